"""`diagnose` names the `.mod` line behind a non-finite value of a mechanism
imported from NMODL: the statement whose value first went non-finite (a rate
that overflows), or the equation of a state (here a concentration) that the
solver's update took to infinity while every rate stayed finite."""

import pathlib

import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so
from stable_ode.diagnostics._nmodl_source import first_bad_statement, ModLine


MOD = pathlib.Path(__file__).parent / "mod"


def _line_of(path: pathlib.Path, text: str) -> int:
    (k,) = [k for k, s in enumerate(path.read_text().splitlines(), 1) if text in s]
    return k


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_names_the_statement_that_overflowed(dtype):
    over = so.load_nmodl(MOD / "overflow.mod")["overflow"]
    cell = so.Cell(
        "cell",
        [
            so.Section("soma", 10.0, 10.0, 1),
            so.Section("dend", 50.0, 2.0, 3, parent="soma"),
        ],
        [
            so.Insert(so.HH(), ["soma"]),
            so.Insert(over(), ["dend"]),
            so.Insert(so.Passive(), ["dend"]),
        ],
    )
    site = so.Site("cell", "dend", 0.5)
    model = so.build(
        [cell],
        [so.StepCurrent(site, 0.5, 0.5, 5.0)],
        [so.Recording("dend", site)],
        dtype=dtype,
    )
    d = so.diagnose(model, 5.0, 0.025)
    assert d.found and d.stage == "kinetics" and d.mechanism == "overflow"
    assert d.state == "overflow.x" and not np.isfinite(d.outputs["x.inf"])
    line = _line_of(MOD / "overflow.mod", "xinf = base^k")
    assert d.source == ModLine(str(MOD / "overflow.mod"), line, "xinf = base^k")
    assert f"source:    overflow.mod:{line}: xinf = base^k" in str(d)


def test_names_the_equation_of_a_concentration_the_update_overflowed():
    grow = so.load_nmodl(MOD / "cagrow.mod")["cagrow"]
    cell = so.Cell(
        "cell",
        [so.Section("soma", 10.0, 10.0, 1)],
        [so.Insert(so.Passive()), so.Insert(grow())],
    )
    model = so.build([cell], recordings=[so.Recording("v", so.Site("cell", "soma"))])
    d = so.diagnose(model, 10.0, 0.025)
    assert d.found and d.stage == "state update" and d.mechanism == "cagrow"
    assert d.state == "cagrow.cai" and not np.isfinite(d.value)
    line = _line_of(MOD / "cagrow.mod", "cai' = k * cai")
    assert (d.source.path, d.source.line) == (str(MOD / "cagrow.mod"), line)
    assert f"cagrow.mod:{line}: cai' = k * cai" in str(d)


def test_built_in_mechanisms_and_finite_runs_name_no_source():
    assert first_bad_statement(so.HH(), lambda: None, 0, 2) is None
    v = jnp.asarray([-65.0, 1e9])
    over = so.load_nmodl(MOD / "overflow.mod")["overflow"]()
    env = so.mechanisms.Environment(celsius=6.3)
    x = {"x": jnp.zeros(2)}
    # Entry 0 at rest is finite; entry 1, far depolarised, overflows.
    at = [
        first_bad_statement(over, lambda: over.kinetics(v, x, env), j, 2)
        for j in (0, 1)
    ]
    assert at[0] is None and at[1].text == "xinf = base^k"
