"""Imported NMODL mechanisms against NEURON running the same `.mod` files, and
against Jaxley's own channels; and how long `load_nmodl` takes per file.

    python -m benchmarks.nmodl [--quick | --smoke] [--dtype float32|float64|both]

The cell: a soma (L = diam = 20 µm, one compartment) and a dendrite attached at
its 1 end (200 µm × 2 µm, 10 compartments; `--smoke`: 2), Ra = 100 Ω·cm,
cm = 1 µF/cm², at 6.3 °C from v_init = -65 mV; everywhere NEURON's demo
channels from its wheel (`nachan.mod` → `HHna`, `khhchan.mod` → `HHk`,
`cachan1.mod` → `cachan1` with `imax` 0.005 mA/cm²), NEURON's `passive.mod`
(`pas`, g 0.0003 S/cm², e -54.3 mV) and a calcium pool that the calcium current
fills (`tests/nmodl/mod/capool.mod`, ours: NEURON's wheel has no pool without
arrays); a 0.3 nA step into the soma from 2 ms for the rest of the run; 100 ms
at dt = 0.025 ms (`--quick`: 50 ms, `--smoke`: 5 ms), recording `v` at the soma
and at the dendrite's end, and the soma's `cai`.

- **ours**: `load_nmodl` of the five files, `simulate(..., solver=BackwardEuler())`,
  jitted, parameters as arguments.
- **NEURON**: the same files, but `passive.mod` (NEURON's built-in `pas` is
  compiled from it), compiled by `nrnivmodl` into a cache folder under the
  temporary directory keyed by their contents (as `from_neuron` does; once per
  file set); tables off, fixed step at
  `secondorder = 0` (NEURON's scheme, which `BackwardEuler` follows for imported
  mechanisms), `ParallelContext.psolve`. `max |Δv|` is ours against it.
- **Jaxley**: the same cell with Jaxley 0.14's own channels of the same kinds —
  the Pospischil `Na`, `K`, `Leak` and `CaL`, `jaxley.pumps.CaPump` and
  `CaNernstReversal` (Jaxley cannot read `.mod` files; its equations differ, so
  its voltages are not compared), `bwd_euler`.

Timed as in `benchmarks/forward.py` (one compiling call, then the median of
interleaved calls). Each dtype runs in its own subprocess (x64 is global);
NEURON, which computes in double, runs beside both, as in `forward.py`, so its
`max |Δv|` against the float32 run is float32's rounding. The import
times are of `load_nmodl` on one file in a fresh process, one row per file: the
first call (which imports NEURON's NMODL front end and sympy), and a second
call on the same file (parsing with the front end, analysis, code generation).
"""

import argparse
import os
import pathlib
import subprocess
import sys
import time


SOMA, DEND, N_DEND = 20.0, (200.0, 2.0), 10  # µm; µm × µm; compartments
RA, CM, V_INIT, CELSIUS = 100.0, 1.0, -65.0, 6.3
AMPLITUDE, DELAY = 0.3, 2.0  # nA, ms
T_MAX, DT = 100.0, 0.025  # ms
IMAX, G_PAS, E_PAS = 0.005, 0.0003, -54.3  # mA/cm², S/cm², mV
ROOT = pathlib.Path(__file__).resolve().parent.parent


def mod_files() -> list[pathlib.Path]:
    """The benchmark's `.mod` files: NEURON's, read from its installed wheel, and
    our calcium pool."""
    import importlib.util

    share = pathlib.Path(importlib.util.find_spec("neuron").origin).parent
    share = share / ".data" / "share"
    demo = share / "nrn" / "demo" / "release"
    return [
        demo / "nachan.mod",
        demo / "khhchan.mod",
        demo / "cachan1.mod",
        share / "modfile" / "passive.mod",
        ROOT / "tests" / "nmodl" / "mod" / "capool.mod",
    ]


def mechanisms(mechs: dict) -> list:
    """The benchmark's mechanism instances, from `load_nmodl`'s classes."""
    return [
        mechs["HHna"](),
        mechs["HHk"](),
        mechs["cachan1"](imax=IMAX),
        mechs["pas"](g=G_PAS, e=E_PAS),
        mechs["capool"](),
    ]


NEURON_PARAMS = {"cachan1": {"imax": IMAX}, "pas": {"g": G_PAS, "e": E_PAS}}
NEURON_SUFFIXES = ("HHna", "HHk", "cachan1", "pas", "capool")


def build_ours(dtype, n_dend: int):
    """The stable_ode model: recordings `soma`, `dend` (v) and `cai`."""
    import stable_ode as so

    mechs = so.load_nmodl(mod_files())
    sections = [
        so.Section("soma", SOMA, SOMA, 1),
        so.Section("dend", *DEND, n_dend, "soma", 1.0),
    ]
    cell = so.Cell(
        "cell",
        sections,
        [so.Insert(m) for m in mechanisms(mechs)],
        axial_resistivity=RA,
        capacitance=CM,
    )
    soma = so.Site("cell", "soma", 0.5)
    recs = [
        so.Recording("soma", soma),
        so.Recording("dend", so.Site("cell", "dend", 1.0)),
        so.Recording("cai", soma, variable="cai"),
    ]
    stim = so.StepCurrent(soma, AMPLITUDE, DELAY, 1e9)
    return so.build([cell], [stim], recs, celsius=CELSIUS, v_init=V_INIT, dtype=dtype)


class NeuronCell:
    """The cell in NEURON with the compiled files; `run()` returns the
    recordings (soma v, dendrite-end v, soma cai) at every step."""

    def __init__(self, n_dend: int, t_max: float):
        from neuron import h

        from stable_ode._neuron_import._runner import compile_and_load

        # nrnivmodl'd once into a cache folder keyed by the files' contents; not
        # passive.mod, from which NEURON's built-in `pas` is compiled
        compile_and_load(h, [f for f in mod_files() if f.name != "passive.mod"])
        h.load_file("stdrun.hoc")
        self.h, self.t_max = h, t_max
        self.soma = h.Section(name="soma")
        self.dend = h.Section(name="dend")
        self.dend.connect(self.soma(1.0), 0.0)
        self.soma.L = self.soma.diam = SOMA
        self.dend.L, self.dend.diam = DEND
        self.soma.nseg, self.dend.nseg = 1, n_dend
        for sec in (self.soma, self.dend):
            sec.Ra, sec.cm = RA, CM
            for suffix in NEURON_SUFFIXES:
                sec.insert(suffix)
                for seg in sec:
                    for k, val in NEURON_PARAMS.get(suffix, {}).items():
                        setattr(seg, f"{k}_{suffix}", val)
                if hasattr(h, f"usetable_{suffix}"):
                    setattr(h, f"usetable_{suffix}", 0)
        self.stim = h.IClamp(self.soma(0.5))
        self.stim.amp, self.stim.delay, self.stim.dur = AMPLITUDE, DELAY, 1e9
        # the dendrite's 1 end: the centre of its last compartment, as ours
        self.vecs = [h.Vector() for _ in range(3)]
        self.vecs[0].record(self.soma(0.5)._ref_v)
        self.vecs[1].record(self.dend(1 - 0.5 / n_dend)._ref_v)
        self.vecs[2].record(self.soma(0.5)._ref_cai)
        self.pc = h.ParallelContext()

    def run(self):
        import numpy as np

        h = self.h
        h.CVode().active(0)
        h.celsius, h.dt, h.secondorder = CELSIUS, DT, 0
        self.pc.set_maxstep(10)
        h.finitialize(V_INIT)
        self.pc.psolve(self.t_max)
        return np.stack([np.array(v) for v in self.vecs])


def build_jaxley(n_dend: int, t_max: float):
    """The cell with Jaxley's own channels of the same kinds (dtype follows JAX's
    x64 flag)."""
    import jaxley as jx
    from jaxley.channels import CaL, K, Leak, Na
    from jaxley.pumps import CaNernstReversal, CaPump

    soma = jx.Branch(jx.Compartment(), 1)
    dend = jx.Branch(jx.Compartment(), n_dend)
    cell = jx.Cell([soma, dend], parents=[-1, 0])
    cell.branch(0).set("length", SOMA)
    cell.branch(0).set("radius", SOMA / 2)
    cell.branch(1).set("length", DEND[0] / n_dend)
    cell.branch(1).set("radius", DEND[1] / 2)
    cell.set("axial_resistivity", RA)
    cell.set("capacitance", CM)
    for channel in (Na(), K(), Leak(), CaL(), CaPump(), CaNernstReversal()):
        cell.insert(channel)
    cell.set("v", V_INIT)
    cell.init_states()
    current = jx.step_current(DELAY, t_max, AMPLITUDE, DT, t_max)
    cell.branch(0).comp(0).stimulate(current, verbose=False)
    cell.branch(0).comp(0).record("v", verbose=False)
    cell.branch(1).comp(n_dend - 1).record("v", verbose=False)
    cell.branch(0).comp(0).record("CaCon_i", verbose=False)
    return cell


def run(dtype_name: str, repeats: int, n_dend: int, t_max: float) -> dict:
    """Time ours against NEURON and Jaxley where installed; one
    row: `forward.compare`'s, with Jaxley's `max |Δv|` removed (other
    equations) and NEURON's split into `neuron_max_dv` (the two voltages, mV)
    and `neuron_max_dcai_mm` (`compare` takes one maximum over all three
    recordings, which mixes mV and mM)."""
    import jax
    import jax.numpy as jnp

    import stable_ode as so

    from ._common import have_jaxley
    from ._neuron import have_neuron
    from .forward import _dtype, compare

    model = build_ours(_dtype(dtype_name), n_dend)

    @jax.jit
    def ours(m):
        sim = so.simulate(m, t_max, DT, solver=so.BackwardEuler())
        return jnp.stack([sim.recordings[n] for n in ("soma", "dend", "cai")])

    jaxley = None
    if have_jaxley():
        import jaxley as jx

        cell = build_jaxley(n_dend, t_max)

        @jax.jit
        def theirs(p):
            return jx.integrate(cell, p, t_max=t_max, delta_t=DT, solver="bwd_euler")

        jaxley = ("bwd_euler, own channels", theirs, (cell.get_parameters(),))
    neuron = None
    if have_neuron():
        nrn = NeuronCell(n_dend, t_max)
        neuron = ("fixed, secondorder=0, same .mod files", nrn.run)
    row = compare(
        f"soma + {n_dend}-compartment dendrite, 5 imported mechanisms "
        f"(Na, K, Ca, pas, Ca pool), {t_max:g} ms",
        dtype_name, "BackwardEuler", ours, (model,), jaxley, neuron, repeats,
    )  # fmt: skip
    row["jaxley_max_dv"] = row["max_dv"] = None  # other channels: not comparable
    out = ours(model)
    row["v_peak"] = float(jnp.max(out[:2]))
    row["cai_peak_mm"] = float(jnp.max(out[2]))
    if neuron is not None:
        import numpy as np

        theirs = nrn.run()
        n = min(out.shape[-1], theirs.shape[-1])
        diff = np.abs(np.asarray(out[:, :n]) - theirs[:, :n])
        row["neuron_max_dv"] = float(np.max(diff[:2]))
        row["neuron_max_dcai_mm"] = float(np.max(diff[2]))
    return row


def import_time(path: str) -> dict:
    """`load_nmodl(path)` timed (s) in this process after importing `stable_ode`:
    `first_s`, the first call, which also imports NEURON's NMODL front end and
    sympy (once per process); `import_s`, a second call on the same file (the
    file's own parse, analysis and code generation: nothing is cached between
    calls)."""
    import stable_ode as so

    times = []
    for _ in range(2):
        start = time.perf_counter()
        so.load_nmodl(path)
        times.append(time.perf_counter() - start)
    return dict(file=pathlib.Path(path).name, first_s=times[0], import_s=times[1])


def import_rows() -> list[dict]:
    """`import_time` of each benchmark file in its own process."""
    import json

    rows = []
    for f in mod_files():
        cmd = [sys.executable, "-m", "benchmarks.nmodl", "--import-time", str(f)]
        out = subprocess.run(
            cmd, cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    return rows


def run_dtype(dtype_name: str, mode: str) -> None:
    import jax

    from ._common import emit, format_table
    from .forward import print_rows

    jax.config.update("jax_enable_x64", dtype_name == "float64")
    repeats = {"full": 11, "quick": 3, "smoke": 1}[mode]
    t_max = {"full": T_MAX, "quick": 50.0, "smoke": 5.0}[mode]
    n_dend = 2 if mode == "smoke" else N_DEND
    print(
        f"# {dtype_name}: jax {jax.__version__}, {jax.default_backend()}, "
        f"{os.cpu_count()} CPUs, median of {repeats} calls after compilation",
        flush=True,
    )
    row = run(dtype_name, repeats, n_dend, t_max)
    print_rows([row])
    print(
        f"(ours: peak v {row['v_peak']:.1f} mV, peak cai {row['cai_peak_mm']:.3g} mM"
        + (
            f"; against NEURON: max |Δv| {row['neuron_max_dv']:.2g} mV, max |Δcai| "
            f"{row['neuron_max_dcai_mm']:.2g} mM)"
            if "neuron_max_dv" in row
            else ")"
        ),
        flush=True,
    )
    emit("nmodl", [row])
    if dtype_name == "float64":
        rows = import_rows()
        table = [
            [r["file"], f"{r['first_s']:.2f}", f"{r['import_s']:.3f}"] for r in rows
        ]
        head = ["file", "first call s", "load_nmodl s"]
        print(format_table(head, table), flush=True)
        emit("nmodl_import", rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.nmodl", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="both"
    )
    parser.add_argument("--quick", action="store_true", help="50 ms, 3 timed calls")
    parser.add_argument("--smoke", action="store_true", help="5 ms, 1 call (a test)")
    parser.add_argument("--import-time", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.import_time:
        import json

        print(json.dumps(import_time(args.import_time)))
        return
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.dtype != "both":
        run_dtype(args.dtype, mode)
        return
    from ._common import run_each_dtype

    run_each_dtype("nmodl", ["--quick"] * args.quick + ["--smoke"] * args.smoke)


if __name__ == "__main__":
    main()
