"""Morphology files read as NEURON's `Import3d` reads them.

`read_morphology` turns an SWC or Neurolucida `.asc` file into the sections, 3-D points
and connections that `Import3d_GUI.instantiate` creates in NEURON (NEURON 9's
`share/nrn/lib/hoc/import3d/`): its soma conventions, the segment joining the soma to
each neurite, where each child attaches, how runs of points become sections and how
they are named. The rules are listed in `docs/morphology-files.md`; the SWC ones live
in `_import3d_swc.py`, the Neurolucida ones in `_import3d_asc.py` (tokens in
`_import3d_asc_lex.py`, the soma contour in `_import3d_contour.py`), and the steps
common to both (`Import3d_GUI.instantiate`: dropping degenerate sections, the soma
contour's centroid, the one-point sphere, names) here, with `point_sites` (where
each file point lies) and `define_shape` (where NEURON draws the sections).
"""

import os
from dataclasses import dataclass, field

import numpy as np


class MorphologyError(ValueError):
    """A morphology file that `Import3d`'s rules cannot turn into a cell.

    The message starts with the file and, where one line is at fault, its line
    number (`"cell.swc, line 12: ..."`); both are also attributes.
    """

    def __init__(self, file: str, line: int | None, problem: str):
        self.file = file
        self.line = line
        self.problem = problem
        where = file if line is None else f"{file}, line {line}"
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):
        return type(self), (self.file, self.line, self.problem)


@dataclass(frozen=True, eq=False)  # eq=False: `points` is an array
class MorphologySection:
    """One section as `Import3d` instantiates it in NEURON.

    **Fields:**

    - `name`: NEURON's name after `instantiate`: `soma[0]`, `axon[0]`, `dend[3]`,
      `apic[12]`; other SWC types `dend_5[0]`, negative ones `minus_1[0]`.
    - `points`: `(k, 4)` float64 array of `x, y, z, diam` (µm), the `pt3dadd`
      points in order, as Import3d computes them. `instantiate(None)` (or into a
      hoc object) passes each value printed with `%.8g` and NEURON stores it as a
      32-bit float: `neuron_points`; `instantiate` into a Python object passes
      the doubles: `points.astype(np.float32)`.
    - `parent`: the parent section's name, `None` for the root.
    - `parent_position`: where the child's 0 end attaches on the parent (NEURON's
      `connect parent(x)`, `child.parentseg().x`), in `[0, 1]`; 0.0 for the root.
    - `swc_type`: 1 soma, 2 axon, 3 basal dendrite, 4 apical dendrite, others as in
      the file (Neurolucida trees: 2 `Axon`, 3 `Dendrite`, 4 `Apical`, else 0).
    - `point_ids`: for each row of `points`, the file's point: the SWC id, or for
      `.asc` files the index, from 0 in file order, among the soma-contour and tree
      points (not markers, spines or other contours); -1 for points Import3d makes
      (the copy of the parent point a child starts with, the ends of a one-point
      soma's cylinder, a contour soma's centroid points).
    - `logical_connection`: the `pt3dstyle(1, x, y, z)` point (µm) for children that
      Import3d joins to their parent by a "wire" drawn from this parent point to
      the child's first point (no membrane), else `None`.
    - `other_points`: `(point id, x)` for file points that are in no `pt3d` row but
      belong here at arc position `x`: a contour soma's outline and the outer
      points of NeuroMorpho's three-point soma (at 0.5), and the points of child
      sections Import3d drops for having one point or zero length (where they
      attached).
    """

    name: str
    points: np.ndarray
    parent: str | None
    parent_position: float
    swc_type: int
    point_ids: tuple[int, ...]
    logical_connection: tuple[float, float, float] | None = None
    other_points: tuple[tuple[int, float], ...] = ()

    @property
    def neuron_points(self) -> np.ndarray:
        """`points` as NEURON stores them: each value through `%.8g`, then float32."""
        return _as_neuron(self.points)


def _as_neuron(points: np.ndarray) -> np.ndarray:
    flat = [float(f"{v:.8g}") for v in np.asarray(points, dtype=np.float64).ravel()]
    return np.asarray(flat, dtype=np.float32).reshape(np.shape(points))


@dataclass(eq=False)
class _Sec:
    """Import3d's `Import3d_Section`: raw columns, diameters, flags."""

    xyz: list  # list of [x, y, z]
    d: list  # diameters, µm
    ids: list  # file point id per column (-1 for made points)
    type: int = 0
    parent: "_Sec | None" = None
    parentx: float = 1.0
    first: int = 0  # 1: column 0 is a logical connection, not a pt3d point
    line: int | None = None  # file line of the section's first point
    index: int = 0  # Import3d's `sec.id`: the first point's index
    iscontour: bool = False
    contour_list: list = field(default_factory=list)  # subsidiary stack contours
    is_subsidiary: bool = False
    absorbed: list = field(default_factory=list)  # (point id, x) not in pt3d rows


def _type_name(t: int) -> str:
    # Import3d_GUI.type2name
    if t == 1:
        return "soma"
    if t == 2:
        return "axon"
    if t == 3:
        return "dend"
    if t == 4:
        return "apic"
    if t < 0:
        return f"minus_{-t}"
    return f"dend_{t}"


def _instantiate(file: str, sections: list[_Sec]) -> list[MorphologySection]:
    """`Import3d_GUI.instantiate` (with `chk_valid`) on Import3d's section list."""
    from ._import3d_contour import contour2centroid, contourstack2centroid

    sections = list(sections)
    # chk_valid: one-point sections, and two-point sections of zero length, are
    # removed (unless root); their children move to their parent and position.
    for i in range(len(sections) - 1, -1, -1):
        sec = sections[i]
        if sec.parent is None:
            continue
        ncol = len(sec.xyz)
        drop = ncol - sec.first <= 1 or (
            ncol - sec.first <= 2 and sec.xyz[sec.first] == sec.xyz[sec.first + 1]
        )
        if drop:
            del sections[i]
            sec.parent.absorbed += [
                (pid, sec.parentx) for pid in sec.ids if pid >= 0
            ] + [(pid, sec.parentx) for pid, _ in sec.absorbed]
            for child in sections[i:]:
                if child.parent is sec:
                    child.parent = sec.parent
                    child.parentx = sec.parentx
    # set_nameindex: numbered per type, in section order
    counts: dict[int, int] = {}
    names: dict[int, str] = {}
    for sec in sections:
        if sec.is_subsidiary:
            continue
        k = counts.get(sec.type, 0)
        counts[sec.type] = k + 1
        names[id(sec)] = f"{_type_name(sec.type)}[{k}]"
    out = []
    for sec in sections:
        if sec.is_subsidiary:
            continue
        j = sec.first
        xyz = np.asarray(sec.xyz[j:], dtype=np.float64).reshape(-1, 3)
        d = np.asarray(sec.d[j:], dtype=np.float64)
        ids = list(sec.ids[j:])
        absorbed = list(sec.absorbed)
        if sec.iscontour:
            for c in [sec] + sec.contour_list:
                absorbed += [(pid, 0.5) for pid in c.ids if pid >= 0]
            if sec.contour_list:
                xyz, d = contourstack2centroid(sec)
            else:
                try:
                    xyz, d = contour2centroid(xyz)
                except ValueError as e:
                    raise MorphologyError(file, sec.line, str(e)) from None
            ids = [-1] * len(d)
        if len(d) == 1:  # sphere_rep: a cylinder along x with L = diam
            x, y, z = xyz[0]
            r = d[0] / 2
            xyz = np.array([[x - r, y, z], [x, y, z], [x + r, y, z]])
            d = np.full(3, d[0])
            ids = [-1, ids[0], -1]
        points = np.column_stack([xyz, d])
        points.setflags(write=False)
        logical = None
        if sec.first == 1:
            logical = tuple(float(v) for v in sec.xyz[0])
        out.append(
            MorphologySection(
                name=names[id(sec)],
                points=points,
                parent=None if sec.parent is None else names[id(sec.parent)],
                parent_position=0.0 if sec.parent is None else float(sec.parentx),
                swc_type=int(sec.type),
                point_ids=tuple(int(i) for i in ids),
                logical_connection=logical,
                other_points=tuple((int(i), float(x)) for i, x in absorbed),
            )
        )
    return out


def point_sites(
    sections: list[MorphologySection],
) -> dict[int, tuple[str, float]]:
    """Where each file point lies: `{point id: (section name, x)}`.

    `x` is the point's arc position along its section's 3-D points, from 0 to 1
    (NEURON's `arc3d(i) / L`). File points that are no `pt3d` point are where
    `MorphologySection.other_points` puts them (a soma outline at the soma's
    middle, a dropped zero-length section where it attached).
    """
    sites: dict[int, tuple[str, float]] = {}
    for sec in sections:
        steps = np.linalg.norm(np.diff(sec.points[:, :3], axis=0), axis=1)
        arc = np.concatenate([[0.0], np.cumsum(steps)])
        length = arc[-1]
        for k, pid in enumerate(sec.point_ids):
            if pid >= 0:
                x = float(arc[k] / length) if length > 0 else 0.5
                sites[pid] = (sec.name, x)
        for pid, x in sec.other_points:
            sites[pid] = (sec.name, x)
    return sites


def define_shape(sections: list[MorphologySection]) -> list[MorphologySection]:
    """The sections moved as NEURON's `define_shape()` moves 3-D sections.

    `instantiate` leaves a child whose first point (or logical connection point)
    is not at its parent's connection point where the file put it; NEURON's
    `define_shape()` (which shape plots call; `finitialize` does not) translates
    each child, parents first, so that that point lands at `parent_position` on
    the straight line from the parent's first to its last 3-D point (not along its
    arc: a bent parent's middle is off the parent). Lengths, diameters, areas and
    resistances do not change; only where the cell is drawn. NEURON computes this
    in 32-bit floats.

    **Returns:** new `MorphologySection`s, points and logical connections shifted.
    """
    import dataclasses

    moved: dict[str, MorphologySection] = {}
    out = []
    for sec in sections:
        if sec.parent is not None:
            parent = moved[sec.parent]
            # the straight line between the parent's end points (treeset.cpp)
            a = sec.parent_position
            target = parent.points[-1, :3] * a + parent.points[0, :3] * (1 - a)
            anchor = (
                np.asarray(sec.logical_connection)
                if sec.logical_connection is not None
                else sec.points[0, :3]
            )
            shift = target - anchor
            points = sec.points.copy()
            points[:, :3] += shift
            points.setflags(write=False)
            logical = sec.logical_connection
            if logical is not None:
                logical = tuple(float(v) for v in np.asarray(logical) + shift)
            sec = dataclasses.replace(sec, points=points, logical_connection=logical)
        moved[sec.name] = sec
        out.append(sec)
    return out


def read_morphology(path: str | os.PathLike) -> list[MorphologySection]:
    """Read an SWC (`.swc`) or Neurolucida (`.asc`) file as NEURON's `Import3d` does.

    The result is what `Import3d_SWC_read()` / `Import3d_Neurolucida3()` followed by
    `Import3d_GUI(reader, 0).instantiate(None)` creates: one `MorphologySection` per
    NEURON section, in Import3d's order (parents before children), with NEURON's
    names, 3-D points (µm), parents and attachment positions. The rules are those of
    NEURON 9's `import3d/*.hoc`, listed in `docs/morphology-files.md`.

    **Arguments:**

    - `path`: the file; its suffix (`.swc` or `.asc`, any case) picks the format.

    **Returns:** a list of `MorphologySection`, the root first.

    **Raises:** `MorphologyError` (a `ValueError`) naming the file and line for a
    malformed file: unreadable lines, non-positive radius or diameter, duplicate or
    missing parent ids, cycles, parents listed after their children, points not
    connected to the root, soma points that do not hold the root or are not
    connected to each other, unclosed or unbalanced Neurolucida blocks, text the
    Neurolucida grammar does not allow, no soma contour or several separate ones,
    a soma contour Import3d cannot reduce; and for an unknown suffix.
    """
    file = os.fspath(path)
    suffix = os.path.splitext(file)[1].lower()
    if suffix == ".swc":
        from ._import3d_swc import read_swc_sections

        sections = read_swc_sections(file)
    elif suffix == ".asc":
        from ._import3d_asc import read_asc_sections

        sections = read_asc_sections(file)
    else:
        raise MorphologyError(
            file,
            None,
            f"unknown morphology format {suffix or '(no suffix)'!r}; "
            "expected .swc (SWC) or .asc (Neurolucida)",
        )
    return _instantiate(file, sections)
