"""Run every benchmark and collect what they print into `benchmarks/results.md`.

    python -m benchmarks [--quick] [--only NAME ...]

Each benchmark runs in its own process (they set JAX's x64 flag and device count
per process), one after the other so that they do not compete for the CPU; its
standard output — the tables with our times, the peers' times and the ratios —
goes into `results.md` under a heading, with the date, the machine and the exact
command. Plots are written by the benchmarks themselves (e.g. work-precision
PNGs next to this file).
"""

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time


BENCHMARKS = {
    "forward": "single HH compartment and 100-compartment HH cable vs Jaxley (issue 2)",
    "branched": "branched HH cell vs Jaxley (issue 3)",
    "network": "100 HH point neurons with 1,000 graded synapses vs Jaxley (issue 3)",
    "work_precision": "spike-time error vs steps and time; Kvaerno5, CVODE (issue 4)",
    "gradient": "gradient time and memory per checkpoint configuration (issue 6)",
}
HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="each benchmark's --quick")
    parser.add_argument(
        "--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these"
    )
    parser.add_argument("--out", default=os.path.join(HERE, "results.md"))
    args = parser.parse_args(argv)
    names = args.only or list(BENCHMARKS)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Benchmark results",
        "",
        f"{now}; {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; `python -m benchmarks"
        f"{' --quick' if args.quick else ''}`. Ratios are ours / peer's (≤ 1 is "
        "the target). See README.md for what each measures and for the analysis.",
        "",
    ]
    failed = []
    for name in names:
        cmd = [sys.executable, "-m", f"benchmarks.{name}"] + (
            ["--quick"] if args.quick else []
        )
        print(f"== {name}: {BENCHMARKS[name]}", flush=True)
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=os.path.dirname(HERE), capture_output=True, text=True
        )
        wall = time.perf_counter() - start
        print(proc.stdout, flush=True)
        lines += [
            f"## {name}: {BENCHMARKS[name]}",
            "",
            f"`{' '.join(cmd[1:])}`, {wall:.0f} s",
            "",
        ]
        if proc.returncode != 0:
            failed.append(name)
            tail = proc.stderr.strip().splitlines()[-5:]
            lines += [f"**failed** (exit code {proc.returncode}):", "", "```"]
            lines += tail + ["```", ""]
            print("\n".join(tail), file=sys.stderr)
        lines += ["```", proc.stdout.rstrip(), "```", ""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {args.out}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
