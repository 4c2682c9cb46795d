"""The reconstructed cell's and the events network's times with XLA's worker threads
on different cores or on one core, ours and Jaxley's, side by side.

    python -m benchmarks.thread_placement [--dtype float32|float64|both]
                                          [--rounds N] [--calls N] [--smoke]

Two cases, each compiled once: the cell of `benchmarks/morphology.py`
(`tc_jy160728_A_idA`, `hh` everywhere, 20 ms at dt = 0.025 ms; `--smoke`: the
three-point-soma test file, 2 ms), ours and Jaxley's import of the same SWC
file; and ours of the network of `benchmarks/events.py` (100 HH cells, 1,000
`Exp2Syn` NetCons, 200 ms; `--smoke`: 10 cells, 30 NetCons, 5 ms; float64
only, as there; NEURON, its peer, runs on one thread). XLA:CPU runs the
kernels of a step on its thread pool, whose threads are named `tf_XLAEigen`
(one per CPU the process may use). The script pins those threads itself, with
`os.sched_setaffinity` on their thread ids, and times each implementation
(median of `--calls` calls) with the threads

- **free**: as the operating system places them (every CPU allowed),
- **apart**: one thread per CPU (the first two CPUs),
- **together**: all on the first CPU,

in `--rounds` rounds of the three placements. It also counts the kernels that
XLA splits into tasks for its thread pool (`outer_dimension_partitions` in the
compiled HLO): a split kernel hands work to another thread at every step, which
costs little when that thread has a core of its own and a switch of threads when
it shares one. Ratio columns: each placement's median over the "apart" median.

Linux only (thread affinity), and it needs two CPUs; without them it says so
and exits. Jaxley is optional. Not part of `python -m benchmarks`; its output
is kept in `benchmarks/thread_placement/`.
"""

import argparse
import glob
import os
import pathlib
import statistics
import sys
import tempfile
import time

from .forward import _dtype
from .morphology import ASC, build_jaxley, build_ours, SMOKE_SWC, write_swc


PLACEMENTS = ("free", "apart", "together")


def xla_threads() -> list[int]:
    """The thread ids of XLA:CPU's pool in this process (Linux)."""
    out = []
    for task in glob.glob("/proc/self/task/*"):
        try:
            with open(task + "/comm") as f:
                if f.read().strip() == "tf_XLAEigen":
                    out.append(int(os.path.basename(task)))
        except OSError:  # the thread ended
            pass
    return sorted(out)


def place(tids: list[int], placement: str, cpus: list[int]) -> None:
    """Pin the threads `tids`: every CPU (`free`), one CPU each in turn over the
    first two (`apart`), or all on the first (`together`)."""
    for k, tid in enumerate(tids):
        if placement == "free":
            os.sched_setaffinity(tid, cpus)
        elif placement == "apart":
            os.sched_setaffinity(tid, {cpus[k % 2]})
        else:
            os.sched_setaffinity(tid, {cpus[0]})


def split_kernels(compiled) -> int:
    """How many kernels of `compiled` XLA splits into tasks for its thread pool."""
    return compiled.as_text().count("outer_dimension_partitions")


def _cell(dtype_name: str, smoke: bool) -> list[tuple]:
    """The reconstructed cell: `(name, jitted function, arguments)`, ours and
    (if installed) Jaxley's."""
    from ._common import have_jaxley

    t_max, ncomp = (2.0, 2) if smoke else (20.0, 4)
    with tempfile.TemporaryDirectory(prefix="stable_ode-bench-") as tmp:
        if smoke:
            path = SMOKE_SWC
        else:
            path = pathlib.Path(tmp) / "tc_jy160728_A_idA.swc"
            write_swc(ASC, path)
        _, _, model, ours = build_ours(path, _dtype(dtype_name), t_max, ncomp)
        impls = [("stable_ode, cell", ours, (model,))]
        if have_jaxley():
            theirs, params, _ = build_jaxley(path, t_max, ncomp)
            impls.append(("Jaxley, cell", theirs, (params,)))
    return impls


def _network(smoke: bool) -> list[tuple]:
    """The events network, ours (float64): `[(name, jitted function, arguments)]`."""
    import jax

    import stable_ode as so

    from . import events

    cells, netcons, t_max = (10, 30, 5.0) if smoke else (100, 1000, 200.0)
    model, _ = events.build_ours(cells, netcons, t_max)

    @jax.jit
    def ours(m):
        return so.simulate(m, t_max, events.DT, solver=so.BackwardEuler()).spikes

    return [("stable_ode, events network", ours, (model,))]


def run(dtype_name: str, rounds: int, calls: int, smoke: bool) -> list[dict]:
    """Time ours (and Jaxley's, if installed) under each placement; one row per
    implementation and case: the medians (ms) per placement over all rounds."""
    import jax

    from ._common import format_table

    jax.config.update("jax_enable_x64", dtype_name == "float64")
    impls = _cell(dtype_name, smoke)
    if dtype_name == "float64":
        impls += _network(smoke)
    compiled = []
    for name, fn, args in impls:
        c = fn.lower(*args).compile()
        jax.block_until_ready(c(*args))
        compiled.append((name, c, args))
    tids = xla_threads()
    cpus = sorted(os.sched_getaffinity(0))
    times = {(name, p): [] for name, _, _ in compiled for p in PLACEMENTS}
    for _ in range(rounds):
        for p in PLACEMENTS:
            place(tids, p, cpus)
            for name, c, args in compiled:
                for _ in range(calls):
                    start = time.perf_counter()
                    jax.block_until_ready(c(*args))
                    times[name, p].append(time.perf_counter() - start)
    place(tids, "free", cpus)
    rows = []
    for name, c, _ in compiled:
        med = {p: 1e3 * statistics.median(times[name, p]) for p in PLACEMENTS}
        rows.append(dict(impl=name, dtype=dtype_name, split=split_kernels(c), **med))
    print(
        f"# {dtype_name}: jax {jax.__version__}, {len(cpus)} CPUs, "
        f"{len(tids)} XLA threads, {rounds} rounds of {calls} calls per placement, "
        "median ms per placement"
    )
    header = ["implementation, case", "split kernels", *(f"{p} ms" for p in PLACEMENTS)]
    header += [f"{p} / apart" for p in PLACEMENTS if p != "apart"]
    table = [
        [r["impl"], str(r["split"]), *(f"{r[p]:.2f}" for p in PLACEMENTS)]
        + [f"{r[p] / r['apart']:.2f}" for p in PLACEMENTS if p != "apart"]
        for r in rows
    ]
    print(format_table(header, table), flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.thread_placement",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="both"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="tiny cell (a test)")
    args = parser.parse_args(argv)
    if not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2:
        print("thread_placement needs Linux and two CPUs; skipped")
        return
    if args.dtype == "both":
        from ._common import run_each_dtype

        flags = ["--rounds", str(args.rounds), "--calls", str(args.calls)]
        run_each_dtype("thread_placement", flags + ["--smoke"] * args.smoke)
        return
    run(args.dtype, args.rounds, args.calls, args.smoke)


if __name__ == "__main__":
    sys.exit(main())
