"""Reading a model file's cells into `stable_ode.Cell`s.

The sections of a cell are an explicit list (a tree, branched or not) or an SWC
file (read by `stable_ode.load_swc`, here, because its section names are what
mechanisms, sites and recordings refer to). `Section`, `Insert` and `Cell` check
their own values; this module reads the keys and types and builds them.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import InvalidArgument
from ..morphology import Cell, Insert, load_swc, Section
from ..morphology._discretise import half_conductance, section_area
from ._ions import read_cell_ions
from ._nmodl import nmodl_parameter_names
from ._reader import key, one_line, Reader, suggest
from ._registry import mechanism_parameters, REGISTRY


SWC_OPTIONS = {
    "soma": "single",
    "n_compartments": None,
    "d_lambda": 0.1,
    "frequency": 100.0,
}
"""The keys of a cell's `swc_options` and their defaults (`stable_ode.load_swc`'s)."""

_SWC_HINT = (
    "; an SWC file's sections are named soma (or soma_k), axon_k, dend_k, apic_k "
    "and type{t}_k, k counting the sections of a type in file order"
)


@dataclass(frozen=True)
class SwcSource:
    """Where an SWC cell's sections come from: the resolved `path` and the
    `stable_ode.load_swc` `options` (`soma`, `n_compartments`, `d_lambda`,
    `frequency`) as `(key, value)` pairs."""

    path: str
    options: tuple[tuple[str, Any], ...]


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

    def _count(self, n: int, where: str):
        self.n_compartments += n
        if self.n_compartments > self.max_compartments:
            self.r.fail(
                where,
                f"the model would have at least {self.n_compartments:,} compartments, "
                f"more than the limit of {self.max_compartments:,}",
            )

    def section(self, raw, where: str) -> Section:
        r = self.r
        raw = r.table(
            raw,
            where,
            required=("name", "length", "diameter"),
            optional=("n_compartments", "parent", "parent_position"),
        )
        parent = raw.get("parent")
        if parent is not None:
            parent = r.string(parent, key(where, "parent"))
        nw = key(where, "n_compartments")
        n = r.integer(raw.get("n_compartments", 1), nw)
        if n >= 1:
            self._count(n, nw)
        with r.at(where):
            return Section(
                r.name(raw["name"], key(where, "name")),
                r.number(raw["length"], key(where, "length")),
                r.number(raw["diameter"], key(where, "diameter")),
                n,
                parent,
                r.position(
                    raw.get("parent_position", 1.0), key(where, "parent_position")
                ),
            )

    def swc_options(self, raw, where: str) -> dict[str, Any]:
        r = self.r
        raw = r.table(raw, where, optional=tuple(SWC_OPTIONS))
        options = dict(SWC_OPTIONS)
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
            sw = key(where, "sections")
            items = r.seq(raw["sections"], sw)
            sections = tuple(r.string(s, f"{sw}[{i}]") for i, s in enumerate(items))
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
            values[rename.get(k, k)] = r.number(v, key(pw, k))
        missing = sorted(required - set(values))
        if missing:
            r.fail(pw, f"mechanism {name!r} needs parameters {missing}")
        cache_key = (name, tuple(values.items()))
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
                "swc_options",
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
        if ("sections" in raw) == ("swc" in raw):
            r.fail(where, "a cell needs exactly one of 'sections' and 'swc'")
        if "swc_options" in raw and "swc" not in raw:
            r.fail(
                key(where, "swc_options"),
                "only a cell read from an SWC file ('swc') takes 'swc_options'",
            )
        mw = key(where, "mechanisms")
        inserts = [
            self.mechanism(m, f"{mw}[{i}]")
            for i, m in enumerate(r.seq(raw.get("mechanisms", []), mw))
        ]
        if "swc" in raw:
            options = self.swc_options(
                raw.get("swc_options", {}), key(where, "swc_options")
            )
            cell, path = self.swc_cell(
                raw["swc"], key(where, "swc"), where, name, inserts, ra, cm, options
            )
            source = SwcSource(str(path), tuple(options.items()))
            if ions:
                with r.at(where):
                    cell = Cell(
                        cell.name,
                        cell.sections,
                        cell.mechanisms,
                        cell.axial_resistivity,
                        cell.capacitance,
                        ions=ions,
                    )
        else:
            sw = key(where, "sections")
            items = r.seq(raw["sections"], sw)
            sections = [self.section(s, f"{sw}[{i}]") for i, s in enumerate(items)]
            with r.at(where):
                cell = Cell(name, sections, inserts, ra, cm, ions=ions)
            source = None
        self.check_dtype(cell, where)
        return cell, source

    def swc_cell(self, raw, where, cell_where, name, inserts, ra, cm, options):
        """The `Cell` of an SWC file (path relative to the model file); a malformed
        file is a `SpecError` at `where` quoting `load_swc`'s message (SWC file and
        line)."""
        r = self.r
        path = (self.directory / r.string(raw, where)).resolve()  # absolute stay
        try:
            cell = load_swc(
                path,
                name=name,
                mechanisms=inserts,
                axial_resistivity=ra,
                capacitance=cm,
                **options,
            )
        except InvalidArgument as e:
            if e.owner.startswith("Cell"):  # the mechanisms or the cell's values
                problem = e.problem + (
                    _SWC_HINT if "unknown section" in e.problem else ""
                )
                r.fail(key(cell_where, e.argument), problem)
            r.fail(where, f"{path}: {one_line(e)}")
        except FileNotFoundError:
            r.fail(where, f"no such SWC file: {path}")
        except UnicodeDecodeError as e:
            r.fail(where, f"{path}: not a text file ({e.reason} at byte {e.start})")
        except OSError as e:
            r.fail(where, f"cannot read SWC file {path}: {e.strerror or e}")
        except (ValueError, ArithmeticError) as e:
            r.fail(where, one_line(e, 1000))
        self._count(sum(s.n_compartments for s in cell.sections), where)
        return cell, path

    def check_dtype(self, cell: Cell, where: str):
        """Every compartment's area and axial conductances are normal numbers of
        the dtype (float32 ranges are narrower than the float64 checks of
        `Section`)."""
        r = self.r
        for i, s in enumerate(cell.sections):
            values = (section_area(s), half_conductance(s, cell.axial_resistivity))
            if not all(r.tiny_ok(v, self.tiny) for v in values):
                r.fail(
                    key(where, f"sections[{i}].diameter"),
                    f"section {s.name!r}: its compartments' area ({values[0]:g} cm²) "
                    f"or axial conductance ({values[1]:g} S) does not fit "
                    f"{r.dtype_name}",
                )
