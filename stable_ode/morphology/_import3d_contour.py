"""A Neurolucida soma contour turned into 3-D points, as `Import3d_GUI` does it.

`contour2centroid` and `contourstack2centroid` follow the hoc procedures of the same
names (`import3d/import3d_gui.hoc`), `contourcenter`, `approximate_contour_by_circle`
and `stk_center` those of `Import3d_Section` (`import3d_sec.hoc`), with NEURON's
`Vector` semantics: sums from left to right, `Vector.interpolate`'s clamping at the
ends, `Vector.indgen(start, stop, step)`'s count.
"""

import math

import numpy as np

from ._import3d import MorphologyError


def _sum(a) -> float:
    """Left-to-right sum (`Vector.sum`, `Vector.mean`'s numerator)."""
    s = 0.0
    for v in np.asarray(a, dtype=np.float64).ravel():
        s += float(v)
    return s


def _mag(v) -> float:
    s = 0.0
    for c in v:
        s += float(c) * float(c)
    return math.sqrt(s)


def _interpolate(xd, xs, ys) -> np.ndarray:
    """`yd.interpolate(xd, xs, ys)`: linear, constant beyond the ends of `xs`."""
    nd, ns = len(xd), len(xs)
    yd = np.zeros(nd)
    i = 0
    while i < nd and xd[i] <= xs[0]:
        yd[i] = ys[0]
        i += 1
    js = 1
    while js < ns and i < nd:
        if not xs[js] <= xs[js - 1]:
            while xd[i] <= xs[js]:
                thet = (xd[i] - xs[js - 1]) / (xs[js] - xs[js - 1])
                yd[i] = (1.0 - thet) * ys[js - 1] + thet * ys[js]
                i += 1
                if i >= nd:
                    break
        js += 1
    while i < nd:
        yd[i] = ys[ns - 1]
        i += 1
    return yd


def contourcenter(xyz: np.ndarray):
    """`Import3d_Section.contourcenter`: the contour resampled at 101 equally spaced
    positions of its x-y arc length (from its first point to its last, the closing
    edge left out), and the mean of those samples.

    **Returns:** `(center (3,), resampled (101, 3))`.
    """
    xyz = np.asarray(xyz, dtype=np.float64)
    n = len(xyz)
    # the arc length is measured in the x-y plane (hoc leaves the z row at 0)
    closed = np.vstack([xyz, xyz[:1]])
    steps = closed[1:] - closed[:-1]  # n edges, the last one closing
    steps[:, 2] = 0.0
    perim = np.zeros(n)
    for i in range(1, n):
        perim[i] = perim[i - 1] + _mag(steps[i - 1])
    step = perim[n - 1] / 100
    d = np.array([float(i) * step + 0.0 for i in range(101)])
    out = np.column_stack([_interpolate(d, perim, xyz[:, k]) for k in range(3)])
    center = np.array([_sum(out[:, k]) / len(out) for k in range(3)])
    return center, out


def _remove_nonincreasing(d: list, rad: list) -> None:
    j = len(d) - 1
    while j > 0:
        if d[j] <= d[j - 1]:
            del d[j]
            del rad[j]
            if j != len(d):
                j += 1
        j -= 1


def contour2centroid(xyz: np.ndarray):
    """`Import3d_GUI.contour2centroid`: a closed contour (µm) as a line of points
    along its major axis with diameters of the contour's width there.

    The contour is resampled (`contourcenter`); the major axis is the principal
    axis of largest variance (pointing so that its largest component is
    positive), the width is measured along the middle axis projected on the xy
    plane; the two sides of the contour are interpolated at 21 equally spaced
    positions between the second smallest and second largest projections; the
    two end diameters are averaged with their neighbours.

    **Returns:** `(xyz (k, 3), diam (k,))`.
    """
    mean, pts = contourcenter(xyz)
    pts = pts - mean
    m = np.zeros((3, 3))
    for i in range(3):
        for j in range(i, 3):
            m[i, j] = m[j, i] = _sum(pts[:, i] * pts[:, j])
    evals, evecs = np.linalg.eigh(m)
    imax, imin = int(np.argmax(evals)), int(np.argmin(evals))
    major = evecs[:, imax].copy()
    if major[int(np.argmax(np.abs(major)))] < 0:
        major = -major
    mid = 3 - imin - imax
    if not 0 <= mid <= 2:
        raise ValueError(
            "Import3d cannot compute the soma centroid: the contour has no "
            "extent in the x-y plane"
        )
    minor = evecs[:, mid].copy()
    minor[2] = 0.0
    if _mag(minor) / (_mag(major) + 1e-100) < 1e-6:
        raise ValueError(
            "Import3d cannot compute the soma centroid from this contour (its "
            "width axis is along z)"
        )
    minor = minor / _mag(minor)
    d = [_sum(p * major) for p in pts]
    rad = [_sum(p * minor) for p in pts]
    imax = int(np.argmax(d))
    d = d[imax:] + d[:imax]
    rad = rad[imax:] + rad[:imax]
    imin = int(np.argmin(d))
    side2, rad2 = d[imin:], rad[imin:]
    d, rad = d[:imin][::-1], rad[:imin][::-1]
    _remove_nonincreasing(d, rad)
    _remove_nonincreasing(side2, rad2)
    both = sorted(d + side2)
    lo, hi = both[1], both[-2]
    if not hi > lo:
        raise ValueError("the soma contour is degenerate (no extent along its axis)")
    step = (hi - lo) / 20
    count = int(math.floor((hi - lo) / step + 1e-9) + 1)
    t = np.array([float(i) * step + lo for i in range(count)])
    r1 = _interpolate(t, d, rad)
    r2 = _interpolate(t, side2, rad2)
    diam = np.abs(r1 - r2)
    points = np.array([[major[k] * ti + mean[k] for k in range(3)] for ti in t])
    diam[0] = (diam[0] + diam[1]) / 2
    diam[-1] = (diam[-1] + diam[-2]) / 2
    return points, diam


def approximate_contour_by_circle(xyz: np.ndarray):
    """`Import3d_Section.approximate_contour_by_circle`: the contour's centre and a
    diameter, the mean distance of the resampled contour from the centre plus
    the closed perimeter / 2π (µm)."""
    xyz = np.asarray(xyz, dtype=np.float64)
    n = len(xyz)
    perim = 0.0
    for i in range(n):
        perim += _mag(xyz[i] - xyz[(i + 1) % n])
    center, pts = contourcenter(xyz)
    sq = (pts[:, 0] - center[0]) * (pts[:, 0] - center[0])
    sq = sq + (pts[:, 1] - center[1]) * (pts[:, 1] - center[1])
    sq = sq + (pts[:, 2] - center[2]) * (pts[:, 2] - center[2])
    diam = _sum(np.sqrt(sq)) / len(sq) + perim / (2 * math.pi)
    return center, diam


def contourstack2centroid(sec):
    """`Import3d_GUI.contourstack2centroid`: one point per contour of a soma stack,
    at the contour's centre with `approximate_contour_by_circle`'s diameter."""
    contours = [sec] + list(sec.contour_list)
    points, diams = [], []
    for c in contours:
        center, diam = approximate_contour_by_circle(np.asarray(c.xyz))
        points.append(center)
        diams.append(diam)
    return np.asarray(points), np.asarray(diams)


def stk_center(sec) -> np.ndarray:
    """`Import3d_Section.stk_center`: the point half-way along the line through the
    centres of a soma stack's contours."""
    centers = [contourcenter(np.asarray(sec.xyz))[0]]
    lengths = [0.0]
    total = 0.0
    for c in sec.contour_list:
        centers.append(contourcenter(np.asarray(c.xyz))[0])
        total += _mag(centers[-1] - centers[-2])
        lengths.append(total)
    half = total / 2
    if half == 0:
        return centers[0]
    i = next(k for k, v in enumerate(lengths) if v > half)
    th = (half - lengths[i - 1]) / (lengths[i] - lengths[i - 1])
    return np.array(
        [th * centers[i][k] + (1 - th) * centers[i - 1][k] for k in range(3)]
    )


def _bbox(sec):
    a = np.asarray(sec.xyz)
    return np.concatenate([a.min(axis=0), a.max(axis=0)])


def connect2soma(file, sections: list) -> list:
    """`Import3d_Neurolucida3.connect2soma`: soma contours first, overlapping ones
    (x-y boxes, consecutive in the file) stacked, every tree joined by a logical
    connection to the centre of the first soma whose box (±0.5 µm; a stack's
    without margin) holds its first point, else of the nearest soma."""
    somas = [s for s in sections if s.iscontour]
    others = [s for s in sections if not s.iscontour]
    sections = somas + others
    if not somas:
        raise MorphologyError(
            file,
            None,
            'no soma contour ("CellBody", "Cell Body" or "Soma" with more than two '
            "points): Import3d would make disconnected trees",
        )
    # soma_contour_stack: consecutive soma contours whose x-y boxes overlap
    first = somas[0]
    bb1 = _bbox(first)
    kept = [first]
    for nxt in somas[1:]:
        bb2 = _bbox(nxt)
        overlap = not any(bb1[i] > bb2[3 + i] or bb2[i] > bb1[3 + i] for i in (0, 1))
        if overlap:
            first.contour_list.append(nxt)
            nxt.is_subsidiary = True
        else:
            first = nxt
            kept.append(nxt)
        bb1 = bb2
    somas = kept
    roots = [s for s in sections if not s.iscontour and s.parent is None]
    centers = []
    for soma in somas:  # connect2soma_2
        if soma.contour_list:
            center = stk_center(soma)
            boxes = np.array([_bbox(c) for c in [soma] + soma.contour_list])
            xmin, ymin = boxes[:, 0].min(), boxes[:, 1].min()
            xmax, ymax = boxes[:, 3].max(), boxes[:, 4].max()
        else:
            a = np.asarray(soma.xyz)
            xmin, xmax = a[:, 0].min() - 0.5, a[:, 0].max() + 0.5
            ymin, ymax = a[:, 1].min() - 0.5, a[:, 1].max() + 0.5
            center = contourcenter(a)[0]
        centers.append(center)
        for i in range(len(roots) - 1, -1, -1):
            sec = roots[i]
            x, y = sec.xyz[0][0], sec.xyz[0][1]
            if xmin <= x <= xmax and ymin <= y <= ymax:
                _join(sec, soma, center)
                del roots[i]
    for sec in roots:  # outside every soma box: the nearest soma centre
        dist = [np.sqrt(np.sum((np.asarray(sec.xyz[0]) - c) ** 2)) for c in centers]
        k = int(np.argmin(dist))
        _join(sec, somas[k], centers[k])
    return sections


def _join(sec, soma, center):
    sec.parent = soma
    sec.parentx = 0.5
    sec.xyz.insert(0, [float(c) for c in center])
    sec.d.insert(0, 0.01)
    sec.ids.insert(0, -1)
    sec.first = 1
