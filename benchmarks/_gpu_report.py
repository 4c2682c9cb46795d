"""The markdown report of `benchmarks/gpu.py`: a header, one row per case (its
times and memory, or why it stopped), and notes."""

import os
import platform

from ._common import format_table
from ._gpu_cases import DT


def _fmt(x, spec: str, none: str = "—") -> str:
    return none if x is None else format(x, spec)


def format_results(rows: list[dict], header: dict) -> str:
    """The markdown report: a header line, the table, and notes."""
    cols = [
        "case", "impl", "dtype", "size", "steps", "build s", "compile s",
        "run ms (median)", "steps/s", "comp.·steps/s", "peak MiB", "XLA temp MiB",
        "check",
    ]  # fmt: skip
    body = []
    for r in rows:
        common = [
            r["kind"],
            r["impl"],
            r["dtype"],
            r["size_label"],
            str(r["n_steps"]),
        ]
        if r.get("stage") != "done" or "error" in r or "killed" in r:
            reason = r.get("error") or r.get("killed") or r.get("skipped") or r["stage"]
            partial = [
                _fmt(r.get("build_s"), ".2f", ""),
                _fmt(r.get("compile_s"), ".2f", ""),
            ]
            body.append(common + partial + ["", "", "", "", "", reason])
            continue
        body.append(
            common
            + [
                f"{r['build_s']:.2f}",
                f"{r['compile_s']:.2f}",
                f"{r['run_ms']:.2f} (n={r['n_runs']})",
                f"{r['steps_per_s']:.3g}",
                f"{r['comp_steps_per_s']:.3g}",
                _fmt(r["peak_mib"], ".1f"),
                _fmt(r["xla_temp_mib"], ".1f"),
                r["check"],
            ]
        )
    lines = [
        f"# benchmarks/gpu.py --size {header['size']}: {header['date']}, "
        f"{header['device']}",
        "",
        f"jax {header.get('jax_version', '?')}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, mode: {header['mode']}, budget {header['budget']:g} s "
        f"(used {header['elapsed']:.0f} s), dt = {DT} ms, BackwardEuler.",
        "",
        format_table(cols, body),
    ]
    for note in header.get("notes", []):
        lines += ["", note]
    return "\n".join(lines) + "\n"
