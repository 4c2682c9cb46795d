"""Gradients through solves that rejected non-finite steps, and through solves that
failed, for every solver, fixed and adaptive: finite, and equal to finite
differences (float64); finite in float32 (issue 20, item 1)."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ALL_SOLVERS

import stable_ode as so


T1, DT = 2.0, 0.025
SITE = so.Site("c", "soma")


def model(dtype, nan_from, nan_for):
    """An HH compartment (the issue's reproducer) with a step current and a current
    trace that is NaN over `[nan_from, nan_from + nan_for)` ms: a step whose
    stimulus sample falls there is non-finite."""
    cell = so.Cell("c", [so.Section("soma", 10.0, 10.0)], [so.Insert(so.HH())])
    return so.build(
        [cell],
        [
            so.StepCurrent(SITE, 0.3, 0.5, 5.0),
            so.TraceCurrent(SITE, [float("nan")], nan_for, nan_from),
        ],
        [so.Recording("soma", SITE)],
        dtype=dtype,
    )


# A NaN window of 0.2 µs around the midpoint of the step [1.0, 1.025]: retried in
# halves, the fixed-step solve succeeds. NaN from 1.0 ms on: it fails at t = 1.0.
# (Adaptive steps are clipped to the window's edges, so a step inside the window
# cannot avoid it: they fail there too.)
CASES = {"rejected": (1.0124, 2e-4), "failed": (1.0, 5.0)}


# The "rejected" case needs steps that sample the stimulus at their middle:
# `CrankNicolson()`'s TR-BDF2 steps split a fixed step at an edge inside it
# and sample each part at its own middle, so they step over the 0.2 µs window
# unharmed (no rejection), and a step that starts inside a NaN window samples
# it; there it runs the "failed" case, and `tr_bdf2=False` (the midpoint
# sampling of Rannacher's start-up steps) both.
SOLVERS = ALL_SOLVERS + (so.CrankNicolson(tr_bdf2=False),)


def solver_id(solver):
    if isinstance(solver, so.CrankNicolson) and not solver.tr_bdf2:
        return "CrankNicolson-rannacher"
    return type(solver).__name__


def cases(kind, solver):
    if kind != "fixed" or (isinstance(solver, so.CrankNicolson) and solver.tr_bdf2):
        return ["failed"]
    return sorted(CASES)


def stepping(kind):
    if kind == "fixed":
        return so.FixedSteps(DT)
    return so.AdaptiveSteps(dfx.PIDController(rtol=1e-6, atol=1e-6), DT, 0.25)


def loss_fn(solver, steps):
    def loss(a, m):
        mm = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, a[None])
        sim = so.simulate(mm, T1, stepping=steps, solver=solver, throw=False)
        v = sim.recordings["soma"]
        # The mean over the valid samples (those the solve reached).
        w = sim.valid.astype(v.dtype)
        return jnp.sum(jnp.where(sim.valid, v, 0)) / jnp.sum(w), sim

    # Jitted once per solver and stepping: the cases differ in values only.
    value = eqx.filter_jit(lambda a, m: loss(a, m)[0])
    return value, eqx.filter_jit(jax.value_and_grad(loss, has_aux=True))


@pytest.mark.parametrize("kind", ["fixed", "adaptive"])
@pytest.mark.parametrize("solver", SOLVERS, ids=solver_id)
def test_gradient_matches_finite_differences(solver, kind):
    value, value_and_grad = loss_fn(solver, stepping(kind))
    a = jnp.asarray(0.3)
    for case in cases(kind, solver):
        m = model(jnp.float64, *CASES[case])
        (v, sim), g = value_and_grad(a, m)
        # The case is what it says: non-finite steps were rejected; the solve
        # succeeded or failed at the NaN.
        assert int(sim.stats["num_nonfinite_rejected"]) > 0, case
        if case == "rejected":
            assert sim.result == so.RESULTS.successful
        else:
            assert sim.result != so.RESULTS.successful
            np.testing.assert_allclose(float(sim.stats["t_fail"]), 1.0, atol=DT)
        assert np.isfinite(float(g)) and float(g) != 0.0, case
        h = 1e-5
        fd = (float(value(a + h, m)) - float(value(a - h, m))) / (2 * h)
        np.testing.assert_allclose(float(v), float(value(a, m)), rtol=1e-12)
        rtol = 1e-6 if kind == "fixed" else 1e-3
        np.testing.assert_allclose(float(g), fd, rtol=rtol, err_msg=case)


@pytest.mark.parametrize("solver", SOLVERS, ids=solver_id)
def test_gradient_finite_float32(solver):
    for kind in ("fixed", "adaptive"):
        _, value_and_grad = loss_fn(solver, stepping(kind))
        for case in cases(kind, solver):
            m = model(jnp.float32, *CASES[case])
            (_, sim), g = value_and_grad(jnp.float32(0.3), m)
            assert int(sim.stats["num_nonfinite_rejected"]) > 0, (case, kind)
            assert np.isfinite(float(g)) and float(g) != 0.0, (case, kind)


class _NanBand(so.AbstractMechanism):
    """A user channel whose gate's steady state is NaN for `lo < v < hi` mV:
    the issue's "user gate whose rate is NaN in a band of voltages"."""

    lo: float = eqx.field(static=True, default=float("inf"))
    hi: float = eqx.field(static=True, default=float("inf"))
    g: float = 1e-4

    def kinetics(self, v, states, env):
        bad = (v > self.lo) & (v < self.hi)
        inf = jnp.where(bad, jnp.nan, 0.5)
        return {"x": so.Relaxation(inf=inf, rate=jnp.ones_like(v))}

    def current(self, v, states, env):
        return self.g * states["x"] * (v + 70.0)


def _band_model(lo=float("inf"), hi=float("inf")):
    mechs = [so.Insert(so.HH()), so.Insert(_NanBand(lo=lo, hi=hi))]
    cell = so.Cell("c", [so.Section("soma", 10.0, 10.0)], mechs)
    return so.build(
        [cell],
        [so.StepCurrent(SITE, 0.3, 0.5, 50.0)],
        [so.Recording("soma", SITE)],
        dtype=jnp.float64,
    )


@pytest.mark.parametrize("solver", [so.BackwardEuler(), so.CrankNicolson()])
def test_gradient_through_a_gate_nan_in_a_voltage_band(solver):
    """The band (±1e-3 mV) sits at the voltage one step of the solve lands on
    during the upstroke (found from a run without it): that step's gate is
    NaN, it is rejected and retried in halves, which miss the band, and the
    solve succeeds; its gradient is finite and equals finite differences
    (h small enough that the perturbed runs hit the band too)."""
    t1 = 3.0
    v = np.asarray(so.simulate(_band_model(), t1, DT, solver=solver).recordings["soma"])
    vk = float(v[int(np.argmax(v > -30.0))])
    m = _band_model(vk - 1e-3, vk + 1e-3)

    def loss(a):
        mm = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, a[None])
        sim = so.simulate(mm, t1, DT, solver=solver, throw=False)
        return sim.recordings["soma"].mean(), sim

    (_, sim), g = eqx.filter_jit(jax.value_and_grad(loss, has_aux=True))(
        jnp.asarray(0.3)
    )
    assert sim.result == so.RESULTS.successful
    assert int(sim.stats["num_nonfinite_rejected"]) > 0
    value = eqx.filter_jit(lambda a: loss(a)[0])
    h = 1e-7
    fd = (value(jnp.asarray(0.3 + h)) - value(jnp.asarray(0.3 - h))) / (2 * h)
    assert np.isfinite(float(g))
    np.testing.assert_allclose(float(g), float(fd), rtol=1e-6)


class _NanAbove(so.AbstractMechanism):
    """A user channel whose gate is NaN above `lo` mV, above the spike's peak:
    only trial steps that overshoot reach it."""

    lo: float = eqx.field(static=True, default=60.0)
    g: float = 1e-4

    def kinetics(self, v, states, env):
        inf = jnp.where(v > self.lo, jnp.nan, 0.5)
        return {"x": so.Relaxation(inf=inf, rate=jnp.ones_like(v))}

    def current(self, v, states, env):
        return self.g * states["x"] * (v + 70.0)


def _adaptive_loss(solver, amplitude, lo, rtol):
    cell = so.Cell(
        "c",
        [so.Section("soma", 10.0, 10.0)],
        [so.Insert(so.HH()), so.Insert(_NanAbove(lo=lo))],
    )
    m = so.build(
        [cell],
        [so.StepCurrent(SITE, amplitude, 0.5, 50.0)],
        [so.Recording("soma", SITE)],
        dtype=jnp.float64,
    )
    steps = so.AdaptiveSteps(dfx.PIDController(rtol=rtol, atol=rtol), 0.5, 0.25)

    def loss(a):
        mm = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, a[None])
        sim = so.simulate(mm, 3.0, stepping=steps, solver=solver, throw=False)
        return sim.recordings["soma"].mean(), sim

    return eqx.filter_jit(jax.value_and_grad(loss, has_aux=True)), eqx.filter_jit(
        lambda a: loss(a)[0]
    )


def test_adaptive_gradient_through_rejected_trial_steps_matches_fd():
    """Tsit5, rtol 1e-6, first step 0.5 ms: one trial step overshoots into the
    NaN region and is rejected, the solve succeeds, and its gradient equals
    finite differences."""
    grad, value = _adaptive_loss(dfx.Tsit5(), 1.0, 60.0, 1e-6)
    a = jnp.asarray(1.0)
    (_, sim), g = grad(a)
    assert sim.result == so.RESULTS.successful
    assert int(sim.stats["num_nonfinite_rejected"]) > 0
    h = 1e-5
    fd = (value(a + h) - value(a - h)) / (2 * h)
    np.testing.assert_allclose(float(g), float(fd), rtol=1e-5)


@pytest.mark.parametrize(
    "solver", [so.BackwardEuler(), so.CrankNicolson()], ids=lambda s: type(s).__name__
)
def test_adaptive_gradient_through_rejected_trial_steps_is_unpoisoned(solver):
    """The staggered solvers at rtol 1e-3 (at 1e-6 their trial steps do not
    overshoot): trial steps into the NaN region are rejected (for
    CrankNicolson the rejected step's NaN states give a NaN cotangent inside
    its linearisation, which reaches the voltage solve's transposed solve:
    lineax raised there before `finite_linear_solve` sanitised those solves
    too), the solve
    succeeds, and its gradient is the gradient of the same solve without a NaN
    region, to the solve's tolerance. (Not compared with finite differences:
    at rtol 1e-3 the step sizes, which the gradient does not differentiate,
    move the finite difference by ~1 %, with or without rejections.)"""
    a = jnp.asarray(1.0)
    (_, sim), g = _adaptive_loss(solver, 1.0, 60.0, 1e-3)[0](a)
    assert sim.result == so.RESULTS.successful
    assert int(sim.stats["num_nonfinite_rejected"]) > 0
    (_, clean), g_clean = _adaptive_loss(solver, 1.0, float("inf"), 1e-3)[0](a)
    assert int(clean.stats["num_nonfinite_rejected"]) == 0
    assert np.isfinite(float(g))
    np.testing.assert_allclose(float(g), float(g_clean), rtol=1e-3)


def test_finite_linear_solve_sanitises_tangent_and_transposed_solves():
    """`finite_linear_solve` on a finite 3-compartment system: its gradient is
    lineax's, bit for bit; a NaN cotangent or tangent, where lineax's own
    transposed or tangent solve raises, gives NaN (carried as by any other
    operation, for the guard to select away), not an error and not zero."""
    import lineax as lx

    from stable_ode._misc import finite_linear_solve
    from stable_ode.morphology._coupling import TridiagonalCoupling

    c = TridiagonalCoupling(jnp.array([1.0, 2.0]), None, None)
    d, b = jnp.array([3.0, 4.0, 5.0]), jnp.array([1.0, -1.0, 2.0])
    solver = lx.Tridiagonal()

    def ours(d, b, w):
        return jnp.sum(w * finite_linear_solve(c, 0.5, d, b, solver))

    def plain(d, b, w):
        return jnp.sum(w * lx.linear_solve(c.operator(d, 0.5), b, solver).value)

    w = jnp.array([1.0, 2.0, 3.0])
    grad = eqx.filter_jit(jax.grad(ours, (0, 1)))
    grad_plain = eqx.filter_jit(jax.grad(plain, (0, 1)))
    for g, g_plain in zip(grad(d, b, w), grad_plain(d, b, w)):
        np.testing.assert_array_equal(g, g_plain)
    nan_w = w.at[1].set(jnp.nan)
    with pytest.raises(Exception, match="non-finite"):
        jax.block_until_ready(grad_plain(d, b, nan_w))
    for g in grad(d, b, nan_w):
        assert np.isnan(np.asarray(g)).all()
    t = jnp.array([0.0, jnp.nan, 0.0])
    jvp = jax.jit(
        lambda t: jax.jvp(
            lambda b: finite_linear_solve(c, 0.5, d, b, solver), (b,), (t,)
        )
    )
    assert np.isnan(np.asarray(jvp(t)[1])).all()


class _TwoStateK(so.AbstractMechanism):
    """A K channel as a two-state kinetic scheme (`MarkovScheme`, c ⇄ o; its
    solves are small dense LU solves per compartment, not lineax's)."""

    gbar: float = 0.036

    def kinetics(self, v, states, env):
        a = 0.1 * so.safe_exp((v + 40) / 20)
        b = 0.1 * so.safe_exp(-(v + 40) / 20)
        z = jnp.zeros_like(v)
        return {"k": so.MarkovScheme(("c", "o"), ((z, a), (b, z)))}

    def current(self, v, states, env):
        return self.gbar * states["o"] * (v + 77.0)


def test_gradient_through_a_kinetic_scheme_in_rejected_steps_matches_fd():
    """A scheme's solves inside a non-finite step (its states NaN) used to raise
    lineax's "non-finite input" in the backward pass: now the solve's gradient is
    finite and equals finite differences, through a rejected step and through a
    failed solve (one compilation: the cases differ in values only)."""
    cell = so.Cell(
        "c",
        [so.Section("soma", 10.0, 10.0)],
        [so.Insert(so.HH(gkbar=0.0)), so.Insert(_TwoStateK())],
    )
    _, value_and_grad = loss_fn(so.BackwardEuler(), stepping("fixed"))
    a, h = jnp.asarray(0.3), 1e-5
    for case in ("rejected", "failed"):
        nan_from, nan_for = CASES[case]
        m = so.build(
            [cell],
            [
                so.StepCurrent(SITE, 0.3, 0.5, 5.0),
                so.TraceCurrent(SITE, [float("nan")], nan_for, nan_from),
            ],
            [so.Recording("soma", SITE)],
            dtype=jnp.float64,
        )
        (_, sim), g = value_and_grad(a, m)
        assert int(sim.stats["num_nonfinite_rejected"]) > 0, case
        assert (sim.result == so.RESULTS.successful) == (case == "rejected")
        assert np.isfinite(float(g)) and float(g) != 0.0, case
        up, down = (float(value_and_grad(a + s, m)[0][0]) for s in (h, -h))
        np.testing.assert_allclose(float(g), (up - down) / (2 * h), rtol=1e-6)
