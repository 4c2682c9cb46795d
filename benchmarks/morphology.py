"""A reconstructed cell of about 10,000 points: loading and building against
NEURON's `Import3d`, and a simulation with `hh` everywhere against Jaxley's and
NEURON's import of the same SWC file (issue 19).

    python -m benchmarks.morphology [--quick | --smoke] [--dtype float32|float64|both]

The cell: the thalamocortical neuron `tests/data/morphologies/tc_jy160728_A_idA.asc`
(Neurolucida, 217 sections and 9,941 points as `Import3d` stores them; licence in
that folder's README), and the same points written as an SWC file (`write_swc`:
each section's points as `Import3d` stores them, a child's repeated first point
left out; written to a temporary folder, so that Jaxley, which reads SWC only,
reads the same reconstruction).

- **Loading and building** (rows `morphology_load`, float64 process only): the
  best of several runs of `stable_ode.load_morphology` (NEURON's `d_lambda` rule
  at 0.1 and 100 Hz) + `stable_ode.build`, and of `read_morphology` alone,
  against NEURON's `Import3d_SWC_read` / `Import3d_Neurolucida3` `input` +
  `Import3d_GUI(...).instantiate(None)` + the `geom_nseg` loop (stdlib's
  `lambda_f`), timed alternately in one process; Jaxley's `read_swc` (one call,
  the SWC file only) beside them.
- **Simulation** (rows `morphology`, one process per dtype): the SWC cell with
  `n_compartments` per section (`--smoke`: a small hand-written SWC file),
  `hh` everywhere (NEURON's at 6.3 °C, exact rates), Ra = 100 Ω·cm,
  cm = 1 µF/cm², v_init = -65 mV, a 1 nA step from 2 ms for 30 ms into
  `soma[0](0.5)`, dt = 0.025 ms, `v` at the soma and at the 1 end of the last
  section recorded at every step. Ours: `simulate(..., solver=BackwardEuler())`
  on `load_morphology`'s cell; NEURON: `Import3d` of the same file, the same
  `nseg`, `secondorder = 0`, `ParallelContext.psolve` (the same scheme and
  geometry: `neuron_max_dv` is a check); Jaxley: `jx.read_swc(file, ncomp=...)`
  with `bwd_euler` (Jaxley's own SWC conventions, one cylinder per compartment,
  so its trace differs from ours and NEURON's and `jaxley_max_dv` at the soma is
  a difference between geometries, not a check; its compartment count is in
  the row). Conventions of `benchmarks/forward.py`: jitted, one compiling call,
  the median of interleaved calls.
"""

import argparse
import os
import pathlib
import tempfile
import time

from .forward import _dtype


DATA = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "morphologies"
ASC = DATA / "tc_jy160728_A_idA.asc"
SMOKE_SWC = DATA / "i3d_three_point_soma.swc"
RA, CM, V_INIT, CELSIUS = 100.0, 1.0, -65.0, 6.3
AMPLITUDE, DELAY, DURATION = 1.0, 2.0, 30.0  # nA, ms, ms
DT = 0.025  # ms
MODES = {  # timed calls (loading, simulation), simulated ms, compartments/section
    "full": (5, 11, 50.0, 4),
    "quick": (3, 3, 20.0, 4),
    "smoke": (1, 1, 2.0, 2),
}


def write_swc(src, dst) -> int:
    """Write the sections of morphology file `src` (as `read_morphology` reads
    them, 3-D points as NEURON stores them) to the SWC file `dst`; returns the
    number of points written."""
    import numpy as np

    from stable_ode.morphology import read_morphology

    ids: dict[str, list[int]] = {}
    lines = ["# id type x y z radius parent (points of " + os.path.basename(src) + ")"]
    n = 0
    for s in read_morphology(src):
        points = np.asarray(s.neuron_points, dtype=float)
        parent_id = -1
        if s.parent is not None:
            own = ids[s.parent]
            parent_id = own[round(s.parent_position * (len(own) - 1))]
            if s.parent_position == 1.0:
                points = points[1:]  # the parent's end point, repeated
        mine = []
        for x, y, z, d in points:
            n += 1
            lines.append(
                f"{n} {s.swc_type} {x:.7g} {y:.7g} {z:.7g} {d / 2:.7g} {parent_id}"
            )
            mine.append(n)
            parent_id = n
        ids[s.name] = mine
    pathlib.Path(dst).write_text("\n".join(lines) + "\n")
    return n


def _neuron_import(h, path, n_compartments=None):
    """NEURON's `Import3d` of `path` with `Ra`, `cm` and `nseg` (`None`: the
    `geom_nseg` rule); returns the new sections."""
    if str(path).endswith(".swc"):
        reader = h.Import3d_SWC_read()
    else:
        reader = h.Import3d_Neurolucida3()
    reader.quiet = 1
    reader.input(str(path))
    before = set(h.allsec())
    h.Import3d_GUI(reader, 0).instantiate(None)
    made = [s for s in h.allsec() if s not in before]
    for s in made:
        s.Ra, s.cm = RA, CM
        if n_compartments is None:  # geom_nseg, d_lambda 0.1 at 100 Hz
            s.nseg = int((s.L / (0.1 * h.lambda_f(100, sec=s)) + 0.9) / 2) * 2 + 1
        else:
            s.nseg = n_compartments
    return made


def _best(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def loading(paths, repeats: int) -> list[dict]:
    """Rows `morphology_load`: ours and NEURON's load-and-build time per file."""
    import stable_ode as so

    from ._common import have_jaxley
    from ._neuron import have_neuron

    h = None
    if have_neuron():
        from neuron import h

        h.load_file("stdrun.hoc")
        h.load_file("import3d.hoc")
    rows = []
    for path in paths:

        def ours(path=path):
            cell = so.load_morphology(path, axial_resistivity=RA, capacitance=CM)
            return so.build([cell])

        model = ours()  # warm up
        read = so.morphology.read_morphology(str(path))
        ours_s = neuron_s = float("inf")
        jaxley_s = None
        for _ in range(repeats):  # alternating, so that load hits both alike
            ours_s = min(ours_s, _best(ours, 1)[0])
            if h is not None:
                start = time.perf_counter()
                made = _neuron_import(h, path)
                neuron_s = min(neuron_s, time.perf_counter() - start)
                neuron_nseg = sum(s.nseg for s in made)
                for s in made:
                    h.delete_section(sec=s)
        read_s = _best(
            lambda path=path: so.morphology.read_morphology(str(path)), repeats
        )[0]
        jaxley_comp = None
        if have_jaxley() and str(path).endswith(".swc"):
            import jaxley as jx

            start = time.perf_counter()
            jcell = jx.read_swc(str(path), ncomp=1)
            jaxley_s = time.perf_counter() - start
            jaxley_comp = int(jcell.total_nbranches)
        rows.append(
            dict(
                case=os.path.basename(path),
                points=sum(len(s.neuron_points) for s in read),
                sections=len(read),
                compartments=int(model.n_compartments),
                ours_s=ours_s,
                ours_read_s=read_s,
                neuron_s=neuron_s if h is not None else None,
                neuron_compartments=neuron_nseg if h is not None else None,
                jaxley_read_s=jaxley_s,
                jaxley_branches=jaxley_comp,
            )
        )
    return rows


def build_ours(path, dtype, t_max: float, ncomp: int):
    """The cell of the SWC file `path` in stable_ode, `hh` everywhere, the step
    current into soma[0](0.5): `(cell, sites, model, run)`, `run(model)` the
    jitted `simulate` returning both recordings (soma and the last section's 1
    end) stacked."""
    import jax
    import jax.numpy as jnp

    import stable_ode as so

    cell = so.load_morphology(
        path,
        name="c",
        n_compartments=ncomp,
        axial_resistivity=RA,
        capacitance=CM,
        mechanisms=[so.Insert(so.HH())],
    )
    last = cell.sections[-1].name
    sites = [so.Site("c", "soma[0]", 0.5), so.Site("c", last, 1.0)]
    model = so.build(
        [cell],
        [so.StepCurrent(sites[0], AMPLITUDE, DELAY, DURATION)],
        [so.Recording(f"r{i}", s) for i, s in enumerate(sites)],
        celsius=CELSIUS,
        v_init=V_INIT,
        dtype=dtype,
    )
    names = [name for name, _ in model.layout.recordings]

    @jax.jit
    def ours(m):
        sim = so.simulate(m, t_max, DT, solver=so.BackwardEuler())
        return jnp.stack([sim.recordings[n] for n in names])

    return cell, sites, model, ours


def build_jaxley(path, t_max: float, ncomp: int):
    """Jaxley's `read_swc` of `path` set up as `build_ours`'s cell (the soma
    recorded): `(run, params, compartments)`, `run(params)` the jitted
    `jx.integrate` with `bwd_euler`."""
    import jax
    import jaxley as jx

    from ._models import insert_hh

    jcell = jx.read_swc(str(path), ncomp=ncomp)
    insert_hh(jcell, RA, CM, V_INIT)
    current = jx.step_current(DELAY, DURATION, AMPLITUDE, DT, t_max)
    jcell.soma.branch(0).loc(0.5).stimulate(current, verbose=False)
    jcell.soma.branch(0).loc(0.5).record("v", verbose=False)

    @jax.jit
    def theirs(p):
        return jx.integrate(jcell, p, t_max=t_max, delta_t=DT, solver="bwd_euler")

    return theirs, jcell.get_parameters(), int(jcell.total_nbranches) * ncomp


def simulation(path, dtype_name: str, repeats: int, t_max: float, ncomp: int):
    """Row `morphology`: ours against Jaxley and NEURON on the SWC file `path`."""
    import jax.numpy as jnp

    from ._common import have_jaxley
    from ._neuron import have_neuron
    from .forward import compare

    cell, sites, model, ours = build_ours(path, _dtype(dtype_name), t_max, ncomp)
    jaxley, jaxley_comp = None, None
    if have_jaxley():
        theirs, params, jaxley_comp = build_jaxley(path, t_max, ncomp)
        jaxley = ("bwd_euler", theirs, (params,))
    nrn = None
    if have_neuron():
        nrn = _NeuronRun(path, ncomp, sites, t_max, cell)
    try:
        row = compare(
            f"reconstructed cell ({os.path.basename(path)}), hh everywhere, "
            f"{t_max:g} ms",
            dtype_name,
            "BackwardEuler",
            ours,
            (model,),
            jaxley,
            None if nrn is None else ("fixed, secondorder=0", nrn.run),
            repeats,
        )
    finally:
        if nrn is not None:
            nrn.close()
    v = ours(model)
    if jaxley is not None:  # Jaxley records the soma only
        from ._common import max_abs_diff

        row["jaxley_max_dv"] = max_abs_diff(v[:1], jaxley[1](*jaxley[2]))
        row["max_dv"] = row["jaxley_max_dv"]
    row |= dict(
        compartments=int(model.n_compartments),
        jaxley_compartments=jaxley_comp,
        v_peak=float(jnp.max(v[0])),
    )
    return row


class _NeuronRun:
    """NEURON's `Import3d` of the SWC file with `hh` everywhere, run by
    `ParallelContext.psolve` at fixed steps (`secondorder = 0`)."""

    def __init__(self, path, ncomp, sites, t_max, cell):
        from neuron import h

        from stable_ode.morphology._discretise import compartment_of

        h.load_file("stdrun.hoc")
        h.load_file("import3d.hoc")
        self.h, self.pc, self.t_max = h, h.ParallelContext(), t_max
        self.made = _neuron_import(h, path, ncomp)
        for s in self.made:
            s.insert("hh")
        by_name = {s.name(): s for s in self.made}
        soma = by_name["soma[0]"]
        self.clamp = h.IClamp(soma(0.5))
        self.clamp.amp, self.clamp.delay, self.clamp.dur = AMPLITUDE, DELAY, DURATION
        self.vecs = []
        for site in sites:
            sec = cell.section(site.section)
            x = (compartment_of(sec, site.position) + 0.5) / sec.n_compartments
            vec = h.Vector()
            vec.record(by_name[site.section](x)._ref_v)
            self.vecs.append(vec)

    def run(self):
        import numpy as np

        h = self.h
        h.CVode().active(0)
        h.celsius, h.dt, h.usetable_hh, h.secondorder = CELSIUS, DT, 0, 0
        h.steps_per_ms = 1.0 / DT
        self.pc.set_maxstep(10)
        h.finitialize(V_INIT)
        self.pc.psolve(self.t_max)
        return np.stack([np.array(v) for v in self.vecs])

    def close(self):
        self.vecs, self.clamp = [], None
        for s in self.made:
            self.h.delete_section(sec=s)


def run_dtype(dtype_name: str, mode: str) -> None:
    import jax

    from ._common import emit
    from .forward import print_rows

    jax.config.update("jax_enable_x64", dtype_name == "float64")
    load_repeats, repeats, t_max, ncomp = MODES[mode]
    print(
        f"# {dtype_name}: jax {jax.__version__}, {jax.default_backend()}, "
        f"{os.cpu_count()} CPUs, median of {repeats} calls after compilation",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="stable_ode-bench-") as tmp:
        if mode == "smoke":
            swc, files = SMOKE_SWC, [SMOKE_SWC]
        else:
            swc = pathlib.Path(tmp) / "tc_jy160728_A_idA.swc"
            write_swc(ASC, swc)
            files = [ASC, swc]
        if dtype_name == "float64":
            rows = loading(files, load_repeats)
            for r in rows:
                print(
                    f"{r['case']}: {r['points']} points, {r['sections']} sections, "
                    f"{r['compartments']} compartments: ours load+build "
                    f"{r['ours_s']:.3f} s (read {r['ours_read_s']:.3f} s), NEURON "
                    f"Import3d+geom_nseg {r['neuron_s'] or float('nan'):.3f} s "
                    f"({r['neuron_compartments']} segments), Jaxley read_swc "
                    f"{r['jaxley_read_s'] or float('nan'):.3f} s",
                    flush=True,
                )
            emit("morphology_load", rows)
        row = simulation(swc, dtype_name, repeats, t_max, ncomp)
    print_rows([row])
    print(
        f"(compartments: ours and NEURON {row['compartments']}, Jaxley "
        f"{row['jaxley_compartments']}; peak soma v of ours: {row['v_peak']:.1f} mV)",
        flush=True,
    )
    emit("morphology", [row])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.morphology", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="both"
    )
    parser.add_argument("--quick", action="store_true", help="3 timed calls, 20 ms")
    parser.add_argument("--smoke", action="store_true", help="a tiny file (a test)")
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.dtype != "both":
        run_dtype(args.dtype, mode)
        return
    from ._common import run_each_dtype

    run_each_dtype("morphology", ["--quick"] * args.quick + ["--smoke"] * args.smoke)


if __name__ == "__main__":
    main()
