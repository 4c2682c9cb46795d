"""Validation of a parsed model file into a typed `ModelSpec`, before anything is built.

Every check raises one `SpecError` naming the file and the key path. The result is
plain frozen data (names, numbers, tuples): `_loader.py` turns it into objects.
Sections (explicit, branched or not, or from an SWC file), synapses, stimuli and
recordings are each read by one function (`_cell_sections`, `_swc_sections`,
`_synapses`, ...). SWC files are read here, at validation, because their section
names are what mechanisms, sites and recordings refer to.
"""

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import diffrax as dfx

from ..morphology import load_swc
from ._errors import SpecError
from ._registry import (
    _suggest,
    CONTROLLER_KINDS,
    CONTROLLER_OPTIONAL,
    mechanism_parameters,
    resolve_mechanism,
    resolve_solver,
    resolve_synapse,
    SYNAPSE_BOUNDS,
)


FORMAT = "stable_ode.model/1"
"""The format string a model file must declare."""

DTYPES = ("float32", "float64")
RESERVED_OUTPUT_NAMES = ("t", "stats")
_NAME = re.compile(r"^[A-Za-z0-9_.\-\[\]]+$")


# ---------------------------------------------------------------------------
# The typed result


@dataclass(frozen=True)
class SectionSpec:
    """A section: geometry in µm, `n_compartments` ≥ 1, attachment to its parent."""

    name: str
    length: float
    diameter: float
    n_compartments: int
    parent: str | None
    parent_position: float


@dataclass(frozen=True)
class MechanismSpec:
    """A mechanism by name, the sections it is in (`None`: all) and its params."""

    name: str
    sections: tuple[str, ...] | None
    params: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class CellSpec:
    """A cell: sections, mechanisms, `axial_resistivity` (Ω·cm), `capacitance`
    (µF/cm²).

    For a cell read from an SWC file, `swc` is the file's resolved path and
    `swc_options` the `stable_ode.load_swc` options used (`soma`, `n_compartments`,
    `d_lambda`, `frequency`); `sections` are the sections `load_swc` made.
    """

    name: str
    sections: tuple[SectionSpec, ...]
    mechanisms: tuple[MechanismSpec, ...]
    axial_resistivity: float
    capacitance: float
    swc: str | None = None
    swc_options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class SiteSpec:
    """`cell`, `section`, `position` in [0, 1]."""

    cell: str
    section: str
    position: float


@dataclass(frozen=True)
class SynapseSpec:
    """A synapse of `kind` (a registered kind or `"module.path:ClassName"`) from
    the compartment at `pre` to the one at `post`, with `params` (units of the
    class's fields: µS, mV, 1/ms for `ionotropic`; µS for `gap_junction`)."""

    kind: str
    pre: SiteSpec
    post: SiteSpec
    params: tuple[tuple[str, float], ...]


@dataclass(frozen=True)
class StimulusSpec:
    """A stimulus of `kind` (`"step"` or `"trace"`) at `site`.

    `step`: `amplitude` (nA), `delay`, `duration` (ms). `trace`: `values` (nA),
    `dt`, `delay` (ms).
    """

    kind: str
    site: SiteSpec
    amplitude: float = 0.0
    delay: float = 0.0
    duration: float = 0.0
    values: tuple[float, ...] = ()
    dt: float = 0.0


@dataclass(frozen=True)
class RecordSpec:
    """Record the membrane potential at `site` under `name`."""

    name: str
    site: SiteSpec


@dataclass(frozen=True)
class IntegrationSpec:
    """Solver name, `dt` and `save_dt` (ms), dtype name, controller config."""

    solver: str
    dt: float
    save_dt: float
    dtype: str
    controller: tuple[tuple[str, Any], ...] | None

    def controller_dict(self) -> dict[str, Any] | None:
        return None if self.controller is None else dict(self.controller)


@dataclass(frozen=True)
class ModelSpec:
    """A validated model file (`stable_ode.model/1`).

    **Fields:** `file` (as given), `temperature` (°C), `v_init` (mV), `t_stop` (ms),
    `cells`, `synapses`, `stimuli`, `record`, `integration`.
    """

    file: str
    temperature: float
    v_init: float
    t_stop: float
    cells: tuple[CellSpec, ...]
    synapses: tuple[SynapseSpec, ...]
    stimuli: tuple[StimulusSpec, ...]
    record: tuple[RecordSpec, ...]
    integration: IntegrationSpec

    @property
    def directory(self) -> Path:
        """The folder of the model file: relative paths in it resolve from here."""
        return Path(self.file).resolve().parent


# ---------------------------------------------------------------------------
# Reading helpers


def _describe(value) -> str:
    kind = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "table",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    if isinstance(value, (dict, list)):
        return kind
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}"


def _key(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


class _Reader:
    def __init__(self, file: str):
        self.file = file
        self.sections_of: dict[str, dict[str, SectionSpec]] = {}

    def fail(self, where: str, problem: str):
        raise SpecError(self.file, where, problem)

    def table(self, value, where: str, required=(), optional=()) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"must be a table (JSON object), got {_describe(value)}")
        allowed = [*required, *optional]
        for k in value:
            if k not in allowed:
                self.fail(
                    _key(where, str(k)),
                    f"unknown key{_suggest(str(k), allowed)}; allowed keys here: "
                    f"{', '.join(allowed)}",
                )
        for k in required:
            if k not in value:
                self.fail(_key(where, k), "required key is missing")
        return value

    def mapping(self, value, where: str) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"must be a table (JSON object), got {_describe(value)}")
        return value

    def seq(self, value, where: str) -> list:
        if not isinstance(value, list):
            self.fail(where, f"must be a list, got {_describe(value)}")
        return value

    def string(self, value, where: str) -> str:
        if not isinstance(value, str):
            self.fail(where, f"must be a string, got {_describe(value)}")
        if not value:
            self.fail(where, "must not be empty")
        return value

    def number(self, value, where: str, *, gt=None, ge=None, le=None) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, f"must be a number, got {_describe(value)}")
        if not math.isfinite(value):
            self.fail(where, f"must be finite, got {value!r}")
        if gt is not None and not value > gt:
            self.fail(where, f"must be > {gt}, got {value!r}")
        if ge is not None and not value >= ge:
            self.fail(where, f"must be >= {ge}, got {value!r}")
        if le is not None and not value <= le:
            self.fail(where, f"must be <= {le}, got {value!r}")
        return float(value)

    def position(self, value, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, f"must be a number in [0, 1], got {_describe(value)}")
        if not (0.0 <= value <= 1.0):
            self.fail(where, f"must be in [0, 1], got {value!r}")
        return float(value)

    def positive_int(self, value, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.fail(where, f"must be a positive integer, got {_describe(value)}")
        return value

    def name(self, value, where: str) -> str:
        value = self.string(value, where)
        if not _NAME.match(value):
            self.fail(
                where,
                f"{value!r} is not a valid name: use letters, digits and '_', '.', "
                f"'-', '[', ']'",
            )
        return value

    def unique(self, names: list[str], where: str, what: str):
        seen = set()
        for i, n in enumerate(names):
            if n in seen:
                self.fail(f"{where}[{i}].name", f"duplicate {what} name {n!r}")
            seen.add(n)


# ---------------------------------------------------------------------------
# The sections of a cell: an explicit list (a tree, branched or not) or an SWC
# file.


def _section(r: _Reader, raw, where: str) -> SectionSpec:
    raw = r.table(
        raw,
        where,
        required=("name", "length", "diameter"),
        optional=("n_compartments", "parent", "parent_position"),
    )
    parent = raw.get("parent")
    if parent is not None:
        parent = r.string(parent, _key(where, "parent"))
    return SectionSpec(
        name=r.name(raw["name"], _key(where, "name")),
        length=r.number(raw["length"], _key(where, "length"), gt=0),
        diameter=r.number(raw["diameter"], _key(where, "diameter"), gt=0),
        n_compartments=r.positive_int(
            raw.get("n_compartments", 1), _key(where, "n_compartments")
        ),
        parent=parent,
        parent_position=r.position(
            raw.get("parent_position", 1.0), _key(where, "parent_position")
        ),
    )


def _check_tree(r: _Reader, sections: list[SectionSpec], where: str):
    """Parents exist, no cycle, exactly one root (a tree, branched or not)."""
    index = {s.name: i for i, s in enumerate(sections)}
    for i, s in enumerate(sections):
        if s.parent is not None and s.parent not in index:
            r.fail(
                f"{where}[{i}].parent",
                f"parent {s.parent!r} is not a section of this cell "
                f"(sections: {', '.join(index)}){_suggest(s.parent, index)}",
            )
    for i, s in enumerate(sections):
        chain, p = [s.name], s.parent
        while p is not None:
            chain.append(p)
            if p == s.name:
                r.fail(
                    f"{where}[{i}].parent",
                    f"sections form a cycle: {' -> '.join(chain)}",
                )
            if len(chain) > len(sections) + 1:
                break  # a cycle not through s; reported when its own member is checked
            p = sections[index[p]].parent
    roots = [s.name for s in sections if s.parent is None]
    if len(roots) != 1:
        r.fail(
            where,
            f"a cell needs exactly one root section (one without 'parent'), "
            f"found {len(roots)}: {roots}",
        )


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


def _swc_options(r: _Reader, raw, where: str) -> dict[str, Any]:
    raw = r.table(raw, where, optional=tuple(SWC_OPTIONS))
    options = dict(SWC_OPTIONS)
    if "soma" in raw:
        soma = r.string(raw["soma"], _key(where, "soma"))
        if soma not in ("single", "points"):
            r.fail(
                _key(where, "soma"),
                f"must be 'single' or 'points', got {soma!r}"
                f"{_suggest(soma, ['single', 'points'])}",
            )
        options["soma"] = soma
    if raw.get("n_compartments") is not None:
        options["n_compartments"] = r.positive_int(
            raw["n_compartments"], _key(where, "n_compartments")
        )
    if "d_lambda" in raw:
        options["d_lambda"] = (
            None
            if raw["d_lambda"] is None
            else r.number(raw["d_lambda"], _key(where, "d_lambda"), gt=0)
        )
    if "frequency" in raw:
        options["frequency"] = r.number(
            raw["frequency"], _key(where, "frequency"), gt=0
        )
    if options["n_compartments"] is None and options["d_lambda"] is None:
        r.fail(
            where,
            "give 'n_compartments' (compartments per section) or 'd_lambda' (NEURON's "
            "d_lambda rule); both are null",
        )
    return options


def _swc_sections(
    r: _Reader,
    raw,
    where: str,
    directory: Path,
    options: dict[str, Any],
    axial_resistivity: float,
    capacitance: float,
) -> tuple[list[SectionSpec], Path]:
    """Sections from an SWC file (path relative to the model file), read by
    `stable_ode.load_swc` with `options`; a malformed file is a `SpecError` at
    `where` quoting `load_swc`'s message (SWC file and line)."""
    path = (directory / r.string(raw, where)).resolve()  # absolute ones stay
    try:
        cell = load_swc(
            path,
            axial_resistivity=axial_resistivity,
            capacitance=capacitance,
            **options,
        )
    except FileNotFoundError:
        r.fail(where, f"no such SWC file: {path}")
    except UnicodeDecodeError as e:
        r.fail(where, f"{path}: not a text file ({e.reason} at byte {e.start})")
    except OSError as e:
        r.fail(where, f"cannot read SWC file {path}: {e.strerror or e}")
    except ValueError as e:
        r.fail(where, " ".join(str(e).split()))
    sections = [
        SectionSpec(
            name=s.name,
            length=float(s.length),
            diameter=float(s.diameter),
            n_compartments=int(s.n_compartments),
            parent=s.parent,
            parent_position=float(s.parent_position),
        )
        for s in cell.sections
    ]
    return sections, path


def _cell_sections(
    r: _Reader,
    raw: dict,
    where: str,
    directory: Path,
    axial_resistivity: float,
    capacitance: float,
):
    """`(sections, swc path or None, swc options)`."""
    if ("sections" in raw) == ("swc" in raw):
        r.fail(where, "a cell needs exactly one of 'sections' and 'swc'")
    if "swc_options" in raw and "swc" not in raw:
        r.fail(
            _key(where, "swc_options"),
            "only a cell read from an SWC file ('swc') takes 'swc_options'",
        )
    if "swc" in raw:
        options = _swc_options(
            r, raw.get("swc_options", {}), _key(where, "swc_options")
        )
        sections, path = _swc_sections(
            r,
            raw["swc"],
            _key(where, "swc"),
            directory,
            options,
            axial_resistivity,
            capacitance,
        )
        return sections, str(path), tuple(options.items())
    else:
        sw = _key(where, "sections")
        items = r.seq(raw["sections"], sw)
        if not items:
            r.fail(sw, "a cell needs at least one section")
        sections = [_section(r, s, f"{sw}[{i}]") for i, s in enumerate(items)]
        r.unique([s.name for s in sections], sw, "section")
        _check_tree(r, sections, sw)
    return sections, None, ()


# ---------------------------------------------------------------------------
# Mechanisms, cells


def _mechanism(
    r: _Reader,
    raw,
    where: str,
    section_names: list[str],
    directory: Path,
    hint: str = "",
) -> MechanismSpec:
    raw = r.table(raw, where, required=("name",), optional=("sections", "params"))
    name = r.string(raw["name"], _key(where, "name"))
    try:
        cls = resolve_mechanism(name, directory)
    except LookupError as e:
        r.fail(_key(where, "name"), str(e))
    sections = None
    if "sections" in raw:
        sw = _key(where, "sections")
        items = r.seq(raw["sections"], sw)
        if not items:
            r.fail(sw, "must name at least one section (omit it to insert everywhere)")
        sections = []
        for i, s in enumerate(items):
            s = r.string(s, f"{sw}[{i}]")
            if s not in section_names:
                r.fail(
                    f"{sw}[{i}]",
                    f"unknown section {s!r}{_suggest(s, section_names)} "
                    f"(sections of this cell: {', '.join(section_names)}){hint}",
                )
            if s in sections:
                r.fail(f"{sw}[{i}]", f"section {s!r} is listed twice")
            sections.append(s)
        sections = tuple(sections)
    pw = _key(where, "params")
    params = r.mapping(raw.get("params", {}), pw)
    allowed, required = mechanism_parameters(cls)
    for k, v in params.items():
        if k not in allowed:
            r.fail(
                _key(pw, k),
                f"unknown parameter of {name!r}{_suggest(k, allowed)}; its "
                f"parameters are {', '.join(sorted(allowed))}",
            )
        r.number(v, _key(pw, k))
    missing = sorted(required - set(params))
    if missing:
        r.fail(pw, f"mechanism {name!r} needs parameters {missing}")
    return MechanismSpec(
        name=name,
        sections=sections,
        params=tuple((k, float(v)) for k, v in params.items()),
    )


def _cell(r: _Reader, raw, where: str, directory: Path) -> CellSpec:
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
        ),
    )
    name = r.name(raw["name"], _key(where, "name"))
    axial_resistivity = r.number(
        raw.get("axial_resistivity", 35.4), _key(where, "axial_resistivity"), gt=0
    )
    capacitance = r.number(
        raw.get("capacitance", 1.0), _key(where, "capacitance"), gt=0
    )
    sections, swc, swc_options = _cell_sections(
        r, raw, where, directory, axial_resistivity, capacitance
    )
    names = [s.name for s in sections]
    mw = _key(where, "mechanisms")
    mechanisms = [
        _mechanism(r, m, f"{mw}[{i}]", names, directory, _SWC_HINT if swc else "")
        for i, m in enumerate(r.seq(raw.get("mechanisms", []), mw))
    ]
    return CellSpec(
        name=name,
        sections=tuple(sections),
        mechanisms=tuple(mechanisms),
        axial_resistivity=axial_resistivity,
        capacitance=capacitance,
        swc=swc,
        swc_options=swc_options,
    )


# ---------------------------------------------------------------------------
# Sites, synapses, stimuli, recordings


def _site(r: _Reader, raw: dict, where: str, cells: dict[str, CellSpec]) -> SiteSpec:
    cell = r.string(raw["cell"], _key(where, "cell"))
    if cell not in cells:
        r.fail(
            _key(where, "cell"),
            f"unknown cell {cell!r}{_suggest(cell, cells)} (cells: {', '.join(cells)})",
        )
    section = r.string(raw["section"], _key(where, "section"))
    names = r.sections_of.get(cell)
    if names is None:
        names = r.sections_of[cell] = {s.name: s for s in cells[cell].sections}
    if section not in names:
        r.fail(
            _key(where, "section"),
            f"unknown section {section!r}{_suggest(section, names)} "
            f"(sections of cell {cell!r}: {', '.join(names)})",
        )
    position = r.position(raw.get("position", 0.5), _key(where, "position"))
    return SiteSpec(cell, section, position)


_SITE_KEYS = ("cell", "section")


def _compartment(r: _Reader, site: SiteSpec) -> tuple[str, str, int]:
    """NEURON's `sec(x)`: the compartment `site` names, as (cell, section, k)."""
    n = r.sections_of[site.cell][site.section].n_compartments
    return site.cell, site.section, min(int(math.floor(site.position * n)), n - 1)


_BOUND_TEXT = {"ge": ">=", "gt": ">", "ne": "!="}


def _synapses(
    r: _Reader, raw, where: str, cells: dict[str, CellSpec], directory: Path
) -> tuple[SynapseSpec, ...]:
    """Synapses between compartments of any cells: `kind`, `pre`/`post` sites,
    `params` (the kind's class fields; omitted ones take the class defaults)."""
    items = r.seq(raw, where)
    classes: dict[str, tuple[set[str], set[str]]] = {}
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        item = r.table(item, w, required=("kind", "pre", "post"), optional=("params",))
        kind = r.string(item["kind"], _key(w, "kind"))
        if kind not in classes:
            try:
                cls = resolve_synapse(kind, directory)
            except LookupError as e:
                r.fail(_key(w, "kind"), str(e))
            classes[kind] = mechanism_parameters(cls)
        allowed, required = classes[kind]
        sites = []
        for end in ("pre", "post"):
            ew = _key(w, end)
            site = r.table(item[end], ew, required=_SITE_KEYS, optional=("position",))
            sites.append(_site(r, site, ew, cells))
        pw = _key(w, "params")
        params = r.mapping(item.get("params", {}), pw)
        bounds = SYNAPSE_BOUNDS.get(kind, {})
        for k, v in params.items():
            if k not in allowed:
                r.fail(
                    _key(pw, k),
                    f"unknown parameter of synapse kind {kind!r}"
                    f"{_suggest(k, allowed)}; its parameters are "
                    f"{', '.join(sorted(allowed))}",
                )
            r.number(v, _key(pw, k))
            if k in bounds:
                op, bound = bounds[k]
                ok = {"ge": v >= bound, "gt": v > bound, "ne": v != bound}[op]
                if not ok:
                    r.fail(_key(pw, k), f"must be {_BOUND_TEXT[op]} {bound}, got {v!r}")
        missing = sorted(required - set(params))
        if missing:
            r.fail(pw, f"synapse kind {kind!r} needs parameters {missing}")
        pre, post = sites
        if kind == "gap_junction" and _compartment(r, pre) == _compartment(r, post):
            c, sec, k = _compartment(r, pre)
            r.fail(
                _key(w, "post"),
                f"a gap junction joins compartment {k} of {c}.{sec} to itself",
            )
        out.append(
            SynapseSpec(
                kind=kind,
                pre=pre,
                post=post,
                params=tuple((k, float(v)) for k, v in params.items()),
            )
        )
    return tuple(out)


def _stimulus(r: _Reader, raw, where: str, cells) -> StimulusSpec:
    r.mapping(raw, where)
    if "kind" not in raw:
        r.fail(_key(where, "kind"), "required key is missing ('step' or 'trace')")
    kind = r.string(raw["kind"], _key(where, "kind"))
    if kind == "step":
        raw = r.table(
            raw,
            where,
            required=("kind", *_SITE_KEYS, "amplitude", "delay", "duration"),
            optional=("position",),
        )
        return StimulusSpec(
            kind="step",
            site=_site(r, raw, where, cells),
            amplitude=r.number(raw["amplitude"], _key(where, "amplitude")),
            delay=r.number(raw["delay"], _key(where, "delay"), ge=0),
            duration=r.number(raw["duration"], _key(where, "duration"), ge=0),
        )
    if kind == "trace":
        raw = r.table(
            raw,
            where,
            required=("kind", *_SITE_KEYS, "values", "dt"),
            optional=("position", "delay"),
        )
        vw = _key(where, "values")
        values = r.seq(raw["values"], vw)
        if not values:
            r.fail(vw, "must hold at least one sample")
        return StimulusSpec(
            kind="trace",
            site=_site(r, raw, where, cells),
            values=tuple(r.number(v, f"{vw}[{i}]") for i, v in enumerate(values)),
            dt=r.number(raw["dt"], _key(where, "dt"), gt=0),
            delay=r.number(raw.get("delay", 0.0), _key(where, "delay"), ge=0),
        )
    r.fail(
        _key(where, "kind"),
        f"unknown stimulus kind {kind!r}{_suggest(kind, ['step', 'trace'])}: use "
        f"'step' or 'trace'",
    )
    raise AssertionError  # unreachable


def _record(r: _Reader, raw, where: str, cells) -> RecordSpec:
    raw = r.table(raw, where, required=("name", *_SITE_KEYS), optional=("position",))
    name = r.name(raw["name"], _key(where, "name"))
    if name in RESERVED_OUTPUT_NAMES:
        r.fail(
            _key(where, "name"),
            f"{name!r} is reserved (the output file stores 't' and 'stats')",
        )
    return RecordSpec(name=name, site=_site(r, raw, where, cells))


# ---------------------------------------------------------------------------
# Integration settings


def _whole(n: float) -> bool:
    return round(n) >= 1 and abs(n - round(n)) <= 1e-6 * max(1.0, n)


def _integration(r: _Reader, raw, where: str, t_stop: float) -> IntegrationSpec:
    raw = r.table(
        raw,
        where,
        required=("dt",),
        optional=("solver", "save_dt", "dtype", "controller"),
    )
    solver = r.string(raw.get("solver", "backward_euler"), _key(where, "solver"))
    try:
        factory = resolve_solver(solver)
    except LookupError as e:
        r.fail(_key(where, "solver"), str(e))
    dt = r.number(raw["dt"], _key(where, "dt"), gt=0)
    save_dt = r.number(raw.get("save_dt", dt), _key(where, "save_dt"), gt=0)
    dtype = r.string(raw.get("dtype", "float64"), _key(where, "dtype"))
    if dtype not in DTYPES:
        r.fail(_key(where, "dtype"), f"must be 'float32' or 'float64', got {dtype!r}")

    cw = _key(where, "controller")
    controller = raw.get("controller")
    if controller is not None:
        controller = r.mapping(controller, cw)
        if "kind" not in controller:
            r.fail(_key(cw, "kind"), "required key is missing (e.g. 'pid')")
        kind = r.string(controller["kind"], _key(cw, "kind"))
        if kind not in CONTROLLER_KINDS:
            r.fail(
                _key(cw, "kind"),
                f"unknown controller kind {kind!r}: use one of "
                f"{sorted(CONTROLLER_KINDS)}, or null (omit it) for fixed steps",
            )
        r.table(
            controller,
            cw,
            required=("kind", *sorted(CONTROLLER_KINDS[kind])),
            optional=sorted(CONTROLLER_OPTIONAL),
        )
        for k in ("rtol", "atol", "dtmin", "dtmax"):
            if k in controller:
                r.number(controller[k], _key(cw, k), gt=0)
        for k in ("pcoeff", "icoeff", "dcoeff"):
            if k in controller:
                r.number(controller[k], _key(cw, k), ge=0)
        if "dtmin" in controller and "dtmax" in controller:
            if controller["dtmin"] > controller["dtmax"]:
                r.fail(_key(cw, "dtmin"), "must be <= dtmax")
        if not isinstance(factory(), dfx.AbstractAdaptiveSolver):
            r.fail(
                cw,
                f"solver {solver!r} has no error estimate, so it cannot be used with "
                f"an adaptive controller; use fixed steps (null) or another solver",
            )
        controller = tuple(
            (k, v if k == "kind" else float(v)) for k, v in controller.items()
        )
        if not _whole(t_stop / save_dt):
            r.fail(
                _key(where, "save_dt"),
                f"{save_dt} ms must divide t_stop = {t_stop} ms into a whole number "
                f"of samples",
            )
    else:
        if not _whole(t_stop / dt):
            r.fail(
                _key(where, "dt"),
                f"{dt} ms must divide t_stop = {t_stop} ms into a whole number of "
                f"steps (fixed steps)",
            )
        if not _whole(save_dt / dt):
            r.fail(
                _key(where, "save_dt"),
                f"{save_dt} ms must be a whole multiple of dt = {dt} ms (fixed steps)",
            )
    return IntegrationSpec(
        solver=solver, dt=dt, save_dt=save_dt, dtype=dtype, controller=controller
    )


# ---------------------------------------------------------------------------
# The whole file


def validate(raw: Any, file: str) -> ModelSpec:
    """Check a parsed model file and return it as a `ModelSpec`.

    **Arguments:**

    - `raw`: the parsed JSON/TOML document.
    - `file`: the file name, used in messages and to resolve relative paths.

    **Returns:** a `ModelSpec`.

    **Raises:** `SpecError` at the first problem.
    """
    r = _Reader(file)
    if not isinstance(raw, dict):
        r.fail("", f"the top level must be a table (JSON object), got {_describe(raw)}")
    if "format" not in raw:
        r.fail("format", f"required key is missing (must be {FORMAT!r})")
    if raw["format"] != FORMAT:
        r.fail("format", f"must be {FORMAT!r}, got {_describe(raw['format'])}")
    raw = r.table(
        raw,
        "",
        required=("format", "t_stop", "cells", "integration"),
        optional=("temperature", "v_init", "synapses", "stimuli", "record"),
    )
    directory = Path(file).resolve().parent
    t_stop = r.number(raw["t_stop"], "t_stop", gt=0)

    items = r.seq(raw["cells"], "cells")
    if not items:
        r.fail("cells", "a model needs at least one cell")
    cell_list = [_cell(r, c, f"cells[{i}]", directory) for i, c in enumerate(items)]
    r.unique([c.name for c in cell_list], "cells", "cell")
    cells = {c.name: c for c in cell_list}

    synapses = _synapses(r, raw.get("synapses", []), "synapses", cells, directory)
    stimuli = tuple(
        _stimulus(r, s, f"stimuli[{i}]", cells)
        for i, s in enumerate(r.seq(raw.get("stimuli", []), "stimuli"))
    )
    record = tuple(
        _record(r, s, f"record[{i}]", cells)
        for i, s in enumerate(r.seq(raw.get("record", []), "record"))
    )
    r.unique([x.name for x in record], "record", "recording")
    return ModelSpec(
        file=file,
        temperature=r.number(raw.get("temperature", 6.3), "temperature", gt=-273.15),
        v_init=r.number(raw.get("v_init", -65.0), "v_init"),
        t_stop=t_stop,
        cells=tuple(cell_list),
        synapses=synapses,
        stimuli=stimuli,
        record=record,
        integration=_integration(r, raw["integration"], "integration", t_stop),
    )
