"""Cells from morphology files as NEURON's `Import3d` instantiates them, and the
map from the file's points to compartments."""

import functools
import os
from collections.abc import Sequence

from .._errors import InvalidArgument
from .._stimulus import Site
from ._cell import Cell, Insert, Section
from ._geometry import n_compartments_d_lambda
from ._import3d import MorphologySection, point_sites, read_morphology
from ._properties import centre_values
from ._regions import section_lists


class MorphologyInfo:
    """What a `Cell` read from a file keeps of it (`Cell.morphology`).

    - `file`: the file's path.
    - `types`: `((section name, SWC type), ...)`.
    - `sites`: `((point id, section name, x), ...)`, every file point's section
      and arc position (`stable_ode.morphology.point_sites`).

    Hashable and compared by value, so that a `Cell` holding it stays a valid
    static field of a jitted model.
    """

    def __init__(self, file: str, types, sites):
        self.file = file
        self.types = tuple(types)
        self.sites = tuple(sites)

    def _key(self):
        return (self.file, self.types, self.sites)

    def __eq__(self, other):
        return isinstance(other, MorphologyInfo) and self._key() == other._key()

    def __hash__(self):
        return hash((self.file, len(self.sites), self.types))

    def __repr__(self):
        return f"MorphologyInfo({self.file!r}, {len(self.sites)} points)"

    @functools.cached_property
    def _type_map(self) -> dict:
        return dict(self.types)

    @functools.cached_property
    def site_map(self) -> dict[int, tuple[str, float]]:
        """`{point id: (section name, x)}`."""
        return {pid: (sec, x) for pid, sec, x in self.sites}

    def types_of(self, sections) -> list[int]:
        """The SWC type of each section (0 for a section not from the file)."""
        return [self._type_map.get(s.name, 0) for s in sections]


def morphology_info(file: str, sections: Sequence[MorphologySection]):
    """The `MorphologyInfo` of `read_morphology(file)`'s `sections`."""
    sites = point_sites(list(sections))
    return MorphologyInfo(
        file,
        ((s.name, s.swc_type) for s in sections),
        ((pid, sec, x) for pid, (sec, x) in sorted(sites.items())),
    )


def load_morphology(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    n_compartments: int | None = None,
    d_lambda: float = 0.1,
    frequency: float = 100.0,
    axial_resistivity: float = 35.4,
    capacitance: float = 1.0,
    mechanisms: Sequence[Insert] = (),
    ions: Sequence = (),
    properties: Sequence = (),
) -> Cell:
    """Read an SWC or Neurolucida `.asc` file into a `Cell` as NEURON's `Import3d`
    instantiates it.

    The sections are `read_morphology`'s: NEURON's names (`soma[0]`, `dend[3]`,
    `apic[12]`, `axon[0]`), parents and attachment positions, and their 3-D
    points as NEURON stores them (`MorphologySection.neuron_points`), so each
    compartment's area and axial resistance are NEURON's `area()` and `ri()`.
    The cell's section lists `somatic`, `axonal`, `basal`, `apical` follow the
    SWC types (Neurolucida trees: `Axon`, `Dendrite`, `Apical`), as `Import3d`'s.
    `point_site(cell, point)` names the compartment holding a file point.

    **Arguments:**

    - `path`: the `.swc` or `.asc` file.
    - `name`: the cell's name (default: the file's stem).
    - `n_compartments`: compartments of every section (NEURON's `nseg`), or
      `None` (default) for NEURON's `d_lambda` rule on the 3-D geometry
      (`n_compartments_d_lambda`, with each section's `cm` and `Ra` after
      `properties`, as NEURON's `geom_nseg` after setting them; a
      distance-valued `cm` at the section's centre, see `Properties`).
    - `d_lambda`: fraction of the length constant at `frequency` (default 0.1).
    - `frequency`: Hz (default 100).
    - `axial_resistivity`: Ω·cm (NEURON's `Ra`). `capacitance`: µF/cm² (`cm`).
    - `mechanisms`, `ions`, `properties`: as for `Cell`; sections by name, `*`
      pattern or section list.

    **Returns:** a `Cell` with `morphology` set (a `MorphologyInfo`).

    **Raises:** `MorphologyError` (a `ValueError`) naming the file and line for a
    malformed file; `FileNotFoundError` for a missing one; `InvalidArgument` for
    a bad argument.
    """
    owner = "load_morphology"
    if n_compartments is not None:
        n = n_compartments
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidArgument(
                owner, "n_compartments", f"must be a positive integer, got {n!r}"
            )
    for key, value in (("d_lambda", d_lambda), ("frequency", frequency)):
        if isinstance(value, bool) or not (
            isinstance(value, (int, float)) and value > 0 and value < float("inf")
        ):
            raise InvalidArgument(owner, key, f"must be a number > 0, got {value!r}")
    file = os.fspath(path)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"no such morphology file: {file}")
    return cell_from_sections(
        file,
        read_morphology(file),
        name=name,
        n_compartments=n_compartments,
        d_lambda=d_lambda,
        frequency=frequency,
        axial_resistivity=axial_resistivity,
        capacitance=capacitance,
        mechanisms=mechanisms,
        ions=ions,
        properties=properties,
    )


def cell_from_sections(
    file: str,
    read: Sequence[MorphologySection],
    *,
    name,
    n_compartments,
    d_lambda,
    frequency,
    axial_resistivity,
    capacitance,
    mechanisms,
    ions,
    properties,
) -> Cell:
    """`load_morphology`'s `Cell` of `read_morphology`'s sections `read` (named
    as given) read from `file`, arguments checked."""
    name = name if name is not None else os.path.splitext(os.path.basename(file))[0]
    first = [
        Section(
            ms.name,
            parent=ms.parent,
            parent_position=ms.parent_position if ms.parent is not None else 1.0,
            points=[tuple(float(v) for v in row) for row in ms.neuron_points],
        )
        for ms in read
    ]
    if n_compartments is None:
        lists = section_lists([s.name for s in read], [s.swc_type for s in read])
        cm, ra = centre_values(
            first, properties, capacitance, axial_resistivity, lists, f"Cell {name!r}"
        )
    sections = []
    for sec in first:
        if n_compartments is not None:
            k = n_compartments
        else:
            k = n_compartments_d_lambda(
                sec, cm[sec.name], ra[sec.name], d_lambda, frequency
            )
        sections.append(
            Section(
                sec.name,
                n_compartments=k,
                parent=sec.parent,
                parent_position=sec.parent_position,
                points=sec.points,
            )
        )
    return Cell(
        name,
        sections,
        mechanisms,
        axial_resistivity,
        capacitance,
        ions,
        properties,
        morphology=morphology_info(file, read),
    )


def point_site(cell: Cell, point: int) -> Site:
    """The `Site` of a file point of a cell read by `load_morphology`:
    `Site(cell.name, section, x)` with `x` the point's arc position along its
    section (NEURON's `arc3d(i) / L`), so that the site names the compartment
    that contains the point.

    **Arguments:**

    - `cell`: a `Cell` from `load_morphology` (or a model file's `"morphology"`).
    - `point`: the point's id in an SWC file; for an `.asc` file its index, from
      0 in file order, among the points `Import3d` reads (the soma contour and
      the tree points, not markers or spines).

    **Raises:** `InvalidArgument` if the cell was not read from a file or has
    no such point.
    """
    owner = f"point_site({cell.name!r})"
    info = cell.morphology
    if not isinstance(info, MorphologyInfo):
        raise InvalidArgument(
            owner, "cell", "was not read from a morphology file (load_morphology)"
        )
    if isinstance(point, bool) or not isinstance(point, int):
        raise InvalidArgument(owner, "point", f"must be an integer, got {point!r}")
    where = info.site_map.get(point)
    if where is None:
        ids = sorted(info.site_map)
        span = f"{ids[0]}..{ids[-1]}" if ids else "none"
        raise InvalidArgument(
            owner,
            "point",
            f"{point} is not a point of {info.file} (its points: {span}, "
            f"{len(ids)} in all)",
        )
    section, x = where
    return Site(cell.name, section, min(max(x, 0.0), 1.0))
