"""SWC files as NEURON's `Import3d_SWC_read` (`import3d/read_swc.hoc`) reads them.

Coordinates and radii are read as 32-bit floats, as hoc's `sscanf("%f")` reads
them. The steps follow the hoc procedures of the same names: `parse`, `check_pid`,
`mark_branch`, `neuromorph_3point_soma`, `sectionify`, `mksection`. Points are taken
in id order; sections are maximal runs of consecutive points (in id order) that
`mark_branch` and `sectionify` do not end.
"""

import math

import numpy as np

from ._import3d import _Sec, MorphologyError


def _parse(file: str):
    """The points `(id, type, x, y, z, diam, parent, line)`, coordinates and
    diameters as Import3d holds them (hoc's `sscanf("%f")` reads 32-bit floats)."""
    vals, lines = [], []
    try:
        f = open(file)
    except OSError as e:
        raise MorphologyError(file, None, f"cannot read the file ({e})") from None
    with f:
        for lineno, raw in enumerate(f, start=1):
            text = raw.split("#", 1)[0]
            cols = text.split()
            if not cols:
                continue
            try:
                if len(cols) != 7 or "_" in text:
                    raise ValueError
                vals.append([float(c) for c in cols])
            except ValueError:
                raise MorphologyError(
                    file,
                    lineno,
                    "expected 7 numbers `id type x y z radius parent`, got "
                    f"{raw.strip()!r}",
                ) from None
            lines.append(lineno)
    if not vals:
        raise MorphologyError(file, None, "no points")
    a = np.asarray(vals, dtype=np.float64)

    def first(bad, problem):
        if np.any(bad):
            k = int(np.argmax(bad))
            raise MorphologyError(file, lines[k], problem(k))

    first(~np.isfinite(a).all(axis=1), lambda k: f"non-finite number in {vals[k]}")
    ints = a[:, [0, 1, 6]]
    first(
        (ints != np.round(ints)).any(axis=1),
        lambda k: f"id, type and parent must be integers, got {vals[k]}",
    )
    first(a[:, 5] <= 0, lambda k: f"radius must be > 0 µm, got {vals[k][5]}")
    first(a[:, 0] < 0, lambda k: f"point id must be >= 0, got {int(vals[k][0])}")
    xyzr = a[:, 2:6].astype(np.float32).astype(np.float64)
    xyzr[:, 3] *= 2  # diameter
    ids = a[:, 0].astype(int).tolist()
    types = a[:, 1].astype(int).tolist()
    parents = a[:, 6].astype(int).tolist()
    return [
        (i, t, x, y, z, d, p, line)
        for i, t, (x, y, z, d), p, line in zip(
            ids, types, xyzr.tolist(), parents, lines
        )
    ]


def _check(file: str, rows):
    """`check_pid`, made strict: one tree, parents before children, unique ids."""
    seen: dict[int, int] = {}
    for row in rows:
        if row[0] in seen:
            raise MorphologyError(
                file,
                row[7],
                f"point id {row[0]} already defined on line {seen[row[0]]}",
            )
        seen[row[0]] = row[7]
    by_id = {row[0]: row for row in rows}
    roots = [row for row in rows if row[6] < 0]
    for row in rows:
        if row[6] >= 0 and row[6] not in by_id:
            raise MorphologyError(
                file,
                row[7],
                f"point {row[0]} has parent {row[6]}, which is not a point",
            )
    for row in rows:
        pid, parent, line = row[0], row[6], row[7]
        if parent >= pid:
            # a cycle, or a parent listed with a larger id (Import3d requires
            # parent id < id)
            chain, q = [pid], parent
            while q >= 0 and q not in chain:
                chain.append(q)
                q = by_id[q][6]
            if q >= 0:
                loop = chain[chain.index(q) :] + [q]
                raise MorphologyError(
                    file,
                    line,
                    "cycle of parents: " + " -> ".join(str(i) for i in loop),
                )
            raise MorphologyError(
                file,
                line,
                f"point {pid} has parent {parent}; Import3d requires every parent "
                "id to be smaller than its child's id",
            )
    if len(roots) != 1:
        lines = ", ".join(str(r[7]) for r in roots)
        raise MorphologyError(
            file,
            roots[1][7],
            f"{len(roots)} roots (negative parent) on lines {lines}: the points are "
            "not all connected to one root",
        )
    # Soma conventions (Import3d reads these files without complaint, into soma
    # sections that hang from neurites): the soma holds the root, in one piece.
    root = roots[0]
    soma = [row for row in rows if row[1] == 1]
    if soma and root[1] != 1:
        raise MorphologyError(
            file,
            root[7],
            f"the root point {root[0]} has type {root[1]}, but the file has soma "
            f"points (type 1, first on line {soma[0][7]}); the soma must hold the root",
        )
    for row in soma:
        if row[6] >= 0 and by_id[row[6]][1] != 1:
            raise MorphologyError(
                file,
                row[7],
                f"soma point {row[0]} hangs from point {row[6]} of type "
                f"{by_id[row[6]][1]}; the soma points must be connected to each "
                "other",
            )


def _three_point_soma(rows, pix, nchild) -> bool:
    """NeuroMorpho.Org's three-point soma (`neuromorph_3point_soma`): a sphere."""
    if len(rows) < 3 or not (pix[1] == 0 and pix[2] == 0):
        return False
    if not (nchild[1] == 0 and nchild[2] == 0):
        return False
    d = [row[5] for row in rows[:3]]
    if not (d[1] == d[0] and d[2] == d[0]):
        return False
    length = 0.0
    for i in (1, 2):
        length += math.sqrt(
            (rows[i][2] - rows[0][2]) ** 2
            + (rows[i][3] - rows[0][3]) ** 2
            + (rows[i][4] - rows[0][4]) ** 2
        )
    return abs(length / d[0] - 1) < 0.01


def read_swc_sections(file: str):
    """Import3d's section list for an SWC file."""
    rows = _parse(file)
    _check(file, rows)
    # check_pid sorts by id when the ids are not increasing in file order (NEURON
    # 9.0.2's sort itself fails; this is what it means to do).
    rows.sort(key=lambda r: r[0])
    n = len(rows)
    index = {row[0]: i for i, row in enumerate(rows)}
    pix = [index[row[6]] if row[6] >= 0 else -1 for row in rows]
    typ = [row[1] for row in rows]

    # mark_branch: nchild[p] counts children (+.01 if not the next point, +.01 if
    # of another type); sections end where nchild != 1.
    connect2prox = [False] * n
    nchild = [0.0] * n
    for i in range(n):
        p = pix[i]
        if p < 0:
            continue
        nchild[p] += 1
        if p != i - 1:
            nchild[p] += 0.01
            if p > 1:
                if typ[p] != 1 and typ[pix[p]] == 1:
                    connect2prox[i] = True
                    nchild[p] = 1
            elif p == 0 and typ[p] != 1:
                connect2prox[i] = True
                nchild[p] = 1
        if typ[p] != typ[i]:
            nchild[p] += 0.01

    # sectionify
    nchild_soma = [0] * n
    nsoma = 1 if typ[0] == 1 else 0
    for i in range(1, n):
        if typ[i] == 1:
            nsoma += 1
            if pix[i] >= 0 and typ[pix[i]] == 1:
                nchild_soma[pix[i]] += 1
    soma3geom = nsoma == 3 and _three_point_soma(rows, pix, nchild)
    if soma3geom:
        pix[2] = 1  # pid.x[2] = id.x[1]: one section, then only point 0 is kept
    for i in range(n - 1):
        if typ[i] == 1 and typ[i + 1] == 1 and pix[i + 1] == i:
            if not (i != 0 and nchild_soma[i] > 1):
                nchild[i] = 1
    ends = [i for i in range(n) if nchild[i] != 1]  # last point of each section
    starts = [0] + [e + 1 for e in ends[:-1]]

    sections: list[_Sec] = []
    point2sec = [0] * n
    for k, (a, b) in enumerate(zip(starts, ends)):
        for i in range(a, b + 1):
            point2sec[i] = k

    def pt(i):
        return [rows[i][2], rows[i][3], rows[i][4]]

    for k, (first, last) in enumerate(zip(starts, ends)):
        end = last + 1  # hoc's `i`: first point of the next section
        if k == 0:
            stop = 1 if soma3geom else end
            sec = _Sec(
                xyz=[pt(j) for j in range(first, stop)],
                d=[rows[j][5] for j in range(first, stop)],
                ids=[rows[j][0] for j in range(first, stop)],
                line=rows[first][7],
                index=first,
            )
        else:
            p = pix[first]
            psec = sections[point2sec[p]]
            sec = _Sec(
                xyz=[pt(p)] + [pt(j) for j in range(first, end)],
                d=[rows[p][5]] + [rows[j][5] for j in range(first, end)],
                ids=[-1] + [rows[j][0] for j in range(first, end)],
                parent=psec,
                line=rows[first][7],
                index=first,
            )
            den_con_soma = psec.type == 1 and typ[first] != 1
            con_soma = psec.type == 1
            handled = False
            if psec is sections[0]:
                handled = True
                if den_con_soma and len(psec.d) == 1:  # one-point soma
                    sec.parentx = 0.5
                    if end - first > 1:
                        sec.first = 1
                elif p == psec.index:  # first point of the root
                    sec.parentx = 0.0
                    if typ[first] != 1 and nchild_soma[p] > 1:
                        sec.first = 1
                else:
                    handled = False
            if not handled and con_soma:
                offset = -1 if psec.index == 0 else -2
                if p < psec.index + len(psec.d) + offset:  # soma interior
                    sec.parentx = 0.5
                    if den_con_soma and end - first > 1:
                        sec.first = 1
                elif end - first > 1 and nchild_soma[p] > 1:
                    if typ[first] != 1:
                        sec.first = 1
        sec.type = typ[first]
        sections.append(sec)
        if sec.parent is not None and sec.parent.type == 1 and sec.type != 1:
            sec.d[0] = sec.d[1]
        if connect2prox[first]:
            sec.parentx = 0.0
    if soma3geom:  # the two outer points belong to the sphere
        sections[0].absorbed = [(rows[1][0], 0.5), (rows[2][0], 0.5)]
    return sections
