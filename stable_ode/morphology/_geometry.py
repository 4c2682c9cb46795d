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


def resistance_range_per_ra(points: tuple, n: int) -> list[float]:
    """The smallest and largest half-compartment axial resistance per unit `Ra`
    (Ω per Ω·cm) through which current can flow."""
    r = connecting_halves(points, n) * R_SCALE
    return [float(r.min()), float(r.max())]


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
