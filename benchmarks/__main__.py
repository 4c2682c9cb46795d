"""Run every benchmark and collect what they print into `benchmarks/results.md`.

    python -m benchmarks [--quick | --smoke] [--only NAME ...] [--out FILE]
                         [--small-loop-bytes N]

Each benchmark runs in its own process (they set JAX's x64 flag and device count
per process), one after the other so that they do not compete for the CPU; its
standard output — the tables with our times, the peers' times and the ratios —
goes into `results.md` under a heading, with the wall and CPU time it took, the
date, the machine and the exact command. The benchmarks also append their rows
to `results.json` (one JSON object per line, `$BENCHMARKS_JSON`), from which this
runner writes the summary tables at the top of `results.md` (every ratio of ours
to a peer; float32 against float64) and the plots in `plots/` next to it: times
per case (`forward_times.png`), gradient time and memory per checkpoint
configuration (`gradient.png`) and, from `work_precision` itself, the
work-precision curves (`work_precision_{compartment,cable}.png`).

`--quick` gives each benchmark its `--quick` (every comparison, fewer and smaller
configurations: a few minutes on 2 cores); `--smoke` gives tiny models, float64
only, for a test that the benchmarks run (`tests/test_benchmarks.py`).
`--small-loop-bytes N` runs every benchmark process with XLA:CPU's small-loop
threshold at `N` bytes (`stable_ode.set_cpu_small_loop_bytes`, which
`python -m stable_ode` applies with 65,536; `docs/performance.md`): ours and the
peers alike, since they share each process. Without it, XLA's default (1,024).
"""

import argparse
import datetime
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time


BENCHMARKS = {
    "forward": "single HH compartment, 100-compartment HH cable and a 64-way vmap "
    "batch vs Jaxley and NEURON; adaptive steps vs diffrax and CVODE (issue 2)",
    "branched": "branched HH cell vs Jaxley and NEURON (issue 3)",
    "network": "100 HH point neurons with 1,000 graded synapses vs Jaxley (issue 3)",
    "work_precision": "spike-time error vs steps and time; Kvaerno5, CVODE (issue 4)",
    "gradient": "gradient time and memory per checkpoint configuration (issue 6)",
}
PER_DTYPE = ("forward", "branched", "network")  # one process per dtype
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
    args = parser.parse_args(argv)
    if args.small_loop_bytes is not None and args.small_loop_bytes <= 0:
        parser.error(
            f"--small-loop-bytes must be positive, got {args.small_loop_bytes}"
        )
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    names = args.only or list(BENCHMARKS)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    plots = os.path.join(out_dir, "plots")
    os.makedirs(plots, exist_ok=True)
    json_path = os.path.splitext(os.path.abspath(args.out))[0] + ".json"
    if os.path.exists(json_path):
        os.remove(json_path)
    env = dict(os.environ, BENCHMARKS_JSON=json_path)
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    flag = "" if mode == "full" else f" --{mode}"
    if args.small_loop_bytes is not None:
        from stable_ode._xla import _with_small_loop_bytes

        env["XLA_FLAGS"] = _with_small_loop_bytes(
            env.get("XLA_FLAGS", ""), args.small_loop_bytes
        )
        flag += f" --small-loop-bytes {args.small_loop_bytes}"
    start_all, cpu_all = time.perf_counter(), _children_cpu()
    sections, timings, failed = [], [], []
    for name in names:
        cmd = _command(name, mode, plots)
        print(f"== {name}: {BENCHMARKS[name]}", flush=True)
        start, cpu = time.perf_counter(), _children_cpu()
        proc = subprocess.run(
            cmd, cwd=os.path.dirname(HERE), capture_output=True, text=True, env=env
        )
        wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
        timings.append((name, wall, cpu, proc.returncode))
        print(proc.stdout, flush=True)
        lines = [
            f"## {name}: {BENCHMARKS[name]}",
            "",
            f"`{' '.join(['python'] + cmd[1:])}`: {wall:.0f} s wall, {cpu:.0f} s CPU",
            "",
        ]
        if proc.returncode != 0:
            failed.append(name)
            tail = proc.stderr.strip().splitlines()[-5:]
            lines += [f"**failed** (exit code {proc.returncode}):", "", "```"]
            lines += tail + ["```", ""]
            print("\n".join(tail), file=sys.stderr)
        lines += ["```", proc.stdout.rstrip(), "```", ""]
        sections += lines
    wall_all, cpu_all = time.perf_counter() - start_all, _children_cpu() - cpu_all
    rows = load_rows(json_path)
    figures = write_plots(rows, plots)
    figures += sorted(
        os.path.join(plots, f)
        for f in os.listdir(plots)
        if f.startswith("work_precision_") and f.endswith(".png")
    )
    head = [
        "# Benchmark results",
        "",
        f"{now}; {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; `python -m benchmarks{flag}`: "
        f"{wall_all:.0f} s wall, {cpu_all:.0f} s CPU in all"
        + (f"; `XLA_FLAGS={env['XLA_FLAGS']}`" if env.get("XLA_FLAGS") else "")
        + ". Ratios are ours / "
        "peer's (≤ 1 is the target). See README.md for what each measures and for "
        "the analysis; the per-benchmark output below has every column.",
        "",
        "| benchmark | wall s | CPU s | exit |",
        "|---|---|---|---|",
    ]
    head += [f"| {n} | {w:.0f} | {c:.0f} | {rc} |" for n, w, c, rc in timings]
    head += [""] + summary(rows)
    if figures:
        head += ["## Plots", ""]
        head += [
            f"![{os.path.basename(f)}]({os.path.relpath(f, out_dir)})" for f in figures
        ]
        head.append("")
    with open(args.out, "w") as f:
        f.write("\n".join(head + sections))
    print(f"wrote {args.out} ({wall_all:.0f} s wall, {cpu_all:.0f} s CPU)")
    for fig in figures:
        print(f"plot: {fig}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def load_rows(path: str) -> list[dict]:
    """The rows the benchmarks appended to `path` (none if it does not exist)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}"


def _ms(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def summary(rows: list[dict]) -> list[str]:
    """Markdown lines: every fixed-step comparison (ours / Jaxley, ours / NEURON,
    both dtypes), the adaptive one (time / ours at the same tolerance), the
    gradient's (time / best Jaxley configuration), and float32 against float64."""
    fixed = [r for r in rows if r["benchmark"] in PER_DTYPE]
    out = []
    if fixed:
        out += [
            "## Summary: ours against each peer (ratio = ours / peer)",
            "",
            "| benchmark | case | ours | dtype | ours ms | Jaxley ms | ours / Jaxley "
            "| NEURON ms | ours / NEURON |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for r in fixed:
            out.append(
                f"| {r['benchmark']} | {r['case']} | {r['ours']} | {r['dtype']} | "
                f"{_ms(r['ours_ms'])} | {_ms(r.get('jaxley_ms'))} | "
                f"{_ratio(r['ours_ms'], r.get('jaxley_ms'))} | "
                f"{_ms(r.get('neuron_ms'))} | "
                f"{_ratio(r['ours_ms'], r.get('neuron_ms'))} |"
            )
        out.append("")
    adaptive = [r for r in rows if r["benchmark"] == "forward_adaptive"]
    if adaptive:
        out += [
            "Adaptive steps at the same tolerance (ratio = method's time / ours; "
            "spike error against NEURON CVODE at atol 1e-8):",
            "",
            "| case | dtype | method | tol | steps | ms | ratio | spike error ms |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in adaptive:
            err = r.get("spike_error_ms")
            err = "—" if err is None else f"{err:.2g}"
            ratio = "—" if r.get("ratio") is None else f"{r['ratio']:.2f}"
            out.append(
                f"| {r['case']} | {r['dtype']} | {r['method']} | {r['tol']:g} | "
                f"{r['steps']} | {r['ms']:.2f} | {ratio} | {err} |"
            )
        out.append("")
    grad = [r for r in rows if r["benchmark"] == "gradient" and "ms" in r]
    for model in ("cable", "network"):
        inter = [
            r
            for r in grad
            if r.get("kind") == "interleaved" and r.get("model", "cable") == model
        ]
        if not inter:
            continue
        best = min((r["ms"] for r in inter if r["impl"] == "jaxley"), default=None)
        out += [
            f"Gradient of the {model} (interleaved in one process; ratio = time / "
            "the better Jaxley configuration's):",
            "",
            "| impl | configuration | ms | ratio | XLA temp MB |",
            "|---|---|---|---|---|",
        ]
        for r in inter:
            temp = r.get("xla_temp_mb")
            out.append(
                f"| {r['impl']} | {r['adjoint']} | {r['ms']:.1f} | "
                f"{_ratio(r['ms'], best)} | "
                f"{'—' if temp is None else format(temp, '.2f')} |"
            )
        out.append("")
    out += dtype_table(rows)
    return out


def dtype_table(rows: list[dict]) -> list[str]:
    """float32 against float64, for every row measured in both dtypes."""
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        if r["benchmark"] in PER_DTYPE:
            key = (r["benchmark"], r["case"], r["ours"])
        elif r["benchmark"] == "forward_adaptive":
            key = ("forward (adaptive)", r["case"], r["method"])
        else:
            continue
        by_key.setdefault(key, {})[r["dtype"]] = r
    pairs = [(k, d) for k, d in by_key.items() if {"float32", "float64"} <= set(d)]
    if not pairs:
        return []
    out = [
        "## float32 against float64",
        "",
        "| benchmark | case | solver | ours f64 ms | ours f32 ms | f32 / f64 | "
        "Jaxley f64 ms | Jaxley f32 ms | f32 / f64 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (bench, case, solver), d in pairs:
        a, b = d["float64"], d["float32"]
        ours64 = a.get("ours_ms", a.get("ms"))
        ours32 = b.get("ours_ms", b.get("ms"))
        out.append(
            f"| {bench} | {case} | {solver} | {_ms(ours64)} | {_ms(ours32)} | "
            f"{_ratio(ours32, ours64)} | {_ms(a.get('jaxley_ms'))} | "
            f"{_ms(b.get('jaxley_ms'))} | "
            f"{_ratio(b.get('jaxley_ms'), a.get('jaxley_ms'))} |"
        )
    out.append("")
    return out


def write_plots(rows: list[dict], folder: str) -> list[str]:
    """`forward_times.png` (ms per fixed-step case: ours, Jaxley, NEURON, both
    dtypes) and `gradient.png` (time and memory per checkpoint configuration),
    when there are rows for them. Returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    written = []
    fixed = [r for r in rows if r["benchmark"] in PER_DTYPE]
    if fixed:
        keys = list(dict.fromkeys((r["case"], r["ours"]) for r in fixed))
        series = [
            (f"{who} {dt}", key, dt)
            for who, key in (("ours", "ours_ms"), ("Jaxley", "jaxley_ms"))
            for dt in ("float64", "float32")
        ] + [("NEURON (float64)", "neuron_ms", "float64")]
        fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(keys)), 5))
        width = 0.8 / len(series)
        x = np.arange(len(keys))
        for k, (label, field, dt) in enumerate(series):
            vals = []
            for case, ours in keys:
                r = next(
                    (
                        r
                        for r in fixed
                        if (r["case"], r["ours"], r["dtype"]) == (case, ours, dt)
                    ),
                    None,
                )
                v = None if r is None else r.get(field)
                vals.append(math.nan if v is None else v)
            ax.bar(x + (k - len(series) / 2 + 0.5) * width, vals, width, label=label)
        ax.set_xticks(x)
        ax.set_xticklabels(
            [f"{c}\n{o}" for c, o in keys], fontsize=7, rotation=20, ha="right"
        )
        ax.set_yscale("log")
        ax.set_ylabel("wall time per solve (ms, median)")
        ax.set_title("Forward simulation, fixed steps")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = os.path.join(folder, "forward_times.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    grad = [r for r in rows if r["benchmark"] == "gradient" and "ms" in r]
    if grad:
        inter = [
            r
            for r in grad
            if r.get("kind") == "interleaved" and r.get("model", "cable") == "cable"
        ]
        proc = [
            r
            for r in grad
            if r.get("kind") == "process" and r["model"] == "cable"
            and not r.get("growth")
        ]  # fmt: skip
        panels = [
            (inter, "ms", "gradient time, interleaved (ms)", False),
            (inter, "xla_temp_mb", "XLA temp (MB)", True),
            (proc, "peak_rss_mb", "peak RSS, own process (MB)", False),
        ]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
        for ax, (rs, field, title, log) in zip(axes, panels, strict=True):
            labels = [
                f"{'Jaxley' if r['impl'] == 'jaxley' else 'ours'}\n{r['adjoint']}"
                for r in rs
            ]
            vals = [math.nan if r.get(field) is None else r[field] for r in rs]
            colors = ["tab:orange" if r["impl"] == "jaxley" else "tab:blue" for r in rs]
            ax.bar(range(len(rs)), vals, color=colors)
            ax.set_xticks(range(len(rs)))
            ax.set_xticklabels(labels, fontsize=7, rotation=30, ha="right")
            ax.set_title(title)
            if log:
                ax.set_yscale("log")
            ax.grid(True, axis="y", which="both", alpha=0.3)
        t_max = inter[0]["t_max"] if inter else grad[0]["t_max"]
        fig.suptitle(f"Gradient of the HH cable, {t_max:g} ms, float64")
        fig.tight_layout()
        path = os.path.join(folder, "gradient.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


if __name__ == "__main__":
    sys.exit(main())
