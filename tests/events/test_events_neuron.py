"""Point processes and NetCons against NEURON (its built-in `ExpSyn`,
`Exp2Syn`, `AlphaSynapse`, `SEClamp`, `VClamp`, `IClamp`, `NetStim` and
`NetCon`; no `nrnivmodl` needed).

One HH compartment, L = diam = 20 µm, 6.3 °C. Measured (x86-64, float64):

- Same scheme, same dt (our `BackwardEuler` vs NEURON `secondorder = 0`, dt
  0.025 ms), arrivals on the grid: an `ExpSyn` driven by a spike-time list
  (NEURON: `NetCon(None, syn).event(t)`), an `Exp2Syn` by a `NetStim` through
  a NetCon with delay 1 ms, an `AlphaSynapse`: max |Δv| = 2.2e-11 mV over
  spikes of ~100 mV; the synaptic states `g`, `A`, `B` agree to 1e-17 µS.
  Asserted 1e-8 mV and 1e-14 µS. (NEURON's recorded `Exp2Syn.g` is the
  `B - A` of the step's current evaluation, one step behind the states, so
  the states are compared.)
- `SEClamp` (three levels, rs 0.5 MΩ) and an `IClamp` after it: max |Δv| =
  1.5e-10 mV, max |Δi| = 3.0e-10 nA (on currents up to 20 nA). Asserted 1e-8.
- Arrivals off the grid (1.0137 and 2.5071 ms), converged: our adaptive
  `CrankNicolson` (atol 1e-7, steps landing on each arrival) against NEURON
  CVODE (atol 1e-10, which delivers events at their exact times): max |Δv| =
  1.3e-3 mV, spike times 4.3e-6 ms apart (asserted 0.01 mV, 1e-3 ms). Our
  fixed dt 0.025 ms: spike times within 0.017 ms of CVODE's (backward Euler's
  own first-order error; asserted 0.2 ms).
"""

import diffrax as dfx
import numpy as np
from events_neuron import run
from helpers import spike_times

import stable_ode as so


CELL = so.Cell(
    "c", [so.Section("soma", length=20.0, diameter=20.0)], [so.Insert(so.HH())]
)
SITE = so.Site("c", "soma", 0.5)


def _ours(pps, ncs, rec, t_stop, dt, cells=(CELL,), **kw):
    recordings = [
        so.Recording(k, what) if var == "v" else so.PointRecording(k, what, var)
        for k, (what, var) in rec.items()
    ]
    model = so.build(cells, point_processes=pps, netcons=ncs, recordings=recordings)
    out = so.simulate(model, t_stop, dt, **kw)
    return np.asarray(out.ts), {k: np.asarray(v) for k, v in out.recordings.items()}


def _synapses(times):
    s1 = so.ExpSyn(SITE, tau=2.0, e=0.0, name="s1")
    s2 = so.Exp2Syn(SITE, tau1=0.5, tau2=3.0, e=-10.0, name="s2")
    a = so.AlphaSynapse(SITE, onset=12.0, tau=1.0, gmax=0.002, e=0.0, name="a")
    ncs = [
        so.NetCon(so.SpikeTimes(times), s1, delay=0.0, weight=0.004),
        so.NetCon(so.NetStim(interval=3.0, number=3, start=2.0), s2, weight=0.003),
    ]
    rec = {"v": (SITE, "v"), "g1": (s1, "g"), "A": (s2, "A"), "B": (s2, "B")}
    rec |= {"i1": (s1, "i"), "i2": (s2, "i")}
    return [s1, s2, a], ncs, rec


def test_synapses_match_neuron_on_the_grid():
    pps, ncs, rec = _synapses([1.0, 2.5])
    tn, rn = run([CELL], pps, ncs, rec, t_stop=20.0, dt=0.025)
    t, r = _ours(pps, ncs, rec, 20.0, 0.025)
    np.testing.assert_allclose(t, tn, rtol=0, atol=1e-9)
    assert np.max(r["v"]) > 20, "the synapses should make the cell spike"
    assert np.max(np.abs(r["v"] - rn["v"])) < 1e-8
    for k in ("g1", "A", "B"):
        assert np.max(rn[k]) > 1e-3
        assert np.max(np.abs(r[k] - rn[k])) < 1e-14, k
    # NEURON's recorded `syn.i` at t_{k+1} is the current of the step from
    # t_k (at v_k, with the events at t_k delivered); ours at t_k is
    # g(t_k)·(v(t_k) - e), before them: equal but at the arrivals' samples.
    arrivals = [1.0, 2.5, 3.0, 6.0, 9.0]
    keep = np.all(np.abs(t[:-1, None] - np.asarray(arrivals)) > 1e-9, axis=1)
    for k in ("i1", "i2"):
        assert np.max(np.abs(rn[k])) > 0.1
        assert np.max(np.abs(r[k][:-1] - rn[k][1:])[keep]) < 1e-9, k


def test_clamps_match_neuron():
    """An `SEClamp` and an `IClamp` after it in one cell; in two more, a
    `VClamp` with NEURON's defaults (gain 1e5, tau1 1 µs) and one with gain
    1e4, rstim 0.5 MΩ, tau1 0.05, tau2 0.02 ms, fac 0.5 (one model, one
    compile). Measured: the SEClamp cell 1.5e-10 mV, 3.0e-10 nA; the VClamps
    6.1e-11 and 6.5e-11 mV, 3.1e-6 nA (of 24 nA: the default clamp's dI/dv is
    5e4 nA/mV) and 2.6e-10 nA. Both `IClamp`s' recorded currents equal
    NEURON's exactly."""
    vc = so.SEClamp(
        SITE, rs=0.5, dur1=2.0, amp1=-70.0, dur2=3.0, amp2=-20.0, dur3=2.0, amp3=-60.0
    )
    ic = so.IClamp(SITE, delay=8.0, dur=2.0, amp=0.3)
    cells = [CELL] + [
        so.Cell(
            c, [so.Section("soma", length=20.0, diameter=20.0)], [so.Insert(so.HH())]
        )
        for c in ("c1", "c2")
    ]
    s1, s2 = so.Site("c1", "soma", 0.5), so.Site("c2", "soma", 0.5)
    levels = dict(dur=(2.0, 3.0, 2.0), amp=(-70.0, -20.0, -60.0))
    vc1 = so.VClamp(s1, **levels, name="vc1")
    vc2 = so.VClamp(
        s2, **levels, gain=1e4, rstim=0.5, tau1=0.05, tau2=0.02, fac=0.5, name="vc2"
    )
    # on at t = 0, off between grid points: its recorded current too
    ic2 = so.IClamp(s2, delay=0.0, dur=1.01, amp=0.05, name="ic2")
    rec = {"v": (SITE, "v"), "i": (vc, "i"), "vc": (vc, "vc")}
    rec |= {"v1": (s1, "v"), "i1": (vc1, "i"), "v2": (s2, "v"), "i2": (vc2, "i")}
    rec |= {"ic": (ic, "i"), "ic2": (ic2, "i")}
    pps = [vc, ic, vc1, vc2, ic2]
    _, rn = run(cells, pps, [], rec, t_stop=12.0, dt=0.025)
    _, r = _ours(pps, [], rec, 12.0, 0.025, cells=cells)
    assert np.max(np.abs(rn["i"])) > 10
    assert np.max(np.abs(r["v"] - rn["v"])) < 1e-8
    assert np.max(np.abs(r["i"] - rn["i"])) < 1e-8
    assert np.max(np.abs(r["vc"] - rn["vc"])) == 0
    assert abs(r["v1"][100] + 20.0) < 0.01  # clamped to the second level
    assert np.max(np.abs(rn["i1"][1:])) > 10
    # An IClamp's recorded current: NEURON's `IClamp.i`, sample for sample
    # (the value each step injected, at its middle; at t = 0 `amp` if on).
    assert np.array_equal(r["ic"], rn["ic"]) and np.array_equal(r["ic2"], rn["ic2"])
    assert r["ic"].max() == 0.3 and r["ic2"][0] == 0.05 and r["ic2"][-1] == 0.0
    for k, tol in (("v1", 1e-8), ("v2", 1e-8), ("i1", 1e-4), ("i2", 1e-8)):
        # From the second sample: NEURON's `i` at t = 0 is computed with its dt.
        err = np.max(np.abs(r[k][1:] - rn[k][1:]))
        print(k, err)
        assert err < tol, k


def test_off_grid_arrivals_converge():
    """Arrivals at 1.0137 and 2.5071 ms (off any grid): our adaptive run and
    NEURON CVODE agree; our fixed step at dt 0.025 is within its first-order
    error of both."""
    pps, ncs, rec = _synapses([1.0137, 2.5071])
    rec = {"v": rec["v"]}
    tn, rn = run([CELL], pps, ncs, rec, t_stop=20.0, dt=0.025, atol=1e-10)
    ctl = dfx.PIDController(rtol=0, atol=1e-7)
    t, ra = _ours(pps, ncs, rec, 20.0, 0.025, solver=so.CrankNicolson(), controller=ctl)
    _, rf = _ours(pps, ncs, rec, 20.0, 0.025)
    n = len(tn)  # CVODE's samples every dt (it may stop one short of t_stop)
    np.testing.assert_allclose(t[:n], tn, rtol=0, atol=1e-9)
    err_adaptive = np.max(np.abs(ra["v"][:n] - rn["v"]))
    sn = spike_times(tn, rn["v"])
    sa, sf = spike_times(t, ra["v"]), spike_times(t, rf["v"])
    assert len(sn) == len(sa) == len(sf) >= 1
    print(
        f"adaptive vs CVODE: {err_adaptive:.3g} mV, spikes "
        f"{np.max(np.abs(sa - sn)):.3g} ms; fixed dt 0.025: spikes "
        f"{np.max(np.abs(sf - sn)):.3g} ms"
    )
    assert err_adaptive < 0.01
    assert np.max(np.abs(sa - sn)) < 1e-3
    assert np.max(np.abs(sf - sn)) < 0.2  # backward Euler's own error at 0.025
