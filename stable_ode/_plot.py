"""The figure of `python -m stable_ode run --plot` and `demo`: voltage traces per
recording and, for networks, a spike raster.

matplotlib is optional (`pip install 'stable_ode[plot]'`); nothing here imports it
until a figure is drawn, and `have_matplotlib()` says whether it can be.
"""

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._analysis import spike_times as spike_times


SPIKE_THRESHOLD = 0.0
"""mV: an upward crossing of this voltage counts as a spike."""

NO_MATPLOTLIB = (
    "matplotlib is not installed; get it with: pip install 'stable_ode[plot]'"
)
MAX_TRACE_PANELS = 8
"""More 1-d recordings than this are drawn as one heat map (recording × time)."""
MAX_LINES = 10
"""A 2-d recording with more compartments than this is drawn as a heat map."""
MAX_TICK_LABELS = 25
"""Rows of a raster or heat map are labelled by name up to this many."""


def have_matplotlib() -> bool:
    """Whether matplotlib can be imported (without importing it)."""
    return importlib.util.find_spec("matplotlib") is not None


def image_formats() -> dict[str, str]:
    """File suffixes (without the dot) matplotlib can write → format description."""
    from matplotlib.backend_bases import FigureCanvasBase

    return FigureCanvasBase.get_supported_filetypes()


@dataclass(frozen=True)
class Stimulus:
    """A stimulus as the figure shows it: on from `start` to `end` (ms) in `cell`;
    `label` describes it (e.g. `"0.5 nA step into c soma(0.5), 1-4 ms"`)."""

    cell: str
    start: float
    end: float
    label: str


@dataclass(frozen=True)
class Raster:
    """Spike times (ms) per cell, in cell order; `site` says where they were
    detected (e.g. `"soma(0.5)"` or `"root section (0.5)"`)."""

    cells: tuple[str, ...]
    spikes: tuple[np.ndarray, ...]
    site: str


def plot_simulation(
    path: str | Path,
    t: np.ndarray,
    recordings: Mapping[str, np.ndarray],
    *,
    title: str = "",
    subtitle: str = "",
    record_sites: Mapping[str, tuple[str, str]] | None = None,
    stimuli: Sequence[Stimulus] = (),
    raster: Raster | None = None,
    t_fail: float | None = None,
    compartments: Sequence[str] | None = None,
    threshold: float = SPIKE_THRESHOLD,
) -> None:
    """Draw a simulation into the image file `path` (the suffix picks the format).

    Top: the membrane potential of each recording against time — one panel per
    1-d recording (spikes marked), a heat map for more than `MAX_TRACE_PANELS`
    recordings or for a 2-d recording (samples × compartments) with more than
    `MAX_LINES` compartments. Bottom, if `raster` is given: a spike raster (cell vs
    spike time). Stimuli are shaded where they are on, in the panels of their
    cell. After a failed solve, samples after `t_fail` are not drawn and a dashed
    line marks where the solve stopped.

    **Arguments:**

    - `path`: image file.
    - `t`: sample times, ms. `recordings`: name → membrane potential, mV.
    - `title`, `subtitle`: figure title and a smaller line under it.
    - `record_sites`: recording name → `(cell, site)`, e.g. `("c", "soma(0.5)")`:
      panel titles, and stimuli are shaded only in their cell's panels (default:
      all panels).
    - `stimuli`: `Stimulus`es. `raster`: a `Raster`, or `None`.
    - `t_fail`: time (ms) the solve stopped at, or `None` if it succeeded.
    - `compartments`: names of the compartments (columns of a 2-d recording),
      e.g. `"dend[3]"`; default: their indices.
    - `threshold`: spike threshold, mV.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    t = np.asarray(t, float)
    failed = t_fail is not None and np.isfinite(t_fail)
    reached = t <= t_fail if failed else np.ones(t.shape, bool)
    traces = {k: np.asarray(v, float) for k, v in recordings.items()}
    one_d = {k: v for k, v in traces.items() if v.ndim == 1}
    two_d = {k: v for k, v in traces.items() if v.ndim != 1}
    panels: list[tuple[str, object]] = []
    if len(one_d) > MAX_TRACE_PANELS:
        panels.append(
            ("heat", ("recordings", list(one_d), np.stack(list(one_d.values()), 1)))
        )
    else:
        panels += [("trace", (k, v)) for k, v in one_d.items()]
    for k, v in two_d.items():
        kind = "lines" if v.shape[1] <= MAX_LINES else "heat"
        names = compartments
        if names is None or len(names) != v.shape[1]:
            names = [f"{i}" for i in range(v.shape[1])]
        panels.append((kind, (k, list(names), v)))
    if raster is not None:
        panels.append(("raster", raster))

    heights = [
        {"trace": 1.6, "lines": 2.2, "heat": 2.6, "raster": 2.4}[kind]
        if kind != "raster"
        else min(5.0, 1.4 + 0.12 * len(raster.cells))
        for kind, _ in panels
    ]
    fig = Figure(figsize=(9, 0.9 + sum(heights)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(
        len(panels), 1, sharex=True, squeeze=False, height_ratios=heights
    )[:, 0]

    def shade(ax, cell):
        for s in stimuli:
            if cell is None or s.cell == cell:
                ax.axvspan(s.start, s.end, color="0.9", zorder=0, lw=0)

    for ax, (kind, data) in zip(axes, panels, strict=True):
        if kind == "trace":
            name, v = data
            v = np.where(reached, v, np.nan)
            ax.plot(t, v, lw=1.1, color="C0")
            sp = spike_times(t, v, threshold)
            if sp.size:
                ax.plot(
                    sp,
                    np.full(sp.shape, threshold),
                    "|",
                    color="C3",
                    ms=9,
                    mew=1.5,
                )
            cell, site = (record_sites or {}).get(name, (None, ""))
            shade(ax, cell)
            where = f"  ·  cell {cell}, {site}" if cell is not None else ""
            count = f"{sp.size} spike{'s' if sp.size != 1 else ''}"
            ax.set_title(f"{name}{where}", loc="left", fontsize="medium")
            ax.set_title(
                count, loc="right", fontsize="small", color="C3" if sp.size else "0.4"
            )
            ax.set_ylabel("V (mV)")
            ax.grid(alpha=0.3)
        elif kind == "lines":
            name, rows, v = data
            import matplotlib as mpl

            cmap = mpl.colormaps["viridis"]
            n = v.shape[1]
            for i in range(n):
                ax.plot(
                    t,
                    np.where(reached, v[:, i], np.nan),
                    lw=0.9,
                    color=cmap(i / max(1, n - 1)),
                )
            norm = mpl.colors.BoundaryNorm(np.arange(n + 1) - 0.5, cmap.N)
            cb = fig.colorbar(
                mpl.cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.01
            )
            cb.set_ticks(range(n), labels=rows)
            cb.ax.tick_params(labelsize="small")
            shade(ax, None)
            ax.set_title(
                f"{name}: membrane potential of all {n} compartments",
                loc="left",
                fontsize="medium",
            )
            ax.set_ylabel("V (mV)")
            ax.grid(alpha=0.3)
        elif kind == "heat":
            name, rows, v = data
            v = np.where(reached[:, None], v, np.nan)
            finite = v[np.isfinite(v)]
            lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
            dt = t[1] - t[0] if t.size > 1 else 1.0
            img = ax.imshow(
                v.T,
                aspect="auto",
                origin="lower",
                interpolation="nearest",
                extent=(t[0] - dt / 2, t[-1] + dt / 2, -0.5, v.shape[1] - 0.5),
                cmap="magma",
                vmin=lo,
                vmax=hi if hi > lo else lo + 1.0,
            )
            cb = fig.colorbar(img, ax=ax, pad=0.01)
            cb.set_label("V (mV)")
            _row_labels(ax, rows)
            what = "recordings" if name == "recordings" else "compartments"
            ax.set_title(
                f"{name}: membrane potential of all {len(rows)} {what}",
                loc="left",
                fontsize="medium",
            )
            ax.set_ylabel(what[:-1])
        else:  # raster
            r = data
            for i, (cell, sp) in enumerate(zip(r.cells, r.spikes, strict=True)):
                for s in stimuli:
                    if s.cell == cell:
                        ax.fill_between(
                            [s.start, s.end], i - 0.45, i + 0.45, color="0.9", lw=0
                        )
                ax.plot(sp, np.full(sp.shape, i), "|", color="k", ms=6, mew=1.2)
            n_spikes = sum(sp.size for sp in r.spikes)
            active = sum(1 for sp in r.spikes if sp.size)
            ax.set_title(
                f"spike raster: {n_spikes} spikes in {active} of {len(r.cells)} cells "
                f"(upward crossings of {threshold:g} mV at each cell's {r.site})",
                loc="left",
                fontsize="medium",
            )
            ax.set_ylim(len(r.cells) - 0.5, -0.5)
            _row_labels(ax, list(r.cells))
            ax.set_ylabel("cell")
            ax.grid(alpha=0.3, axis="x")
        if failed:
            ax.axvline(t_fail, color="C3", ls="--", lw=1.2)
    if failed:
        axes[0].text(
            t_fail,
            1.0,
            f" solve stopped at {t_fail:.6g} ms",
            color="C3",
            transform=axes[0].get_xaxis_transform(),
            va="bottom",
            ha="left",
            fontsize="small",
        )
    axes[-1].set_xlabel("time (ms)")
    axes[-1].set_xlim(t[0], t[-1])
    lines = [x for x in (title, subtitle) if x]
    if stimuli:
        on = (
            "; ".join(s.label for s in stimuli)
            if len(stimuli) <= 2
            else f"{len(stimuli)} stimuli, in their cells' panels"
        )
        lines.append(f"shaded: stimulus on ({on})")
    if lines:
        fig.suptitle("\n".join(lines), fontsize="medium")
    fig.savefig(path, dpi=120)


def _row_labels(ax, rows: list[str]) -> None:
    if len(rows) <= MAX_TICK_LABELS:
        ax.set_yticks(range(len(rows)), rows, fontsize="small")
    else:
        from matplotlib.ticker import MaxNLocator

        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
