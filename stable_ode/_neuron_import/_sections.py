"""Reading NEURON's sections into model-file cells: names, trees, geometry (3-D
points where a section has them, else `L`/`diam`), `nseg`, `cm`, `Ra`.

Every function takes NEURON's `h` and appends what it cannot convert to a list of
problems (strings) instead of raising, so that one run reports all of them.
"""

import re
from collections import Counter
from dataclasses import dataclass, field


_NAME = re.compile(r"[A-Za-z0-9_.\-\[\]]+\Z")


@dataclass
class CellTree:
    """One NEURON tree: its model-file `name`, its sections in NEURON's
    `allsec()` order (parents first is not required by the format) and each
    section's model-file name."""

    name: str
    sections: list = field(default_factory=list)
    names: dict = field(default_factory=dict)  # NEURON section -> model-file name


def _root(h, sec):
    ref = h.SectionRef(sec=sec)
    return ref.root


def cell_trees(h, sections, problems: list) -> list[CellTree]:
    """Group `sections` (NEURON sections) into trees and name them.

    A tree whose sections all carry a template prefix (`Pyr[0].soma`) is the
    cell `Pyr[0]` with the prefix dropped from its section names; other trees
    are `cell` (one tree) or `cell_0`, `cell_1`, ... .
    """
    trees: dict = {}
    for sec in sections:
        trees.setdefault(_root(h, sec), []).append(sec)
    out = []
    many = len(trees) > 1
    used: set = set()
    for k, secs in enumerate(trees.values()):
        full = [s.name() for s in secs]
        prefixes = {n.rsplit(".", 1)[0] if "." in n else None for n in full}
        if len(prefixes) == 1 and None not in prefixes:
            name = prefixes.pop()
            local = [n.rsplit(".", 1)[1] for n in full]
        else:
            name = f"cell_{k}" if many else "cell"
            local = full
        if name in used or not _NAME.match(name):
            name = f"cell_{k}"
        used.add(name)
        tree = CellTree(name)
        seen: set = set()
        for sec, n in zip(secs, local):
            if not _NAME.match(n):
                problems.append(
                    f"section {sec.name()!r}: a name the model file cannot hold (only "
                    f"letters, digits and _ . - [ ])"
                )
            if n in seen:
                problems.append(
                    f"section {sec.name()!r}: two sections of cell {name!r} share "
                    f"this name"
                )
            seen.add(n)
            tree.sections.append(sec)
            tree.names[sec] = n
        out.append(tree)
    return out


def _points(h, sec) -> list[list[float]] | None:
    n = int(h.n3d(sec=sec))
    if n == 0:
        return None
    return [
        [
            float(h.x3d(i, sec=sec)),
            float(h.y3d(i, sec=sec)),
            float(h.z3d(i, sec=sec)),
            float(h.diam3d(i, sec=sec)),
        ]
        for i in range(n)
    ]


def section_entry(h, sec, tree: CellTree, problems: list) -> dict:
    """The model-file entry of one section: `points` (NEURON's `x3d`, `y3d`,
    `z3d`, `diam3d`, µm) where it has 3-D points, else `length` and `diameter`;
    `n_compartments` (`nseg`); `parent` and `parent_position` (where
    `parentseg()` says its 0 end attaches)."""
    label = sec.name()
    entry: dict = {"name": tree.names[sec]}
    points = _points(h, sec)
    if points is not None:
        if len(points) < 2:
            problems.append(f"section {label!r}: one 3-D point (NEURON needs two)")
        entry["points"] = points
    else:
        diams = {float(seg.diam) for seg in sec}
        if len(diams) > 1:
            problems.append(
                f"section {label!r}: diam varies along the section without 3-D "
                f"points ({min(diams):g} to {max(diams):g} µm); give it pt3d points"
            )
        entry["length"] = float(sec.L)
        entry["diameter"] = float(sec(0.5).diam)
    entry["n_compartments"] = int(sec.nseg)
    ref = h.SectionRef(sec=sec)
    if ref.has_parent():
        parent_seg = sec.parentseg()
        if float(h.section_orientation(sec=sec)) != 0.0:
            problems.append(
                f"section {label!r}: attached by its 1 end (connect(..., 1)); only "
                f"sections attached by their 0 end are supported"
            )
        entry["parent"] = tree.names.get(parent_seg.sec, parent_seg.sec.name())
        entry["parent_position"] = float(parent_seg.x)
    return entry


def _common(values):
    return Counter(values).most_common(1)[0][0]


def cell_properties(h, tree: CellTree, problems: list) -> dict:
    """`axial_resistivity`, `capacitance` (the most common values) and
    `properties` entries (one per other value; sections whose `seg.cm` varies
    along them in one entry of `{"values": [...]}`, one per segment in order).
    NEURON's `Ra` is one value per section."""
    del h, problems
    ra, cm = {}, {}
    for sec in tree.sections:
        ra[sec] = float(sec.Ra)
        cm[sec] = [float(seg.cm) for seg in sec]
    uniform = [c[0] for c in cm.values() if len(set(c)) == 1]
    ra0 = _common(ra.values())
    cm0 = _common(uniform) if uniform else next(iter(cm.values()))[0]
    groups: dict = {}
    varying: list = []
    for sec in tree.sections:
        if len(set(cm[sec])) > 1:
            varying.append(sec)
        key = (
            cm[sec][0] if len(set(cm[sec])) == 1 and cm[sec][0] != cm0 else None,
            ra[sec] if ra[sec] != ra0 else None,
        )
        if key != (None, None):
            groups.setdefault(key, []).append(tree.names[sec])
    properties = []
    for (c, r), names in groups.items():
        p: dict = {"sections": names}
        if c is not None:
            p["capacitance"] = c
        if r is not None:
            p["axial_resistivity"] = r
        properties.append(p)
    if varying:
        properties.append(
            {
                "sections": [tree.names[s] for s in varying],
                "capacitance": {"values": [c for s in varying for c in cm[s]]},
            }
        )
    out: dict = {"axial_resistivity": ra0, "capacitance": cm0}
    if properties:
        out["properties"] = properties
    return out
