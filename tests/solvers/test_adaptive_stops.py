"""Adaptive and safe fixed stepping through `simulate`: where a solve stops (a
failure keeps its trajectory, under `vmap` too; the optimistic run gives the safe
result), the default stepping and gradients, and stimulus edges as step
boundaries (accuracy is `test_adaptive.py`)."""

import functools

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import hh_cable, hh_compartment

import stable_ode as so
from stable_ode._stepping.adaptive import safe_controller


class Fragile(so.AbstractMechanism):
    """A leak whose current is NaN above `v_max` (mV): a model that cannot go on."""

    g: float = 0.001
    e: float = -65.0
    v_max: float = -40.0

    def gates(self, v, celsius):
        del v, celsius
        return {}

    def current(self, v, states, celsius):
        del states, celsius
        return jnp.where(v > self.v_max, jnp.nan, self.g * (v - self.e))


def _fragile(amplitude=0.5):
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0, 1)], [so.Insert(Fragile())])
    site = so.Site("c", "soma", 0.5)
    return so.build(
        [cell],
        [so.StepCurrent(site, amplitude, 1.0, 20.0)],
        [so.Recording("soma", site)],
    )


# ------------------------------------------------------------- when a solve stops


@pytest.mark.parametrize("adaptive", [False, True])
def test_failure_keeps_trajectory_and_time(adaptive):
    m = _fragile()
    controller = dfx.PIDController(rtol=1e-4, atol=1e-4) if adaptive else None
    sim = so.simulate(m, 10.0, 0.025, controller=controller, throw=False)
    assert bool(sim.result == so.RESULTS.nonfinite_max_rejections) or bool(
        sim.result == so.RESULTS.nonfinite_dt_min
    )
    t_fail = float(sim.stats["t_fail"])
    v = np.asarray(sim.recordings["soma"])
    valid = np.asarray(sim.valid)
    assert 1.0 < t_fail < 10.0 and np.all(np.isfinite(v))
    assert valid.sum() < valid.size and np.all(valid == (np.asarray(sim.ts) <= t_fail))
    # the current is evaluated at the step's start: only the last good state may
    # lie past the NaN threshold
    assert np.sum(v[valid] > -40.0) <= 1
    assert np.all(v[~valid] == v[valid][-1]) or adaptive  # fixed: held last sample
    if adaptive:  # held value is the state at t_fail, the last good one
        assert np.all(v[~valid] == v[~valid][0])
    assert int(sim.stats["num_nonfinite_rejected"]) >= 1
    with pytest.raises(Exception, match=r"stopped at t = [0-9.]+ ms.*non-finite"):
        so.simulate(m, 10.0, 0.025, controller=controller, throw=True)


def test_failure_under_vmap_names_the_member():
    # `throw=True` under `vmap`: a run where no member fails returns normally, one
    # where member 2 fails raises naming it; the samples are the unbatched ones.
    m = _fragile()
    amplitudes = jnp.asarray([0.0, 0.01, 0.5])

    @functools.partial(jax.jit, static_argnums=1)
    def run(amplitudes, throw):
        def one(a):
            mm = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, jnp.full((1,), a))
            return so.simulate(mm, 3.0, 0.025, throw=throw).recordings["soma"]

        return jax.vmap(one)(amplitudes)

    ok = run(amplitudes[:2], True)
    for i in range(2):
        mm = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, amplitudes[i : i + 1])
        single = so.simulate(mm, 3.0, 0.025).recordings["soma"]
        assert np.array_equal(np.asarray(ok[i]), np.asarray(single))
    with pytest.raises(
        Exception, match=r"stopped at t = [0-9.]+ ms \(batch member 2 of 3\)"
    ):
        run(amplitudes, True)


def test_optimistic_gives_the_safe_result():
    # `optimistic=True` runs a plain StepTo first and the safe solve only if that
    # went non-finite: the same samples, result and failure time as the safe
    # solve alone (`False`), in a batch where member 2 goes non-finite (the whole
    # batch takes the safe path) and where none does (the fast path); its gradient
    # is the safe solve's. The same for the default (`None`: optimistic values,
    # gradients through the safe solve alone by a custom_vjp).
    m = _fragile()

    def with_amplitude(a):
        return eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, jnp.full((1,), a))

    @functools.partial(jax.jit, static_argnums=1)
    def run(amplitudes, optimistic):
        def one(a):
            sim = so.simulate(
                with_amplitude(a), 3.0, 0.025, throw=False, optimistic=optimistic
            )
            return sim.recordings["soma"], sim.result._value, sim.stats

        return jax.vmap(one)(amplitudes)

    # (Batches of one size: one compilation per setting serves both.)
    for amplitudes in ([0.0, 0.01, 0.5], [0.0, 0.01, 0.02]):
        v, code, stats = run(jnp.asarray(amplitudes), False)
        for optimistic in (True, None):
            v_opt, code_opt, stats_opt = run(jnp.asarray(amplitudes), optimistic)
            assert np.array_equal(np.asarray(v), np.asarray(v_opt))
            assert np.array_equal(np.asarray(code), np.asarray(code_opt))
            for key in ("t_fail", "num_nonfinite_rejected", "num_accepted", "min_dt"):
                assert np.array_equal(
                    np.asarray(stats[key]), np.asarray(stats_opt[key])
                )
        failed = amplitudes[-1] == 0.5  # member 2 goes non-finite
        assert (int(code[-1]) != 0) == failed
        assert (float(stats["t_fail"][-1]) < 3.0) == failed

    def loss(g, a, optimistic):
        mm = eqx.tree_at(lambda m: m.mechanisms[0].mechanism.g, with_amplitude(a), g)
        sim = so.simulate(mm, 3.0, 0.025, optimistic=optimistic, throw=False)
        return jnp.mean(jnp.where(sim.valid, sim.recordings["soma"], 0.0))

    g = m.mechanisms[0].mechanism.g
    grad = jax.jit(jax.grad(loss), static_argnums=2)
    # a = 0.5: the plain run goes non-finite; the safe solve stops cleanly.
    for a in (0.01, 0.5):
        grads = [grad(g, a, o) for o in (False, True, None)]
        for other in grads[1:]:
            assert np.allclose(np.asarray(grads[0]), np.asarray(other), rtol=1e-12)
        assert np.all(np.isfinite(np.asarray(grads[0])))
        assert np.all(np.asarray(grads[0]) != 0)
    # The default's gradient holds the safe solve's loops only (as `False`), not
    # also the plain run's (as `True`).
    loops = {
        o: str(jax.make_jaxpr(jax.grad(loss), static_argnums=2)(g, 0.01, o)).count(
            "while["
        )
        for o in (False, True, None)
    }
    assert loops[None] == loops[False] < loops[True], loops


def test_default_gradient_with_outputs_left_out():
    # The default's custom_vjp gets no cotangent for outputs a loss does not use
    # (one of two recordings, the float statistics): its gradient is still the
    # safe solve's, and the loss on the float statistics alone gives zero.
    m = hh_cable(n=4, length=80.0)

    def loss(gnabar, optimistic, what):
        mm = eqx.tree_at(lambda m: m.mechanisms[0].mechanism.gnabar, m, gnabar)
        sim = so.simulate(mm, 2.0, 0.025, optimistic=optimistic)
        if what == "end":
            return jnp.sum(sim.recordings["end"] ** 2)
        return jnp.where(jnp.isfinite(sim.stats["t_fail"]), 1.0, 0.0)

    gnabar = m.mechanisms[0].mechanism.gnabar
    grad = jax.jit(jax.grad(loss), static_argnums=(1, 2))
    safe, default = (grad(gnabar, o, "end") for o in (False, None))
    np.testing.assert_allclose(np.asarray(default), np.asarray(safe), rtol=1e-12)
    assert np.all(np.asarray(safe) != 0)
    assert np.all(np.asarray(grad(gnabar, None, "stats")) == 0)


def test_default_fixed_steps_keep_forward_mode():
    # With an adjoint that supports forward mode the default is the safe solve
    # alone (a custom_vjp would block jax.jvp), and jax.jvp works.
    m = _fragile(0.01)

    def v_end(g):
        mm = eqx.tree_at(lambda m: m.mechanisms[0].mechanism.g, m, g)
        sim = so.simulate(mm, 3.0, 0.025, adjoint=dfx.ForwardMode())
        assert sim.solution is not None
        return sim.recordings["soma"][-1]

    g = m.mechanisms[0].mechanism.g
    _, tangent = jax.jvp(v_end, (g,), (jnp.ones_like(g),))
    assert np.all(np.isfinite(np.asarray(tangent))) and np.all(np.asarray(tangent) != 0)


def test_fixed_default_matches_steps_and_rejects_fixed_controllers():
    m = hh_compartment()
    sim = so.simulate(m, 10.0, 0.025, save_dt=0.1)
    assert bool(sim.result == so.RESULTS.successful)
    np.testing.assert_allclose(sim.ts, 0.1 * np.arange(101), atol=1e-12)
    assert int(sim.stats["num_steps"]) == 400
    assert float(sim.stats["min_dt"]) == pytest.approx(0.025, rel=1e-12)
    assert float(sim.stats["t_fail"]) == np.inf and bool(jnp.all(sim.valid))
    with pytest.raises(ValueError, match="cannot reject non-finite"):
        so.simulate(m, 10.0, 0.025, controller=dfx.ConstantStepSize())


# --------------------------------------------------------------- step edges


def test_adaptive_with_traced_model():
    # The model as an argument of `jax.jit` (stimulus times traced): the stimulus
    # edges still bound the steps, and the result is the untraced one.
    m = hh_compartment(delay=5.0, duration=10.0)
    pid = dfx.PIDController(rtol=1e-4, atol=1e-4)

    def run(m):
        return so.simulate(m, 20.0, 0.1, solver=so.CrankNicolson(), controller=pid)

    traced, eager = jax.jit(run)(m), run(m)
    v_traced, v_eager = traced.recordings["soma"], eager.recordings["soma"]
    assert np.allclose(np.asarray(v_traced), np.asarray(v_eager), atol=1e-9)
    assert int(traced.stats["num_steps"]) == int(eager.stats["num_steps"])


def test_stimulus_edge_is_a_step_boundary():
    m = hh_compartment(delay=5.0, duration=10.0)
    jumps = jnp.asarray(m.stimuli.jump_times(), m.dtype)
    ctrl = safe_controller(dfx.PIDController(rtol=1e-5, atol=1e-5), jumps)
    assert isinstance(ctrl, so.NonFiniteRejecting)
    assert isinstance(ctrl.controller, dfx.ClipStepSizeController)
    sol = dfx.diffeqsolve(
        so.MembraneTerm(m),
        so.NonFiniteGuard(so.CrankNicolson()),
        0.0,
        20.0,
        0.1,
        m.init_state(),
        saveat=dfx.SaveAt(steps=True, fn=lambda t, y, args: y.v),
        stepsize_controller=ctrl,
        max_steps=2000,
    )
    ts = np.asarray(sol.ts)
    ts = ts[np.isfinite(ts)]
    for edge in (5.0, 15.0):
        # a step ends just before the edge and the next starts just after it
        assert np.min(np.abs(ts - edge)) < 1e-12
    # and no accepted step straddles an edge
    assert not np.any((ts[:-1] < 5.0 - 1e-12) & (ts[1:] > 5.0 + 1e-12))
    assert not np.any((ts[:-1] < 15.0 - 1e-12) & (ts[1:] > 15.0 + 1e-12))
