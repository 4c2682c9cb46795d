"""The figure of a run: voltage traces, stimuli and, for a network, a raster."""

import numpy as np

from .. import _plot
from .._plot import Raster, spike_times, Stimulus
from .._stimulus import StepCurrent
from ._args import UsageError
from ._output import replacing
from ._solve import describe_model, Solved, step_counts


NETWORK_CELLS = 4
"""A model with more cells than this, or with any synapse, gets a spike raster."""
RASTER_MEMORY = 2**28
"""Bytes: a network's raster needs every compartment's voltage at every saved step;
above this, the raster shows the recordings only."""


def is_network(spec) -> bool:
    """Whether a model file gets a spike raster: more than `NETWORK_CELLS` cells, or
    any synapse."""
    return len(spec.cells) > NETWORK_CELLS or bool(spec.synapses)


def spike_sites(loaded) -> tuple[list[int], str]:
    """For each cell (file order): the compartment its spikes are detected in, the
    middle of its root section (`model.index(cell, root, 0.5)`); and how to call
    that site."""
    sites, roots = [], set()
    for cell in loaded.spec.cells:
        root = next(s.name for s in cell.sections if s.parent is None)
        roots.add(root)
        sites.append(loaded.model.index(cell.name, root, 0.5))
    where = f"{roots.pop()}(0.5)" if len(roots) == 1 else "root section (0.5)"
    return sites, where


def raster_fits(loaded) -> bool:
    """Whether every compartment's voltage at every saved step fits
    `RASTER_MEMORY`."""
    n = loaded.model.n_compartments
    _, saved = step_counts(loaded)
    return saved * n * loaded.model.dtype.itemsize <= RASTER_MEMORY


def _stimuli(spec) -> list[Stimulus]:
    out = []
    for s in spec.stimuli:
        site = f"{s.site.cell} {s.site.section}({s.site.position:g})"
        if isinstance(s, StepCurrent):
            end = s.delay + s.duration
            what = f"{s.amplitude:g} nA step"
        else:
            end = s.delay + len(s.values) * s.dt
            what = "current trace"
        label = f"{what} into {site}, {s.delay:g}–{end:g} ms"
        out.append(Stimulus(s.site.cell, s.delay, end, label))
    return out


def _compartment_names(loaded) -> list[str]:
    """`section[i]`, or `cell.section[i]` for a model of several cells."""
    spec = loaded.spec
    several = len(spec.cells) > 1
    return [
        f"{c.cell}.{c.section}[{c.index}]" if several else f"{c.section}[{c.index}]"
        for c in loaded.model.layout.compartments
    ]


def plot(path, loaded, solved: Solved, title: str) -> None:
    spec = loaded.spec
    raster = None
    if is_network(spec):
        cells = tuple(c.name for c in spec.cells)
        if solved.voltages is not None:
            sites, where = spike_sites(loaded)
            traces = [solved.voltages[:, i] for i in sites]
        else:  # too large to save every compartment: the recordings' cells
            by_cell = {r.site.cell: r.name for r in spec.record}
            cells = tuple(c for c in cells if c in by_cell)
            traces = [solved.recordings[by_cell[c]] for c in cells]
            where = "recording site"
        t_fail = solved.stats.get("t_fail")
        if t_fail is not None:  # after a failure, samples hold the last good value
            traces = [np.where(solved.t <= t_fail, v, np.nan) for v in traces]
        if cells:
            spikes = tuple(spike_times(solved.t, v) for v in traces)
            raster = Raster(cells, spikes, where)
    try:
        with replacing(path) as tmp:
            _plot.plot_simulation(
                tmp,
                solved.t,
                solved.recordings,
                title=title,
                subtitle=describe_model(loaded),
                record_sites={
                    r.name: (r.site.cell, f"{r.site.section}({r.site.position:g})")
                    for r in spec.record
                },
                stimuli=_stimuli(spec),
                raster=raster,
                t_fail=solved.stats.get("t_fail"),
                compartments=_compartment_names(loaded),
            )
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e
