"""Cell descriptions: sections with NEURON-style geometry and inserted mechanisms.

These are plain descriptions (names, lengths, counts); `stable_ode.build` turns a
list of cells into a `MembraneModel` of arrays. Units: µm, Ω·cm, µF/cm².

Each class checks its own arguments when it is built and raises
`InvalidArgument` (a `ValueError`) naming the argument's key path, so that a model
file and the Python API accept exactly the same things.
"""

import functools
import math
import sys
from collections.abc import Sequence

import equinox as eqx

from .._errors import concrete_number, InvalidArgument
from ..mechanisms import AbstractMechanism
from . import _geometry, _geometry_checks
from ._cell_checks import (
    _check_ions,
    _listing,
    _positive,
    _suggest,
    check_section_names,
    first_cycle,
)


class Section(eqx.Module):
    """An unbranched section cut into `n_compartments` compartments of equal
    length: a cylinder of `length` and `diameter`, or a chain of frusta through
    3-D `points`.

    **Arguments:**

    - `name`: unique within its cell.
    - `length`: µm, > 0 (NEURON's `L`). Not given with `points`.
    - `diameter`: µm, > 0 (NEURON's `diam`). Not given with `points`.
    - `n_compartments`: ≥ 1 (NEURON's `nseg`).
    - `parent`: name of the section whose point `parent_position` this section's
      0 end attaches to; `None` for the root.
    - `parent_position`: in [0, 1] (default 1.0, NEURON's default).
    - `points` (keyword only): 3-D points `(x, y, z, diam)`, µm, from the 0 end to
      the 1 end (NEURON's `pt3dadd`), at least two, finite, diameters ≥ 0. The
      diameter varies linearly along the arc between consecutive points, and
      each compartment's membrane area (slant included) and the axial
      resistances of its two halves are integrated over the frusta it spans,
      exactly as NEURON's `area()` and `ri()` (the morphology guide, "Sections
      from 3-D points", has the details). Only an end point may have zero
      diameter, and the 0 end only on the root section: a zero diameter
      elsewhere would cut the axial path. The section's `length` is then its
      arc length (NEURON's `L`) and its `diameter` the mean diameter over its
      arc length (the mean of NEURON's `seg.diam` over its compartments); both
      are computed, not given. As in NEURON, which stores 3-D points in single
      precision, the geometry is computed from the points rounded to float32
      (`points` keeps the values given).

    **Raises:** `InvalidArgument` (a `ValueError`) naming the argument (for a bad
    point `points[i]`) if a value is out of range, or if the geometry is too
    extreme for its compartments' area (cm²) and axial resistance to be finite,
    non-zero float64 numbers.
    """

    # Plain attribute reads: equinox's `Module.__getattribute__` wraps bound
    # methods as pytrees, a Python call on every read that loading and building
    # many sections pay millions of times; this class has no methods to wrap.
    __getattribute__ = object.__getattribute__

    name: str
    length: float
    diameter: float
    n_compartments: int = 1
    parent: str | None = None
    parent_position: float = 1.0
    points: tuple[tuple[float, float, float, float], ...] | None = eqx.field(
        default=None, static=True
    )

    def __init__(
        self,
        name: str,
        length: float | None = None,
        diameter: float | None = None,
        n_compartments: int = 1,
        parent: str | None = None,
        parent_position: float = 1.0,
        *,
        points: Sequence[Sequence[float]] | None = None,
    ):
        # `object.__setattr__`: equinox's own checks each assignment for bound
        # methods and transformed functions, a cost per section that a cell of
        # many sections pays many times over; these are plain values.
        put = functools.partial(object.__setattr__, self)
        put("name", name)
        put("n_compartments", n_compartments)
        put("parent", parent)
        put("parent_position", parent_position)
        if points is None:
            missing = "is required (or give 3-D points=...)"
            if length is None:
                raise InvalidArgument(f"Section {name!r}", "length", missing)
            if diameter is None:
                raise InvalidArgument(f"Section {name!r}", "diameter", missing)
            put("length", length)
            put("diameter", diameter)
            put("points", None)
            return
        owner = f"Section {name!r}"
        try:
            pts = _geometry_checks.as_points(points)
        except ValueError as e:
            argument, problem = str(e).split(": ", 1)
            raise InvalidArgument(owner, argument, problem) from None
        problem = _geometry_checks.points_problem(pts, parent is not None)
        if problem is not None:
            raise InvalidArgument(owner, *problem)
        self.points = pts
        self.length, self.diameter = _geometry.length_and_diameter(pts)
        # (`dataclasses.replace` passes the computed values back: accepted.)
        if (length, diameter) not in ((None, None), (self.length, self.diameter)):
            raise InvalidArgument(
                owner,
                "points",
                "give either points or length and diameter, not both (with points "
                "the length and diameter follow from them)",
            )

    def __check_init__(self):
        # On the plain values (`vars`): each attribute read through equinox's
        # `Module.__getattribute__` costs more than the check itself.
        f = vars(self)
        length, diameter, n = f["length"], f["diameter"], f["n_compartments"]
        x, points = f["parent_position"], f["points"]
        if (
            type(length) is float
            and type(diameter) is float
            and type(x) in (float, int)
            and type(n) is int
            and points is None
            and 0 < length < math.inf
            and 0 < diameter < math.inf
            and n >= 1
            and 0.0 <= x <= 1.0
            and _geometry_checks.cylinder_problem(length, diameter, n) is None
        ):
            return  # the common case, every check passed
        owner = f"Section {f['name']!r}"
        _positive(owner, "length", length)
        _positive(owner, "diameter", diameter)
        if isinstance(n, bool) or int(n) != n or n < 1:
            raise InvalidArgument(
                owner, "n_compartments", f"must be a positive integer, got {n!r}"
            )
        if concrete_number(x) and not (0.0 <= x <= 1.0):
            raise InvalidArgument(
                owner, "parent_position", f"must be in [0, 1], got {x!r}"
            )
        if points is not None:
            problem = _geometry_checks.geometry_problem(points, int(n))
            if problem is not None:
                raise InvalidArgument(owner, "points", problem)
        elif concrete_number(length) and concrete_number(diameter):
            problem = _geometry_checks.cylinder_problem(
                float(length), float(diameter), int(n)
            )
            if problem is not None:
                raise InvalidArgument(owner, problem[0], problem[1])


class Insert(eqx.Module):
    """A mechanism inserted into the named sections of a cell (all if `None`).

    **Arguments:**

    - `mechanism`: an `AbstractMechanism` instance.
    - `sections`: section names (each at most once, at least one), or `None` for
      every section of the cell.
    """

    __getattribute__ = object.__getattribute__  # plain reads, as `Section`

    mechanism: AbstractMechanism
    sections: tuple[str, ...] | None = None

    def __init__(
        self, mechanism: AbstractMechanism, sections: Sequence[str] | None = None
    ):
        self.mechanism = mechanism
        self.sections = None if sections is None else tuple(sections)

    def __check_init__(self):
        if not isinstance(self.mechanism, AbstractMechanism):
            raise TypeError(
                f"Insert expects an AbstractMechanism instance, got {self.mechanism!r}"
            )
        if self.sections is None:
            return
        owner = f"Insert({type(self.mechanism).__name__})"
        if not self.sections:
            raise InvalidArgument(
                owner,
                "sections",
                "must name at least one section (omit it to insert everywhere)",
            )
        seen = set()
        for i, s in enumerate(self.sections):
            if s in seen:
                raise InvalidArgument(
                    owner, f"sections[{i}]", f"section {s!r} is listed twice"
                )
            seen.add(s)


class _Positions(dict):
    """Section name → position in `Cell.sections`; hashable (by its names), so that
    a `Cell` stays hashable with it as a static field."""

    def __hash__(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return hash(tuple(self))


def _section(cell: "Cell", name: str) -> Section:
    i = cell._positions.get(name)
    if i is None or cell.sections[i].name != name:
        for s in cell.sections:  # after `eqx.tree_at` renamed sections
            if s.name == name:
                return s
        raise KeyError(
            f"Cell {cell.name!r} has no section {name!r} "
            f"(sections: {_listing([s.name for s in cell.sections])})"
        )
    return cell.sections[i]


class _Lookup:
    """A method that equinox does not wrap: `Module.__getattribute__` turns every
    bound method into an `eqx.BoundMethod` module, whose construction flattens the
    whole cell, so `cell.section(name)` on a cell of n sections cost O(n) and
    looking up every section O(n²)."""

    def __init__(self, fn):
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __get__(self, obj, owner=None):
        if obj is None:
            return self.fn
        return functools.partial(self.fn, obj)


class Cell(eqx.Module):
    """A neuron: sections forming one tree, and the mechanisms inserted in them.

    **Arguments:**

    - `name`: unique within the model.
    - `sections`: the sections; names unique, parents among them, no cycle, and
      exactly one without a parent (the root).
    - `mechanisms`: `Insert`s, naming sections of this cell.
    - `axial_resistivity`: Ω·cm (NEURON's `Ra`, default 35.4), > 0.
    - `capacitance`: µF/cm² (NEURON's `cm`, default 1.0), > 0.
    - `ions`: `IonSetting`s, per-section overrides of the model's ion settings
      (initial concentrations, fixed reversal potentials); later entries win.
    - `properties`: `Properties`, per-section `cm` and `Ra`; later entries win.
    - `morphology` (keyword only): the `MorphologyInfo` of a cell read from a
      file (`load_morphology` sets it): SWC types and where each file point lies.

    Wherever sections are listed (`Insert`, `IonSetting`, `Properties`), an entry
    may be a section name, a pattern with `*` (`"apic*"`) or one of NEURON's
    lists `somatic`, `axonal`, `basal`, `apical` (by SWC type for a cell read
    from a file, else by the name prefixes `soma`, `axon`, `dend`, `apic`) and
    `all`. The cell stores the names they stand for, and `Distance` values of
    mechanism parameters as one value per compartment.

    **Raises:** `InvalidArgument` (a `ValueError`) naming the argument at fault, e.g.
    `sections[2].parent` for a parent that is not a section of the cell. The
    checks take time linear in the number of sections.
    """

    __getattribute__ = object.__getattribute__  # plain reads, as `Section`

    name: str
    sections: tuple[Section, ...]
    mechanisms: tuple[Insert, ...] = ()
    axial_resistivity: float = 35.4
    capacitance: float = 1.0
    ions: tuple = eqx.field(static=True, default=())
    properties: tuple = ()
    morphology: object = eqx.field(static=True, default=None)
    _positions: _Positions = eqx.field(static=True, repr=False)

    def __init__(
        self,
        name: str,
        sections: Sequence[Section],
        mechanisms: Sequence[Insert] = (),
        axial_resistivity: float = 35.4,
        capacitance: float = 1.0,
        ions: Sequence = (),
        properties: Sequence = (),
        *,
        morphology=None,
    ):
        from ._regions import resolve_cell

        self.name = name
        self.sections = tuple(sections)
        self.axial_resistivity = axial_resistivity
        self.capacitance = capacitance
        self.morphology = morphology
        self._positions = _Positions()
        for i, s in enumerate(self.sections):
            self._positions.setdefault(s.name, i)
        types = None if morphology is None else morphology.types_of(self.sections)
        self.mechanisms, self.ions, self.properties = resolve_cell(
            f"Cell {name!r}",
            self.sections,
            tuple(mechanisms),
            tuple(ions),
            tuple(properties),
            types,
        )

    def __check_init__(self):
        # On plain values (`vars`): reading a field through equinox's
        # `Module.__getattribute__` costs more than checking it, and the checks
        # read several fields of every section.
        cell = vars(self)
        owner = f"Cell {cell['name']!r}"
        sections = cell["sections"]
        if not sections:
            raise InvalidArgument(
                owner, "sections", "a cell needs at least one section"
            )
        positions = cell["_positions"]
        fields = [vars(s) for s in sections]
        names = [f["name"] for f in fields]
        parents = [f["parent"] for f in fields]
        if len(positions) != len(names):
            for i, n in enumerate(names):
                if positions[n] != i:
                    raise InvalidArgument(
                        owner, f"sections[{i}].name", f"duplicate section name {n!r}"
                    )
        for i, p in enumerate(parents):
            if p is not None and p not in positions:
                raise InvalidArgument(
                    owner,
                    f"sections[{i}].parent",
                    f"parent {p!r} is not a section of this cell "
                    f"(sections: {_listing(names)}){_suggest(p, names)}",
                )
        cycle = first_cycle(parents, names, positions)
        if cycle is not None:
            i, chain = cycle
            raise InvalidArgument(
                owner,
                f"sections[{i}].parent",
                f"sections form a cycle: {' -> '.join(chain)}",
            )
        roots = [n for n, p in zip(names, parents) if p is None]
        if len(roots) != 1:
            raise InvalidArgument(
                owner,
                "sections",
                f"a cell needs exactly one root section (one without 'parent'), "
                f"found {len(roots)}: {_listing(roots)}",
            )
        pinched = _geometry_checks.pinched_attachment(fields, positions)
        if pinched is not None:
            raise InvalidArgument(owner, f"sections[{pinched[0]}].parent", pinched[1])
        for m, ins in enumerate(cell["mechanisms"]):
            check_section_names(
                owner, f"mechanisms[{m}]", ins.sections, positions, names
            )
        _check_ions(owner, cell["ions"], positions, names)
        _positive(owner, "axial_resistivity", cell["axial_resistivity"])
        _positive(owner, "capacitance", cell["capacitance"])
        ra = cell["axial_resistivity"]
        if concrete_number(ra):
            tiny, huge = sys.float_info.min, sys.float_info.max
            for f in fields:
                if concrete_number(f["length"]) and concrete_number(f["diameter"]):
                    for r in (ra * r1 for r1 in _geometry_checks.resistances_per_ra(f)):
                        if tiny <= r <= huge:
                            continue
                        raise InvalidArgument(
                            owner,
                            "axial_resistivity",
                            f"{ra!r} Ω·cm gives section {f['name']!r} an axial "
                            f"resistance of {r:g} Ω, not a finite non-zero number",
                        )

    section = _Lookup(_section)
    """`cell.section(name)`: the section called `name` (a dictionary lookup)."""
