"""Checks of a section's 3-D points and of the geometry they give: `Points`
(the stored form), what is wrong with a list of points (`points_problem`),
with the compartments' areas and axial resistances (`geometry_problem`), and
with how sections attach (`pinched_attachment`). The integration itself
(NEURON's `area()` and `ri()`) is in `_geometry`."""

import math
import sys
from collections.abc import Sequence

import numpy as np

from ._geometry import (
    _arc_and_diameters,
    connecting_halves,
    points_geometry,
    R_SCALE,
    resistance_range_per_ra,
)


class Points(tuple):
    """A section's 3-D points: a tuple of `(x, y, z, diam)` tuples of floats, µm.

    Not a namedtuple, so JAX and equinox see it as one leaf (a static field of
    `Section` that their tree walks do not enter), and its hash is computed once
    (it keys the geometry caches).
    """

    def __hash__(self):
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h


def as_points(points) -> Points:
    """`points` as `Points`: a tuple of `(x, y, z, diam)` tuples of Python floats.

    **Raises:** `ValueError` with the index of the first entry that is not four
    real numbers.
    """
    try:
        rows = list(points)
    except TypeError:
        raise ValueError(
            f"points: must be a sequence of (x, y, z, diam), got {points!r}"
        ) from None
    out = []
    for i, p in enumerate(rows):
        try:
            row = tuple(float(c) for c in p)
        except (TypeError, ValueError):
            raise ValueError(
                f"points[{i}]: must be four numbers (x, y, z, diam), got {p!r}"
            ) from None
        if len(row) != 4:
            raise ValueError(
                f"points[{i}]: must be four numbers (x, y, z, diam), got {len(row)}"
            )
        out.append(row)
    return Points(out)


def points_problem(points: Sequence, has_parent: bool):
    """`(argument, problem)` for the first thing wrong with a section's 3-D
    points, else `None`: fewer than two, a non-finite or negative value, a zero
    diameter inside the section (it would cut the axial path: infinite
    resistance), a zero first diameter on a section with a parent (it would cut
    it from its parent), every diameter zero, or points that all coincide (zero
    length)."""
    if len(points) < 2:
        return "points", f"needs at least 2 points (x, y, z, diam), got {len(points)}"
    last = len(points) - 1
    values = np.asarray(points, np.float64)
    with np.errstate(over="ignore"):  # beyond single precision: checked below
        single = values.astype(np.float32)  # as NEURON stores them
    bad = ~np.isfinite(single).all(axis=1) | (values[:, 3] <= 0)
    bad |= (single[:, 3] == 0) != (values[:, 3] == 0)
    if not bad.any():  # the common case, without a loop over the points
        return _length_problem(points)
    for i, (x, y, z, d) in enumerate(points):
        if not all(math.isfinite(c) for c in (x, y, z, d)):
            return f"points[{i}]", f"must be finite, got {(x, y, z, d)!r}"
        if d < 0:
            return f"points[{i}]", f"diameter must be >= 0 µm, got {d!r}"
        if not np.isfinite(single[i]).all() or (single[i, 3] == 0) != (d == 0):
            return f"points[{i}]", (
                f"{(x, y, z, d)!r} is not representable in single precision, in "
                "which NEURON stores 3-D points and the geometry is computed "
                "(|value| <= 3.4e38 µm, a diameter > 0 at least 1.4e-45 µm)"
            )
        if d == 0 and (0 < i < last or (i == 0 and has_parent)):
            where = (
                "at the 0 end of a section with a parent (it would cut the section "
                "from its parent: an infinite axial resistance)"
                if i == 0
                else "inside the section (it would cut its axial path: an infinite "
                "axial resistance)"
            )
            return (
                f"points[{i}]",
                f"diameter 0 {where}; only an end point may have zero diameter",
            )
    return _length_problem(points)


def _length_problem(points):
    if all(p[3] == 0 for p in points):
        return "points", "every diameter is 0: the section has no membrane"
    arc, _ = _arc_and_diameters(points)
    if not arc[-1] > 0:
        return "points", "all points coincide: the section has zero length"
    return None


def geometry_problem(points: tuple, n: int) -> str | None:
    """What is wrong if a compartment's area (cm²) or a half's axial resistance
    per unit `Ra` is not a finite, normal, non-zero float64; else `None`."""
    tiny, huge = sys.float_info.min, sys.float_info.max
    for k, a in enumerate(points_geometry(points, n).area * 1e-8):
        if not (tiny <= a <= huge):
            return (
                f"compartment {k} of {n} has an area of {a:g} cm², not a finite "
                "non-zero number"
            )
    for r in connecting_halves(points, n) * R_SCALE:
        if not (tiny <= r <= huge and 1 / r >= tiny):
            return (
                f"a half compartment has an axial resistance of {r:g} Ω per Ω·cm "
                f"(with {n} compartments), not a finite non-zero number"
            )
    return None


def pinched_attachment(fields: list[dict], positions: dict):
    """`(i, problem)` for the first section attached at an end of zero diameter
    (NEURON would join it through its ~1e15 MΩ guard); else `None`. `fields`:
    each section's field values (`vars(section)`), `positions`: name → index."""
    if all(f["points"] is None for f in fields):
        return None  # only a section of points can have a zero diameter
    for i, s in enumerate(fields):
        if s["parent"] is None:
            continue
        p, x = fields[positions[s["parent"]]], s["parent_position"]
        for _ in fields:  # a 0 end is the node its section hangs from
            if x != 0.0 or p["parent"] is None:
                break
            p, x = fields[positions[p["parent"]]], p["parent_position"]
        if p["points"] is not None and x in (0.0, 1.0):
            if p["points"][0 if x == 0.0 else -1][3] == 0.0:
                return i, (
                    f"attaches to the {int(x)} end of {p['name']!r}, whose diameter "
                    "there is 0 (an infinite axial resistance)"
                )
    return None


def axial_resistance_per_ra(length: float, diameter: float, n: int) -> float:
    """Resistance of half a compartment per unit `Ra`: `(L/2n) / (π·(d/2)²)`, in
    Ω per Ω·cm (µm converted to cm)."""
    return (length / (2 * n)) * 1e-4 / (math.pi * (diameter / 2) ** 2 * 1e-8)


def cylinder_problem(length: float, diameter: float, n: int):
    """`(argument, problem)` if the compartments' area or axial resistance is not a
    finite, normal, non-zero float64; else `None`."""
    tiny, huge = sys.float_info.min, sys.float_info.max
    try:
        area = math.pi * diameter * (length / n) * 1e-8
        cross = math.pi * (diameter / 2) ** 2 * 1e-8
        r = (length / (2 * n)) * 1e-4 / cross if cross > 0 else math.inf
    except OverflowError:
        area = cross = r = math.inf
    if not (tiny <= area <= huge):
        return "diameter", (
            f"{diameter!r} µm with length {length!r} µm and {n} compartment(s) "
            f"gives a compartment area of {area:g} cm², not a finite non-zero number"
        )
    if not (tiny <= r <= huge and 1 / r >= tiny):
        return "diameter", (
            f"{diameter!r} µm with length {length!r} µm and {n} compartment(s) "
            f"gives an axial resistance of {r:g} Ω per Ω·cm, not a finite non-zero "
            f"number"
        )
    return None


def resistances_per_ra(f: dict) -> list[float]:
    """The extreme half-compartment axial resistances per unit `Ra` of the
    section with field values `f` (`vars(section)`), Ω per Ω·cm (the one value
    of a cylinder)."""
    n = int(f["n_compartments"])
    if f["points"] is not None:
        return resistance_range_per_ra(f["points"], n)
    return [axial_resistance_per_ra(float(f["length"]), float(f["diameter"]), n)]
