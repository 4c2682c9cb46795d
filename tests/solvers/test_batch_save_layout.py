"""The vmapped plain run saves one row per step (issue 21): each step writes the
whole batch's samples as one contiguous row of a (steps × batch) buffer, not
one column of a (batch × steps) buffer per step. Read off the compiled HLO."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp

import stable_ode as so


BATCH, T_MAX, DT = 64, 5.0, 0.025


def test_vmapped_sweep_saves_a_row_per_step():
    cell = so.Cell(
        "c",
        [so.Section("s", length=20.0, diameter=20.0, n_compartments=1)],
        mechanisms=[so.Insert(so.HH())],
    )
    site = so.Site("c", "s", 0.5)
    model = so.build(
        [cell], [so.StepCurrent(site, 0.1, 1.0, 10.0)], [so.Recording("v", site)]
    )
    hh = model.mechanisms[0].mechanism

    def one(gnabar):
        m = eqx.tree_at(
            lambda m: m.mechanisms[0].mechanism.gnabar,
            model,
            gnabar * jnp.ones_like(hh.gnabar),
        )
        return so.simulate(m, T_MAX, DT).recordings["v"]

    sweep = jax.jit(jax.vmap(one))
    text = sweep.lower(jnp.linspace(0.10, 0.15, BATCH)).compile().as_text()
    # the buffers that dynamic-update-slices write, as (dims, ...)
    shapes = [
        tuple(int(d) for d in m.group(1).split(","))
        for m in re.finditer(
            r"= f(?:32|64)\[([\d,]+)\][^=]*dynamic-update-slice\(", text
        )
    ]
    steps = round(T_MAX / DT)
    assert (steps, BATCH, 1) in shapes, shapes  # steps-major, batch contiguous
    batch_major = [s for s in shapes if len(s) >= 2 and s[0] == BATCH and steps in s]
    assert not batch_major, batch_major
