"""Run every benchmark and render their results into `benchmarks/results.md`.

    python -m benchmarks [--quick | --smoke] [--only NAME ...] [--out FILE]
                         [--small-loop-bytes N]
    python -m benchmarks --render [--out FILE] [--no-plots]

Each benchmark runs in its own process (they set JAX's x64 flag and device count
per process), one after the other so that they do not compete for the CPU; its
standard output (every column, as it goes) is echoed here. The benchmarks append
their rows to `results.json` next to `--out` (one JSON object per line,
`$BENCHMARKS_JSON`), and this runner adds one row that says where and how they
ran (machine, Python, command, wall and CPU time per benchmark). `results.md` is
rendered from these rows alone (`benchmarks/_report.py`): one table per
comparison, float32 against float64, and the plots in `plots/` next to it (times
per fixed-step case, `forward_times.png`; gradient time and memory per checkpoint
configuration, `gradient.png`; and, written by `work_precision` itself, the
work-precision curves `work_precision_{compartment,cable}.png`). A folder next to
`--out` that holds another run's `results.json` (`small_loops/`,
`redesign_start/`) adds a table of our times and ratios in that run against this
one.

`--render` runs nothing: it rebuilds `results.md` (and, unless `--no-plots`, the
plots) from the `results.json` already there.

`--quick` gives each benchmark its `--quick` (every comparison, fewer and smaller
configurations: a few minutes on 2 cores); `--smoke` gives tiny models, float64
only, for a test that the benchmarks run (`tests/repo/test_benchmarks.py`).
`--small-loop-bytes N` runs every benchmark process with XLA:CPU's small-loop
threshold at `N` bytes (`stable_ode.set_cpu_small_loop_bytes`, which
`python -m stable_ode` applies with 65,536; `docs/performance.md`): ours and the
peers alike, since they share each process. Without it, XLA's default (1,024).
"""

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

from ._plots import write_plots
from ._report import render, RUN, summary as summary


BENCHMARKS = {
    "forward": "single HH compartment, 100-compartment HH cable and a 64-way vmap "
    "batch vs Jaxley and NEURON; adaptive steps vs diffrax and CVODE",
    "branched": "branched HH cell vs Jaxley and NEURON",
    "morphology": "a 10,000-point reconstruction: loading vs Import3d, hh "
    "everywhere vs Jaxley and NEURON",
    "network": "100 HH point neurons with 1,000 graded synapses vs Jaxley",
    "events": "100 HH cells, 1,000 Exp2Syn NetCons with delays vs NEURON; build "
    "and compile of 1,000 cells with 100,000 NetCons",
    "nmodl": "a cell with NEURON's demo .mod channels and a calcium pool, imported, "
    "vs NEURON running the same files and Jaxley's own channels; load_nmodl time",
    "work_precision": "spike-time error vs steps and time; Kvaerno5, CVODE",
    "gradient": "gradient time and memory per checkpoint configuration",
    "loading": "loading and building model files of 1,000 to 100,000 sections",
}
COMPARISONS = {
    "small_loops": "XLA:CPU's small-loop threshold at 65,536 bytes",
    "mib_loops": "XLA:CPU's small-loop threshold at 1 MiB (`--small-loop-bytes "
    "1048576`)",
    "whole_loops": "XLA:CPU's small-loop threshold at 16 MiB (`--small-loop-bytes "
    "16777216`): every step loop of these sizes compiled into one function",
    "sequential_schedule": "XLA:CPU's loop bodies ordered for one thread "
    "(`XLA_FLAGS=--xla_cpu_enable_concurrency_optimized_scheduler=false`, "
    "`stable_ode.set_cpu_concurrent_schedule(False)`)",
    "one_core": "the whole run limited to one of the machine's cores (`taskset -c 0 "
    "python -m benchmarks --quick`): XLA's thread pool has one thread, so no kernel "
    "is handed to another core; the peers under the same limit. Run about 5 h "
    "after this one, in another session: compare the ratios to the peers, not "
    "the ms",
    "redesign_start": "the code at the start of the redesign (`fb227c7`), run "
    "on the same machine right after this run (`--only forward branched network "
    "gradient`)",
    "events_delivery": "the events benchmark alone (`--quick --only events`) "
    "after the NetCon delivery rewrite, on another machine (AVX2, slower), "
    "2026-12-02 19:56 UTC",
}
"""Folders next to `results.md` holding another run's `results.json` → what was
different in that run."""
# one process per dtype
PER_DTYPE = ("forward", "branched", "network", "morphology", "nmodl")
HERE = os.path.dirname(os.path.abspath(__file__))


def _command(name: str, mode: str, plots: str) -> list[str]:
    cmd = [sys.executable, "-m", f"benchmarks.{name}"]
    if mode != "full":
        cmd.append(f"--{mode}")
    if mode == "smoke" and name in PER_DTYPE:
        cmd += ["--dtype", "float64"]
    if name == "work_precision":
        cmd += ["--out", plots]
    return cmd


def _machine() -> str:
    """The machine, as the run row records it: architecture and CPUs, and how
    many of them this process may run on when that is fewer (`taskset`)."""
    text = f"{platform.machine()}, {os.cpu_count()} CPUs"
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return text
    return text if usable == os.cpu_count() else f"{text}, run on {usable}"


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    mode_group = parser.add_mutually_exclusive_group()
    mode_group.add_argument(
        "--quick", action="store_true", help="each benchmark's --quick"
    )
    mode_group.add_argument(
        "--smoke", action="store_true", help="tiny models, float64 only (a test)"
    )
    mode_group.add_argument(
        "--render",
        action="store_true",
        help="run nothing: rebuild results.md from the results.json next to --out",
    )
    parser.add_argument(
        "--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these"
    )
    parser.add_argument("--out", default=os.path.join(HERE, "results.md"))
    parser.add_argument(
        "--small-loop-bytes",
        type=int,
        metavar="N",
        help="XLA:CPU's small-while-loop threshold for every benchmark process",
    )
    parser.add_argument(
        "--no-plots", action="store_true", help="write no plots (link those there)"
    )
    args = parser.parse_args(argv)
    if args.small_loop_bytes is not None and args.small_loop_bytes <= 0:
        parser.error(
            f"--small-loop-bytes must be positive, got {args.small_loop_bytes}"
        )
    if args.render and (args.only or args.small_loop_bytes is not None):
        parser.error("--render runs nothing: it takes no --only or --small-loop-bytes")
    out_dir = os.path.dirname(os.path.abspath(args.out))
    plots = os.path.join(out_dir, "plots")
    json_path = os.path.splitext(os.path.abspath(args.out))[0] + ".json"
    if args.render:
        if not os.path.exists(json_path):
            parser.error(f"--render: no {json_path} to render from")
        failed = []
    else:
        failed = run_benchmarks(args, json_path, plots)
    if not args.no_plots:
        os.makedirs(plots, exist_ok=True)
        write_plots(load_rows(json_path), plots)
    text = rendered(args.out)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def run_benchmarks(args, json_path: str, plots: str) -> list[str]:
    """Run the benchmarks `args` asks for, each in its own process, their rows
    into `json_path` (replaced) followed by the `run` row. Returns the names of
    those that failed."""
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    names = args.only or list(BENCHMARKS)
    os.makedirs(plots, exist_ok=True)
    if os.path.exists(json_path):
        os.remove(json_path)
    env = dict(os.environ, BENCHMARKS_JSON=json_path)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    flag = "" if mode == "full" else f" --{mode}"
    if args.only:
        flag += f" --only {' '.join(args.only)}"
    if args.small_loop_bytes is not None:
        from stable_ode._xla import _with_small_loop_bytes

        env["XLA_FLAGS"] = _with_small_loop_bytes(
            env.get("XLA_FLAGS", ""), args.small_loop_bytes
        )
        flag += f" --small-loop-bytes {args.small_loop_bytes}"
    start_all, cpu_all = time.perf_counter(), _children_cpu()
    timings, failed = [], []
    for name in names:
        cmd = _command(name, mode, plots)
        print(f"== {name}: {BENCHMARKS[name]}", flush=True)
        start, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run(
            cmd, cwd=os.path.dirname(HERE), capture_output=True, text=True, env=env
        )
        wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
        timings.append(dict(name=name, wall_s=wall, cpu_s=cpu, exit=proc.returncode))
        print(proc.stdout, flush=True)
        if proc.returncode != 0:
            failed.append(name)
            print("\n".join(proc.stderr.strip().splitlines()[-5:]), file=sys.stderr)
    run = dict(
        benchmark=RUN,
        command=f"python -m benchmarks{flag}",
        date=now,
        machine=_machine(),
        python=platform.python_version(),
        xla_flags=env.get("XLA_FLAGS") or None,
        wall_s=time.perf_counter() - start_all,
        cpu_s=_children_cpu() - cpu_all,
        benchmarks=timings,
    )
    with open(json_path, "a") as f:
        f.write(json.dumps(run) + "\n")
    return failed


def rendered(out: str) -> str:
    """The text of the results file `out`, rendered from the `results.json` next to
    it, linking the plots in `plots/` there, with a table against each other run
    in `COMPARISONS` found there."""
    out_dir = os.path.dirname(os.path.abspath(out))
    plots = os.path.join(out_dir, "plots")
    figures = (
        sorted(os.path.join(plots, f) for f in os.listdir(plots) if f.endswith(".png"))
        if os.path.isdir(plots)
        else []
    )
    comparisons = tuple(
        (label, load_rows(os.path.join(out_dir, folder, "results.json")))
        for folder, label in COMPARISONS.items()
        if os.path.exists(os.path.join(out_dir, folder, "results.json"))
    )
    rows = load_rows(os.path.splitext(os.path.abspath(out))[0] + ".json")
    return render(rows, figures, out_dir, comparisons)


def load_rows(path: str) -> list[dict]:
    """The rows the benchmarks appended to `path` (none if it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
