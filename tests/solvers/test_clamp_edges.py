"""CrankNicolson under voltage clamps: a clamp's level changes are edges (TR-BDF2
start-up steps, a fixed step split at an edge inside it, the clamp's level
sampled in each part), and while a clamp is on every step is L-stable, since
its series resistance makes the clamped compartment's mode stiff (`rs·C` ≈
0.8 µs here, against dt 0.025 ms) and θ = 1/2 steps leave it ringing.

A passive cable of 41 compartments clamped at its 0 end from -65 to -20 mV
at 1 ms (on every grid) or 1 ms + dt/3 (off it) and back 2 ms later, against
a run at dt/64. Measured at dt 0.025, from 0.25 ms after each edge on:

| clamp, edge | CN: far end (mV); current (nA) | BE | plain θ = 1/2 |
|---|---|---|---|
| SEClamp, on grid | 7.9e-6; 4.7e-5 | 1.7e-2; 9.6e-3 | 6.5e-5; 13 |
| SEClamp, off grid | 7.7e-6; 3.8e-5 | 2.3e-2; 4.8e-3 | 7.0e-3; 12 |
| VClamp, on grid | 1.0e-5; 6.7e-6 | 1.7e-2; 9.7e-3 | 1.5e-4; 1.5e6 |
| VClamp, off grid | 1.9e-4; 1.2e-4 | 2.3e-2; 4.8e-3 | 7.3e-3; 1.5e6 |

In the first sample after an edge the clamped end's error is backward
Euler's (1.2–1.7 mV of a 45 mV jump): its decay over 0.8 µs is not resolved
by any fixed step of 0.025 ms.
"""

import numpy as np
import pytest

import stable_ode as so


DT = 0.025
T1 = 4.0
DELAYS = {"on_grid": 1.0, "off_grid": 1.0 + DT / 3}
CLAMPS = ("SEClamp", "VClamp")


def cable(kind, delay):
    """The clamped cable (float64, as the suite runs) recording `v` at both
    ends and the clamp's current `i` (nA)."""
    cell = so.Cell(
        "c",
        [so.Section("s", 1000.0, 1.0, 41)],
        [so.Insert(so.Passive(g=1e-4, e=-65.0))],
        axial_resistivity=100.0,
    )
    site = so.Site("c", "s", 0.0)
    levels = dict(dur=(delay, 2.0, 10.0), amp=(-65.0, -20.0, -65.0))
    if kind == "SEClamp":
        d, a = levels["dur"], levels["amp"]
        vc = so.SEClamp(
            site, rs=1.0, dur1=d[0], amp1=a[0], dur2=d[1], amp2=a[1],
            dur3=d[2], amp3=a[2], name="vc",
        )  # fmt: skip
    else:
        vc = so.VClamp(site, **levels, name="vc")
    recordings = [
        so.Recording("v", site),
        so.Recording("far", so.Site("c", "s", 1.0)),
        so.PointRecording("i", vc, "i"),
    ]
    return so.build([cell], point_processes=[vc], recordings=recordings)


def run(model, solver, dt):
    """Recordings on the grid of `DT`."""
    out = so.simulate(model, T1, dt, solver=solver)
    k = round(DT / dt)
    return {n: np.asarray(v)[::k] for n, v in out.recordings.items()}


def away(delay, n):
    """Samples from 0.25 ms after each edge on."""
    t = np.arange(n) * DT
    near = ((t >= delay) & (t < delay + 0.25)) | (
        (t >= delay + 2.0) & (t < delay + 2.25)
    )
    return ~near


@pytest.fixture(scope="module")
def runs():
    out = {}
    for kind in CLAMPS:
        for where, delay in DELAYS.items():
            model = cable(kind, delay)
            out[kind, where] = {
                "ref": run(model, so.CrankNicolson(), DT / 64),
                "cn": run(model, so.CrankNicolson(), DT),
                "be": run(model, so.BackwardEuler(), DT),
                "plain": run(model, so.CrankNicolson(startup=False), DT),
            }
    return out


def errors(runs, kind, where, solver, keys=("v", "far", "i")):
    r = runs[kind, where]
    mask = away(DELAYS[where], r["ref"]["v"].shape[0])
    return {k: np.abs(r[solver][k] - r["ref"][k])[mask].max() for k in keys}


@pytest.mark.parametrize("kind", CLAMPS)
@pytest.mark.parametrize("where", list(DELAYS))
def test_beats_backward_euler(runs, kind, where):
    """Away from the edges, at the far end and in the clamp's current, the
    error is under a tenth of backward Euler's (measured: 60–2000×)."""
    cn = errors(runs, kind, where, "cn")
    be = errors(runs, kind, where, "be")
    print(kind, where, "cn", cn, "be", be)
    for k in ("far", "i"):
        assert cn[k] * 10 < be[k], (k, cn, be)


@pytest.mark.parametrize("kind", CLAMPS)
@pytest.mark.parametrize("where", list(DELAYS))
def test_no_ringing_at_the_clamp(runs, kind, where):
    """After each level change the clamp's current error keeps its sign (no
    zig-zag), where plain Crank–Nicolson's alternates every step."""
    r = runs[kind, where]
    for edge in (DELAYS[where], DELAYS[where] + 2.0):
        k = int(np.floor(edge / DT + 1e-9)) + 2  # the second sample after it
        window = slice(k, k + 30)
        e = r["cn"]["i"][window] - r["ref"]["i"][window]
        plain = r["plain"]["i"][window] - r["ref"]["i"][window]
        flips = lambda x: int(np.sum(np.sign(x[1:]) != np.sign(x[:-1])))  # noqa: E731
        print(kind, where, edge, "sign changes", flips(e), "plain", flips(plain))
        assert flips(e) <= 2 and flips(plain) >= 20, edge


@pytest.mark.parametrize("where", list(DELAYS))
def test_second_order_under_a_clamp(runs, where):
    """With an `SEClamp`, errors away from the edges at dt, dt/2, dt/4 fall
    by about 4 each (measured 3.94–4.03), at both ends."""
    model = cable("SEClamp", DELAYS[where])
    ref = runs["SEClamp", where]["ref"]
    mask = away(DELAYS[where], ref["v"].shape[0])
    errs = np.array(
        [
            [
                np.abs(run(model, so.CrankNicolson(), DT / k)[c] - ref[c])[mask].max()
                for c in ("v", "far")
            ]
            for k in (1, 2, 4)
        ]
    )
    ratios = errs[:-1] / errs[1:]
    print(where, errs, ratios)
    assert np.all((ratios > 3.5) & (ratios < 4.5)), (errs, ratios)
