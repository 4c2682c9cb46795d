"""Exact delivery of NetCon arrivals, gradients, and bad input.

A passive compartment (L = diam = 20 µm) with `ExpSyn`s and `Exp2Syn`s; all
float64. Measured: an arrival at `t0 + 0.3·dt` gives `w·exp(-(t - ta)/tau)` at
every saved time to 1e-17 µS (fixed steps) and, at every saved time but the
arrival's own instant, 1.8e-8 µS (adaptive `BackwardEuler`, atol 1e-6: the
step lands on the arrival; between step ends samples are linearly
interpolated).
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import finite_difference_grad

import stable_ode as so
from stable_ode.events._stepping import event_outcome


CELL = so.Cell(
    "c",
    [so.Section("soma", length=20.0, diameter=20.0)],
    [so.Insert(so.Passive(g=1e-4, e=-65.0))],
)
SITE = so.Site("c", "soma", 0.5)
DT = 0.025


def _model(times, weight=0.01, tau=2.0, delay=0.0):
    syn = so.ExpSyn(SITE, tau=tau, e=0.0, name="s")
    nc = so.NetCon(so.SpikeTimes(times), syn, delay=delay, weight=weight)
    rec = [so.Recording("v", SITE), so.PointRecording("g", "s", "g")]
    return so.build([CELL], point_processes=[syn], netcons=[nc], recordings=rec)


def _analytic(ts, arrivals, w, tau):
    return sum(w * np.exp(-(ts - ta) / tau) * (ts > ta) for ta in arrivals)


def test_off_grid_arrival_is_exact_in_fixed_steps():
    ta = 1.0 + 0.3 * DT
    out = so.simulate(_model([ta, 2.0]), 4.0, DT)
    ts, g = np.asarray(out.ts), np.asarray(out.recordings["g"])
    ana = _analytic(ts, [ta, 2.0], 0.01, 2.0)
    assert np.max(ana) > 0.009
    # g at every saved time: the jump decayed exactly from its arrival time;
    # the on-grid arrival at 2.0 enters after the sample at 2.0 (as NEURON).
    np.testing.assert_allclose(g, ana, rtol=1e-13, atol=1e-17)


def test_off_grid_arrival_lands_an_adaptive_step():
    ta = 1.0 + 0.3 * DT
    ctl = dfx.PIDController(rtol=0, atol=1e-6)
    out = so.simulate(_model([ta]), 4.0, DT, controller=ctl)
    ts, g = np.asarray(out.ts), np.asarray(out.recordings["g"])
    # Samples between step ends are BackwardEuler's linear interpolation of
    # the exact decay (1.8e-8 µS off at most here): the delivery is exact.
    np.testing.assert_allclose(g, _analytic(ts, [ta], 0.01, 2.0), atol=5e-8)
    # The voltage converges to the fixed-step voltage of a grid through `ta`.
    fine = so.simulate(_model([ta]), 4.0, DT / 40)
    v_fine = np.asarray(fine.recordings["v"])[::40]
    v = np.asarray(out.recordings["v"])
    assert np.max(np.abs(v - v_fine)) < 2e-3


def test_recorded_current_agrees_with_the_sampled_voltage():
    """A synapse's recorded `i` is `g·(v - e)` at every sample, between step
    ends too (computed from the interpolated states, not interpolated on its
    own), in adaptive steps of `CrankNicolson` (cubic Hermite samples), for
    `ExpSyn` and `Exp2Syn`."""
    ctl = dfx.PIDController(rtol=1e-5, atol=1e-5)
    syns = [so.ExpSyn(SITE, tau=2.0, e=0.0, name="a"),
            so.Exp2Syn(SITE, tau1=0.5, tau2=3.0, e=-10.0, name="b")]  # fmt: skip
    ncs = [so.NetCon(so.SpikeTimes([0.51, 1.7]), s, weight=0.01) for s in syns]
    rec = [so.Recording("v", SITE)]
    rec += [so.PointRecording(f"{s.name}.{k}", s, k) for s in syns for k in "gi"]
    model = so.build([CELL], point_processes=syns, netcons=ncs, recordings=rec)
    out = so.simulate(model, 4.0, DT, solver=so.CrankNicolson(), controller=ctl)
    r = {k: np.asarray(x) for k, x in out.recordings.items()}
    assert int(out.stats["num_accepted"]) < len(r["v"]) / 2, "samples inside steps"
    for name, e in (("a", 0.0), ("b", -10.0)):
        assert np.max(r[f"{name}.g"]) > 0.005
        want = r[f"{name}.g"] * (r["v"] - e)
        np.testing.assert_allclose(r[f"{name}.i"], want, rtol=1e-12, atol=1e-15)


def test_many_arrivals_in_one_step():
    """300 arrivals, up to ~16 in one step, at random times: every one delivered."""
    rng = np.random.default_rng(0)
    times = np.sort(rng.uniform(0.5, 1.0, 300))
    out = so.simulate(_model(times, weight=1e-4), 2.0, DT)
    ts, g = np.asarray(out.ts), np.asarray(out.recordings["g"])
    np.testing.assert_allclose(
        g, _analytic(ts, times, 1e-4, 2.0), rtol=1e-12, atol=1e-17
    )


def test_netstim_times():
    assert np.allclose(
        so.NetStim(interval=3, number=3, start=2).spike_times(), [2, 5, 8]
    )
    assert len(so.NetStim(number=2.5).spike_times()) == 3  # NEURON fires ceil(number)
    assert so.NetStim(start=-1).spike_times().size == 0
    a = so.NetStim(interval=2.0, number=2000, start=1.0, noise=0.5, seed=3)
    t = a.spike_times()
    np.testing.assert_array_equal(t, a.spike_times())  # seeded: reproducible
    assert not np.array_equal(t, so.NetStim(2.0, 2000, 1.0, 0.5, 4).spike_times())
    gaps = np.diff(t)
    assert np.all(gaps >= 1.0)  # (1 - noise)·interval at least
    assert abs(np.mean(gaps) - 2.0) < 0.05


def test_gradients_match_finite_differences():
    """d(sum of v)/d(weight, tau) of an ExpSyn, d/d(weight, tau2) of an Exp2Syn,
    arrivals off the grid; and d/d(weight, delay) of a NetCon from a second
    (passive) cell's voltage crossing -62 mV, and d/d(g_pas) of both cells,
    through that crossing's time; d/d(delay) of the spike-time and the
    NetStim NetCons (one compile). The forward pass is continuous in the
    arrival times (an arrival enters its step as its mean conductance over
    it), so a delay's gradient has the onset term and agrees with a central
    difference over several steps too (`docs/events.md`, "Gradients through
    arrival times"; measured 0.6% on the spike-time delay)."""
    syn = so.ExpSyn(SITE, tau=2.0, e=0.0, name="s")
    syn2 = so.Exp2Syn(SITE, tau1=0.4, tau2=3.0, e=0.0, name="s2")
    src = so.Site("src", "soma", 0.5)
    ic = so.IClamp(src, delay=0.1, dur=5.0, amp=0.05)
    ncs = [
        so.NetCon(so.SpikeTimes([0.513]), syn, delay=0.2, weight=0.01),
        so.NetCon(so.NetStim(interval=0.7, number=2, start=0.31), syn2, weight=0.02),
        so.NetCon(src, syn, delay=0.4, weight=0.01, threshold=-62.0, max_pending=1),
    ]
    model = so.build(
        [CELL, so.Cell("src", CELL.sections, CELL.mechanisms)],
        point_processes=[syn, syn2, ic],
        netcons=ncs,
        recordings=[so.Recording("v", SITE), so.SpikeRecording("src", src, -62.0, 2)],
    )

    def loss(p):
        return jnp.sum(so.simulate(with_params(model, p), 2.0, DT).recordings["v"])

    def with_params(m, p):
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.weight, m, p[0:1])
        m = eqx.tree_at(lambda m: m.point_processes[0].tau, m, p[1:2])
        m = eqx.tree_at(lambda m: m.point_processes[1].arrivals.weight, m, p[2:3])
        m = eqx.tree_at(lambda m: m.point_processes[1].tau2, m, p[3:4])
        m = eqx.tree_at(lambda m: m.point_processes[0].cell.weight, m, p[4:5])
        m = eqx.tree_at(lambda m: m.point_processes[0].cell.delay, m, p[5:6])
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.delay, m, p[7:8])
        m = eqx.tree_at(lambda m: m.point_processes[1].arrivals.delay, m, p[8:9])
        return eqx.tree_at(lambda m: m.mechanisms[0].mechanism.g, m, p[6])

    p0 = jnp.asarray([0.01, 2.0, 0.02, 3.0, 0.01, 0.4, 1e-4, 0.2, 1.0])
    spikes = so.simulate(model, 2.0, DT).spikes["src"]
    assert 0.5 < float(spikes[0]) < 1.5 and not np.isfinite(spikes[1])
    grad = np.asarray(jax.grad(loss)(p0))
    fd = finite_difference_grad(loss, p0, eps=1e-6)
    print("grad", grad, "fd", fd)
    assert np.all(np.abs(grad) > 1e-3)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)
    # Moving the arrival across 4 grid points: the onset term is there (the
    # decay term alone has the opposite sign here).
    h = 2 * DT
    wide = (loss(p0.at[7].add(h)) - loss(p0.at[7].add(-h))) / (2 * h)
    print("spike-time delay: grad", grad[7], "central difference ±2 dt", wide)
    assert abs(grad[7] - wide) < 0.05 * abs(wide)


def test_delay_gradient_in_adaptive_steps():
    """Adaptive steps land on the arrival, so the step times (constants to
    the gradient) do not move with the delay: the onset term comes from the
    zero-valued `w·age/dt` of the arrival at the step's start. Measured:
    d(∫v dt)/d(delay) -32.519 against central differences -32.523 (1e-6) and
    -32.492 (±0.05 ms); without the onset term it was +10.2."""
    model = _model([0.513], delay=0.2)
    ctl = dfx.PIDController(rtol=0, atol=1e-7)

    def loss(d):
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.delay, model, d)
        return jnp.sum(so.simulate(m, 2.0, DT, controller=ctl).recordings["v"]) * DT

    loss = jax.jit(loss)
    d0 = jnp.asarray([0.2])
    grad = float(jax.grad(loss)(d0)[0])
    fd = float(finite_difference_grad(loss, d0, eps=1e-6)[0])
    wide = float((loss(d0 + 0.05) - loss(d0 - 0.05)) / 0.1)
    print("adaptive delay gradient", grad, "fd", fd, "±0.05 ms", wide)
    assert grad < -1
    # Finite differences of an adaptive solve also move its steps (the
    # controller), which the gradient does not differentiate: 1.1e-4 apart.
    np.testing.assert_allclose(grad, fd, rtol=1e-3)
    np.testing.assert_allclose(grad, wide, rtol=0.01)


def test_delays_out_of_build_order_are_reported():
    """Arrivals are sorted at build time; delays changed afterwards that
    reorder them are reported (`RESULTS.event_order`, with the first
    out-of-order arrival's time), not delivered wrongly (no solve needed)."""
    syn = so.ExpSyn(SITE, name="s")
    ncs = [
        so.NetCon(so.SpikeTimes([1.0]), syn, delay=0.5, weight=0.01),
        so.NetCon(so.SpikeTimes([1.2]), syn, delay=0.5, weight=0.01),
    ]
    model = so.build([CELL], point_processes=[syn], netcons=ncs)
    arr = model.point_processes[0].arrivals
    np.testing.assert_allclose(np.asarray(arr.time[:2]), [1.5, 1.7])
    assert not np.isfinite(arr.disorder())
    stats = {"t_fail": jnp.asarray(jnp.inf)}
    y = model.init_state()
    result, _ = event_outcome(model, y, so.RESULTS.successful, stats)
    assert result == so.RESULTS.successful
    later = eqx.tree_at(
        lambda m: m.point_processes[0].arrivals.delay, model, jnp.asarray([0.9, 0.5])
    )
    result, st = event_outcome(later, y, so.RESULTS.successful, stats)
    assert result == so.RESULTS.event_order
    np.testing.assert_allclose(st["t_fail"], 1.7)


def test_bad_input():
    syn = so.ExpSyn(SITE, name="s")
    ic = so.IClamp(SITE, name="ic")
    with pytest.raises(ValueError, match=r"netcons\[0\].target.*'nope'"):
        so.build(
            [CELL],
            point_processes=[syn],
            netcons=[so.NetCon(so.SpikeTimes([1.0]), "nope")],
        )
    with pytest.raises(ValueError, match=r"netcons\[0\].target.*IClamp"):
        so.build(
            [CELL], point_processes=[ic], netcons=[so.NetCon(so.SpikeTimes([1.0]), ic)]
        )
    with pytest.raises(ValueError, match="delay"):
        so.NetCon(so.SpikeTimes([1.0]), syn, delay=-1.0)
    with pytest.raises(ValueError, match=r"delay.*> 0 ms for a cell-voltage"):
        so.NetCon(SITE, syn, delay=0.0)
    with pytest.raises(ValueError, match="tau"):
        so.ExpSyn(SITE, tau=0.0)
    with pytest.raises(ValueError, match="times"):
        so.SpikeTimes([-1.0])
    with pytest.raises(ValueError, match="duplicate"):
        so.build([CELL], point_processes=[syn, so.ExpSyn(SITE, name="s")])
    with pytest.raises(ValueError, match="recordable"):
        so.build(
            [CELL], point_processes=[syn], recordings=[so.PointRecording("x", syn, "A")]
        )
    with pytest.raises(ValueError, match="unknown cell"):
        so.build([CELL], point_processes=[so.ExpSyn(so.Site("zz", "soma"))])


def test_an_in_step_group_must_define_its_average():
    from typing import ClassVar

    from stable_ode.events._groups import AbstractArrivalGroup

    with pytest.raises(TypeError, match="sets in_step = True.*defines no average"):

        class _NoAverage(AbstractArrivalGroup):
            in_step: ClassVar[bool] = True
