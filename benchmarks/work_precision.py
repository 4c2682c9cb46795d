"""Work-precision curves: spike-time error against steps and wall time.

    python -m benchmarks.work_precision [--quick | --smoke] [--out DIR]

Two models, both NEURON's `hh` at 6.3 °C, Ra = 100 Ω·cm, cm = 1 µF/cm²,
v_init = -65 mV with gates at steady state, float64:

- **compartment**: one HH compartment (length = diameter = 20 µm), a 0.15 nA step
  current from 5 ms for 90 ms (repetitive spiking), 100 ms;
- **cable**: an unbranched HH cable, 1000 µm long, 2 µm diameter, 100
  compartments, a 0.1 nA step into its 0 end from 5 ms for 40 ms, 50 ms,
  spikes recorded at both ends (the geometry of `benchmarks/forward.py`).

Methods:

- fixed `BackwardEuler` and `CrankNicolson` through `stable_ode.simulate`
  (`SafeStepTo` on the grid), a sweep over `dt`;
- adaptive `BackwardEuler` and `CrankNicolson` through `simulate` with
  `diffrax.PIDController(rtol=tol, atol=tol)` (run as
  `NonFiniteRejecting(ClipStepSizeController(PID, jump_ts=stimulus edges))`),
  a sweep over `tol`;
- adaptive `CrankNicolson` "timing": `stable_ode.TimingTolerance(
  diffrax.PIDController(rtol=0, atol=tol))`, the recommended configuration (a
  voltage error on a spike's flank counts as a shift in time; no relative
  tolerance on a potential), a sweep over `tol`;
- adaptive `diffrax.Tsit5` (explicit, fifth order) through `simulate`, plain and
  "timing", on the compartment only (the cable is too stiff for an explicit
  method), a sweep over `tol`;
- `diffrax.Kvaerno5` with `PIDController(rtol=tol, atol=tol)`, a sweep over `tol`;
- NEURON 9's CVODE (`cvode.atol(tol)`, `rtol = 0`), a sweep over `tol`; steps
  are the number of CVODE returns (`Vector.record(h._ref_t)`), which is the
  number of accepted steps.

**Error:** the largest |Δt| over all spikes (upward crossings of 0 mV, linearly
interpolated on a 2 µs grid of dense output) against a reference: our
`CrankNicolson` at fixed dt = 0.5 µs (its own error, from the run at dt = 1 µs by
Richardson extrapolation, is printed; so is NEURON CVODE at atol 1e-9 against it).
A run with a different number of spikes has error `inf`.

**Work:** the number of steps (accepted + rejected, as `simulate` reports), and
the median wall time of the jitted `simulate` call (compilation excluded),
saving `v` every 0.1 ms. The spike times come from a second, untimed run that
saves on the 2 µs grid (`SaveAt(ts=...)` does not change the steps diffrax
takes; for fixed steps the second run is `diffeqsolve` with `StepTo` on the same
grid). NEURON: `h.finitialize` + `ParallelContext.psolve` (its run loop in C,
not the hoc loop of `h.continuerun`), median of several runs.

Prints a table per model, the issue's targets and whether they are met, and
writes `work_precision_<model>.png` (two panels: error vs steps, error vs wall
time) to `--out` (default `benchmarks/plots/`).
"""

import argparse
import dataclasses
import math
import os
import time

import jax


jax.config.update("jax_enable_x64", True)

import diffrax as dfx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import stable_ode as so  # noqa: E402
from stable_ode import spike_times  # noqa: E402

from ._common import emit, spike_error, time_jitted  # noqa: E402
from .work_precision_report import _progress, plot, table, targets  # noqa: E402


CELSIUS = 6.3
V_INIT = -65.0  # mV
RA, CM = 100.0, 1.0  # Ω·cm, µF/cm²
FINE = 0.002  # ms, dense-output grid for spike times
SAVE_DT = 0.1  # ms, saving in the timed runs
REF_DT = 0.0005  # ms


@dataclasses.dataclass(frozen=True)
class Case:
    """One model: geometry (µm), stimulus (nA, ms), duration (ms)."""

    name: str
    length: float
    diameter: float
    n_compartments: int
    amplitude: float
    delay: float
    duration: float
    t_max: float
    stim_position: float

    def build(self) -> so.MembraneModel:
        cell = so.Cell(
            "c",
            [so.Section("s", self.length, self.diameter, self.n_compartments)],
            [so.Insert(so.HH())],
            axial_resistivity=RA,
            capacitance=CM,
        )
        recs = [so.Recording("start", so.Site("c", "s", self.stim_position))]
        if self.n_compartments > 1:
            recs.append(so.Recording("end", so.Site("c", "s", 1.0)))
        stim = so.StepCurrent(
            so.Site("c", "s", self.stim_position),
            self.amplitude,
            self.delay,
            self.duration,
        )
        return so.build([cell], [stim], recs, celsius=CELSIUS, v_init=V_INIT)


COMPARTMENT = Case("compartment", 20.0, 20.0, 1, 0.15, 5.0, 90.0, 100.0, 0.5)
CABLE = Case("cable", 1000.0, 2.0, 100, 0.1, 5.0, 40.0, 50.0, 0.0)


@dataclasses.dataclass
class Point:
    method: str
    param: float  # dt (ms) or tol
    steps: int
    seconds: float
    error: float  # ms


def all_spikes(t, recs: dict) -> list[np.ndarray]:
    return [spike_times(t, recs[k]) for k in sorted(recs)]


# ------------------------------------------------------------------ stable_ode


def _fine_grid(case: Case):
    n = round(case.t_max / FINE)
    return jnp.linspace(0.0, case.t_max, n + 1)


def _recorder(model):
    recs = model.layout.recordings
    return lambda t, y, args: {name: y.v[i] for name, i in recs}


def fixed_dense(model, case: Case, solver, dt: float):
    """Spike times of fixed steps `dt` (ms) from dense output on the fine grid."""
    n = round(case.t_max / dt)
    sol = dfx.diffeqsolve(
        so.MembraneTerm(model),
        solver,
        0.0,
        case.t_max,
        None,
        model.init_state(),
        saveat=dfx.SaveAt(ts=_fine_grid(case), fn=_recorder(model)),
        stepsize_controller=dfx.StepTo(jnp.linspace(0.0, case.t_max, n + 1)),
        max_steps=n,
    )
    return all_spikes(sol.ts, sol.ys)


def run_fixed(model, case, solver, dts, ref, repeats) -> list[Point]:
    pts = []
    name = f"fixed {type(solver).__name__}"
    for dt in dts:
        fn = jax.jit(
            # saving every SAVE_DT, or every step if the step is longer
            lambda m, dt=dt: so.simulate(
                m, case.t_max, dt, solver=solver, save_dt=max(SAVE_DT, dt)
            )
        )
        timing, sim = time_jitted(fn, model, repeats=repeats)
        steps = sim.stats["num_steps"]
        err = spike_error(fixed_dense(model, case, solver, dt), ref)
        pts.append(Point(name, dt, int(steps), timing.median, err))
        _progress(pts[-1])
    return pts


def pid_controller(tol):
    """`diffrax.PIDController(rtol=tol, atol=tol)`."""
    return dfx.PIDController(rtol=tol, atol=tol)


def timing_controller(tol):
    """`stable_ode.TimingTolerance(diffrax.PIDController(rtol=0, atol=tol))`."""
    return so.TimingTolerance(dfx.PIDController(rtol=0.0, atol=tol))


def run_adaptive(
    model, case, solver, tols, ref, repeats, label=None, controller=pid_controller
) -> list[Point]:
    def sim(m, tol, save_dt):
        return so.simulate(
            m,
            case.t_max,
            0.01,
            solver=solver,
            save_dt=save_dt,
            controller=controller(tol),
        )

    # the model is closed over: `simulate` needs concrete stimulus edges for the
    # adaptive controller's jump times
    timed = jax.jit(lambda tol: sim(model, tol, SAVE_DT))
    dense = jax.jit(lambda tol: sim(model, tol, FINE))
    name = label or f"adaptive {type(solver).__name__}"
    pts = []
    for tol in tols:
        tol_ = jnp.asarray(tol)
        timing, s = time_jitted(timed, tol_, repeats=repeats)
        steps = s.stats["num_steps"]
        s = dense(tol_)
        err = spike_error(all_spikes(s.ts, s.recordings), ref)
        pts.append(Point(name, tol, int(steps), timing.median, err))
        _progress(pts[-1])
    return pts


def reference(model, case: Case, ref_dt: float = REF_DT, estimate: bool = True):
    """CrankNicolson at `ref_dt` and, if `estimate`, at 2·`ref_dt`: the reference and
    its error estimate (Richardson: the error of the finer run is |Δ|/3 for a
    second-order method; `nan` without the estimate)."""
    ref = fixed_dense(model, case, so.CrankNicolson(), ref_dt)
    if not estimate:
        return ref, math.nan
    coarse = fixed_dense(model, case, so.CrankNicolson(), 2 * ref_dt)
    return ref, spike_error(coarse, ref) / 3


# ------------------------------------------------------------------ NEURON


def _neuron_model(h, case: Case):
    sec = h.Section(name=f"wp_{case.name}")
    sec.L, sec.diam, sec.nseg = case.length, case.diameter, case.n_compartments
    sec.Ra, sec.cm = RA, CM
    sec.insert("hh")
    clamp = h.IClamp(sec(case.stim_position))
    clamp.amp, clamp.delay, clamp.dur = case.amplitude, case.delay, case.duration
    n = case.n_compartments
    # compartment centres, as stable_ode's recordings (position 1.0: the last)
    sites = {"start": sec((min(int(case.stim_position * n), n - 1) + 0.5) / n)}
    if n > 1:
        sites["end"] = sec((n - 0.5) / n)
    return sec, clamp, sites


def _cvode_run(h, case: Case, sites):
    """One CVODE solve: (accepted steps, spike times on the fine grid)."""
    t_steps, t_fine = h.Vector(), h.Vector()
    t_steps.record(h._ref_t)
    t_fine.record(h._ref_t, FINE)
    vs = {k: h.Vector() for k in sites}
    for k, seg in sites.items():
        vs[k].record(seg._ref_v, FINE)
    h.finitialize(V_INIT)
    h.continuerun(case.t_max)
    recs = {k: np.array(v) for k, v in vs.items()}
    return len(t_steps) - 1, all_spikes(np.array(t_fine), recs)


def run_cvode(case: Case, tols, ref, repeats) -> list[Point]:
    from neuron import h

    h.load_file("stdrun.hoc")
    sec, clamp, sites = _neuron_model(h, case)
    cvode = h.CVode()
    h.celsius = CELSIUS
    h.usetable_hh = 0  # exact rates, as ours
    pts = []
    try:
        cvode.active(1)
        cvode.rtol(0.0)
        for tol in tols:
            cvode.atol(tol)
            # the vectors of `_cvode_run` are gone: the timed runs record nothing
            steps, spikes = _cvode_run(h, case, sites)
            err = spike_error(spikes, ref)
            times = []
            pc = h.ParallelContext()
            pc.set_maxstep(10)
            for _ in range(repeats):
                # psolve: NEURON's run loop in C (continuerun's hoc loop adds ~10
                # µs per step, see benchmarks/_neuron.py)
                start = time.perf_counter()
                h.finitialize(V_INIT)
                pc.psolve(case.t_max)
                times.append(time.perf_counter() - start)
            pts.append(Point("NEURON CVODE", tol, steps, float(np.median(times)), err))
            _progress(pts[-1])
    finally:
        cvode.active(0)
        del clamp
        h.delete_section(sec=sec)
    return pts


def plan(mode: str) -> dict:
    """What `main` measures in `mode` ("full", "quick", "smoke")."""
    if mode == "full":
        return dict(
            cases=(COMPARTMENT, CABLE),
            repeats=7,
            ref_dt=REF_DT,
            estimate=True,
            be_dts=[0.1, 0.05, 0.025, 0.0125, 0.00625],
            cn_dts=[0.2, 0.1, 0.05, 0.025, 0.0125],
            cn_tols=[1e-3, 1e-4, 1e-5, 1e-6, 1e-7],
            timing_tols=[1e-4, 3e-5, 2e-5, 1e-5, 3e-6, 1e-6],
            # explicit: the compartment only (the cable is stiff for it)
            tsit5_tols={"compartment": [1e-3, 3e-4, 1e-4, 3e-5, 1e-5]},
            # 1e-6 needs more than simulate's 100,000 steps on the compartment
            be_tols=dict.fromkeys(("compartment", "cable"), [1e-3, 1e-4, 1e-5]),
            # Kvaerno5 on the 100-compartment cable: ~2 min per solve at tol 1e-5
            # on a loaded 2-core machine
            k5_tols={"compartment": [1e-4, 1e-5, 1e-6], "cable": [1e-3, 1e-4]},
            cv_tols=[1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7],
        )
    if mode == "quick":
        # Every method present, fewer points; the reference at 1 µs without its
        # Richardson estimate (NEURON CVODE at atol 1e-9 is printed against it).
        return dict(
            cases=(COMPARTMENT, CABLE),
            repeats=3,
            ref_dt=0.001,
            estimate=False,
            be_dts=[0.025],
            cn_dts=[0.025],
            cn_tols=[1e-3, 1e-5],
            timing_tols=[2e-5, 1e-5],
            tsit5_tols={"compartment": [1e-4]},
            be_tols={"compartment": [], "cable": []},
            k5_tols={"compartment": [1e-4], "cable": []},
            cv_tols=[1e-3, 1e-5],
        )
    short = dataclasses.replace(COMPARTMENT, duration=15.0, t_max=20.0)
    return dict(
        cases=(short,),
        repeats=1,
        ref_dt=0.005,
        estimate=False,
        be_dts=[0.05],
        cn_dts=[],
        cn_tols=[1e-3],
        timing_tols=[1e-4],
        tsit5_tols={},
        be_tols={"compartment": []},
        k5_tols={"compartment": []},
        cv_tols=[1e-3],
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer points (~1 min)")
    parser.add_argument(
        "--smoke", action="store_true", help="a 20 ms compartment, 3 points (a test)"
    )
    parser.add_argument(
        "--out",
        default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots"),
        help="where the PNGs go (default benchmarks/plots)",
    )
    args = parser.parse_args(argv)
    p = plan("smoke" if args.smoke else "quick" if args.quick else "full")
    repeats = p["repeats"]
    os.makedirs(args.out, exist_ok=True)
    summary = []
    for case in p["cases"]:
        print(f"\n## {case.name} ({case.t_max:g} ms)", flush=True)
        model = case.build()
        ref, ref_err = reference(model, case, p["ref_dt"], p["estimate"])
        print(
            f"  reference: CrankNicolson dt = {p['ref_dt']} ms, "
            f"{sum(len(r) for r in ref)} spikes, est. error "
            + (f"{ref_err:.1g} ms" if p["estimate"] else "not estimated"),
            flush=True,
        )
        pts = []
        pts += run_fixed(model, case, so.BackwardEuler(), p["be_dts"], ref, repeats)
        pts += run_fixed(model, case, so.CrankNicolson(), p["cn_dts"], ref, repeats)
        pts += run_adaptive(model, case, so.CrankNicolson(), p["cn_tols"], ref, repeats)
        pts += run_adaptive(
            model,
            case,
            so.CrankNicolson(),
            p["timing_tols"],
            ref,
            repeats,
            "adaptive CrankNicolson timing",
            timing_controller,
        )
        for label, controller in (
            ("adaptive Tsit5", pid_controller),
            ("adaptive Tsit5 timing", timing_controller),
        ):
            tols = p["tsit5_tols"].get(case.name, [])
            if tols:
                pts += run_adaptive(
                    model, case, dfx.Tsit5(), tols, ref, repeats, label, controller
                )
        be_tols = p["be_tols"][case.name]
        if be_tols:
            pts += run_adaptive(model, case, so.BackwardEuler(), be_tols, ref, repeats)
        if p["k5_tols"][case.name]:
            pts += run_adaptive(
                model, case, dfx.Kvaerno5(), p["k5_tols"][case.name], ref, 1, "Kvaerno5"
            )
        else:
            print("  Kvaerno5: left out in this mode (minutes per solve on the cable)")
        cv = run_cvode(case, p["cv_tols"] + [1e-9], ref, repeats)
        print(f"  NEURON CVODE atol 1e-9 vs reference: {cv[-1].error:.2g} ms")
        pts += cv[:-1]
        print()
        print(table(pts))
        path = os.path.join(args.out, f"work_precision_{case.name}.png")
        plot(case, pts, path)
        print(f"\nplot: {path}")
        emit(
            "work_precision",
            [dict(dataclasses.asdict(x), case=case.name) for x in pts],
        )
        summary += targets(case, pts)
    print("\n## targets")
    for line in summary:
        print("- " + line)


if __name__ == "__main__":
    main()
