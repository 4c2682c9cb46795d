"""NEURON's `stim.mod` (`IClamp`) and `svclmp.mod` (`SEClamp`) imported as
point processes: an `ELECTRODE_CURRENT`, `t` read in `BREAKPOINT`,
`at_time`, and `SOLVE icur METHOD after_cvode` (`stable_ode.nmodl._clock`).

One HH compartment (L = diam = 20 µm, 6.3 °C) with an `SEClamp` (rs 0.5 MΩ;
-70 mV for 2 ms, -20 mV for 3 ms, -60 mV for 2 ms, then off) and an `IClamp`
(1 nA from 8 ms for 2 ms), 12 ms at dt 0.025 ms. Asserted:

- the imported files give the built-in `IClamp` / `SEClamp`'s traces (each in
  a model of its own, so that the `CrankNicolson` run also checks that the
  imported clamp's stiffness is seen) to 1e-12 mV and nA, and equal
  gradients;
- against NEURON (whose built-in `IClamp` and `SEClamp` are these two files,
  compiled into `libnrniv`), backward Euler against `secondorder = 0`:
  1e-8 mV and nA (measured in `docs/nmodl.md`);
- adaptive steps land on the times the files compare `t` with.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_load_error, MODFILE, run_cvode, run_fixed

import stable_ode as so
from stable_ode.nmodl import load_nmodl


T1, DT = 12.0, 0.025
LEVELS = dict(dur1=2.0, amp1=-70.0, dur2=3.0, amp2=-20.0, dur3=2.0, amp3=-60.0)


@pytest.fixture(scope="module")
def imported():
    return load_nmodl([MODFILE / "stim.mod", MODFILE / "svclmp.mod"])


def _model(iclamp, seclamp, cell="c"):
    site = so.Site(cell, "soma", 0.5)
    vc = seclamp(site, rs=0.5, name=f"{cell}.vc", **LEVELS)
    delay = {"delay": 8.0} if iclamp is so.IClamp else {"del_": 8.0}
    ic = iclamp(site, dur=2.0, amp=1.0, name=f"{cell}.ic", **delay)
    recordings = [
        so.Recording(cell, site),
        so.PointRecording(f"{cell}.i", vc, "i"),
        so.PointRecording(f"{cell}.vc", vc, "vc"),
        so.PointRecording(f"{cell}.ic", ic, "i"),
    ]
    hh = so.Cell(cell, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    return [hh], [vc, ic], recordings


def _run(model, **kw):
    out = so.simulate(model, T1, DT, **kw)
    return {k: np.asarray(x) for k, x in out.recordings.items()}


@pytest.fixture(scope="module")
def runs(imported):
    out = {}
    for kind, classes in (
        ("imported", (imported["IClamp"], imported["SEClamp"])),
        ("builtin", (so.IClamp, so.SEClamp)),
    ):
        cells, pps, rec = _model(*classes)
        model = so.build(cells, point_processes=pps, recordings=rec)
        for solver in (so.BackwardEuler(), so.CrankNicolson()):
            out[kind, type(solver).__name__] = _run(model, solver=solver)
    return out


@pytest.mark.parametrize("solver", ["BackwardEuler", "CrankNicolson"])
def test_imported_equals_builtin(runs, solver):
    ours, theirs = runs["imported", solver], runs["builtin", solver]
    assert abs(ours["c"][60] + 70.0) < 0.1, "clamped to the first level"
    assert np.max(ours["c"]) > 0, "the IClamp makes the cell spike"
    for k in ("c", "c.i", "c.vc", "c.ic"):
        err = float(np.max(np.abs(ours[k] - theirs[k])))
        print(f"{solver} {k}: {err:.2g}")
        assert err < 1e-12, k


def _neuron_clamps(h):
    """`_model`'s compartment and clamps in NEURON: `(section, SEClamp,
    IClamp)`."""
    sec = h.Section(name="clamp_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    vc, ic = h.SEClamp(sec(0.5)), h.IClamp(sec(0.5))
    vc.rs = 0.5
    for k, x in LEVELS.items():
        setattr(vc, k, x)
    ic.delay, ic.dur, ic.amp = 8.0, 2.0, 1.0
    return sec, vc, ic


def test_against_neuron(runs):
    """NEURON's own IClamp and SEClamp, compiled from these files."""
    from neuron import h

    sec, vc, ic = _neuron_clamps(h)
    rec = {"c": sec(0.5)._ref_v, "c.i": vc._ref_i, "c.vc": vc._ref_vc}
    rec["c.ic"] = ic._ref_i
    vecs = {k: h.Vector().record(x) for k, x in rec.items()}
    h.usetable_hh = 0
    theirs = run_fixed(h, vecs, [sec], [vc, ic], T1, DT)
    del vc, ic, sec, vecs
    ours = runs["imported", "BackwardEuler"]
    assert np.max(np.abs(theirs["c.i"])) > 10
    for k, tol in (("c", 1e-8), ("c.i", 1e-8), ("c.vc", 0.0), ("c.ic", 0.0)):
        # From the second sample: NEURON's `i` at t = 0 is computed with its dt.
        err = float(np.max(np.abs(ours[k][1:] - theirs[k][1:])))
        print(f"imported vs NEURON {k}: {err:.2g}")
        assert err <= tol, k


@pytest.mark.neuron
def test_converged_against_cvode(imported, neuron_mechanisms):
    """Converged runs of the same files in both simulators: ours under an
    adaptive `CrankNicolson` (`PIDController(rtol = atol = 1e-8)`), NEURON
    under CVODE (`rtol = atol = 1e-10`), 20 ms: spike times (0 mV, upward)
    to 0.01 ms, and the voltage (mV) and the clamp's current (nA) at every
    sample off the level edges (at an edge each records the level that
    starts there or the one that ends there) to 1e-3. Measured: spike time
    2e-6 ms, v 1.7e-4 mV (in the spike's repolarisation), i 8.5e-5 nA (just
    after a level edge). The samples fall inside our steps: before the
    recorder computed a clamp's `i` from the interpolated voltage, `i` was
    interpolated on its own and was 0.04 nA off, 25 µs after an edge."""
    h = neuron_mechanisms
    t1 = 20.0
    cells, pps, rec = _model(imported["IClamp"], imported["SEClamp"])
    rec.append(so.SpikeRecording("spikes", so.Site("c", "soma", 0.5), 0.0, 8))
    model = so.build(cells, point_processes=pps, recordings=rec)
    ctl = dfx.PIDController(rtol=1e-8, atol=1e-8)
    out = so.simulate(model, t1, DT, solver=so.CrankNicolson(), controller=ctl)
    ours = {k: np.asarray(x) for k, x in out.recordings.items()}
    fired = np.asarray(out.spikes["spikes"])
    fired = fired[np.isfinite(fired)]

    sec, vc, ic = _neuron_clamps(h)
    nc = h.NetCon(sec(0.5)._ref_v, None, sec=sec)
    nc.threshold = 0.0
    spikes = h.Vector()
    nc.record(spikes)
    refs = {"c": sec(0.5)._ref_v, "c.i": vc._ref_i}
    theirs = run_cvode(h, t1, refs=refs, dt=DT)
    times = np.array(spikes)
    del vc, ic, nc, refs
    h.delete_section(sec=sec)

    print("spike times: ours", fired, "NEURON (CVODE)", times)
    assert len(times) >= 1
    np.testing.assert_allclose(fired, times, rtol=0, atol=0.01)
    t = np.arange(len(ours["c"])) * DT
    off = np.all(np.abs(t[:, None] - np.array([0.0, 2.0, 5.0, 7.0])) > 1e-9, axis=1)
    for k in ("c", "c.i"):
        err = float(np.max(np.abs(ours[k][off] - theirs[k][off])))
        print(f"converged, ours vs CVODE, {k}: {err:.3g}")
        assert err < 1e-3, k


def test_adaptive_steps_land_on_the_edges(imported):
    """The imported clamps report the times their files compare `t` with
    (`t < del + dur`, `t < tc2`, `at_time(dur1)`, ...) as jump times, and an
    adaptive run of the imported and the built-in clamps in one model (one
    error norm, so the same steps) gives the same voltages and recordings,
    at the level edges too."""
    cells, pps, rec = _model(imported["IClamp"], imported["SEClamp"], "a")
    cells2, pps2, rec2 = _model(so.IClamp, so.SEClamp, "b")
    model = so.build(cells + cells2, point_processes=pps + pps2, recordings=rec + rec2)
    jumps = {g.names[0]: g.jump_times(jnp.float64) for g in model.point_processes}
    np.testing.assert_array_equal(jumps["a.vc"], [2.0, 5.0, 7.0])
    np.testing.assert_array_equal(jnp.sort(jumps["a.ic"]), [8.0, 10.0])
    ctl = dfx.PIDController(rtol=1e-6, atol=1e-6)
    r = _run(model, solver=so.CrankNicolson(), controller=ctl)
    for k in ("", ".i", ".vc", ".ic"):
        err = float(np.max(np.abs(r["a" + k] - r["b" + k])))
        print(f"adaptive {k or 'v'}: {err:.2g}")
        assert err < 1e-12, k
    # A sample on an edge records the level that starts there, as the
    # step that starts there sees it (the sample is its start).
    for k, level in ((80, -20.0), (200, -60.0)):
        assert r["a.vc"][k] == level
        assert r["a.i"][k] == (level - r["a"][k]) / 0.5
    assert r["a.i"][280] == 0.0, "off from 7 ms"


def test_gradients_equal_builtin(imported):
    """`jax.grad` of the mean voltage with respect to the SEClamp's series
    resistance: the imported file's equals the built-in's."""

    def grad(classes, rs_of):
        cells, pps, rec = _model(*classes)
        model = so.build(cells, point_processes=pps, recordings=rec[:1])
        kinds = [g.kind for g in model.point_processes]
        k = kinds.index("SEClamp")

        def loss(scale):
            m = eqx.tree_at(
                lambda m: rs_of(m.point_processes[k]),
                model,
                replace_fn=lambda x: x * scale,
            )
            return jnp.mean(so.simulate(m, 6.0, DT).recordings["c"])

        return float(jax.grad(loss)(jnp.asarray(1.0)))

    g_imp = grad((imported["IClamp"], imported["SEClamp"]), lambda g: g.params["rs"])
    g_bui = grad((so.IClamp, so.SEClamp), lambda g: g.rs)
    print(f"d mean(v) / d log rs: imported {g_imp:.6g}, built-in {g_bui:.6g}")
    assert abs(g_bui) > 1e-3
    np.testing.assert_allclose(g_imp, g_bui, rtol=1e-10)


HEAD = """NEURON { POINT_PROCESS P ELECTRODE_CURRENT i RANGE amp }
PARAMETER { amp = 1 (nA) d = 1 (ms) }
ASSIGNED { v (mV) i (nA) }
STATE { g }
INITIAL { g = 0 }
"""  # 5 lines


@pytest.mark.parametrize(
    "body, construct, line, words",
    [
        (
            "BREAKPOINT { SOLVE s METHOD cnexp\n i = g }\n"
            "DERIVATIVE s {\n g' = t - g\n}\n",
            "t",
            9,
            "DERIVATIVE s's rates",
        ),
        (
            "BREAKPOINT { SOLVE s METHOD cnexp\n if (t < g) { i = amp } }\n"
            "DERIVATIVE s { g' = -g }\n",
            "t",
            7,
            "compared with an expression of g",
        ),
        (
            "BREAKPOINT { SOLVE s METHOD cnexp\n i = amp*dt }\n"
            "DERIVATIVE s { g' = -g }\n",
            "dt",
            7,
            "not available",
        ),
        (
            "BREAKPOINT {\n SOLVE s METHOD after_cvode\n i = amp }\n"
            "DERIVATIVE s { g' = -g }\n",
            "SOLVE",
            7,
            "after_cvode solves a PROCEDURE",
        ),
    ],
)
def test_clock_errors(tmp_path, body, construct, line, words):
    assert_load_error(tmp_path / "p.mod", HEAD + body, construct, line, words)


def test_electrode_current_in_a_suffix_file_is_an_error(tmp_path):
    text = (
        "NEURON { SUFFIX m\n ELECTRODE_CURRENT i }\nASSIGNED { i (mA/cm2) }\n"
        "BREAKPOINT { i = 0 }\n"
    )
    assert_load_error(tmp_path / "m.mod", text, "ELECTRODE_CURRENT", 2, "SUFFIX file")
