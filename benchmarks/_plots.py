"""The plots of `results.md`: `write_plots`, from the rows of `results.json`."""

import math
import os

from ._report import FIXED


def write_plots(rows: list[dict], folder: str) -> list[str]:
    """`forward_times.png` (ms per fixed-step case: ours, Jaxley, NEURON, both
    dtypes) and `gradient.png` (time and memory per checkpoint configuration),
    when there are rows for them. Returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    written = []
    fixed = [r for r in rows if r["benchmark"] in FIXED]
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
                f"{'Jaxley' if r['impl'] == 'jaxley' else r['impl']}\n{r['adjoint']}"
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
