"""Non-finite step rejection on toy vector fields: what plain `PIDController` does
wrong, and what `NonFiniteRejecting` / `SafeStepTo` / `NonFiniteGuard` do instead."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so


LAM = 10.0  # dy/dt = -LAM·y, y(0) = 1


def vf_state(t, y, args):
    """NaN where |y| > 2: large steps overshoot into it, the solution never does."""
    lam, t_bad = args
    del t_bad
    return jnp.where(jnp.abs(y) > 2, jnp.nan, -lam * y)


def vf_inf(t, y, args):
    lam, t_bad = args
    del t_bad
    return jnp.where(jnp.abs(y) > 2, jnp.inf, -lam * y)


def vf_positive(t, y, args):
    """NaN where y < 0 (a square-root-like domain): Heun's predictor leaves it
    whenever LAM·dt > 1."""
    lam, t_bad = args
    del t_bad
    return jnp.where(y < 0, jnp.nan, -lam * y)


def vf_time(t, y, args):
    """NaN for t > t_bad: no step can get past it."""
    lam, t_bad = args
    return jnp.where(t > t_bad, jnp.nan, -lam * y)


TSIT5 = dfx.Tsit5()


def _solve(vf, controller, solver=TSIT5, lam=LAM, t_bad=jnp.inf, max_steps=400):
    args = (jnp.asarray(lam), jnp.asarray(t_bad))
    return dfx.diffeqsolve(
        dfx.ODETerm(vf),
        solver,
        0.0,
        2.0,
        0.5,
        jnp.array([1.0]),
        args=args,
        saveat=dfx.SaveAt(t1=True, controller_state=True),
        stepsize_controller=controller,
        max_steps=max_steps,
        throw=False,
    )


PID = dfx.PIDController(rtol=1e-6, atol=1e-10, pcoeff=0.3, icoeff=0.4)


# ---------------------------------------------------------------- plain PID's failures


def test_pid_accepts_nan_state_with_finite_error():
    y0 = jnp.array([1.0])
    nan = jnp.array([jnp.nan])
    _, state = PID.init(None, 0.0, 1.0, y0, 0.1, None, None, 2)
    keep, *_ = PID.adapt_step_size(0.0, 0.1, y0, nan, None, jnp.zeros(1), 2, state)
    assert bool(keep)  # the documented failure
    ours = so.NonFiniteRejecting(PID)
    _, state = ours.init(None, 0.0, 1.0, y0, 0.1, None, None, 2)
    keep, t0, t1, _, new, result = ours.adapt_step_size(
        0.0, 0.1, y0, nan, None, jnp.zeros(1), 2, state
    )
    assert not bool(keep)
    assert float(t0) == 0.0 and float(t1) == pytest.approx(0.05)
    assert int(new.stats.num_nonfinite_rejected) == 1
    assert bool(result == dfx.RESULTS.successful)


def test_pid_inf_state_gives_nan_dt():
    y0 = jnp.array([1.0])
    inf = jnp.array([jnp.inf])
    _, state = PID.init(None, 0.0, 1.0, y0, 0.1, None, None, 2)
    keep, _, t1, _, _, _ = PID.adapt_step_size(0.0, 0.1, y0, inf, None, inf, 2, state)
    assert not bool(keep) and np.isnan(float(t1))  # the documented failure
    ours = so.NonFiniteRejecting(PID, shrink=0.25)
    _, state = ours.init(None, 0.0, 1.0, y0, 0.1, None, None, 2)
    keep, _, t1, _, _, _ = ours.adapt_step_size(0.0, 0.1, y0, inf, None, inf, 2, state)
    assert not bool(keep) and float(t1) == pytest.approx(0.025)


def test_inner_history_not_committed_on_nonfinite():
    y0 = jnp.array([1.0])
    ours = so.NonFiniteRejecting(PID)
    _, state = ours.init(None, 0.0, 1.0, y0, 0.1, None, None, 2)
    # one finite step to give the PI controller some history
    _, _, _, _, state, _ = ours.adapt_step_size(
        0.0, 0.1, y0, jnp.array([0.9]), None, jnp.array([1e-7]), 2, state
    )
    before = state.inner
    for bad in (jnp.nan, jnp.inf, -jnp.inf):
        y1 = jnp.array([bad])
        _, _, t1, _, after, _ = ours.adapt_step_size(
            0.1, 0.2, y0, y1, None, jnp.array([1e-7]), 2, state
        )
        # (committing the sanitised call — y1 = y0, zero error — would reset it)
        assert bool(eqx.tree_equal(after.inner, before))
        assert np.isfinite(float(t1))


def test_pid_spins_on_nonfinite_time_region_wrapper_stops():
    plain = _solve(vf_time, PID, t_bad=1.0)
    assert bool(plain.result == dfx.RESULTS.max_steps_reached)
    assert int(plain.stats["num_steps"]) == 400  # burnt the whole budget
    wrapped = _solve(vf_time, so.NonFiniteRejecting(PID), t_bad=1.0)
    stats = wrapped.controller_state.stats
    assert bool(wrapped.result == dfx.RESULTS.dt_min_reached)
    assert bool(stats.result == so.RESULTS.nonfinite_dt_min)
    assert float(stats.t_fail) == pytest.approx(1.0, abs=1e-9)
    assert float(wrapped.ts[0]) == float(stats.t_fail)  # stopped at the last good t
    assert int(wrapped.stats["num_steps"]) < 400
    np.testing.assert_allclose(wrapped.ys[0], np.exp(-LAM * 1.0), rtol=1e-4)


@pytest.mark.parametrize("vf", [vf_state, vf_inf])
def test_wrapper_steps_around_nonfinite_region(vf):
    sol = _solve(vf, so.NonFiniteRejecting(PID))
    stats = sol.controller_state.stats
    assert bool(sol.result == dfx.RESULTS.successful)
    assert int(stats.num_nonfinite_rejected) >= 1
    assert int(stats.num_accepted) == int(sol.stats["num_accepted_steps"])
    assert int(stats.num_rejected) == int(sol.stats["num_rejected_steps"])
    assert 0 < float(stats.min_dt) < 0.5
    np.testing.assert_allclose(sol.ys[0], np.exp(-2 * LAM), rtol=1e-3)


def test_give_up_codes():
    # No finite step at all past t_bad = 0: gives up at t = 0.
    many = _solve(vf_time, so.NonFiniteRejecting(PID, max_nonfinite=3), t_bad=-1.0)
    st = many.controller_state.stats
    assert bool(st.result == so.RESULTS.nonfinite_max_rejections)
    assert int(st.num_nonfinite_rejected) == 3 and float(st.t_fail) == 0.0
    small = _solve(vf_time, so.NonFiniteRejecting(PID, dtmin=0.1), t_bad=-1.0)
    st = small.controller_state.stats
    assert bool(st.result == so.RESULTS.nonfinite_dt_min)
    assert int(st.num_nonfinite_rejected) == 3  # 0.5 → 0.25 → 0.125 → (0.0625 < 0.1)
    with pytest.raises(ValueError, match="shrink"):
        so.NonFiniteRejecting(PID, shrink=1.5)
    with pytest.raises(ValueError, match="adaptive"):
        so.NonFiniteRejecting(dfx.ConstantStepSize())  # pyright: ignore


# ----------------------------------------------------------------------- gradients


def _grad(vf, solver, lam):
    def f(lam):
        return _solve(vf, so.NonFiniteRejecting(PID), solver=solver, lam=lam).ys[0, 0]

    return jax.grad(f)(jnp.asarray(lam))


def test_grad_through_rejected_nonfinite_steps():
    exact = -2.0 * np.exp(-2 * LAM)
    g = _grad(vf_state, so.NonFiniteGuard(dfx.Tsit5()), LAM)
    assert np.isfinite(float(g))
    np.testing.assert_allclose(float(g), exact, rtol=1e-3)
    # Without the guard the rejected NaN step poisons the gradient inside the solver
    # (0·NaN in the backward pass of Tsit5's later stages) — why simulate wraps.
    assert np.isnan(float(_grad(vf_state, dfx.Tsit5(), LAM)))


def test_vmap_one_member_failing():
    lams = jnp.array([8.0, 10.0, 12.0])
    t_bads = jnp.array([jnp.inf, 0.7, jnp.inf])

    def f(lam, t_bad):
        sol = _solve(vf_time, so.NonFiniteRejecting(PID), lam=lam, t_bad=t_bad)
        return sol.ys[0, 0], sol.controller_state.stats.result._value

    ys, codes = jax.vmap(f)(lams, t_bads)
    for i in range(3):
        y, code = f(lams[i], t_bads[i])
        assert float(ys[i]) == pytest.approx(float(y), rel=1e-12)
        assert int(codes[i]) == int(code)
    np.testing.assert_allclose(
        np.asarray(ys)[[0, 2]],
        np.exp(-2 * np.array([8.0, 12.0])),
        rtol=1e-3,
        atol=1e-11,
    )  # atol: the controller's atol = 1e-10
    np.testing.assert_allclose(ys[1], np.exp(-0.7 * 10.0), rtol=1e-3)
    assert int(codes[1]) == int(so.RESULTS.nonfinite_dt_min._value)


# ------------------------------------------------------------------- SafeStepTo


def _heun_grid(vf, dt, lam=LAM, controller_cls=so.SafeStepTo, t_bad=jnp.inf):
    n = round(2.0 / dt)
    grid = jnp.linspace(0.0, 2.0, n + 1)
    return dfx.diffeqsolve(
        dfx.ODETerm(vf),
        dfx.Heun(),
        0.0,
        2.0,
        None,
        jnp.array([1.0]),
        args=(jnp.asarray(lam), jnp.asarray(t_bad)),
        saveat=dfx.SaveAt(t0=True, steps=True, controller_state=True),
        stepsize_controller=controller_cls(grid),
        max_steps=8 * n,
        throw=False,
    )


def test_safe_step_to_subdivides_then_returns_to_grid():
    # Heun's predictor with LAM·dt = 2.5 or 1.25 leaves y >= 0 (NaN) on every grid
    # step; with dt = 0.0625 it does not. So each grid step is retried twice, then
    # taken as 4 quarter steps: the same numbers as StepTo on the 0.0625 grid.
    coarse = _heun_grid(vf_positive, 0.25)
    fine = _heun_grid(vf_positive, 0.0625, controller_cls=dfx.StepTo)
    st = coarse.controller_state.stats
    assert bool(coarse.result == dfx.RESULTS.successful)
    assert int(st.num_nonfinite_rejected) == 2 * 8
    ok = np.isfinite(np.asarray(coarse.ts))
    np.testing.assert_array_equal(coarse.ts[ok], fine.ts[: ok.sum()])
    np.testing.assert_allclose(coarse.ys[ok], fine.ys[: ok.sum()], rtol=1e-14)
    assert float(st.min_dt) == 0.0625


def test_nested_levels_run_retries_past_their_length():
    # `Checkpointing(levels=...)` runs the loop as nested scans, prod(levels)
    # iterations for the grid; here every grid step needs 6 (2 non-finite retries,
    # 4 quarter steps), 48 in all for levels (2, 4): the rest runs in the extra
    # outer segments that cover max_steps (16 segments of 4 iterations).
    # Values and gradients are those of the default checkpointing.
    grid = jnp.linspace(0.0, 2.0, 9)

    def final(lam, adjoint):
        sol = dfx.diffeqsolve(
            dfx.ODETerm(vf_positive),
            so.NonFiniteGuard(dfx.Heun()),
            0.0,
            2.0,
            None,
            jnp.array([1.0]),
            args=(lam, jnp.asarray(jnp.inf)),
            saveat=dfx.SaveAt(t1=True),
            stepsize_controller=so.SafeStepTo(grid),
            adjoint=adjoint,
            max_steps=64,
            throw=False,
        )
        return sol.ys[-1, 0], sol.stats["num_steps"]

    lam = jnp.asarray(LAM)
    (y_nested, steps), (y_default, _) = (
        final(lam, a) for a in (so.Checkpointing(levels=(2, 4)), so.Checkpointing())
    )
    assert int(steps) == 48 and float(y_nested) == float(y_default)
    grads = [
        jax.grad(lambda lam, a=a: final(lam, a)[0])(lam)
        for a in (so.Checkpointing(levels=(2, 4)), so.Checkpointing())
    ]
    assert np.isfinite(float(grads[0])) and float(grads[0]) != 0.0
    np.testing.assert_allclose(float(grads[0]), float(grads[1]), rtol=1e-13)


def test_safe_step_to_is_step_to_when_finite():
    a = _heun_grid(vf_state, 0.01)
    b = _heun_grid(vf_state, 0.01, controller_cls=dfx.StepTo)
    assert int(a.controller_state.stats.num_nonfinite_rejected) == 0
    np.testing.assert_array_equal(a.ys, b.ys)


def test_safe_step_to_gives_up():
    # NaN for t > 0.5: every retry [0.5, 0.5 + 0.25/2**k] evaluates past it.
    sol = _heun_grid(vf_time, 0.25, t_bad=0.5)
    st = sol.controller_state.stats
    assert bool(sol.result == dfx.RESULTS.dt_min_reached)
    assert bool(st.result == so.RESULTS.nonfinite_max_rejections)
    assert int(st.num_nonfinite_rejected) == 10 and float(st.t_fail) == 0.5
    ok = np.isfinite(np.asarray(sol.ts))
    np.testing.assert_array_equal(sol.ts[ok], [0.0, 0.25, 0.5])
    assert np.all(np.isfinite(np.asarray(sol.ys[ok])))


def test_grad_through_rejected_nonfinite_steps_implicit_solver():
    # diffrax's implicit solvers: `simulate` fills their root-finder tolerances
    # from the controller (as diffeqsolve would) and then guards them too.
    from stable_ode._stepping.guard import with_controller_tols

    exact = -2.0 * np.exp(-2 * LAM)
    kv = dfx.Kvaerno5()
    guarded = so.NonFiniteGuard(with_controller_tols(kv, so.NonFiniteRejecting(PID)))
    assert guarded.solver.root_finder.rtol == PID.rtol
    g = _grad(vf_state, guarded, LAM)
    # Differentiating through Newton solves stopped at rtol 1e-6 (measured 1.5e-3
    # relative error; Tsit5 above: < 1e-3).
    np.testing.assert_allclose(float(g), exact, rtol=3e-3)
    # Unguarded, the rejected NaN steps poison Kvaerno5's gradient as Tsit5's.
    assert np.isnan(float(_grad(vf_state, kv, LAM)))


# --------------------------------------------------------------- TimingTolerance


def _membrane_state(v):
    return so.State(v=jnp.asarray(v), groups=({"m": jnp.asarray([0.05, 0.06])},))


def test_timing_tolerance_scales_the_voltage_error_only():
    """The wrapped controller sees `e_v / (1 + |Δv|/(dt·slope))` compartment by
    compartment, the gates' error as it is; its decision is the wrapped
    controller's on that error."""
    pid = dfx.PIDController(rtol=0.0, atol=1e-3)
    wrapped = so.TimingTolerance(pid, slope=2.0)
    y0 = _membrane_state([-65.0, -60.0])
    y1 = _membrane_state([-64.9, -20.0])  # slopes 1 and 400 mV/ms over dt = 0.1
    error = _membrane_state([0.0012, 0.004])
    error = eqx.tree_at(lambda e: e.groups, error, ({"m": jnp.asarray([1e-4, 1e-4])},))
    t0, t1 = jnp.asarray(0.0), jnp.asarray(0.1)
    state = pid.init(None, t0, t1, y0, 0.1, None, None, 3)[1]
    got = wrapped.adapt_step_size(t0, t1, y0, y1, None, error, 3, state)
    weight = 1 / (1 + np.array([0.1, 40.0]) / (0.1 * 2.0))
    scaled = eqx.tree_at(lambda e: e.v, error, error.v * weight)
    want = pid.adapt_step_size(t0, t1, y0, y1, None, scaled, 3, state)
    plain = pid.adapt_step_size(t0, t1, y0, y1, None, error, 3, state)
    assert not bool(plain[0])  # rejected on the unscaled error ...
    assert bool(got[0])  # ... accepted once the steep compartment's is scaled
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_timing_tolerance_keeps_nonfinite_steps_rejected():
    wrapped = so.NonFiniteRejecting(
        so.TimingTolerance(dfx.PIDController(rtol=0.0, atol=1e-3))
    )
    y0 = _membrane_state([-65.0, -60.0])
    error = _membrane_state([1e-5, 1e-5])
    t0, t1 = jnp.asarray(0.0), jnp.asarray(0.1)
    state = wrapped.init(None, t0, t1, y0, 0.1, None, None, 3)[1]
    for bad in (jnp.nan, jnp.inf):
        y1 = _membrane_state([-64.0, bad])
        keep, _, next_t1, _, new, _ = wrapped.adapt_step_size(
            t0, t1, y0, y1, None, error, 3, state
        )
        assert not bool(keep) and bool(jnp.isfinite(next_t1))
        assert int(new.stats.num_nonfinite_rejected) == 1


def test_timing_tolerance_bad_input():
    with pytest.raises(ValueError, match="slope must be > 0"):
        so.TimingTolerance(dfx.PIDController(rtol=0, atol=1e-3), slope=0.0)
    with pytest.raises(ValueError, match="wraps an adaptive controller"):
        so.TimingTolerance(dfx.ConstantStepSize())
    with pytest.raises(ValueError, match="needs the state of a stable_ode"):
        _solve(vf_state, so.TimingTolerance(dfx.PIDController(rtol=0, atol=1e-3)))
