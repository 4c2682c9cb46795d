"""Cell descriptions: sections with NEURON-style geometry and inserted mechanisms.

These are plain descriptions (names, lengths, counts); `stable_ode.build` turns a
list of cells into a `MembraneModel` of arrays. Units: µm, Ω·cm, µF/cm².
"""

from collections.abc import Sequence

import equinox as eqx

from ..mechanisms import AbstractMechanism


class Section(eqx.Module):
    """An unbranched cylinder cut into `n_compartments` equal compartments.

    **Arguments:**

    - `name`: unique within its cell.
    - `length`: µm, > 0.
    - `diameter`: µm, > 0.
    - `n_compartments`: ≥ 1 (NEURON's `nseg`).
    - `parent`: name of the section whose point `parent_position` this section's
      0 end attaches to; `None` for the root.
    - `parent_position`: in [0, 1] (default 1.0, NEURON's default).
    """

    name: str
    length: float
    diameter: float
    n_compartments: int = 1
    parent: str | None = None
    parent_position: float = 1.0

    def __check_init__(self):
        if not (self.length > 0):
            raise ValueError(
                f"Section {self.name!r}: length must be > 0 µm, got {self.length}"
            )
        if not (self.diameter > 0):
            raise ValueError(
                f"Section {self.name!r}: diameter must be > 0 µm, got {self.diameter}"
            )
        if int(self.n_compartments) != self.n_compartments or self.n_compartments < 1:
            raise ValueError(
                f"Section {self.name!r}: n_compartments must be an integer >= 1, "
                f"got {self.n_compartments}"
            )
        if not (0.0 <= self.parent_position <= 1.0):
            raise ValueError(
                f"Section {self.name!r}: parent_position must be in [0, 1], "
                f"got {self.parent_position}"
            )


class Insert(eqx.Module):
    """A mechanism inserted into the named sections of a cell (all if `None`)."""

    mechanism: AbstractMechanism
    sections: tuple[str, ...] | None = None

    def __init__(
        self, mechanism: AbstractMechanism, sections: Sequence[str] | None = None
    ):
        if not isinstance(mechanism, AbstractMechanism):
            raise TypeError(
                f"Insert expects an AbstractMechanism instance, got {mechanism!r}"
            )
        self.mechanism = mechanism
        self.sections = None if sections is None else tuple(sections)


class Cell(eqx.Module):
    """A neuron: sections forming one tree, and the mechanisms inserted in them.

    **Arguments:**

    - `name`: unique within the model.
    - `sections`: the sections; exactly one has no parent.
    - `mechanisms`: `Insert`s.
    - `axial_resistivity`: Ω·cm (NEURON's `Ra`, default 35.4).
    - `capacitance`: µF/cm² (NEURON's `cm`, default 1.0).
    """

    name: str
    sections: tuple[Section, ...]
    mechanisms: tuple[Insert, ...] = ()
    axial_resistivity: float = 35.4
    capacitance: float = 1.0

    def __init__(
        self,
        name: str,
        sections: Sequence[Section],
        mechanisms: Sequence[Insert] = (),
        axial_resistivity: float = 35.4,
        capacitance: float = 1.0,
    ):
        self.name = name
        self.sections = tuple(sections)
        self.mechanisms = tuple(mechanisms)
        self.axial_resistivity = axial_resistivity
        self.capacitance = capacitance
        if not self.sections:
            raise ValueError(f"Cell {name!r} has no sections")
        names = [s.name for s in self.sections]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"Cell {name!r}: duplicate section names {sorted(dup)}")
        roots = [s.name for s in self.sections if s.parent is None]
        if len(roots) != 1:
            raise ValueError(
                f"Cell {name!r} must have exactly one root section (no parent), "
                f"has {len(roots)}: {roots}"
            )
        for s in self.sections:
            if s.parent is not None and s.parent not in names:
                raise ValueError(
                    f"Cell {name!r}: section {s.name!r} has parent {s.parent!r}, "
                    f"which is not a section of this cell"
                )
        parent = {s.name: s.parent for s in self.sections}
        for s in names:
            seen, p = set(), s
            while p is not None:
                if p in seen:
                    raise ValueError(
                        f"Cell {name!r}: sections form a cycle through {p!r}"
                    )
                seen.add(p)
                p = parent[p]
        for ins in self.mechanisms:
            for sec in ins.sections or ():
                if sec not in names:
                    raise ValueError(
                        f"Cell {name!r}: mechanism {type(ins.mechanism).__name__} is "
                        f"inserted in section {sec!r}, which is not a section of "
                        f"this cell (sections: {names})"
                    )
        if not (axial_resistivity > 0):
            raise ValueError(
                f"Cell {name!r}: axial_resistivity must be > 0 Ω·cm, "
                f"got {axial_resistivity}"
            )
        if not (capacitance > 0):
            raise ValueError(
                f"Cell {name!r}: capacitance must be > 0 µF/cm², got {capacitance}"
            )

    def section(self, name: str) -> Section:
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(
            f"Cell {self.name!r} has no section {name!r} "
            f"(sections: {[s.name for s in self.sections]})"
        )
