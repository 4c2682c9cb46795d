"""Shape plots: a model's cells drawn from their 3-D points, each compartment
coloured by a value (NEURON's `PlotShape` with `variable('v')`), and an
animation of them over time.

matplotlib is optional (`pip install 'stable_ode[plot]'`) and imported on use.
"""

import math

import numpy as np

from ._errors import InvalidArgument


def _points_xy(section) -> tuple[np.ndarray, np.ndarray]:
    """A section with 3-D points: `(xyz (k, 3) µm, arc fraction (k,))`."""
    pts = np.asarray(section.points, dtype=np.float64)
    xyz = pts[:, :3]
    steps = np.linalg.norm(np.diff(xyz, axis=0), axis=1)
    arc = np.concatenate([[0.0], np.cumsum(steps)])
    total = arc[-1]
    frac = arc / total if total > 0 else np.linspace(0.0, 1.0, len(arc))
    return xyz, frac


def _along(xyz, frac, x: float) -> np.ndarray:
    """The point at arc fraction `x` of a polyline."""
    return np.array([np.interp(x, frac, xyz[:, i]) for i in range(3)])


def _pieces(xyz, frac, n: int) -> list[np.ndarray]:
    """The polyline cut into `n` pieces of equal arc length (one per
    compartment), each `(m, 3)`."""
    out = []
    for k in range(n):
        a, b = k / n, (k + 1) / n
        inner = [xyz[j] for j in range(len(frac)) if a < frac[j] < b]
        out.append(np.array([_along(xyz, frac, a), *inner, _along(xyz, frac, b)]))
    return out


def shape_lines(model) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """`(lines, compartments, diameters)`: one polyline (`(m, 3)`, µm) per
    compartment of every cell of `model` (a `MembraneModel`), the compartment's
    index in the model, and its section's mean diameter (µm).

    Sections with 3-D points are drawn through them. A section without
    points is a straight line of its length, starting where it attaches to its
    parent: a root along +x from the origin, children fanned out around their
    parent's direction (a schematic layout, as NEURON's `define_shape` makes
    one for sections without points).
    """
    lines, index, diameters = [], [], []
    cell_shift = 0.0
    for _, sections in _cells(model):
        by_name = {s.name: (s, off) for s, off in sections}
        placed: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        children: dict[str | None, list] = {}
        for s, _ in sections:
            children.setdefault(s.parent, []).append(s)

        shift = np.array([cell_shift, 0.0, 0.0])
        stack = [(r, np.array([1.0, 0.0, 0.0])) for r in children.get(None, [])]
        while stack:  # parents before children, without recursion
            s, direction = stack.pop()
            if s.points is not None:
                xyz, frac = _points_xy(s)
                xyz = xyz + shift
            else:
                if s.parent is None:
                    start = shift
                else:
                    pxyz, pfrac = placed[s.parent]
                    start = _along(pxyz, pfrac, float(s.parent_position))
                end = start + float(s.length) * direction
                xyz, frac = np.array([start, end]), np.array([0.0, 1.0])
            placed[s.name] = (xyz, frac)
            kids = children.get(s.name, [])
            base = xyz[-1] - xyz[0]
            norm = float(np.linalg.norm(base[:2]))
            angle = math.atan2(base[1], base[0]) if norm > 0 else 0.0
            for j, child in enumerate(kids):
                spread = 0.0 if len(kids) == 1 else (j / (len(kids) - 1) - 0.5)
                a = angle + spread * math.pi * 2 / 3
                stack.append((child, np.array([math.cos(a), math.sin(a), 0.0])))
        for name, (xyz, frac) in placed.items():
            s, offset = by_name[name]
            n = int(s.n_compartments)
            for k, piece in enumerate(_pieces(xyz, frac, n)):
                lines.append(piece)
                index.append(offset + k)
                diameters.append(float(s.diameter))
        xs = np.concatenate([xyz[:, 0] for xyz, _ in placed.values()])
        cell_shift = float(xs.max()) + 0.2 * float(np.ptp(xs) + 1.0)
    return lines, np.asarray(index), np.asarray(diameters)


def _cells(model):
    cells: dict[str, list] = {}
    for cell, section, offset in model.layout.sections:
        cells.setdefault(cell, []).append((section, offset))
    return list(cells.items())


def _frame(model, values, t, time) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64)
    n = model.n_compartments
    if v.ndim == 1:
        if v.shape != (n,):
            raise InvalidArgument(
                "plot_shape", "values", f"needs {n} values (one per compartment)"
            )
        return v
    if v.ndim != 2 or v.shape[1] != n:
        raise InvalidArgument(
            "plot_shape",
            "values",
            f"must be (compartments,) or (samples, compartments) with {n} "
            f"compartments, got shape {v.shape}",
        )
    if t is None or time is None:
        raise InvalidArgument(
            "plot_shape", "time", "give t (ms) and time (ms) with samples × values"
        )
    t = np.asarray(t, dtype=np.float64)
    return v[int(np.argmin(np.abs(t - float(time))))]


def plot_shape(
    model,
    values,
    *,
    t=None,
    time: float | None = None,
    ax=None,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    label: str = "v (mV)",
    colorbar: bool = True,
):
    """Draw the cells of `model` from their 3-D points (projected on the x-y
    plane, µm), each compartment coloured by its value (NEURON's `PlotShape`).

    **Arguments:**

    - `model`: a `MembraneModel` (`stable_ode.build`, `load_spec(...).model`).
    - `values`: one value per compartment (`(n_compartments,)`, e.g. mV), or
      samples × compartments (`simulate(...).recordings["v"]` of a model without
      recordings) together with `t` and `time`.
    - `t`: the sample times (ms); `time`: the time to show (ms; the nearest
      sample).
    - `ax`: matplotlib axes to draw into (default: a new figure's).
    - `cmap`, `vmin`, `vmax`: the colour map and its range (default: the
      values' range).
    - `label`: the colour bar's label; `colorbar`: whether to draw one.

    **Returns:** the matplotlib `LineCollection` (its `axes`, `figure` are the
    plot's).
    """
    frame = _frame(model, values, t, time)
    return _draw(model, frame, ax, cmap, vmin, vmax, label, colorbar)


def _draw(model, frame, ax, cmap, vmin, vmax, label, colorbar):
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    lines, index, diameters = shape_lines(model)
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 6))
    widths = np.clip(diameters, 0.5, 8.0)
    collection = LineCollection(
        [ln[:, :2] for ln in lines], cmap=cmap, linewidths=widths, capstyle="round"
    )
    collection.set_array(frame[index])
    lo = float(np.min(frame)) if vmin is None else vmin
    hi = float(np.max(frame)) if vmax is None else vmax
    collection.set_clim(lo, hi if hi > lo else lo + 1.0)
    ax.add_collection(collection)
    ax.autoscale_view()
    ax.set_aspect("equal")
    ax.set_xlabel("x (µm)")
    ax.set_ylabel("y (µm)")
    if colorbar:
        ax.figure.colorbar(collection, ax=ax, label=label)
    collection.compartments = index  # which value each line shows
    return collection


def animate_shape(
    model,
    values,
    t,
    *,
    every: int = 1,
    interval: float = 50.0,
    cmap: str = "viridis",
    vmin: float | None = None,
    vmax: float | None = None,
    label: str = "v (mV)",
):
    """An animation of `plot_shape` over the samples of `values` (samples ×
    compartments) at times `t` (ms): a matplotlib `FuncAnimation` (save it with
    `.save("shape.gif")`), showing every `every`-th sample, `interval` ms
    apart. The colour range is the values' over all samples unless given."""
    from matplotlib.animation import FuncAnimation

    v = np.asarray(values, dtype=np.float64)
    t = np.asarray(t, dtype=np.float64)
    _frame(model, v, t, t[0])  # checks the shapes
    lo = float(v.min()) if vmin is None else vmin
    hi = float(v.max()) if vmax is None else vmax
    collection = _draw(model, v[0], None, cmap, lo, hi, label, True)
    ax = collection.axes
    title = ax.set_title(f"t = {t[0]:g} ms")
    frames = range(0, len(t), max(1, int(every)))

    def update(i):
        collection.set_array(v[i][collection.compartments])
        title.set_text(f"t = {t[i]:g} ms")
        return collection, title

    return FuncAnimation(ax.figure, update, frames=frames, interval=interval)


def save_shape_figure(path, model, t, voltages, time: float | None, title: str):
    """`run --plot-shape`: the shape coloured by every compartment's voltage
    (`voltages`, samples × compartments, mV, at times `t`, ms) at `time` (ms;
    `None`: when the largest voltage anywhere occurs), written to `path`
    whole or not at all. **Returns:** the time shown (ms)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ._cli._output import replacing

    t = np.asarray(t)
    v = np.asarray(voltages)
    if time is None:
        time = float(t[int(np.argmax(np.max(v, axis=1)))])
    i = int(np.argmin(np.abs(t - time)))
    fig, ax = plt.subplots(figsize=(7, 6))
    plot_shape(model, v[i], ax=ax, label="v (mV)")
    ax.set_title(f"{title}: v at t = {t[i]:g} ms")
    with replacing(path) as tmp:
        fig.savefig(tmp, format=str(path).rsplit(".", 1)[-1].lower())
    plt.close(fig)
    return float(t[i])
