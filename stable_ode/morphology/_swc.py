"""Reading and writing SWC morphologies.

SWC (Cannon et al. 1998; the NeuroMorpho.Org standard): one point per line,
`id type x y z radius parent`, lengths in µm, `#` starts a comment, `parent = -1`
marks the root. Types: 1 soma, 2 axon, 3 (basal) dendrite, 4 apical dendrite,
others custom.
"""

import math
import os
from collections import deque
from collections.abc import Sequence

import numpy as np

from ._cell import Cell, Insert, Section
from ._cylinder import cylinder
from ._geometry import n_compartments_d_lambda
from ._swc_points import _NAME_TYPES, _parse, _Point, run_from, section_namer


def load_swc(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    soma: str = "single",
    n_compartments: int | None = None,
    d_lambda: float | None = 0.1,
    frequency: float = 100.0,
    axial_resistivity: float = 35.4,
    capacitance: float = 1.0,
    mechanisms: Sequence[Insert] = (),
    geometry: str = "cylinders",
) -> Cell:
    """Read a standard SWC file into a `Cell`.

    With `geometry="import3d"` the sections are NEURON's `Import3d` sections
    with their 3-D points (exactly `load_morphology`'s cell: its soma rules,
    attachment points and per-compartment areas and resistances) under the
    names described below; that is what a model file's `"swc"` cell is. The
    default, `"cylinders"`, is described here:

    **Sections.** Each unbranched run of points of one type becomes a section named
    `{type}_{k}` (`soma`, `axon`, `dend`, `apic`, or `type{t}` for custom types;
    `k` counts sections of that type in file order). A run ends at a branch point,
    at a change of type, or at a tip. A section's length is the sum of its segment
    lengths, starting from its parent point (the branch point, as NEURON's Import3D
    duplicates it into the child); its diameter is the length-weighted mean of its
    segments' diameters (each the mean of its two end diameters, the connecting
    segment taking the child's first diameter), which preserves the lateral
    membrane area of the frusta up to their slant. Children attach at their
    parent's 1 end.

    **Soma.** The soma (type 1) must contain the root point.
    `soma="single"`: all soma points form one one-compartment section `soma`, a
    cylinder of the same lateral area: length = the soma points' total path length
    and diameter = area / (π·length); a one-point soma of radius r is NEURON's
    cylinder with length = diameter = 2r. Neurites attach at `soma(0.5)` (straight
    to the soma compartment) and start at their own first point (the path from the
    soma point is inside the soma), unless they have only one point.
    `soma="points"`: soma runs become sections like the neurites (`soma_0`,
    `soma_1`, ...), runs leaving the root point attach at the root section's 0 end;
    a one-point soma is treated as for `"single"`.

    **Compartments.** `n_compartments` for every section but a single soma, if
    given; otherwise NEURON's `d_lambda` rule at `frequency`:
    `nseg = int((L/(d_lambda·λ_f) + 0.9)/2)·2 + 1` with
    `λ_f = 1e5·sqrt(d/(4π·f·Ra·cm))` µm (for the section's cylinder).

    **Arguments:**

    - `path`: the SWC file.
    - `name`: the cell's name (default: the file's stem).
    - `soma`: `"single"` or `"points"`.
    - `n_compartments`: compartments per section, or `None` for the d_lambda rule.
    - `d_lambda`: fraction of the AC length constant per compartment (default 0.1).
    - `frequency`: Hz, for the d_lambda rule (default 100).
    - `axial_resistivity`: Ω·cm. `capacitance`: µF/cm².
    - `mechanisms`: `Insert`s, by the section names above.
    - `geometry`: `"cylinders"` (default, one cylinder per section, as above) or
      `"import3d"` (NEURON's sections and 3-D geometry, these names).

    **Returns:** a `Cell`.

    **Raises:** `ValueError` naming the file and line for malformed files: wrong
    columns, non-positive radius, duplicate id, unknown parent, cycles, more than
    one root, no soma, a root that is not a soma point, zero-length sections.
    """
    if soma not in ("single", "points"):
        raise ValueError(f'soma must be "single" or "points", got {soma!r}')
    if geometry not in ("cylinders", "import3d"):
        raise ValueError(
            f'geometry must be "cylinders" or "import3d", got {geometry!r}'
        )
    if geometry == "import3d":
        from ._swc_names import load_swc_geometry

        load_swc(path, soma=soma, n_compartments=1)  # its checks and messages
        return load_swc_geometry(
            path,
            soma=soma,
            name=name,
            n_compartments=n_compartments,
            d_lambda=d_lambda,
            frequency=frequency,
            axial_resistivity=axial_resistivity,
            capacitance=capacitance,
            mechanisms=mechanisms,
        )
    if n_compartments is None and d_lambda is None:
        raise ValueError("give n_compartments or d_lambda")
    if n_compartments is None and not (d_lambda > 0 and frequency > 0):
        raise ValueError(
            f"d_lambda and frequency must be > 0, got {d_lambda} and {frequency}"
        )
    file = os.fspath(path)
    points = _parse(path)
    by_id = {p.id: p for p in points}
    children: dict[int, list[_Point]] = {p.id: [] for p in points}
    roots = []
    for p in points:
        if p.parent == -1:
            roots.append(p)
        elif p.parent not in by_id:
            raise ValueError(
                f"{file}, line {p.line}: point {p.id} has parent {p.parent}, which is "
                "not a point of this file"
            )
        else:
            children[p.parent].append(p)
    # Cycles: points whose parent chain never reaches a root.
    reached = set()
    stack = list(roots)
    while stack:
        p = stack.pop()
        reached.add(p.id)
        stack.extend(children[p.id])
    if len(reached) != len(points):
        first = min((p for p in points if p.id not in reached), key=lambda p: p.line)
        raise ValueError(
            f"{file}, line {first.line}: point {first.id} is on a cycle of parents "
            "(its parent chain never reaches a root)"
        )
    if not any(p.type == 1 for p in points):
        raise ValueError(f"{file}: no soma (no point of type 1)")
    if len(roots) != 1:
        lines = ", ".join(str(p.line) for p in roots)
        raise ValueError(
            f"{file}: {len(roots)} roots (parent -1) on lines {lines}; "
            "a cell has exactly one"
        )
    root = roots[0]
    if root.type != 1:
        raise ValueError(
            f"{file}, line {root.line}: the root point has type {root.type}, "
            "expected a soma point (type 1)"
        )
    soma_points = [p for p in points if p.type == 1]
    for p in soma_points:
        if p is not root and by_id[p.parent].type != 1:
            raise ValueError(
                f"{file}, line {p.line}: soma point {p.id} hangs from a non-soma "
                f"point {p.parent}; the soma must be connected"
            )
    single = soma == "single" or len(soma_points) == 1

    def nseg(length, diameter):
        if n_compartments is not None:
            return int(n_compartments)
        return n_compartments_d_lambda(
            cylinder("_", length, diameter),
            capacitance,
            axial_resistivity,
            d_lambda,
            frequency,
        )

    sections: list[Section] = []
    new_name = section_namer()

    if single:
        area = 0.0
        path_length = 0.0
        for p in soma_points:
            if p is not root:
                q = by_id[p.parent]
                seg = float(np.linalg.norm(p.xyz - q.xyz))
                slant = math.hypot(seg, p.radius - q.radius)
                area += math.pi * (p.radius + q.radius) * slant
                path_length += seg
        if path_length > 0:
            soma_l, soma_d = path_length, area / (math.pi * path_length)
        else:
            soma_l = soma_d = 2 * root.radius
        sections.append(Section("soma", soma_l, soma_d, 1))

    # Runs: start at each child of a run end whose run must begin there.
    if single:
        starts = [c for p in soma_points for c in children[p.id] if c.type != 1]
        queue = deque((c, "soma", 0.5, True) for c in starts)
    else:
        kids = children[root.id]
        if not kids:
            raise ValueError(f"{file}, line {root.line}: the soma has no other points")
        kids = sorted(kids, key=lambda c: c.type != 1)  # soma runs first
        queue = deque((c, None, 0.0, False) for c in kids)
    root_section = None
    while queue:
        first, parent, position, from_soma = queue.popleft()
        run = run_from(first, children)
        prev = by_id[first.parent]
        pts = [prev.xyz] + [p.xyz for p in run]
        radii = [first.radius] + [p.radius for p in run]
        seg = np.linalg.norm(np.diff(np.asarray(pts), axis=0), axis=1)
        seg_d = np.asarray(radii[:-1]) + np.asarray(radii[1:])
        if from_soma and len(run) > 1:
            seg, seg_d = seg[1:], seg_d[1:]
        length = float(seg.sum())
        if not length > 0:
            raise ValueError(
                f"{file}, line {first.line}: the section starting at point "
                f"{first.id} has zero length (its points coincide)"
            )
        diameter = float((seg * seg_d).sum() / length)
        name_ = new_name(first.type)
        if parent is None:  # "points" soma: runs from the root
            if root_section is None:
                root_section = name_
                parent_, position_ = None, 1.0
            else:
                parent_, position_ = root_section, 0.0
        else:
            parent_, position_ = parent, position
        n = nseg(length, diameter)
        sections.append(cylinder(name_, length, diameter, n, parent_, position_))
        end = run[-1]
        queue.extend((c, name_, 1.0, False) for c in children[end.id])
    return Cell(
        name if name is not None else os.path.splitext(os.path.basename(file))[0],
        sections,
        mechanisms,
        axial_resistivity=axial_resistivity,
        capacitance=capacitance,
    )


def save_swc(cell: Cell, path: str | os.PathLike) -> None:
    """Write `cell` as an SWC file that `load_swc` reads back to the same sections.

    Each section becomes a straight run along its own direction: the soma (section
    `soma`, one compartment) as NeuroMorpho's three-point soma (a cylinder of its
    length and diameter); sections attached at `soma(0.5)` as two points, others as
    one point at their length from the parent's end. Types come from the section
    names' prefixes (`soma`, `axon`, `dend`, `apic`, `type{t}`). Only the layouts
    `load_swc(soma="single")` produces can be written (children at their parent's
    1 end, or at `soma(0.5)`); compartment counts are not stored.

    **Arguments:**

    - `cell`: the cell.
    - `path`: the file to write.
    """
    root = [s for s in cell.sections if s.parent is None][0]
    if root.name != "soma":
        raise ValueError(
            f"save_swc writes cells whose root section is 'soma', got {root.name!r}"
        )

    def type_of(sec: Section) -> int:
        base = sec.name.rsplit("_", 1)[0]
        if base in _NAME_TYPES:
            return _NAME_TYPES[base]
        if base.startswith("type") and base[4:].isdigit():
            return int(base[4:])
        raise ValueError(
            f"save_swc: cannot tell the SWC type of section {sec.name!r} "
            "(expected a name like soma, axon_0, dend_3, apic_1, type7_0)"
        )

    def f(x):
        return repr(float(x))

    lines = [
        f"# {cell.name}: written by stable_ode.save_swc",
        "# id type x y z r parent",
    ]
    ids = iter(range(1, 10**9))
    r = root.diameter / 2
    c = next(ids)
    lines.append(f"{c} 1 0 0 0 {f(r)} -1")
    lines.append(f"{next(ids)} 1 0 {f(root.length / 2)} 0 {f(r)} {c}")
    lines.append(f"{next(ids)} 1 0 {f(-root.length / 2)} 0 {f(r)} {c}")
    end: dict[str, tuple[int, np.ndarray]] = {"soma": (c, np.zeros(3))}
    children: dict[str, list[Section]] = {s.name: [] for s in cell.sections}
    for s in cell.sections:
        if s.parent is not None:
            children[s.parent].append(s)
    queue = [root]
    k = 0
    while queue:
        parent = queue.pop(0)
        for s in children[parent.name]:
            k += 1
            angle = 2 * math.pi * k / 7.0
            direction = np.array([math.cos(angle), math.sin(angle), 0.1 * k])
            direction /= np.linalg.norm(direction)
            t = type_of(s)
            pid, start = end[parent.name]
            rad = s.diameter / 2
            if parent.name == "soma" and s.parent_position == 0.5:
                a = start + direction * root.diameter / 2
                first = next(ids)
                lines.append(
                    f"{first} {t} {f(a[0])} {f(a[1])} {f(a[2])} {f(rad)} {pid}"
                )
                pid, start = first, a
            elif s.parent_position != 1.0:
                raise ValueError(
                    f"save_swc: section {s.name!r} attaches at {parent.name}"
                    f"({s.parent_position}); only the 1 end (or soma(0.5)) is "
                    "representable"
                )
            b = start + direction * s.length
            last = next(ids)
            lines.append(f"{last} {t} {f(b[0])} {f(b[1])} {f(b[2])} {f(rad)} {pid}")
            end[s.name] = (last, b)
            queue.append(s)
    with open(path, "w") as out:
        out.write("\n".join(lines) + "\n")
