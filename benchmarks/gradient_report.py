"""The tables and the verdict of `python -m benchmarks.gradient`: the separate
processes' rows (`print_results`) and whether ours meets the target against
Jaxley, from the interleaved times where both were timed there (`verdict`)."""


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def print_results(results: list[dict]) -> None:
    from ._common import format_table

    header = [
        "model",
        "impl",
        "configuration",
        "t ms",
        "grad ms (median)",
        "min",
        "peak RSS MB",
        "base RSS MB",
        "XLA temp MB",
        "compile s",
        "finite",
        "grad[:3]",
    ]
    rows = []
    for r in results:
        if "error" in r:
            rows.append(
                [r["model"], r["impl"], r["adjoint"], _fmt(r["t_max"], ".0f")]
                + ["ERROR: " + r["error"][:80]]
                + [""] * 7
            )
            continue
        rows.append(
            [
                r["model"],
                {"jaxley": "Jaxley 0.14", "ours": "stable_ode"}.get(
                    r["impl"], "stable_ode, plain solves"
                ),
                r["adjoint"],
                _fmt(r["t_max"], ".0f"),
                _fmt(r["ms"]),
                _fmt(r["min_ms"]),
                _fmt(r["peak_rss_mb"], ".0f"),
                _fmt(r["base_rss_mb"], ".0f"),
                _fmt(r["xla_temp_mb"], ".2f"),
                _fmt(r["compile_s"]),
                str(r["finite"]),
                ", ".join(f"{g:.6g}" for g in r["grad_head"]),
            ]
        )
    print(format_table(header, rows))


# Our configuration matched with each of Jaxley's: storing every step (our
# default for these sizes) against Jaxley without checkpointing, and the same
# nested levels.
MATCHED = (("default", "none"), ("store-all", "none"), ("levels=40,50", "levels=40,50"))


def verdict(results: list[dict], interleaved_rows: list[dict] = ()) -> str:
    """Whether ours ≤ Jaxley's time, peak RSS and XLA working memory, for each
    model, at each matched configuration (`MATCHED`). Times come from the
    interleaved rows where both configurations were timed there (calls
    alternating in one process: the machine's load is shared), else from the
    separate processes. Our configurations without a Jaxley counterpart (fewer
    checkpoints than Jaxley's levels store: time traded for memory) are listed
    with their time and working memory relative to Jaxley's best."""
    ok = [r for r in results if "error" not in r and not r.get("growth")]
    lines = []

    def leq(a, b):
        return a is not None and b is not None and a <= b

    for model in ("cable", "network"):
        rows = {(r["impl"], r["adjoint"]): r for r in ok if r["model"] == model}
        inter = {
            (r["impl"], r["adjoint"]): r
            for r in interleaved_rows
            if r["model"] == model
        }
        jx_rows = [r for (impl, _), r in rows.items() if impl == "jaxley"]
        if not jx_rows:
            continue
        lines.append(f"  {model}, matched configurations (time, peak RSS, XLA temp):")
        for ours_name, jx_name in MATCHED:
            o, j = rows.get(("ours", ours_name)), rows.get(("jaxley", jx_name))
            if o is None or j is None:
                continue
            oi, ji = inter.get(("ours", ours_name)), inter.get(("jaxley", jx_name))
            o_ms, j_ms, where = (
                (oi["ms"], ji["ms"], "interleaved")
                if oi is not None and ji is not None
                else (o["ms"], j["ms"], "separate processes")
            )
            checks = [
                leq(o_ms, j_ms),
                leq(o["peak_rss_mb"], j["peak_rss_mb"]),
                leq(o["xla_temp_mb"], j["xla_temp_mb"]),
            ]
            lines.append(
                f"    ours {ours_name:>13} vs Jaxley {jx_name:>12}: "
                f"{o_ms:.1f} / {j_ms:.1f} ms ({where}), "
                f"{o['peak_rss_mb']:.0f} / {j['peak_rss_mb']:.0f} MB, "
                f"{o['xla_temp_mb']:.2f} / {j['xla_temp_mb']:.2f} MB: "
                + ("met" if all(checks) else "NOT met")
            )
        matched = {name for name, _ in MATCHED}
        others = [
            r
            for (impl, name), r in rows.items()
            if impl == "ours" and name not in matched
        ]
        if not others:
            continue
        # Jaxley's best time from the interleaved process where it ran there, as
        # the matched rows; ours-only configurations run in processes of their own.
        jx_inter = [r["ms"] for (impl, _), r in inter.items() if impl == "jaxley"]
        best_ms = min(jx_inter or [r["ms"] for r in jx_rows])
        least_mb = min(r["xla_temp_mb"] for r in jx_rows)
        lines.append(
            f"  {model}, ours without a Jaxley counterpart (time traded for memory; "
            "own processes):"
        )
        for r in others:
            lines.append(
                f"    ours {r['adjoint']:>15}: {r['ms']:.1f} ms "
                f"({r['ms'] / best_ms:.2f}x Jaxley's best), XLA temp "
                f"{r['xla_temp_mb']:.2f} MB ({r['xla_temp_mb'] / least_mb:.2f}x "
                "Jaxley's least)"
            )
    if not lines:
        return "verdict: missing rows"
    growth = sorted(
        (
            r
            for r in results
            if "error" not in r
            and r.get("growth")
            and r["adjoint"] == "checkpoints=100"
        ),
        key=lambda r: r["t_max"],
    )
    if len(growth) >= 2:
        a, b = growth[0], growth[-1]
        ratio_t = b["t_max"] / a["t_max"]
        ratio_m = (b["xla_temp_mb"] or 0) / max(a["xla_temp_mb"] or 1e-9, 1e-9)
        lines.append(
            f"  memory growth at Checkpointing(100), {a['t_max']:.0f} -> "
            f"{b['t_max']:.0f} ms ({ratio_t:.0f}x): XLA temp x{ratio_m:.2f}, peak "
            f"RSS {a['peak_rss_mb']:.0f} -> {b['peak_rss_mb']:.0f} MB"
        )
    return "target (ours <= Jaxley, time and memory):\n" + "\n".join(lines)
