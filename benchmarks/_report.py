"""`results.md` from `results.json`: one table per comparison (the plots are
`_plots.py`'s).

The benchmarks append one JSON object per measured row to `results.json`
(`_common.emit`); `python -m benchmarks` appends one more, `benchmark="run"`, that
says where and how they ran. Everything in `results.md` is rendered from these
rows (`render`), so that `python -m benchmarks --render` can rebuild it from a
committed `results.json` without running anything.
"""

import os


RUN = "run"
"""The `benchmark` tag of the row that describes the run itself."""

FIXED = {
    "forward": "Fixed steps: one HH compartment, a 100-compartment HH cable, a "
    "64-way vmap batch, ours against Jaxley and NEURON",
    "branched": "Fixed steps: a branched HH cell, ours against Jaxley and NEURON",
    "network": "Fixed steps: 100 HH point neurons with 1,000 graded synapses, ours "
    "against Jaxley",
    "morphology": "Fixed steps: a reconstructed cell, hh everywhere, ours against "
    "Jaxley's and NEURON's import of the same SWC file",
    "events": "Fixed steps: HH cells, Exp2Syn synapses, threshold NetCons with "
    "delays, ours against NEURON",
    "nmodl": "Fixed steps: a cell with imported NMODL channels and a calcium pool, "
    "ours against NEURON running the same .mod files and Jaxley's own channels",
}
"""The fixed-step comparisons (benchmark → heading), in the order shown."""


def _ratio(a, b) -> str:
    if a is None or b is None or b == 0:
        return "—"
    return f"{a / b:.2f}"


def _ms(x) -> str:
    return "—" if x is None else f"{x:.2f}"


def _g(x, fmt=".2g") -> str:
    return "—" if x is None else format(x, fmt)


def run_header(rows: list[dict]) -> list[str]:
    """Where and how the rows were measured (the `run` row), or a line saying
    that it was not recorded."""
    run = next((r for r in rows if r["benchmark"] == RUN), None)
    if run is None:
        return ["Machine and command were not recorded with these rows.", ""]
    out = [
        f"`{run['command']}` on {run['machine']}, Python {run['python']}, "
        f"{run['date']}: {run['wall_s']:.0f} s wall, {run['cpu_s']:.0f} s CPU"
        + (f"; `XLA_FLAGS={run['xla_flags']}`" if run.get("xla_flags") else "")
        + ".",
        "",
    ]
    if run.get("benchmarks"):
        out += ["| benchmark | wall s | CPU s | exit |", "|---|---|---|---|"]
        out += [
            f"| {b['name']} | {b['wall_s']:.0f} | {b['cpu_s']:.0f} | {b['exit']} |"
            for b in run["benchmarks"]
        ]
        out.append("")
        failed = [b["name"] for b in run["benchmarks"] if b["exit"] != 0]
        if failed:
            out += [f"**failed**: {', '.join(failed)} (their rows are missing).", ""]
    return out


def fixed_tables(rows: list[dict]) -> list[str]:
    """One table per fixed-step benchmark: ours against Jaxley and NEURON, every
    dtype (ratio = ours / peer)."""
    out = []
    for bench, title in FIXED.items():
        these = [r for r in rows if r["benchmark"] == bench]
        if not these:
            continue
        out += [
            f"## {title}",
            "",
            "Median wall time per solve; ratio = ours / peer (≤ 1: ours is faster).",
            "",
            "| case | ours | dtype | ours ms | Jaxley ms | ours / Jaxley "
            "| NEURON ms | ours / NEURON |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in these:
            out.append(
                f"| {r['case']} | {r['ours']} | {r['dtype']} | "
                f"{_ms(r['ours_ms'])} | {_ms(r.get('jaxley_ms'))} | "
                f"{_ratio(r['ours_ms'], r.get('jaxley_ms'))} | "
                f"{_ms(r.get('neuron_ms'))} | "
                f"{_ratio(r['ours_ms'], r.get('neuron_ms'))} |"
            )
        out.append("")
    return out


def compile_table(rows: list[dict]) -> list[str]:
    """Build, trace and compile time of networks by size (`network_compile`)."""
    these = [r for r in rows if r["benchmark"] == "network_compile"]
    if not these:
        return []
    out = ["## Network build and compile time by size (every cell recorded)", "",
           "Seconds; × = over the smallest network's (flat: compile time does not "
           "grow with cells, synapses or recordings).", "",
           "| cells | synapses | recordings | dtype | build s | trace s | compile s "
           "| compile × |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    out += [
        f"| {r['cells']} | {r['synapses']} | {r['recordings']} | {r['dtype']} | "
        f"{r['build_s']:.2f} | {r['trace_s']:.2f} | {r['compile_s']:.2f} | "
        f"{r['compile_ratio']:.2f} |"
        for r in these
    ]
    return out + [""]


def events_scale_table(rows: list[dict]) -> list[str]:
    """Build, trace and compile time and peak RSS of NetCon networks by size
    (`events_scale`, each size in its own process)."""
    these = [r for r in rows if r["benchmark"] == "events_scale"]
    if not these:
        return []
    out = ["## NetCon networks: build and compile time by size", "",
           "Seconds, and the peak RSS of the process that built and compiled the "
           "network (20 ms, spike times recorded).", "",
           "| cells | NetCons | build s | trace s | compile s | peak RSS MB |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    out += [
        f"| {r['cells']} | {r['netcons']} | {r['build_s']:.2f} | {r['trace_s']:.2f} "
        f"| {r['compile_s']:.2f} | {r['peak_rss_mb']:.0f} |"
        for r in these
    ]
    return out + [""]


def nmodl_table(rows: list[dict]) -> list[str]:
    """Imported mechanisms: our voltages and calcium against NEURON's run of the
    same `.mod` files (`nmodl`), and `load_nmodl`'s time per file
    (`nmodl_import`)."""
    runs = [r for r in rows if r["benchmark"] == "nmodl" and "neuron_max_dv" in r]
    files = [r for r in rows if r["benchmark"] == "nmodl_import"]
    if not runs and not files:
        return []
    out = ["## Imported NMODL mechanisms: agreement with NEURON, import time", ""]
    if runs:
        out += ["Ours (`BackwardEuler`) against NEURON's fixed step (`secondorder = "
                "0`) on the same `.mod` files, over every step.", "",
                "| case | dtype | max \\|Δv\\| mV | max \\|Δcai\\| mM | peak cai mM |",
                "|---|---|---|---|---|"]  # fmt: skip
        out += [
            f"| {r['case']} | {r['dtype']} | {r['neuron_max_dv']:.2g} | "
            f"{r['neuron_max_dcai_mm']:.2g} | {r['cai_peak_mm']:.3g} |"
            for r in runs
        ]
        out.append("")
    if files:
        out += [
            "`load_nmodl` of one file in a fresh process, seconds: the first call "
            "(which also imports NEURON's NMODL front end and sympy, once per "
            "process), and a second call on the same file (parse, analysis, code "
            "generation).",
            "",
            "| file | first call s | load_nmodl s |",
            "|---|---|---|",
        ]
        out += [
            f"| {r['file']} | {r['first_s']:.2f} | {r['import_s']:.3f} |" for r in files
        ]
        out.append("")
    return out


def morphology_load_table(rows: list[dict]) -> list[str]:
    """Loading and building a reconstruction: ours against NEURON's `Import3d`
    (`morphology_load`)."""
    these = [r for r in rows if r["benchmark"] == "morphology_load"]
    if not these:
        return []
    out = ["## Loading and building a reconstruction", "",
           "Best of several runs, seconds: ours `load_morphology` (d_lambda rule) + "
           "`build`; NEURON `Import3d` + `instantiate` + `geom_nseg`; Jaxley "
           "`read_swc` (one call, SWC only).", "",
           "| file | points | sections | compartments | ours s | ours read s "
           "| NEURON s | ours / NEURON | Jaxley read_swc s |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    out += [
        f"| {r['case']} | {r['points']} | {r['sections']} | {r['compartments']} | "
        f"{r['ours_s']:.3f} | {r['ours_read_s']:.3f} | "
        f"{_g(r.get('neuron_s'), '.3f')} | "
        f"{_ratio(r['ours_s'], r.get('neuron_s'))} | "
        f"{_g(r.get('jaxley_read_s'), '.3f')} |"
        for r in these
    ]
    return out + [""]


def adaptive_table(rows: list[dict]) -> list[str]:
    """Adaptive steps at one tolerance: ours, diffrax's, NEURON's CVODE."""
    adaptive = [r for r in rows if r["benchmark"] == "forward_adaptive"]
    if not adaptive:
        return []
    out = [
        "## Adaptive steps at the same tolerance: ours against diffrax and CVODE",
        "",
        "Ratio = method's time / ours; spike error against NEURON CVODE at atol 1e-8.",
        "",
        "| case | dtype | method | tol | steps | ms | ratio | spike error ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in adaptive:
        ratio = "—" if r.get("ratio") is None else f"{r['ratio']:.2f}"
        out.append(
            f"| {r['case']} | {r['dtype']} | {r['method']} | {r['tol']:g} | "
            f"{r['steps']} | {r['ms']:.2f} | {ratio} | "
            f"{_g(r.get('spike_error_ms'))} |"
        )
    out.append("")
    return out


def work_precision_table(rows: list[dict]) -> list[str]:
    """Spike-time error against steps and wall time, per model and method."""
    wp = [r for r in rows if r["benchmark"] == "work_precision"]
    if not wp:
        return []
    out = [
        "## Work-precision: spike-time error against steps and time",
        "",
        "Error = largest spike-time difference from a fine reference, ms; "
        "parameter = dt (ms) for fixed steps, the tolerance for adaptive ones.",
        "",
        "| model | method | dt / tol | steps | wall ms | spike error ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in wp:
        out.append(
            f"| {r['case']} | {r['method']} | {r['param']:g} | {r['steps']} | "
            f"{1e3 * r['seconds']:.2f} | {_g(r.get('error'))} |"
        )
    out.append("")
    return out


def gradient_tables(rows: list[dict]) -> list[str]:
    """Gradient time and memory per checkpoint configuration: interleaved in one
    process (times), each in its own process (peak memory)."""
    grad = [r for r in rows if r["benchmark"] == "gradient" and "ms" in r]
    out = []
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
            f"## Gradient of the {model}: ours against Jaxley",
            "",
            "Interleaved in one process; ratio = time / the better Jaxley "
            "configuration's.",
            "",
            "| impl | configuration | ms | ratio | XLA temp MB |",
            "|---|---|---|---|---|",
        ]
        for r in inter:
            out.append(
                f"| {r['impl']} | {r['adjoint']} | {r['ms']:.1f} | "
                f"{_ratio(r['ms'], best)} | {_g(r.get('xla_temp_mb'), '.2f')} |"
            )
        out.append("")
        ms = {r["impl"]: r["ms"] for r in inter if r["adjoint"] == "default"}
        plain = ms.get("ours, plain solves")
        if "ours" in ms and plain is not None:
            out += [
                "Sanitised solves (`finite_linear_solve`) against lineax's plain "
                f"ones, default configuration: time ratio {ms['ours'] / plain:.3f}.",
                "",
            ]
    proc = [r for r in grad if r.get("kind") == "process" and not r.get("growth")]
    if proc:
        out += [
            "## Gradient memory: each configuration in its own process",
            "",
            "| model | impl | configuration | ms | peak RSS MB | base RSS MB "
            "| XLA temp MB | finite |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in proc:
            out.append(
                f"| {r['model']} | {r['impl']} | {r['adjoint']} | {r['ms']:.1f} | "
                f"{_g(r.get('peak_rss_mb'), '.0f')} | "
                f"{_g(r.get('base_rss_mb'), '.0f')} | "
                f"{_g(r.get('xla_temp_mb'), '.2f')} | {r.get('finite', '—')} |"
            )
        out.append("")
    return out


def loading_table(rows: list[dict]) -> list[str]:
    """Loading and building model files of 1,000 to 100,000 sections: flat per
    section means linear (`benchmarks/loading.py`)."""
    load = sorted(
        (r for r in rows if r["benchmark"] == "loading"), key=lambda r: r["sections"]
    )
    if not load:
        return []
    out = [
        "## Loading and building model files",
        "",
        "One cell, a binary tree of sections of 2 compartments, `hh` everywhere: "
        "`load_spec` (read and build), the reading alone, and the Python API; "
        f"growth of CPU µs per section, largest / smallest: {load[0]['growth']:.2f}.",
        "",
        "| sections | load+build s | CPU s | CPU µs/section | read s | API s |",
        "|---|---|---|---|---|---|",
    ]
    for r in load:
        out.append(
            f"| {r['sections']:,} | {r['seconds']:.3f} | {r['cpu_seconds']:.3f} | "
            f"{r['cpu_us_per_section']:.1f} | {r['read_seconds']:.3f} | "
            f"{r['api_seconds']:.3f} |"
        )
    out.append("")
    return out


def summary(rows: list[dict]) -> list[str]:
    """Markdown lines: every comparison's table, then float32 against float64."""
    from ._report_compare import dtype_table  # which imports this module

    return (
        fixed_tables(rows)
        + compile_table(rows)
        + events_scale_table(rows)
        + nmodl_table(rows)
        + morphology_load_table(rows)
        + adaptive_table(rows)
        + work_precision_table(rows)
        + gradient_tables(rows)
        + loading_table(rows)
        + dtype_table(rows)
    )


def render(
    rows: list[dict],
    figures: list[str],
    out_dir: str,
    comparisons: tuple[tuple[str, list[dict]], ...] = (),
) -> str:
    """The text of `results.md`.

    **Arguments:**

    - `rows`: the rows of `results.json` (the `run` row among them, if recorded).
    - `figures`: paths of the plots to link.
    - `out_dir`: the folder `results.md` is written to (links are relative to it).
    - `comparisons`: `(label, rows)` of other runs to set our times against.

    **Returns:** the markdown text.
    """
    lines = [
        "# Benchmark results",
        "",
        "Generated by `python -m benchmarks` from `results.json` (rebuild with "
        "`python -m benchmarks --render`); do not edit by hand. What each "
        "benchmark compares, and how: `benchmarks/README.md`.",
        "",
    ]
    lines += run_header(rows) + summary(rows)
    from ._report_compare import comparison_table

    for label, other in comparisons:
        lines += comparison_table(rows, other, label)
    if figures:
        lines += ["## Plots", ""]
        lines += [
            f"![{os.path.basename(f)}]({os.path.relpath(f, out_dir)})" for f in figures
        ]
        lines.append("")
    return "\n".join(lines)
