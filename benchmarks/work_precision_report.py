"""The report of `python -m benchmarks.work_precision`: the progress lines, the
table per model, the issue's targets evaluated on the measured points, and the
plot (`Point`s and `Case`s of `work_precision.py`)."""

import math

from ._common import format_table


def _progress(p):
    print(
        f"  {p.method:28s} {p.param:9.3g}  steps {p.steps:8d}  "
        f"{p.seconds * 1e3:9.2f} ms  error {p.error:.3g} ms",
        flush=True,
    )


def table(pts: list) -> str:
    rows = [
        [
            p.method,
            f"{p.param:.3g}",
            str(p.steps),
            f"{p.seconds * 1e3:.2f}",
            "—" if math.isinf(p.error) else f"{p.error:.2g}",
        ]
        for p in pts
    ]
    return format_table(
        ["method", "dt (ms) / tol", "steps", "wall (ms)", "spike error (ms)"], rows
    )


def _cheapest(pts, max_error, key):
    ok = [p for p in pts if p.error <= max_error]
    return min(ok, key=key) if ok else None


def targets(case, pts: list) -> list[str]:
    """The issue's targets, evaluated on the measured points."""
    out = []
    be = [p for p in pts if p.method == "fixed BackwardEuler" and p.param == 0.025]
    adaptive = [p for p in pts if p.method.startswith("adaptive")]
    k5 = [p for p in pts if p.method == "Kvaerno5" and not math.isinf(p.error)]
    if be:
        b = be[0]
        best = _cheapest(adaptive, 0.01, key=lambda p: p.steps)
        if best is None:
            out.append(f"{case.name}: no adaptive run reached 0.01 ms: NOT MET")
        else:
            met = "met" if best.steps < b.steps else "NOT MET"
            out.append(
                f"{case.name}: adaptive reaches {best.error:.2g} ms (<= 0.01) in "
                f"{best.steps} steps ({best.method}, tol {best.param:g}); fixed "
                f"BackwardEuler dt = 0.025 takes {b.steps} steps for "
                f"{b.error:.2g} ms: {met}"
            )
    for k in k5:
        best = _cheapest(adaptive, k.error, key=lambda p: p.seconds)
        if best is None:
            out.append(
                f"{case.name}: no adaptive run as accurate as Kvaerno5 at tol "
                f"{k.param:g} ({k.error:.2g} ms)"
            )
            continue
        speedup = k.seconds / best.seconds
        met = "met" if speedup >= 100 else "NOT MET"
        out.append(
            f"{case.name}: Kvaerno5 tol {k.param:g}: {k.error:.2g} ms in "
            f"{k.seconds * 1e3:.0f} ms wall, {k.steps} steps; {best.method} tol "
            f"{best.param:g}: {best.error:.2g} ms in {best.seconds * 1e3:.1f} ms: "
            f"{speedup:.0f}x faster (target 100x): {met}"
        )
    return out


def plot(case, pts: list, path: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    methods = list(dict.fromkeys(p.method for p in pts))
    for method in methods:
        mp = [p for p in pts if p.method == method and not math.isinf(p.error)]
        if not mp:
            continue
        style = "--o" if method.startswith("fixed") else "-s"
        err = [max(p.error, 1e-7) for p in mp]
        axes[0].loglog([p.steps for p in mp], err, style, label=method)
        axes[1].loglog([p.seconds for p in mp], err, style, label=method)
    for ax, xlabel in zip(axes, ["steps", "wall time (s)"]):
        ax.axhline(0.01, color="grey", lw=0.8, ls=":")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("max spike-time error (ms)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"HH {case.name}, {case.t_max:g} ms")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
