"""Kinetic schemes (`MarkovScheme`): the update against its closed form, the
steady state, conservation and positivity over 10⁵ float32 steps, gradients,
and a three-state K channel against NEURON running the same scheme as a
`KINETIC` block (`METHOD sparse`), compiled with `nrnivmodl` at test time."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import finite_difference_grad

import stable_ode as so


def _rates(v):
    """The three-state channel's rates (1/ms) at `v` (mV): c1 ⇄ c2 ⇄ o."""
    return (
        0.1 * so.safe_exp((v + 40) / 20),
        0.1 * so.safe_exp(-(v + 40) / 20),
        0.2 * so.safe_exp((v + 30) / 15),
        0.05 * so.safe_exp(-(v + 30) / 25),
    )


class KMarkov(so.AbstractMechanism):
    """A three-state K channel, `c1 ⇄ c2 ⇄ o`, `ik = gbar·o·(v - ek)`: the
    scheme of `tests/data/mod/kmarkov.mod`."""

    ions: ClassVar = (so.UseIon("k", read=("ek",), write=("ik",)),)
    gbar: float = 0.036

    def kinetics(self, v, states, env):
        a1, b1, a2, b2 = _rates(v)
        z = jnp.zeros_like(v)
        rates = ((z, a1, z), (b1, z, a2), (z, b2, z))
        return {"k": so.MarkovScheme(("c1", "c2", "o"), rates)}

    def current(self, v, states, env):
        return {"k": self.gbar * states["o"] * (v - env.ion("k").reversal)}


# NEURON runs the same scheme from tests/data/mod/kmarkov.mod (SUFFIX kmarkov).


def test_two_state_update_is_implicit_euler_and_steady_state_exact():
    a, b, dt = jnp.array([0.3, 5.0, 1e6]), jnp.array([0.7, 0.01, 2.0]), 0.1
    z = jnp.zeros(3)
    scheme = so.MarkovScheme(("c", "o"), ((z, a), (b, z)))
    c0, o0 = jnp.array([1.0, 0.2, 0.5]), jnp.array([0.0, 0.8, 0.5])
    c1, o1 = scheme.update((c0, o0), dt)
    # (I - dt·A)·x1 = x0 for the two-state generator, solved by hand.
    expected = (o0 + dt * a * (c0 + o0)) / (1 + dt * (a + b))
    np.testing.assert_allclose(o1, expected, rtol=1e-13)
    np.testing.assert_allclose(c1 + o1, 1.0, rtol=1e-15)
    dc, do = scheme.rhs((c0, o0))
    np.testing.assert_allclose(do, a * c0 - b * o0, rtol=1e-14)
    np.testing.assert_allclose(dc, -(a * c0 - b * o0), rtol=1e-14)
    _, o_inf = scheme.steady_state(a)
    np.testing.assert_allclose(o_inf, a / (a + b), rtol=1e-13)


def test_filter_of_a_two_state_scheme_is_the_gates_filter():
    """The scheme's generator has eigenvalues 0 and -(a+b): on the difference
    of the populations, its filter is the gate's `1 + z/2 (+ z²/12)`."""
    a, b, dt = jnp.array([0.3]), jnp.array([40.0]), 0.5
    z = jnp.zeros(1)
    scheme = so.MarkovScheme(("c", "o"), ((z, a), (b, z)))
    gate = so.Relaxation(inf=a / (a + b), rate=a + b)
    r = jnp.array([1e-3])
    for quadratic in (False, True):
        rc, ro = scheme.filter(
            (-r, r), dt, (jnp.ones(1), jnp.zeros(1)), quadratic=quadratic
        )
        np.testing.assert_allclose(ro, gate.filter(r, dt, r, quadratic=quadratic))
        np.testing.assert_allclose(rc, -ro, rtol=1e-14)


def _model(dtype, gbar=0.036):
    cell = so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0)],
        [so.Insert(so.HH(gkbar=0.0)), so.Insert(KMarkov(gbar=gbar))],
    )
    site = so.Site("c", "soma")
    return so.build(
        [cell],
        [so.StepCurrent(site, 0.3, 2.0, 1e9)],
        [
            so.Recording("v", site),
        ],
        dtype=dtype,
    )


def test_populations_conserved_and_non_negative_over_1e5_float32_steps():
    model = _model(jnp.float32)
    # 10⁵ steps, spiking throughout.
    sim = so.simulate(model, 2500.0, stepping=so.FixedSteps(0.025, 1000))
    assert bool(jnp.all(sim.valid))
    states = sim.final_state.groups[1]
    total = states["c1"] + states["c2"] + states["o"]
    assert float(jnp.max(jnp.abs(total - 1))) <= 2 * np.finfo(np.float32).eps
    assert all(float(jnp.min(states[s])) >= 0 for s in ("c1", "c2", "o"))
    v = np.asarray(sim.recordings["v"])
    assert np.all(np.isfinite(v)) and v.max() > 0  # it fires throughout


def test_gradient_of_scheme_conductance_matches_finite_differences():
    model = _model(jnp.float64)

    def loss(g):
        m = eqx.tree_at(lambda m: m.mechanisms[1].mechanism.gbar, model, g[None])
        return so.simulate(m, 10.0, 0.025).recordings["v"].mean()

    g = jax.grad(loss)(0.036)
    fd = finite_difference_grad(loss, 0.036, eps=1e-6)
    assert np.isfinite(g) and g != 0
    np.testing.assert_allclose(g, fd, rtol=1e-5)


@pytest.fixture(scope="module")
def nrn(neuron_mechanisms):
    """NEURON's `h` with `kmarkov` (the suite's one compiled set)."""
    return neuron_mechanisms


def test_markov_channel_matches_neurons_kinetic_block(nrn):
    """NEURON's `sparse` on a linear scheme is one implicit Euler step at the
    new voltage, as our `BackwardEuler`: from the same initial populations,
    the same trajectory to rounding (NEURON's finite-difference derivative of
    these currents, linear in v for frozen states, is exact).

    NEURON's `STEADYSTATE sparse` is iterative and leaves its initial
    populations off the exact steady state (which is ours, `MarkovScheme.
    steady_state`) by ~1e-6 relative; the run starts from NEURON's."""
    h = nrn
    dt, t1 = 0.025, 30.0
    sec = h.Section(name="kmarkov_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    sec.insert("kmarkov")
    sec(0.5).hh.gkbar = 0.0
    stim = h.IClamp(sec(0.5))
    stim.delay, stim.dur, stim.amp = 2.0, 1e9, 0.3
    h.usetable_hh = 0
    h.secondorder = 0
    h.dt = dt
    h.celsius = 6.3
    h.cvode_active(0)
    h.finitialize(-65.0)
    k = sec(0.5).kmarkov
    start = {"c1": k.c1, "c2": k.c2, "o": k.o}
    ref = [sec(0.5).v]
    for _ in range(round(t1 / dt)):
        h.fadvance()
        ref.append(sec(0.5).v)
    ref = np.asarray(ref)
    model = _model(jnp.float64)
    y0 = model.init_state()
    exact = y0.groups[1]
    for name, x in start.items():
        assert abs(float(exact[name][0]) - x) <= 1e-5 * x
    groups = (y0.groups[0], {n: jnp.full(1, x) for n, x in start.items()})
    y0 = so.State(v=y0.v, groups=groups)
    ours = np.asarray(so.simulate(model, t1, dt, y0=y0).recordings["v"])
    assert np.sum((ref[:-1] < 0) & (ref[1:] >= 0)) >= 2  # it spikes
    err = float(np.max(np.abs(ours - ref)))
    print("max |v - v_NEURON|:", err)
    assert err < 1e-8
    del stim, sec
