"""Core numerics: exact passive cable, convergence orders, agreement with diffrax's
generic solvers, vmap/grad, a user-written mechanism."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from helpers import (
    ALL_SOLVERS,
    CABLE_SOLVERS,
    finite_difference_grad,
    hh_cable,
    spike_times,
)

import stable_ode as so


def passive_cable(dtype=jnp.float64, amplitude=0.05):
    """3 compartments of a passive cable, current into compartment 0 from t=0."""
    cell = so.Cell(
        "c",
        [so.Section("s", 300.0, 2.0, 3)],
        [so.Insert(so.Passive(g=1e-3, e=-65.0))],
        axial_resistivity=100.0,
    )
    return so.build(
        [cell],
        [so.StepCurrent(so.Site("c", "s", 0.0), amplitude, 0.0, 1e3)],
        dtype=dtype,
    )


def exact_passive(model, t):
    """The compartment equations' exact solution, by matrix exponential."""
    n = model.n_compartments
    eye = np.eye(n)
    lap = np.stack([np.asarray(model.coupling.current(jnp.asarray(e))) for e in eye], 1)
    mech = model.mechanisms[0].mechanism
    k = 1000 / np.asarray(model.capacitance)
    area = np.asarray(model.area)
    g, e = np.asarray(mech.g), np.asarray(mech.e)
    a = k[:, None] * (-np.diag(g) + lap / area[:, None])
    c = k * (g * e + np.asarray(model.stimulus_density(0.5)))
    v_star = -np.linalg.solve(a, c)
    v0 = np.asarray(model.v_init)
    return scipy.linalg.expm(a * t) @ (v0 - v_star) + v_star


def test_passive_exact_solution_is_a_fixed_point_check():
    # The vector field at the exact solution matches its time derivative.
    model = passive_cable()
    t, h = 0.7, 1e-5
    v = exact_passive(model, t)
    dv = (exact_passive(model, t + h) - exact_passive(model, t - h)) / (2 * h)
    term = so.MembraneTerm(model)
    y = so.State(v=jnp.asarray(v), groups=({},))
    np.testing.assert_allclose(term.vf(t, y, None).v, dv, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("solver", ALL_SOLVERS, ids=lambda s: type(s).__name__)
def test_convergence_order_passive_cable(solver):
    """The log-log slope of the error against dt is the order the solver states
    (diffrax's `solver.order(terms)`), for every solver."""
    model = passive_cable()
    order = solver.order(so.MembraneTerm(model))
    t1 = 2.0
    exact = exact_passive(model, t1)
    dts = [0.1, 0.05, 0.025, 0.0125]
    errors = []
    for dt in dts:
        sol = so.simulate(model, t1, dt, solver=solver)
        errors.append(np.max(np.abs(np.asarray(sol.recordings["v"][-1]) - exact)))
    slope = np.polyfit(np.log(dts), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.15, (errors, slope)
    assert all(b < a for a, b in zip(errors, errors[1:]))


def test_crank_nicolson_does_not_ring():
    # A current step into a finely discretised passive cable excites its stiff
    # modes; plain θ = 1/2 oscillates, our start-up steps damp them.
    cell = so.Cell(
        "c",
        [so.Section("s", 1000.0, 1.0, 101)],
        [so.Insert(so.Passive(g=1e-4, e=-65.0))],
        axial_resistivity=100.0,
    )
    model = so.build(
        [cell],
        [so.StepCurrent(so.Site("c", "s", 0.5), 0.1, 1.0, 1e3)],
        dtype=jnp.float64,
    )

    def run(solver, dt):
        v = so.simulate(model, 3.0, dt, solver=solver).recordings["v"]
        return np.asarray(v)[:: round(0.025 / dt)]

    ref = run(so.CrankNicolson(), 0.0005)
    err = {
        name: np.abs(run(solver, 0.025) - ref).max(axis=1)
        for name, solver in [
            ("cn", so.CrankNicolson()),
            ("plain", so.CrankNicolson(startup=False)),
            ("be", so.BackwardEuler()),
        ]
    }
    # Measured (2026-11-29): max error 0.217 mV for both (the single L-stable
    # start-up step is backward Euler); 4 steps after the edge 0.021 (ours),
    # 0.110 (plain CN), 0.112 (BE); 20 steps after 0.0021 (ours), 0.052 (BE).
    after, later = slice(40 + 4, None), slice(40 + 20, None)
    assert err["cn"].max() <= err["be"].max() * (1 + 1e-9)
    assert err["cn"][after].max() < 0.25 * err["be"][after].max()
    assert err["cn"][later].max() < 0.1 * err["be"][later].max()
    # Plain Crank–Nicolson rings: after the edge its error decays only slowly.
    assert err["plain"][after].max() > 2 * err["cn"][after].max()
    # At the stimulus the voltage rises with decreasing increments (concave, as
    # the exact solution); plain Crank–Nicolson's increments zig-zag.
    stim = np.diff(run(so.CrankNicolson(), 0.025)[40:, 50])
    assert np.all(stim > 0) and np.all(np.diff(stim) <= 1e-12)
    plain = np.diff(run(so.CrankNicolson(startup=False), 0.025)[40:, 50])
    assert np.any(np.diff(plain) > 0.1)


@pytest.fixture(scope="module")
def kvaerno5_cable():
    """A 5-compartment HH cable and its Kvaerno5 solution at tolerance 1e-9."""
    model = hh_cable(n=5, amplitude=0.3)
    ref = so.simulate(
        model,
        15.0,
        0.01,
        solver=dfx.Kvaerno5(),
        controller=dfx.PIDController(rtol=1e-9, atol=1e-9),
        save_dt=0.01,
    )
    return model, ref


@pytest.mark.parametrize("solver", CABLE_SOLVERS, ids=lambda s: type(s).__name__)
def test_against_kvaerno5(solver, kvaerno5_cable):
    model, ref = kvaerno5_cable
    ours = so.simulate(model, 15.0, 0.001, solver=solver, save_dt=0.01)
    for name in ("start", "end"):
        sr = spike_times(ref.ts, ref.recordings[name])
        so_ = spike_times(ours.ts, ours.recordings[name])
        assert len(sr) >= 1 and len(sr) == len(so_)
        tol = 0.02 if isinstance(solver, so.BackwardEuler) else 0.002
        np.testing.assert_allclose(so_, sr, atol=tol)


def test_float32_runs_in_float32():
    model = hh_cable(n=4, dtype=jnp.float32)
    for solver in ALL_SOLVERS:
        sol = so.simulate(model, 5.0, 0.025, solver=solver)
        for v in sol.recordings.values():
            assert v.dtype == jnp.float32
            assert jnp.all(jnp.isfinite(v))


@jax.jit
def _peak(model):
    sol = so.simulate(model, 10.0, 0.05, solver=so.BackwardEuler())
    return jnp.max(sol.recordings["end"])


def test_vmap_matches_loop():
    model = hh_cable(n=4, amplitude=0.3)
    gnas = jnp.asarray([0.08, 0.12, 0.16])

    def with_gna(g):
        return eqx.tree_at(
            lambda m: m.mechanisms[0].mechanism.gnabar, model, jnp.full((4,), g)
        )

    batched = jax.vmap(lambda g: _peak(with_gna(g)))(gnas)
    looped = jnp.stack([_peak(with_gna(g)) for g in gnas])
    np.testing.assert_allclose(batched, looped, rtol=1e-10)
    # And over stimulus amplitudes.
    amps = jnp.asarray([0.1, 0.3])
    b2 = jax.vmap(
        lambda a: _peak(eqx.tree_at(lambda m: m.stimuli.step_amplitude, model, a[None]))
    )(amps)
    l2 = jnp.stack(
        [
            _peak(eqx.tree_at(lambda m: m.stimuli.step_amplitude, model, a[None]))
            for a in amps
        ]
    )
    np.testing.assert_allclose(b2, l2, rtol=1e-10)


def test_grad_wrt_conductances_matches_finite_differences():
    model = hh_cable(n=3, amplitude=0.05, duration=10.0)
    target = so.simulate(model, 8.0, 0.05).recordings["end"]

    def loss(params):
        gna, gk, gl = params
        mech = model.mechanisms[0].mechanism
        m = eqx.tree_at(
            lambda m: (
                m.mechanisms[0].mechanism.gnabar,
                m.mechanisms[0].mechanism.gkbar,
                m.mechanisms[0].mechanism.gl,
            ),
            model,
            (
                jnp.full_like(mech.gnabar, gna),
                jnp.full_like(mech.gkbar, gk),
                jnp.full_like(mech.gl, gl),
            ),
        )
        v = so.simulate(m, 8.0, 0.05).recordings["end"]
        return jnp.mean((v - target - 1.0) ** 2)

    x = jnp.asarray([0.1, 0.04, 0.0004])
    g = jax.jit(jax.grad(loss))(x)
    fd = finite_difference_grad(jax.jit(loss), x, eps=1e-7)
    np.testing.assert_allclose(g, fd, rtol=1e-4)


class Kdr(so.AbstractMechanism):
    """A user's delayed-rectifier K channel, (inf, tau) form: the docs' example."""

    gbar: float = 0.036  # S/cm²
    ek: float = -77.0  # mV

    def kinetics(self, v, states, env):
        del states, env
        inf = jax.nn.sigmoid((v + 53.0) / 15.0)
        tau = 1.0 + 4.0 * so.safe_exp(-jnp.square((v + 60.0) / 30.0))
        return {"n": so.inf_tau_gate(inf, tau)}

    def current(self, v, states, env):
        del env
        return self.gbar * states["n"] ** 4 * (v - self.ek)


def test_user_mechanism():
    cell = so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0, 1)],
        [so.Insert(so.Passive(g=1e-4, e=-65.0)), so.Insert(Kdr())],
    )
    site = so.Site("c", "soma")
    model = so.build(
        [cell], [so.StepCurrent(site, 0.2, 1.0, 50.0)], [so.Recording("v", site)]
    )
    # Steady state at v_init from the (inf, tau) form.
    n0 = model.init_state().groups[1]["n"]
    np.testing.assert_allclose(n0, jax.nn.sigmoid((-65.0 + 53.0) / 15.0))
    be = so.simulate(model, 20.0, 0.01).recordings["v"]
    kv = so.simulate(
        model,
        20.0,
        0.01,
        solver=dfx.Kvaerno5(),
        controller=dfx.PIDController(rtol=1e-8, atol=1e-8),
        save_dt=0.01,
    ).recordings["v"]
    np.testing.assert_allclose(be, kv, atol=0.05)
    # The K current pulls the depolarised membrane back below the passive level.
    passive = so.build(
        [eqx.tree_at(lambda c: c.mechanisms, cell, cell.mechanisms[:1])],
        [so.StepCurrent(site, 0.2, 1.0, 50.0)],
        [so.Recording("v", site)],
    )
    vp = so.simulate(passive, 20.0, 0.01).recordings["v"]
    assert float(be[-1]) < float(vp[-1]) - 1.0


def test_build_errors():
    sec = so.Section("soma", 10.0, 10.0, 1)
    with pytest.raises(ValueError, match="length must be > 0"):
        so.Section("bad", -1.0, 1.0)
    with pytest.raises(ValueError, match="not a section"):
        so.Cell("c", [sec], [so.Insert(so.HH(), ["dend"])])
    with pytest.raises(ValueError, match="exactly one root"):
        so.Cell("c", [sec, so.Section("b", 1.0, 1.0)])
    cell = so.Cell("c", [sec])
    with pytest.raises(ValueError, match="unknown cell"):
        so.build([cell], [so.StepCurrent(so.Site("x", "soma"), 0.1, 0.0, 1.0)])
    with pytest.raises(ValueError, match="must divide"):
        so.simulate(so.build([cell]), 1.0, 0.3)
