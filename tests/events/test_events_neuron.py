"""Point processes and NetCons against NEURON (its built-in `ExpSyn`,
`Exp2Syn`, `AlphaSynapse`, `SEClamp`, `IClamp`, `NetStim` and `NetCon`; no
`nrnivmodl` needed).

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
  fixed dt 0.025 ms: spike times within 0.034 ms of CVODE's (backward Euler's
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


def _ours(pps, ncs, rec, t_stop, dt, **kw):
    recordings = [
        so.Recording(k, what) if var == "v" else so.PointRecording(k, what, var)
        for k, (what, var) in rec.items()
    ]
    model = so.build([CELL], point_processes=pps, netcons=ncs, recordings=recordings)
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


def test_clamps_match_neuron():
    vc = so.SEClamp(
        SITE, rs=0.5, dur1=2.0, amp1=-70.0, dur2=3.0, amp2=-20.0, dur3=2.0, amp3=-60.0
    )
    ic = so.IClamp(SITE, delay=8.0, dur=2.0, amp=0.3)
    rec = {"v": (SITE, "v"), "i": (vc, "i"), "vc": (vc, "vc")}
    _, rn = run([CELL], [vc, ic], [], rec, t_stop=12.0, dt=0.025)
    _, r = _ours([vc, ic], [], rec, 12.0, 0.025)
    assert np.max(np.abs(rn["i"])) > 10
    assert np.max(np.abs(r["v"] - rn["v"])) < 1e-8
    assert np.max(np.abs(r["i"] - rn["i"])) < 1e-8
    assert np.max(np.abs(r["vc"] - rn["vc"])) == 0


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
