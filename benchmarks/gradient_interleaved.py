"""The interleaved part of `python -m benchmarks.gradient`: several checkpoint
configurations of one model timed in one process, calls alternating round robin,
each time's ratio to the better Jaxley configuration's (`INTERLEAVED`)."""

import json
import os
import subprocess
import sys
import time

from .gradient import BUILDERS, PLAIN, sanitised_ratio, solve_variant
from .gradient_report import _fmt


def interleaved(specs: list[dict], repeats: int) -> list[dict]:
    """Time several configurations of one model in this one process, calls alternating
    round robin (`_common.time_interleaved`) so that they share the machine's
    load; on a shared machine the separate processes' times can differ by 2x
    from one minute to the next, the ratios measured here do not. Each row also
    has its XLA temp (MB) and compile time (s)."""
    import jax

    jax.config.update("jax_enable_x64", True)

    from ._common import time_interleaved

    fns, args, compile_s = [], [], []
    for spec in specs:
        loss, a = BUILDERS[spec["model"], spec["impl"]](spec["t_max"], spec["adjoint"])
        start = time.perf_counter()
        with solve_variant(spec["impl"]):
            fns.append(jax.jit(jax.grad(loss)).lower(*a).compile())
        compile_s.append(time.perf_counter() - start)
        args.append(a)
    out = time_interleaved(fns, args, repeats=repeats)
    rows = []
    for spec, fn, c, (t, _) in zip(specs, fns, compile_s, out, strict=True):
        analysis = fn.memory_analysis()
        temp = None if analysis is None else analysis.temp_size_in_bytes / 2**20
        rows.append(
            dict(spec, ms=1e3 * t.median, min_ms=1e3 * t.min, compile_s=c,
                 xla_temp_mb=temp)
        )  # fmt: skip
    return rows


INTERLEAVED = {
    "cable": [
        ("jaxley", "none"),
        ("jaxley", "levels=40,50"),
        ("ours", "default"),
        (PLAIN, "default"),
        ("ours", "levels=40,50"),
        ("ours", "store-all"),
    ],
    # Jaxley without checkpointing is left out: 2.5x its `[40, 50]` time and 324
    # MB of working memory in this process, it is no one's better configuration.
    "network": [
        ("jaxley", "levels=40,50"),
        ("ours", "default"),
        (PLAIN, "default"),
        ("ours", "levels=40,50"),
    ],
}


def interleaved_plan(mode: str, model: str = "cable") -> tuple[list[dict], int]:
    """The configurations of `model` (`"cable"` or `"network"`) timed in one
    process with calls alternating, and the number of rounds; without Jaxley,
    ours only. The smoke test times the cable only (an empty list for the
    network)."""
    from ._common import have_jaxley

    pairs = list(INTERLEAVED[model])
    t_max, repeats = 50.0, 15
    if mode == "quick":
        if model == "cable":
            # the configuration the quick run leaves out of the separate processes
            pairs.insert(5, ("ours", "checkpoints=10"))
        # rounds cost little next to the compilations; 3 left the sanitising
        # ratio (ours / plain solves) at the mercy of one burst of load
        repeats = 9
    elif mode == "smoke":
        pairs, t_max, repeats = (
            [("jaxley", "levels=40,50"), ("ours", "store-all")]
            if model == "cable"
            else [],
            5.0,
            1,
        )
    if not have_jaxley():
        pairs = [p for p in pairs if p[0] != "jaxley"]
    specs = [dict(model=model, impl=i, adjoint=a, t_max=t_max) for i, a in pairs]
    return specs, repeats


def run_interleaved(mode: str, model: str) -> list[dict]:
    """`interleaved(*interleaved_plan(mode, model))` in a fresh process; its rows,
    also emitted to `results.json` (`kind="interleaved"`)."""
    from ._common import emit

    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.gradient", "--interleaved", mode, model],
        capture_output=True,
        text=True,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if not lines:
        print(f"interleaved timing ({model}) failed:", proc.stderr.strip()[-500:])
        sys.exit(1)
    rows = json.loads(lines[-1][len("RESULT ") :])
    emit("gradient", [dict(r, kind="interleaved") for r in rows])
    return rows


def print_interleaved(rows: list[dict], repeats: int) -> None:
    """The table of one model's interleaved rows, with each time's ratio to the
    better Jaxley configuration's."""
    from ._common import format_table

    model, t_max = rows[0]["model"], rows[0]["t_max"]
    print(
        f"\n{model.capitalize()} gradient, {t_max:g} ms, timed in one process with "
        f"calls alternating ({repeats} rounds); ratio = time / the best Jaxley "
        "median:"
    )
    best_jx = min((r["ms"] for r in rows if r["impl"] == "jaxley"), default=None)
    table = [
        [
            {"jaxley": "Jaxley 0.14", "ours": "stable_ode"}.get(
                r["impl"], "stable_ode, plain solves"
            ),
            r["adjoint"],
            f"{r['ms']:.1f}",
            f"{r['min_ms']:.1f}",
            "—" if best_jx is None else f"{r['ms'] / best_jx:.2f}",
            _fmt(r["xla_temp_mb"], ".2f"),
            f"{r['compile_s']:.1f}",
        ]
        for r in rows
    ]
    header = ["impl", "configuration", "median ms", "min ms", "ratio",
              "XLA temp MB", "compile s"]  # fmt: skip
    print(format_table(header, table))
    ratio = sanitised_ratio(rows)
    if ratio is not None:
        print(f"sanitised / plain solves (default configuration, median): {ratio:.3f}")
