"""Stepping objects (`FixedSteps`, `AdaptiveSteps`): one compilation for repeated
calls, continuing a run from its final state, one short error for a failed solve,
value and gradient from one computation, and clear errors for settings that
cannot run (issue 16 item 5, issue 20 items 2 and 7)."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import hh_compartment

import stable_ode as so
from stable_ode._recordings import Recordings
from stable_ode._simulate import _solve_counted, _solve_plain_counted
from stable_ode._stepping._base import _gather_by, _points
from stable_ode._stepping.fallback import where_failed


PID = dfx.PIDController(rtol=1e-6, atol=1e-6)


@pytest.fixture(scope="module")
def m():
    return hh_compartment(diameter=10.0, amplitude=0.5, delay=0.2, duration=1.0)


def test_short_form_is_the_stepping_object(m):
    a = so.simulate(m, 1.0, 0.05)
    b = so.simulate(m, 1.0, stepping=so.FixedSteps(0.05))
    np.testing.assert_array_equal(a.recordings["soma"], b.recordings["soma"])
    a = so.simulate(m, 1.0, 0.05, controller=PID, save_dt=0.25)
    b = so.simulate(m, 1.0, stepping=so.AdaptiveSteps(PID, 0.05, 0.25))
    np.testing.assert_array_equal(a.recordings["soma"], b.recordings["soma"])
    assert so.FixedSteps(0.05, 2).n_steps(0.0, 1.0) == 20
    assert so.FixedSteps(0.05, 2).n_saved(0.0, 1.0) == 11
    assert so.AdaptiveSteps(PID, 0.05, 0.25).n_saved(0.0, 1.0) == 5


@pytest.mark.parametrize(
    "steps",
    [so.FixedSteps(0.05), so.AdaptiveSteps(PID, 0.05, 0.25)],
    ids=["fixed", "adaptive"],
)
def test_repeated_calls_compile_once(m, steps):
    # Un-jitted calls with the same shapes and settings: the inner jitted solve is
    # traced once, even for a freshly built model with other parameter values.
    # (Eager fixed steps trace the plain run alone: `_solve_plain_counted`.)
    def traces():
        return tuple(
            eqx.debug.get_num_traces(f) for f in (_solve_counted, _solve_plain_counted)
        )

    so.simulate(m, 1.0, stepping=steps)
    n = traces()
    assert sum(n) > 0
    other = hh_compartment(diameter=10.0, amplitude=0.7, delay=0.2, duration=1.0)
    for model in (m, other, m):
        sim = so.simulate(model, 1.0, stepping=steps)
        assert sim.result == so.RESULTS.successful
    assert traces() == n


@pytest.mark.parametrize("kind", ["fixed", "adaptive"])
def test_continuing_from_the_final_state(m, kind):
    # dt a power of two: the grid of the second piece is the one run's, exactly.
    dt = 1 / 32
    if kind == "fixed":
        steps = so.FixedSteps(dt)
    else:
        steps = so.AdaptiveSteps(PID, dt, 0.25)
    whole = so.simulate(m, 2.0, stepping=steps)
    first = so.simulate(m, 1.0, stepping=steps)
    second = so.simulate(m, 2.0, stepping=steps, t0=1.0, y0=first.final_state)
    np.testing.assert_array_equal(second.ts[0], 1.0)
    pieces = np.concatenate([first.recordings["soma"], second.recordings["soma"][1:]])
    if kind == "fixed":
        # The same steps on the same grid: bit for bit.
        np.testing.assert_array_equal(pieces, whole.recordings["soma"])
        assert eqx.tree_equal(second.final_state, whole.final_state)
    else:
        # The controller restarts from dt0 at 1 ms: the same to its tolerance.
        np.testing.assert_allclose(pieces, whole.recordings["soma"], atol=1e-3)
    assert float(jnp.max(whole.recordings["soma"])) > 0  # it spiked


def _fragile():
    site = so.Site("c", "soma")
    cell = so.Cell("c", [so.Section("soma", 10.0, 10.0)], [so.Insert(so.HH())])
    return so.build(
        [cell],
        [
            so.StepCurrent(site, 0.3, 0.5, 5.0),
            so.TraceCurrent(site, [float("nan")], 5.0, 1.0),
        ],
        [so.Recording("soma", site)],
    )


def test_failed_solve_raises_one_short_error():
    with pytest.raises(RuntimeError) as info:
        so.simulate(_fragile(), 2.0, 0.025)
    msg = str(info.value)
    assert "nonfinite_" in msg and "t = 1 ms" in msg and "diagnose" in msg
    assert "CpuCallback" not in msg and "\n" not in msg
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_eager_call_compiles_the_safe_loop_only_when_needed(m):
    # Outside `jit`, fixed steps run plain first as one compiled loop and compile
    # the safe loop only if the plain run went non-finite; the result is the one
    # `jit(simulate)` gives (both loops in one program), bit for bit.
    def run(model, t1):
        return so.simulate(model, t1, 0.025, throw=False)

    n_safe = eqx.debug.get_num_traces(_solve_counted)
    clean = run(m, 1.0)
    assert eqx.debug.get_num_traces(_solve_counted) == n_safe  # no safe loop
    failing = run(_fragile(), 2.0)
    assert eqx.debug.get_num_traces(_solve_counted) == n_safe + 1
    assert failing.result != so.RESULTS.successful
    assert failing.solution is None and failing.stats["num_nonfinite_rejected"] > 0
    for model, t1, eager in ((m, 1.0, clean), (_fragile(), 2.0, failing)):
        jitted = eqx.filter_jit(run)(model, t1)
        for a, b in zip(jax.tree.leaves(eager), jax.tree.leaves(jitted)):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("optimistic", [None, True, False])
def test_value_and_gradient_are_one_computation(optimistic):
    # With a step budget short of the grid, the value obeys it as the gradient does.
    m = hh_compartment(diameter=10.0, amplitude=0.3, delay=0.5, duration=5.0)

    def f(a):
        mm = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, a[None])
        sim = so.simulate(
            mm, 3.0, 0.025, max_steps=5, throw=False, optimistic=optimistic
        )
        return jnp.mean(jnp.where(sim.valid, sim.recordings["soma"], 0.0))

    a = jnp.asarray(0.3)
    value, _ = jax.value_and_grad(f)(a)
    assert float(f(a)) == float(value)


@pytest.mark.parametrize(
    "solver",
    [dfx.SemiImplicitEuler(), dfx.ItoMilstein(), dfx.KenCarp4()],
    ids=lambda s: type(s).__name__,
)
def test_incompatible_solvers_are_a_clear_error(m, solver):
    for steps in (so.FixedSteps(0.05), so.AdaptiveSteps(PID, 0.05, 0.25)):
        with pytest.raises(ValueError, match=type(solver).__name__):
            so.check_compatible(solver, steps)
        with pytest.raises(ValueError, match="one ODE term"):
            so.simulate(m, 1.0, stepping=steps, solver=solver)


def test_implicit_solver_with_fixed_steps_is_a_clear_error(m):
    with pytest.raises(ValueError, match="Kvaerno5.*adaptive"):
        so.simulate(m, 1.0, 0.05, solver=dfx.Kvaerno5())
    so.check_compatible(dfx.Kvaerno5(), so.AdaptiveSteps(PID, 0.05, 0.25))


def test_bad_controller_settings_name_their_cause(m):
    with pytest.raises(ValueError, match="rtol and atol are both 0"):
        so.AdaptiveSteps(dfx.PIDController(rtol=0, atol=0), 0.05, 0.25)
    with pytest.raises(ValueError, match="pcoeff=100"):
        so.AdaptiveSteps(dfx.PIDController(rtol=0, atol=1e-4, pcoeff=100), 0.05, 0.25)
    m32 = hh_compartment(dtype=jnp.float32)
    tight = so.AdaptiveSteps(dfx.PIDController(rtol=1e-12, atol=1e-12), 0.05, 0.25)
    with pytest.raises(ValueError, match="resolution of float32"):
        so.simulate(m32, 1.0, stepping=tight, solver=dfx.Kvaerno5())


def test_time_resolution_and_save_dt_are_checked():
    m32 = hh_compartment(dtype=jnp.float32)
    with pytest.raises(ValueError, match="time resolution of float32"):
        so.simulate(m32, 1e4 + 0.001, 1e-5, t0=1e4, throw=False)
    m = hh_compartment()
    with pytest.raises(ValueError, match="must divide t1 - t0"):
        so.simulate(m, 5.0, 0.025, save_dt=10.0)
    with pytest.raises(ValueError, match="must divide t1 - t0"):
        so.simulate(m, 5.0, 0.025, save_dt=2.0)
    with pytest.raises(ValueError, match="save_dt=10.0 must divide"):
        so.simulate(m, 5.0, 0.025, controller=PID, save_dt=10.0)


def test_recordings_are_one_array_named_outside_the_solve(m):
    # `Simulation.recordings` is a read-only mapping over one saved array: one
    # leaf for `jit` however many recordings (issue 21 item 3); the solve is the
    # one `test_short_form_is_the_stepping_object` compiled.
    sim = so.simulate(m, 1.0, 0.05)
    rec = sim.recordings
    assert list(rec) == ["soma"] and len(rec) == 1 and "soma" in rec
    assert "v" not in rec and dict(rec).keys() == {"soma"}
    assert len(jax.tree_util.tree_leaves(rec)) == 1
    assert rec.saved.shape == (21, 1)
    np.testing.assert_array_equal(rec["soma"], rec.saved[:, 0])
    with pytest.raises(KeyError):
        rec["dend"]
    whole = Recordings(rec.saved, None)  # a model without named recordings
    assert list(whole) == ["v"] and whole["v"] is rec.saved and "soma" not in whole


def test_recorded_variables_are_gathered_in_recording_order():
    # One gather per distinct variable (and point-process group), then one
    # permutation: the same values, in the recordings' order, as one gather each.
    values = {"v": jnp.arange(4.0), "cai": 10 + jnp.arange(4.0)}
    keys, index = ("cai", "v", "cai", "v", "v"), (0, 1, 3, 0, 2)
    got = _gather_by(keys, index, values.__getitem__)
    want = jnp.stack([values[k][i] for k, i in zip(keys, index)])
    np.testing.assert_array_equal(got, want)

    class Y(eqx.Module):
        groups: tuple

    y = Y(({"g": jnp.arange(3.0)}, {"A": jnp.arange(2.0), "B": 5 + jnp.arange(2.0)}))
    points = ((1, "g", 1), (0, "g", 2), (1, "A", 0), (0, "g", 0))
    np.testing.assert_array_equal(_points(y, points), [5.0, 2.0, 0.0, 0.0])


def test_safe_fallback_runs_for_the_failing_members_only():
    # Batched, the failing members are solved `chunk` at a time (here 3 failing
    # members in chunks of 2: two rounds, the second one half empty); the clean
    # ones keep the plain result; an operand shared by the batch stays shared.
    def pick(x, ok, y):
        return where_failed(lambda a: a[0] * 10 + a[1], (x, y), x + 0.5, ok, chunk=2)

    x = jnp.arange(5.0)
    ok = jnp.asarray([True, False, False, True, False])
    want = jnp.where(ok, x + 0.5, x * 10 + 1)
    np.testing.assert_array_equal(jax.vmap(pick, (0, 0, None))(x, ok, 1.0), want)
    np.testing.assert_array_equal(pick(x[1], ok[1], 1.0), want[1])  # unbatched
    nested = jax.vmap(jax.vmap(pick, (0, 0, None)), (0, 0, None))
    both = nested(jnp.stack([x, x]), jnp.stack([ok, ~ok]), 1.0)
    np.testing.assert_array_equal(both[1], jnp.where(~ok, x + 0.5, x * 10 + 1))


def _sweep_member(m, amp, bad):
    # the model `m` of `_fragile`, its trace current NaN (a failure at 1 ms) for
    # `bad` members only
    return eqx.tree_at(
        lambda m: (m.stimuli.step_amplitude, m.stimuli.trace_values),
        m,
        (amp[None], jnp.where(bad, jnp.nan, 0.0)[None, None]),
    )


def test_batched_results_equal_per_member_results_with_failing_members():
    # Issue 21 item 1: clean and failing members mixed; value and gradient of
    # every member the same as when it runs alone.
    m = _fragile()

    def run(amp, bad):
        sim = so.simulate(_sweep_member(m, amp, bad), 2.0, 0.025, throw=False)
        return sim.recordings["soma"], sim.stats, sim.result._value

    def loss(amp, bad):
        sim = so.simulate(_sweep_member(m, amp, bad), 2.0, 0.025, throw=False)
        return jnp.mean(jnp.where(sim.valid, sim.recordings["soma"], 0.0) ** 2)

    amps = jnp.asarray([0.2, 0.3, 0.4, 0.5])
    bad = jnp.asarray([False, True, False, True])
    batch = jax.jit(jax.vmap(run))(amps, bad)
    grads = jax.jit(jax.vmap(jax.grad(loss)))(amps, bad)
    one, one_grad = jax.jit(run), jax.jit(jax.grad(loss))
    np.testing.assert_array_equal(batch[2] != 0, bad)  # the failing ones failed
    for i in range(4):
        alone = one(amps[i], bad[i])
        for a, b in zip(
            jax.tree_util.tree_leaves(alone), jax.tree_util.tree_leaves(batch)
        ):
            # vectorised arithmetic may round differently from the unbatched one
            np.testing.assert_allclose(a, b[i], rtol=1e-13, atol=0)
        g = one_grad(amps[i], bad[i])
        assert np.isfinite(g) and g != 0
        np.testing.assert_allclose(grads[i], g, rtol=1e-12)
