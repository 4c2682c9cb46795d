"""Reading a model file's cells into `stable_ode.Cell`s.

The sections of a cell are an explicit list (a tree, branched or not), an SWC
file (`"swc"`, read by `stable_ode.load_swc`) or a morphology file
(`"morphology"`, read by `stable_ode.load_morphology` as NEURON's `Import3d`
reads it), read here because their section names are what mechanisms, sites and
recordings refer to. `Section`, `Insert`, `Properties` and `Cell` check their
own values (and resolve section lists, `*` patterns and distance-valued
parameters); this module reads the keys and types and builds them.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..morphology import (
    Cell,
    Insert,
    Section,
)
from ..morphology._discretise import half_conductance, section_area
from ..morphology._regions import section_values
from ._file_cells import morphology_cell, swc_cell
from ._ions import read_cell_ions
from ._nmodl import nmodl_parameter_names
from ._reader import key, Reader, suggest
from ._registry import mechanism_parameters, REGISTRY
from ._sections import cylinder, plain_cylinder
from ._values import read_properties, read_sections, read_value


SWC_OPTIONS = {
    "soma": "single",
    "n_compartments": None,
    "d_lambda": 0.1,
    "frequency": 100.0,
}
"""The keys of a cell's `swc_options` and their defaults (`stable_ode.load_swc`'s);
a `"morphology"` cell takes them all but `soma`."""


@dataclass(frozen=True)
class SwcSource:
    """Where a file cell's sections come from: the resolved `path`, the `reader`
    (`"load_swc"` for `"swc"` cells, `"load_morphology"` for `"morphology"`
    cells) and its `options` (`soma` for `load_swc` only, `n_compartments`,
    `d_lambda`, `frequency`) as `(key, value)` pairs."""

    path: str
    options: tuple[tuple[str, Any], ...]
    reader: str = "load_swc"


def _cache_repr(v) -> Any:
    return (v.dtype.str, v.tobytes()) if isinstance(v, np.ndarray) else repr(v)


class CellReader:
    """Reads `cells[i]` entries; counts compartments against the limit."""

    def __init__(
        self,
        r: Reader,
        directory: Path,
        max_compartments: int,
        tiny: float,
        nmodl: dict | None = None,
    ):
        self.r = r
        self.nmodl = nmodl or {}  # SUFFIX -> class, from the `nmodl` key
        self.directory = directory
        self.max_compartments = max_compartments
        self.tiny = tiny  # the dtype's smallest normal number
        self.n_compartments = 0
        self.mechanisms: dict = {}  # one (immutable) instance per name and params
        # mechanisms[j] entry -> {param: (field, number of values)} for `values`
        self.per_compartment: dict[str, dict[str, tuple[str, int]]] = {}

    def _count(self, n: int, where: str):
        self.n_compartments += n
        if self.n_compartments > self.max_compartments:
            self.r.fail(
                where,
                f"the model would have at least {self.n_compartments:,} compartments, "
                f"more than the limit of {self.max_compartments:,}",
            )

    def section(self, raw, where: str) -> Section:
        plain = plain_cylinder(raw, self.r.largest)
        if plain is not None:
            try:
                section = cylinder(*plain)
            except ValueError:
                pass  # reported at its key below
            else:
                self.n_compartments += plain[3]
                if self.n_compartments <= self.max_compartments:
                    return section
                self.n_compartments -= plain[3]
        r = self.r
        raw = r.table(
            raw,
            where,
            required=("name",),
            optional=(
                "length",
                "diameter",
                "points",
                "n_compartments",
                "parent",
                "parent_position",
            ),
        )
        parent = raw.get("parent")
        if parent is not None:
            parent = r.string(parent, key(where, "parent"))
        nw = key(where, "n_compartments")
        n = r.integer(raw.get("n_compartments", 1), nw)
        if n >= 1:
            self._count(n, nw)
        name = r.name(raw["name"], key(where, "name"))
        position = r.position(
            raw.get("parent_position", 1.0), key(where, "parent_position")
        )
        if "points" in raw:
            for k in ("length", "diameter"):
                if k in raw:
                    r.fail(
                        key(where, k),
                        "a section with 'points' takes no 'length' or 'diameter' "
                        "(they follow from the points)",
                    )
            points = self.points(raw["points"], key(where, "points"))
            with r.at(where):
                return Section(name, None, None, n, parent, position, points=points)
        for k in ("length", "diameter"):
            if k not in raw:
                r.fail(key(where, k), "required key is missing (or give 'points')")
        with r.at(where):
            return cylinder(
                name,
                r.number(raw["length"], key(where, "length")),
                r.number(raw["diameter"], key(where, "diameter")),
                n,
                parent,
                position,
            )

    def points(self, raw, where: str) -> list[tuple[float, ...]]:
        """A section's 3-D points: a list of `[x, y, z, diam]` (µm)."""
        r = self.r
        out = []
        for i, p in enumerate(r.seq(raw, where)):
            w = f"{where}[{i}]"
            p = r.seq(p, w)
            if len(p) != 4:
                r.fail(w, f"a 3-D point is [x, y, z, diam] (µm), got {len(p)} values")
            out.append(tuple(r.number(v, f"{w}[{j}]") for j, v in enumerate(p)))
        return out

    def swc_options(self, raw, where: str, soma: bool = True) -> dict[str, Any]:
        r = self.r
        allowed = tuple(k for k in SWC_OPTIONS if soma or k != "soma")
        raw = r.table(raw, where, optional=allowed)
        options = {k: SWC_OPTIONS[k] for k in allowed}
        if "soma" in raw:
            soma = r.string(raw["soma"], key(where, "soma"))
            if soma not in ("single", "points"):
                r.fail(
                    key(where, "soma"),
                    f"must be 'single' or 'points', got {soma!r}"
                    f"{suggest(soma, ['single', 'points'])}",
                )
            options["soma"] = soma
        if raw.get("n_compartments") is not None:
            w = key(where, "n_compartments")
            n = r.integer(raw["n_compartments"], w)
            if n < 1:
                r.fail(w, f"must be a positive integer, got {n!r}")
            if n > self.max_compartments:
                r.fail(w, f"more than the limit of {self.max_compartments:,}")
            options["n_compartments"] = n
        if "d_lambda" in raw:
            options["d_lambda"] = (
                None
                if raw["d_lambda"] is None
                else r.number(raw["d_lambda"], key(where, "d_lambda"), gt=0)
            )
        if "frequency" in raw:
            options["frequency"] = r.number(
                raw["frequency"], key(where, "frequency"), gt=0
            )
        if options["n_compartments"] is None and options["d_lambda"] is None:
            r.fail(
                where,
                "give 'n_compartments' (compartments per section) or 'd_lambda' "
                "(NEURON's d_lambda rule); both are null",
            )
        return options

    def mechanism(self, raw, where: str) -> Insert:
        r = self.r
        raw = r.table(raw, where, required=("name",), optional=("sections", "params"))
        name = r.string(raw["name"], key(where, "name"))
        cls = self.nmodl.get(name)
        if cls is None:
            with r.at(key(where, "name")):
                cls = REGISTRY.mechanism(name, self.directory)
        sections = None
        if "sections" in raw:
            sections = read_sections(self.r, raw["sections"], key(where, "sections"))
        pw = key(where, "params")
        params = r.mapping(raw.get("params", {}), pw)
        allowed, required = mechanism_parameters(cls)
        rename = nmodl_parameter_names(cls)  # NMODL names for imported ones
        names = set(rename) if rename else allowed
        values = {}
        for k, v in params.items():
            if k not in names:
                r.fail(
                    key(pw, k),
                    f"unknown parameter of {name!r}{suggest(k, names)}; its "
                    f"parameters are {', '.join(sorted(names))}",
                )
            values[rename.get(k, k)] = read_value(self.r, v, key(pw, k))
        missing = sorted(required - set(values))
        if missing:
            r.fail(pw, f"mechanism {name!r} needs parameters {missing}")
        cache_key = (name, tuple((k, _cache_repr(v)) for k, v in values.items()))
        self.per_compartment[where] = {
            k: (rename.get(k, k), len(v["values"]))
            for k, v in params.items()
            if isinstance(v, dict) and "values" in v
        }
        mechanism = self.mechanisms.get(cache_key)
        if mechanism is None:
            with r.at(pw):
                mechanism = self.mechanisms[cache_key] = cls(**values)
        with r.at(where):
            return Insert(mechanism, sections)

    def cell(self, raw, where: str) -> tuple[Cell, SwcSource | None]:
        r = self.r
        raw = r.table(
            raw,
            where,
            required=("name",),
            optional=(
                "sections",
                "swc",
                "morphology",
                "swc_options",
                "properties",
                "mechanisms",
                "axial_resistivity",
                "capacitance",
                "ions",
            ),
        )
        name = r.name(raw["name"], key(where, "name"))
        ions = read_cell_ions(r, raw.get("ions", []), key(where, "ions"))
        ra = r.number(
            raw.get("axial_resistivity", 35.4), key(where, "axial_resistivity")
        )
        cm = r.number(raw.get("capacitance", 1.0), key(where, "capacitance"))
        given = [k for k in ("sections", "swc", "morphology") if k in raw]
        if len(given) != 1:
            r.fail(
                where,
                "a cell needs exactly one of 'sections' and 'swc' (or 'morphology')"
                + (f" (got {', '.join(map(repr, given))})" if given else ""),
            )
        if "swc_options" in raw and "sections" in raw:
            r.fail(
                key(where, "swc_options"),
                "only a cell read from an SWC file ('swc') or a morphology file "
                "('morphology') takes 'swc_options'",
            )
        properties = read_properties(
            self.r, raw.get("properties", []), key(where, "properties")
        )
        mw = key(where, "mechanisms")
        inserts = [
            self.mechanism(m, f"{mw}[{i}]")
            for i, m in enumerate(r.seq(raw.get("mechanisms", []), mw))
        ]
        # what a file-read cell takes besides its file options
        common = dict(
            mechanisms=inserts,
            axial_resistivity=ra,
            capacitance=cm,
            ions=ions,
            properties=properties,
        )
        if "morphology" in raw:
            options = self.swc_options(
                raw.get("swc_options", {}), key(where, "swc_options"), soma=False
            )
            cell, path = morphology_cell(
                self,
                raw["morphology"],
                key(where, "morphology"),
                where,
                name,
                dict(common, **options),
            )
            source = SwcSource(str(path), tuple(options.items()), "load_morphology")
        elif "swc" in raw:
            options = self.swc_options(
                raw.get("swc_options", {}), key(where, "swc_options")
            )
            cell, path = swc_cell(
                self,
                raw["swc"],
                key(where, "swc"),
                where,
                name,
                dict(common, **options),
            )
            source = SwcSource(str(path), tuple(options.items()))
        else:
            sw = key(where, "sections")
            items = r.seq(raw["sections"], sw)
            sections = [self.section(s, f"{sw}[{i}]") for i, s in enumerate(items)]
            with r.at(where):
                cell = Cell(
                    name, sections, inserts, ra, cm, ions=ions, properties=properties
                )
            source = None
        self.check_dtype(cell, where)
        self.check_values(cell, mw)
        return cell, source

    def check_values(self, cell: Cell, mw: str):
        """Each `{"values": [...]}` parameter has one value per compartment of
        its entry's sections."""
        counts = {s.name: s.n_compartments for s in cell.sections}
        for j, ins in enumerate(cell.mechanisms):
            w = f"{mw}[{j}]"
            entries = self.per_compartment.get(w, {})
            if not entries:
                continue
            names = ins.sections if ins.sections is not None else list(counts)
            n = sum(counts[s] for s in names)
            for k, (_field, got) in entries.items():
                if got != n:
                    self.r.fail(
                        key(key(key(w, "params"), k), "values"),
                        f"{got} values for {n} compartments (one per compartment "
                        f"of the entry's {len(names)} section(s), in order)",
                    )

    def check_dtype(self, cell: Cell, where: str):
        """Every compartment's area and axial conductances are normal numbers of
        the dtype (float32 ranges are narrower than the float64 checks of
        `Section`)."""
        r = self.r
        ra = section_values(cell)[1]
        for i, s in enumerate(cell.sections):
            values = (section_area(s), half_conductance(s, ra[s.name]))
            if not all(r.tiny_ok(v, self.tiny) for v in values):
                r.fail(
                    key(where, f"sections[{i}].diameter"),
                    f"section {s.name!r}: its compartments' area ({values[0]:g} cm²) "
                    f"or axial conductance ({values[1]:g} S) does not fit "
                    f"{r.dtype_name}",
                )
