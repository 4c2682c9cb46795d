"""NetCons from a cell's voltage crossing a threshold, against NEURON.

Two HH compartments (L = diam = 20 µm, 6.3 °C): an IClamp (0.5 nA, 1 ms)
makes cell `a` spike; its crossing of -20 mV drives an `ExpSyn` (tau 2 ms,
w 0.02 µS) on cell `b` through a NetCon with delay 1.3 ms, and `b` spikes.
NEURON: `NetCon(a(0.5)._ref_v, syn, sec=a)`, `NetCon.record` for the spikes.

Measured (x86-64, float64, dt 0.025 ms):

- Cell `a` (it receives nothing) is NEURON's trace to 1.5e-11 mV.
- Spike of `a`: NEURON's fixed step records the end of the step in which
  `v` passed the threshold (1.8 ms); ours interpolates within that step
  (1.7901 ms); CVODE (atol 1e-10): 1.7836 ms. So NEURON's fixed step also
  delivers up to a step late at each hop; ours delivers at the interpolated
  time. Spike of `b`: NEURON fixed 3.675, CVODE 3.6246 ms; ours 0.017 ms from
  CVODE's (the arrival enters its step as its mean conductance over it).
- Converged: our adaptive `CrankNicolson` (atol 1e-7; steps land on each
  arrival) against CVODE: spikes of `a` and `b` 1.4e-3 ms apart (the linear
  interpolation of the crossing within the step), `v` of `a` 2.6e-3 mV.

Gradients through a crossing are checked in `test_delivery.py` (a passive
source cell, one compile). On this network, d(∫v_b)/d(weight, delay, tau,
gnabar) matched central differences to 1e-8 (relative); that check costs a
second reverse-mode compile and is not run.
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from events_neuron import run

import stable_ode as so
from stable_ode._recordings import Recordings
from stable_ode.events._arrivals import CellArrivals, just_before, NEXT, NONE
from stable_ode.events._sources import SpikeLog, ThresholdSources
from stable_ode.events._stepping import event_outcome


def _cell(name):
    return so.Cell(
        name, [so.Section("soma", length=20.0, diameter=20.0)], [so.Insert(so.HH())]
    )


CELLS = [_cell("a"), _cell("b")]
A, B = so.Site("a", "soma", 0.5), so.Site("b", "soma", 0.5)
DT, T_STOP, DELAY, W, TAU = 0.025, 8.0, 1.3, 0.02, 2.0


def _network(delay=DELAY, **nc):
    syn = so.ExpSyn(B, tau=TAU, e=0.0, name="syn")
    ic = so.IClamp(A, delay=1.0, dur=1.0, amp=0.5)
    ncs = [so.NetCon(A, syn, delay=delay, weight=W, threshold=-20.0, **nc)]
    spikes = [
        so.SpikeRecording("a", A, threshold=-20.0, max_spikes=4),
        so.SpikeRecording("b", B, threshold=-20.0, max_spikes=4),
    ]
    return [syn, ic], ncs, spikes


@pytest.fixture(scope="module")
def network():
    pps, ncs, spikes = _network()
    rec = [
        so.Recording("va", A),
        so.Recording("vb", B),
        so.PointRecording("g", "syn", "g"),
    ]
    model = so.build(CELLS, point_processes=pps, netcons=ncs, recordings=rec + spikes)
    return model, pps, ncs, spikes


def _spikes(out):
    return {k: np.asarray(t)[np.isfinite(t)] for k, t in out.spikes.items()}


@pytest.fixture(scope="module")
def neuron_runs(network):
    _, pps, ncs, spikes = network
    rec = {"va": (A, "v"), "vb": (B, "v")}
    fixed = run(CELLS, pps, ncs, rec, t_stop=T_STOP, dt=DT, spikes=spikes)
    cvode = run(CELLS, pps, ncs, rec, t_stop=T_STOP, dt=DT, spikes=spikes, atol=1e-10)
    return fixed, cvode


def test_fixed_steps_against_neuron(network, neuron_runs):
    model = network[0]
    (_, rn), (_, rc) = neuron_runs
    out = so.simulate(model, T_STOP, DT)
    r = {k: np.asarray(v) for k, v in out.recordings.items()}
    s = _spikes(out)
    assert len(s["a"]) == len(rn["a"]) == len(rc["a"]) == 1
    assert len(s["b"]) == len(rn["b"]) == len(rc["b"]) == 1
    # The presynaptic cell gets no input: the same scheme, the same trace.
    assert np.max(np.abs(r["va"] - rn["va"])) < 1e-8
    # NEURON records the end of the step in which v passed the threshold; the
    # interpolated crossing lies inside that step.
    assert rn["a"][0] - DT < s["a"][0] < rn["a"][0]
    err = {k: abs(s[k][0] - rc[k][0]) for k in "ab"}
    err_n = {k: abs(rn[k][0] - rc[k][0]) for k in "ab"}
    print(f"fixed dt {DT}: ours - CVODE {err}, NEURON fixed - CVODE {err_n}")
    # Ours: backward Euler's own error; NEURON's fixed step adds up to a step
    # per hop (the detection at the step's end).
    assert err["a"] < 0.01 and err["b"] < 0.04
    assert err["a"] < err_n["a"] and err["b"] < err_n["b"]
    # The synapse's conductance at every saved time: the jump of the spike
    # (interpolated time + delay, off the grid) decayed exactly.
    ta = s["a"][0] + DELAY
    ts = np.asarray(out.ts)
    ana = np.where(ts > ta, W * np.exp(-(ts - ta) / TAU), 0.0)
    assert np.all(np.abs(np.round((ta - ts) / DT) * DT + ts - ta) > 1e-4)  # off-grid
    np.testing.assert_allclose(r["g"], ana, rtol=1e-12, atol=1e-17)


def test_adaptive_steps_against_cvode(network, neuron_runs):
    model = network[0]
    _, (tc, rc) = neuron_runs
    ctl = dfx.PIDController(rtol=0, atol=1e-7)
    out = so.simulate(model, T_STOP, DT, solver=so.CrankNicolson(), controller=ctl)
    s = _spikes(out)
    err = max(abs(s[k][0] - rc[k][0]) for k in "ab")
    n = len(tc)
    err_v = np.max(np.abs(np.asarray(out.recordings["va"])[:n] - rc["va"]))
    print(f"adaptive vs CVODE: spikes {err:.3g} ms, v of a {err_v:.3g} mV")
    assert len(s["a"]) == len(s["b"]) == 1
    assert err < 5e-3
    assert err_v < 0.02
    # The step lands on the arrival: the conductance is the exact decay
    # (linearly interpolated between step ends at the saved times).
    ta = s["a"][0] + DELAY
    ts = np.asarray(out.ts)
    ana = np.where(ts > ta, W * np.exp(-(ts - ta) / TAU), 0.0)
    np.testing.assert_allclose(np.asarray(out.recordings["g"]), ana, atol=5e-7)


def test_overflow_is_reported():
    """A ring buffer of one pending spike and a source that fires twice within
    the delay; a spike log of one: the lost spikes are reported with their
    times, not dropped (the hooks alone, without a solve)."""
    pps, ncs, _ = _network(delay=6.0, max_pending=1)
    spikes = [so.SpikeRecording("a", A, threshold=-20.0, max_spikes=1)]
    model = so.build(CELLS, point_processes=pps, netcons=ncs, recordings=spikes)
    k = [j for j, g in enumerate(model.groups) if isinstance(g, ThresholdSources)]
    (k,) = k
    src, log = model.groups[k], model.groups[k + 1]
    assert isinstance(log, SpikeLog) and src.pending == 1
    y = model.init_state()
    x, x_log = y.groups[k], y.groups[k + 1]
    lo, hi = jnp.full((2,), -30.0), jnp.full((2,), 0.0)  # a crossing at 1/3
    for t0 in (1.0, 3.0):  # the second spike comes before the first's arrival
        x, *found = src.detect(t0, t0 + 0.3, lo, hi, x)
        x_log = log.write(x_log, *found)
    np.testing.assert_allclose(x["overflow"][0], 3.1)
    np.testing.assert_allclose(x_log["overflow"][0], 3.1)
    np.testing.assert_allclose(src.ring(x)[0], [3.1])
    times = log.times(x_log)["a"]
    np.testing.assert_allclose(times, [1.1])
    groups = list(y.groups)
    groups[k], groups[k + 1] = x, x_log
    state = so.State(v=y.v, groups=tuple(groups))
    stats = {"t_fail": jnp.asarray(jnp.inf)}
    result, stats = event_outcome(model, state, so.RESULTS.successful, stats)
    assert result == so.RESULTS.event_overflow
    np.testing.assert_allclose(stats["t_fail"], 3.1)
    assert "max_pending" in so.RESULTS[so.RESULTS.event_overflow]


def test_spike_times_are_one_array_sliced_by_name(network):
    """`Simulation.spikes` holds every spike recording's times in one array
    (one output of a jitted solve, however many recordings: returning one
    array per recording made XLA compile a slice kernel for each) and slices
    a column by name when it is looked up; batch axes come first."""
    model, *_ = network
    sp = jax.jit(lambda m: so.simulate(m, T_STOP, DT).spikes)(model)
    assert len(jax.tree_util.tree_leaves(sp)) == 1 and sp.saved.shape == (4, 2)
    assert list(sp) == ["a", "b"] and len(sp) == 2 and "b" in sp and "c" not in sp
    for r, name in enumerate(("a", "b")):
        np.testing.assert_array_equal(sp[name], sp.saved[:, r])
        assert np.isfinite(sp[name][0]) and np.all(np.isinf(sp[name][2:]))
    assert {k: v.shape for k, v in dict(sp).items()} == {"a": (4,), "b": (4,)}
    with pytest.raises(KeyError):
        sp["c"]
    batched = Recordings(jnp.zeros((3, 4, 2)), ("a", "b"))  # e.g. from a vmap
    assert batched["b"].shape == (3, 4)


def test_two_arrivals_of_one_netcon_in_one_interval_are_not_merged():
    """`CellArrivals.deliver` evaluates one arrival per NetCon and interval
    (two crossings of a threshold are more than a step apart), and only once: should two
    arrive in one interval anyway, the increment is NaN (the step is then
    retried shorter), never one delivery for both; one gives its jump."""
    arrivals = CellArrivals(
        source=jnp.asarray([0, 0], jnp.int32),
        entry=jnp.asarray([0, 1], jnp.int32),
        delay=jnp.asarray([1.0, 2.0]),
        weight=jnp.asarray([0.5, 0.25]),
    )

    def jump(entry, w, age):
        return {"g": w * jnp.exp(-age)}

    states = {"g": jnp.zeros(2)} | arrivals.init_next(jnp.float64)
    window = [(2.5, True, True, [(2.5, jump)])]  # up to 2.5, delivered there
    one = (jnp.asarray([1.0]), jnp.asarray([NONE]))
    out = arrivals.deliver(states, one, jnp.asarray([1.0]), window)
    np.testing.assert_allclose(out["g"], [0.5 * np.exp(-0.5), 0.0])
    np.testing.assert_array_equal(out[NEXT], [1.0, 0.0])  # the first delivered
    again = arrivals.deliver(out, one, jnp.asarray([1.0]), window)
    np.testing.assert_array_equal(again["g"], out["g"])  # and not again
    two = (jnp.asarray([1.0]), jnp.asarray([1.2]))  # both arrive by 2.5
    out = arrivals.deliver(states, two, jnp.asarray([2.0]), window)
    assert np.isnan(out["g"][0]) and out["g"][1] == 0.0


def test_bad_input():
    syn = so.ExpSyn(B, name="s")
    with pytest.raises(ValueError, match=r"delay.*> 0"):
        so.NetCon(A, syn, delay=0.0)
    with pytest.raises(ValueError, match="threshold"):
        so.NetCon(so.SpikeTimes([1.0]), syn, threshold=-20.0)
    with pytest.raises(ValueError, match="max_pending"):
        so.NetCon(A, syn, max_pending=0)
    with pytest.raises(ValueError, match=r"netcons\[0\]\.source.*unknown cell"):
        so.build(
            CELLS, point_processes=[syn], netcons=[so.NetCon(so.Site("z", "soma"), syn)]
        )
    with pytest.raises(ValueError, match=r"netcons\[0\]\.source.*dend"):
        so.build(
            CELLS,
            point_processes=[syn],
            netcons=[so.NetCon(so.Site("a", "dend"), syn)],
        )
    with pytest.raises(ValueError, match="max_spikes"):
        so.SpikeRecording("x", A, max_spikes=0)


def test_window_ends_carry_no_derivative():
    """The delivery windows end just before a time (`nextafter`, which has no
    derivative in JAX): differentiating through them is zero, not an error
    (an adaptive solve's gradient of an artificial cell's recorded spike
    times once failed there)."""
    t = jnp.asarray(2.5)
    assert just_before(t) < t and jnp.nextafter(just_before(t), jnp.inf) == t
    assert jax.grad(just_before)(t) == 0.0
