"""Section geometry from 3-D points, as NEURON computes it (`pt3dadd`, `area()`,
`ri()`), and NEURON's `d_lambda` rule.

A section described by 3-D points `(x, y, z, diam)` (µm) is a chain of frusta
(truncated cones) along its arc length `s`, the diameter varying linearly in
`s` between consecutive points. Cut into `n` compartments of equal arc length
`L/n`, each compartment `k` spans `[k·L/n, (k+1)·L/n]` and has

- membrane area: the lateral (slant) area of the frustum pieces it spans,
  `Σ π/2·(d1 + d2)·sqrt(Δs² + ((d2 - d1)/2)²)` (µm²), a boundary inside a
  frustum cutting it at the linearly interpolated diameter (a zero-length
  piece between two points at the same place but of different diameters adds
  the annulus between them);
- a left and a right half axial resistance, over `[k·L/n, (k+½)·L/n]` and
  `[(k+½)·L/n, (k+1)·L/n]`: `Σ 4·Ra·Δs/(π·d1·d2)` over the pieces of each half
  (the exact resistance of a conical frustum);
- a diameter (NEURON's `seg.diam`): the mean diameter over its arc length.

This is NEURON's `nrn_area_ri` for sections with 3-D points, including its
details: NEURON stores the points in single precision (so the arc lengths are
accumulated from single-precision coordinate differences, and the diameters
are single-precision numbers), and it guards a zero-length piece and a zero
diameter (a piece of zero `d1·d2/Δs` counts as `1e15` µm⁻¹). We reproduce them
so that a section gives NEURON's `seg.area()` and `seg.ri()` to rounding.
Between compartments `k` and `k+1` the resistance is the right half of `k`
plus the left half of `k+1` (NEURON's `sec(x).ri()` of `k+1`); the left half
of the first compartment joins the section to its parent's node, the right
half of the last one to the section's 1-end node (NEURON's zero-area node at
`x = 1`, `sec(1).ri()`).
"""

import functools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np


if TYPE_CHECKING:
    from ._cell import Section

# NEURON's guards in nrn_area_ri / diam_from_list: shortest piece (µm), smallest
# d1·d2/Δs (µm), coincident points (µm).
_MIN_PIECE = 1e-15
_MIN_CONDUCTANCE_PER_RA = 1e-15
_SAME_POINT = 1e-10

# Resistance of a piece, Ω per Ω·cm of Ra, per µm⁻¹ of Σ Δs/(d1·d2): 4/π, and
# 1e4 µm per cm.
R_SCALE = 4e4 / math.pi


@dataclass(frozen=True)
class PointsGeometry:
    """The geometry of a section of 3-D points cut into `n` compartments.

    **Fields:**

    - `arc`: arc length of each point from the first, µm (NEURON's `arc3d`).
    - `length`: the section's length, `arc[-1]`, µm (NEURON's `L`).
    - `area`: membrane area of each compartment, µm² (NEURON's `seg.area()`).
    - `diam`: mean diameter of each compartment over its arc length, µm
      (NEURON's `seg.diam`).
    - `r_left`, `r_right`: `Σ Δs/(d1·d2)` over the left and the right half of
      each compartment, µm⁻¹; times `Ra·4/π·1e4` it is the half's axial
      resistance in Ω for `Ra` in Ω·cm.
    """

    arc: np.ndarray
    length: float
    area: np.ndarray
    diam: np.ndarray
    r_left: np.ndarray
    r_right: np.ndarray


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


@functools.lru_cache(maxsize=1024)
def _arc_and_diameters(points: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Arc length of each point and its diameter, µm, as NEURON stores and sums
    them: single-precision coordinates and diameters, each coordinate difference
    taken in single precision, the rest in double."""
    p = np.asarray(points, np.float32)
    step = np.diff(p[:, :3], axis=0).astype(np.float64)  # float32 differences
    x, y, z = step[:, 0], step[:, 1], step[:, 2]
    seg = np.sqrt(x * x + y * y + z * z)
    arc = np.concatenate([[0.0], np.cumsum(seg)])
    diam = np.abs(p[:, 3]).astype(np.float64)
    arc.setflags(write=False)  # shared through the cache
    diam.setflags(write=False)
    return arc, diam


@functools.lru_cache(maxsize=1024)
def points_geometry(points: tuple, n: int) -> PointsGeometry:
    """Geometry of a section of 3-D `points` `(x, y, z, diam)` (µm, at least two,
    diameters ≥ 0) cut into `n` compartments of equal arc length, exactly as
    NEURON computes it (see the module docstring). Cached by `(points, n)`.
    """
    arc, diam = _arc_and_diameters(points)
    arc_list, diam_list = arc.tolist(), diam.tolist()
    npt = len(arc_list)
    ds = arc_list[-1] / n
    area = [0.0] * n
    mean = [0.0] * n
    halves = [[0.0] * n, [0.0] * n]
    # Walk once along the pieces: each ends at the next point or at the next
    # half-compartment boundary, whichever comes first; (x1, y1) is where the
    # last piece ended (arc, diameter) and j the point at or before it.
    j = 0
    x1, y1 = arc_list[0], diam_list[0]
    for k in range(n):
        start = k * ds
        a = d_integral = 0.0
        for half in (0, 1):
            end = start + ds / 2
            r = 0.0
            while True:
                xj, xn = arc_list[j], arc_list[j + 1]
                if xn > end or j + 2 == npt:  # the boundary comes first
                    frac = 1.0 if abs(xn - xj) < _SAME_POINT else (end - xj) / (xn - xj)
                    x2 = end
                    y2 = (1.0 - frac) * diam_list[j] + frac * diam_list[j + 1]
                    advance = False
                else:  # the next point comes first
                    x2, y2 = xn, diam_list[j + 1]
                    advance = True
                delta = x2 - x1
                d_integral += (y2 + y1) * delta
                delta = max(delta, _MIN_PIECE)
                g = y2 * y1 / delta
                r += 1.0 / (g if g != 0.0 else _MIN_CONDUCTANCE_PER_RA)
                taper = 0.5 * (y2 - y1)
                a += (y2 + y1) * math.sqrt(delta * delta + taper * taper)
                x1, y1 = x2, y2
                if not advance:
                    break
                j += 1
            halves[half][k] = r
            start = end
        area[k] = a * 0.5 * math.pi
        mean[k] = d_integral * 0.5 / ds
    arrays = [np.asarray(area), np.asarray(mean), *map(np.asarray, halves)]
    for a in arrays:  # shared through the cache
        a.setflags(write=False)
    area_, mean_, left, right = arrays
    return PointsGeometry(arc, arc_list[-1], area_, mean_, left, right)


def connecting_halves(points: tuple, n: int) -> np.ndarray:
    """The half-compartment values `Σ Δs/(d1·d2)` (µm⁻¹) of a section of points
    that can carry axial current: all but a half ending at a zero-diameter end
    point, whose value is NEURON's guard (or its rounding, even negative) and
    through which nothing may attach (`Cell` checks)."""
    geo = points_geometry(points, n)
    left, right = geo.r_left, geo.r_right
    if points[0][3] == 0.0:
        left = left[1:]
    if points[-1][3] == 0.0:
        right = right[:-1]
    return np.concatenate([left, right])


def length_and_diameter(points) -> tuple[float, float]:
    """A section's length (its arc length, µm; NEURON's `L`) and diameter (the
    mean diameter over its arc length, µm: the mean of NEURON's `seg.diam`)."""
    arc, diam = _arc_and_diameters(points)
    length = float(arc[-1])
    if not length > 0:
        return length, float(diam.mean())
    integral = float(np.sum((diam[1:] + diam[:-1]) * np.diff(arc))) / 2
    return length, integral / length


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


def resistance_range_per_ra(points: tuple, n: int) -> list[float]:
    """The smallest and largest half-compartment axial resistance per unit `Ra`
    (Ω per Ω·cm) through which current can flow."""
    r = connecting_halves(points, n) * R_SCALE
    return [float(r.min()), float(r.max())]


def pinched_attachment(cell):
    """`(i, problem)` for the first section of `cell` attached at an end of zero
    diameter (NEURON would join it through its ~1e15 MΩ guard); else `None`."""
    for i, s in enumerate(cell.sections):
        if s.parent is None:
            continue
        p, x = cell.section(s.parent), s.parent_position
        for _ in cell.sections:  # a 0 end is the node its section hangs from
            if x != 0.0 or p.parent is None:
                break
            p, x = cell.section(p.parent), p.parent_position
        if p.points is not None and x in (0.0, 1.0):
            if p.points[0 if x == 0.0 else -1][3] == 0.0:
                return i, (
                    f"attaches to the {int(x)} end of {p.name!r}, whose diameter "
                    "there is 0 (an infinite axial resistance)"
                )
    return None


def n_compartments_d_lambda(
    section: "Section",
    cm: float,
    ra: float,
    d_lambda: float = 0.1,
    frequency: float = 100.0,
) -> int:
    """NEURON's `d_lambda` rule: the odd number of compartments for which each
    is at most `d_lambda` of the AC length constant at `frequency`,
    `int((L/(d_lambda·λ_f) + 0.9)/2)·2 + 1`.

    `λ_f` is NEURON's `lambda_f(frequency)` (stdlib.hoc), µm: for a cylinder
    `1e5·sqrt(d/(4π·f·Ra·cm))`; for a section of 3-D points it integrates over
    the frusta, `L / (Σ Δs/sqrt(d1 + d2) · sqrt(2)·1e-5·sqrt(4π·f·Ra·cm))`, so a
    tapering section is measured in units of its local length constant. (Where
    NEURON's `lambda_f` refuses a zero diameter at a point other than the last,
    this rule takes the formula's finite value.)

    **Arguments:**

    - `section`: a `Section`.
    - `cm`: µF/cm² (NEURON's `cm`). `ra`: Ω·cm (NEURON's `Ra`).
    - `d_lambda`: fraction of the length constant per compartment (default 0.1).
    - `frequency`: Hz (default 100).

    **Returns:** the compartment count, an odd integer ≥ 1.
    """
    if section.points is None:
        lam = 1e5 * math.sqrt(section.diameter / (4 * math.pi * frequency * ra * cm))
        return int((section.length / (d_lambda * lam) + 0.9) / 2) * 2 + 1
    arc, diam = _arc_and_diameters(section.points)
    units = 0.0
    for i in range(1, len(arc)):
        units += (arc[i] - arc[i - 1]) / math.sqrt(diam[i - 1] + diam[i])
    units *= math.sqrt(2) * 1e-5 * math.sqrt(4 * math.pi * frequency * ra * cm)
    length = float(arc[-1])
    lam = length / units
    return int((length / (d_lambda * lam) + 0.9) / 2) * 2 + 1


# Per-compartment values used by the discretisation. A cylinder keeps the
# arithmetic it always had (one value per section); a section of points takes
# them from `points_geometry`.


def cylinder_area(sec: "Section") -> float:
    """Lateral area of one compartment of a cylinder section, cm²."""
    return math.pi * sec.diameter * (sec.length / sec.n_compartments) * 1e-8


def cylinder_half_resistance(sec: "Section", ra: float) -> float:
    """Axial resistance of half a compartment of a cylinder section, Ω:
    `Ra·(L/2n) / (π·(d/2)²)` with µm converted to cm."""
    return (
        ra
        * (sec.length / (2 * sec.n_compartments))
        * 1e-4
        / (math.pi * (sec.diameter / 2) ** 2 * 1e-8)
    )


def compartment_areas(sec: "Section") -> np.ndarray:
    """Membrane area of each compartment of `sec`, cm² (NEURON's `seg.area()`
    is µm²)."""
    if sec.points is None:
        return np.full(sec.n_compartments, cylinder_area(sec))
    return points_geometry(sec.points, sec.n_compartments).area * 1e-8


def compartment_diameters(sec: "Section") -> np.ndarray | float:
    """Diameter of each compartment of `sec`, µm (NEURON's `seg.diam`): the
    section's `diameter` for a cylinder, the mean over each compartment's arc
    length for a section of points."""
    if sec.points is None:
        return sec.diameter
    return points_geometry(sec.points, sec.n_compartments).diam


def half_resistances(sec: "Section", ra: float) -> tuple[np.ndarray, np.ndarray]:
    """Axial resistance of the left and the right half of each compartment of
    `sec` for `Ra = ra` (Ω·cm), Ω. NEURON's `sec(x).ri()` (MΩ) is `1e-6·(right
    half of the compartment before + left half)`, and `sec(1).ri()` the last
    right half."""
    n = sec.n_compartments
    if sec.points is None:
        r = np.full(n, cylinder_half_resistance(sec, ra))
        return r, r
    geo = points_geometry(sec.points, n)
    return ra * geo.r_left * R_SCALE, ra * geo.r_right * R_SCALE


def section_conductances(sec: "Section", ra: float):
    """Axial conductances of `sec` for `Ra = ra` (Ω·cm), S.

    **Returns:** `(inner, first, last)`: `inner[k]` between compartments `k` and
    `k+1` (a list of `n - 1`), `first` that of the left half of the first
    compartment (to the node the section hangs from), `last` that of the right
    half of the last one (to its 1-end node).
    """
    n = sec.n_compartments
    if sec.points is None:
        g_half = 1.0 / cylinder_half_resistance(sec, ra)
        return [g_half / 2] * (n - 1), g_half, g_half
    left, right = half_resistances(sec, ra)
    inner = (1.0 / (right[:-1] + left[1:])).tolist()
    return inner, 1.0 / float(left[0]), 1.0 / float(right[-1])
