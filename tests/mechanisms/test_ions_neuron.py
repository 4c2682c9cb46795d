"""Ions against NEURON running the same mechanisms: NEURON's own `cachan1.mod`
(from its wheel) and a first-order calcium pool (`tests/data/mod/capool_ions.mod`),
compiled with `nrnivmodl` into a temporary folder, against their hand-written
stable_ode equivalents (`ion_mechanisms`), with NEURON's `hh`, a current step,
dt 0.025 ms, NEURON's `secondorder=0` against our `BackwardEuler`.

**Where the schemes agree.** Both compute the currents at the start of the step
(`v`, gates and `cai` of step k; `eca` from Nernst of `cai` of step k), solve
the linearised voltage equation, then update the gates at the new voltage
(`cnexp` is the exact exponential for frozen voltage, as our `Relaxation`).
NEURON linearises the current by a finite difference (`v + 0.001 mV`), we by
the exact derivative. The pool reads `ica` as computed in the current phase
(at the voltage, gates and `cai` of step k) in both: our `BackwardEuler` passes
the step's initial voltage to the ion currents that mechanisms read. Nothing
else differs: agreement to ~1e-6 mV, with or without the pool. What remains is
the finite-difference derivative's error, first order in dt
(`test_remaining_difference_is_first_order_in_dt`).

NEURON reports `ica` and `eca` after a step as computed at the start of that
step, i.e. one step late: its sample k+1 is compared with our sample k.
"""

import pathlib

import numpy as np
import pytest
from ion_mechanisms import CaChan1, CaPool

import stable_ode as so


DT = 0.025
T1 = 40.0


def _release_dir() -> pathlib.Path:
    import neuron

    return (
        pathlib.Path(neuron.__file__).parent
        / ".data"
        / "share"
        / "nrn"
        / "demo"
        / "release"
    )


@pytest.fixture(scope="session")
def nrn(neuron_mechanisms):
    """NEURON's `h` with `cachan1` and `capool_ions` (the suite's one compiled
    set, `tests/conftest.py`)."""
    return neuron_mechanisms


def _cell(n: int, pool: bool, imax: float):
    length, diam = (20.0, 20.0) if n == 1 else (90.0, 4.0)
    mechs = [so.Insert(so.HH()), so.Insert(CaChan1(imax=imax))]
    if pool:
        mechs.append(so.Insert(CaPool()))
    return so.Cell("c", [so.Section("soma", length, diam, n)], mechs)


def _ours(n, pool, imax, amp, dt=DT):
    cell = _cell(n, pool, imax)
    recs = []
    for k in range(n):
        site = so.Site("c", "soma", (k + 0.5) / n)
        for var in ("v", "cai", "ica", "eca"):
            recs.append(so.Recording(f"{var}{k}", site, variable=var))
    stim = so.StepCurrent(so.Site("c", "soma", 0.5), amp, 2.0, 30.0)
    model = so.build([cell], [stim], recs, dtype=np.float64)
    sim = so.simulate(model, T1, dt)
    return {k: np.asarray(x) for k, x in sim.recordings.items()}


def _neuron(h, n, pool, imax, amp, dt=DT):
    length, diam = (20.0, 20.0) if n == 1 else (90.0, 4.0)
    sec = h.Section(name=f"ions_{n}_{int(pool)}")
    sec.L, sec.diam, sec.nseg = length, diam, n
    sec.Ra, sec.cm = 35.4, 1.0
    sec.insert("hh")
    sec.insert("cachan1")
    if pool:
        sec.insert("capool_ions")
    for seg in sec:
        seg.cachan1.imax = imax
    h.usetable_cachan1 = 0  # compute the rates exactly, as ours
    h.usetable_hh = 0
    stim = h.IClamp(sec(0.5))
    stim.delay, stim.dur, stim.amp = 2.0, 30.0, amp
    h.secondorder = 0
    h.dt = dt
    h.celsius = 6.3
    h.cvode_active(0)
    h.finitialize(-65.0)
    segs = list(sec)
    out = {f"{var}{k}": [] for k in range(n) for var in ("v", "cai", "ica", "eca")}

    def sample():
        for k, seg in enumerate(segs):
            out[f"v{k}"].append(seg.v)
            out[f"cai{k}"].append(seg.cai)
            out[f"ica{k}"].append(seg.ica)
            out[f"eca{k}"].append(seg.eca)

    sample()
    for _ in range(round(T1 / dt)):
        h.fadvance()
        sample()
    del stim
    return {k: np.asarray(x) for k, x in out.items()}


def _errors(ours, ref, n):
    """Max |ours - NEURON| of v, cai, ica, eca over all compartments; ica and eca
    with NEURON's samples one step later (see the module docstring)."""
    err = {}
    for var in ("v", "cai", "ica", "eca"):
        e = 0.0
        for k in range(n):
            a, b = ours[f"{var}{k}"], ref[f"{var}{k}"]
            if var in ("ica", "eca"):
                a, b = a[:-1], b[1:]
            e = max(e, float(np.max(np.abs(a - b))))
        err[var] = e
    return err


def _spikes(v):
    up = np.nonzero((v[:-1] < 0) & (v[1:] >= 0))[0]
    return up * DT


@pytest.mark.parametrize("n", [1, 3])
def test_constant_calcium_matches_neuron(nrn, n):
    """cachan1 with constant concentrations: the same scheme, so the same
    trajectory to ~1e-6 (the only difference: NEURON's finite-difference
    derivative of the current)."""
    amp = 0.3 if n == 1 else 0.2
    ours, ref = _ours(n, False, 0.01, amp), _neuron(nrn, n, False, 0.01, amp)
    assert len(_spikes(ref["v0"])) >= 2
    err = _errors(ours, ref, n)
    print(f"n={n} constant calcium, max errors:", err)
    assert err["v"] < 1e-5
    assert err["ica"] < 1e-8  # mA/cm² (|ica| up to ~4e-3)
    assert err["eca"] < 1e-9
    assert err["cai"] == 0.0


@pytest.mark.parametrize("n", [1, 3])
def test_calcium_pool_matches_neuron(nrn, n):
    """cachan1 filling a calcium pool: the same scheme (the pool reads the ica
    of the start of the step), so the same trajectory to ~1e-6 mV, calcium to
    ~1e-6 of its rise, the same spike steps."""
    amp = 0.3 if n == 1 else 0.2
    ours, ref = _ours(n, True, 0.01, amp), _neuron(nrn, n, True, 0.01, amp)
    err = _errors(ours, ref, n)
    rise = float(np.max(ref["cai0"]) - ref["cai0"][0])
    print(f"n={n} pool, max errors:", err, "cai rise", rise)
    s_ours, s_ref = _spikes(ours["v0"]), _spikes(ref["v0"])
    print("spikes ours", s_ours, "NEURON", s_ref)
    assert len(s_ref) >= 2 and len(s_ours) == len(s_ref)
    assert np.array_equal(s_ours, s_ref)
    assert err["v"] < 1e-5
    assert err["cai"] < 1e-6 * rise
    assert err["eca"] < 1e-6


def test_remaining_difference_is_first_order_in_dt(nrn):
    """What remains of the difference from NEURON (its finite-difference
    derivative of the current, module docstring) is first order: halving dt
    halves it."""
    err = []
    for dt in (DT, DT / 2):
        ours, ref = _ours(1, True, 0.01, 0.3, dt), _neuron(nrn, 1, True, 0.01, 0.3, dt)
        err.append(_errors(ours, ref, 1))
    print("dt, dt/2:", err)
    for var in ("v", "cai", "eca"):
        assert 1.8 < err[0][var] / err[1][var] < 2.2, var
