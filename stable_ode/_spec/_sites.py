"""Reading sites, synapses, stimuli and recordings of a model file.

A site (`cell`, `section`, `position`) becomes a `stable_ode.Site` and the index
of the compartment it names (`compartment_of`, numbered as `stable_ode.build`
numbers compartments); synapses are kept as those indices, so that no object is
made per synapse beyond its sites.
"""

from dataclasses import dataclass
from pathlib import Path

from .._model import Recording
from .._stimulus import Site, StepCurrent, TraceCurrent
from ..morphology import Cell
from ..morphology._discretise import compartment_of
from ._reader import key, listing, Reader, suggest
from ._registry import mechanism_parameters, REGISTRY, SYNAPSE_BOUNDS


RESERVED_OUTPUT_NAMES = ("t", "stats")


@dataclass(frozen=True)
class SynapseSpec:
    """A synapse of `kind` (a registered kind or `"module.path:ClassName"`) from
    compartment `pre` to compartment `post` (indices as `stable_ode.build` numbers
    them), with `params` (units of the class's fields: µS, mV, 1/ms for
    `ionotropic`; µS for `gap_junction`)."""

    kind: str
    pre: int
    post: int
    params: tuple[tuple[str, float], ...]


_SITE_KEYS = ("cell", "section")
_BOUND_TEXT = {"ge": ">=", "gt": ">", "ne": "!="}


class Sites:
    """Sites of the model's cells → `Site`s and compartment indices."""

    def __init__(self, r: Reader, cells: list[Cell]):
        self.r = r
        self.cells = {c.name: c for c in cells}
        self.offsets: dict[tuple[str, str], int] = {}
        offset = 0
        for c in cells:
            for s in c.sections:
                self.offsets[(c.name, s.name)] = offset
                offset += s.n_compartments
        self.n_compartments = offset

    def site(self, raw: dict, where: str) -> tuple[Site, int, int]:
        """`(site, section-local compartment, global compartment)`."""
        r = self.r
        cw = key(where, "cell")
        cell = r.string(raw["cell"], cw)
        if cell not in self.cells:
            names = list(self.cells)
            r.fail(
                cw,
                f"unknown cell {cell!r}{suggest(cell, names)} (cells: "
                f"{listing(names)})",
            )
        sw = key(where, "section")
        name = r.string(raw["section"], sw)
        try:
            section = self.cells[cell].section(name)
        except KeyError:
            names = [s.name for s in self.cells[cell].sections]
            r.fail(
                sw,
                f"unknown section {name!r}{suggest(name, names)} (sections of cell "
                f"{cell!r}: {listing(names)})",
            )
        position = r.position(raw.get("position", 0.5), key(where, "position"))
        with r.at(where):
            site = Site(cell, name, position)
        k = compartment_of(section, position)
        return site, k, self.offsets[(cell, name)] + k


def read_synapses(
    r: Reader, raw, where: str, sites: Sites, directory: Path
) -> tuple[SynapseSpec, ...]:
    """Synapses between compartments of any cells: `kind`, `pre`/`post` sites,
    `params` (the kind's class fields; omitted ones take the class defaults)."""
    items = r.seq(raw, where)
    classes: dict[str, tuple[set[str], set[str]]] = {}
    out = []
    for i, item in enumerate(items):
        w = f"{where}[{i}]"
        item = r.table(item, w, required=("kind", "pre", "post"), optional=("params",))
        kind = r.string(item["kind"], key(w, "kind"))
        if kind not in classes:
            with r.at(key(w, "kind")):
                classes[kind] = mechanism_parameters(REGISTRY.synapse(kind, directory))
        allowed, required = classes[kind]
        ends = []
        for end in ("pre", "post"):
            ew = key(w, end)
            site = r.table(item[end], ew, required=_SITE_KEYS, optional=("position",))
            ends.append(sites.site(site, ew))
        pw = key(w, "params")
        params = r.mapping(item.get("params", {}), pw)
        bounds = SYNAPSE_BOUNDS.get(kind, {})
        values = []
        for k, v in params.items():
            if k not in allowed:
                r.fail(
                    key(pw, k),
                    f"unknown parameter of synapse kind {kind!r}{suggest(k, allowed)}; "
                    f"its parameters are {', '.join(sorted(allowed))}",
                )
            v = r.number(v, key(pw, k))
            if k in bounds:
                op, bound = bounds[k]
                ok = {"ge": v >= bound, "gt": v > bound, "ne": v != bound}[op]
                if not ok:
                    r.fail(key(pw, k), f"must be {_BOUND_TEXT[op]} {bound}, got {v!r}")
            values.append((k, v))
        missing = sorted(required - set(params))
        if missing:
            r.fail(pw, f"synapse kind {kind!r} needs parameters {missing}")
        (pre, _, pre_i), (_, post_k, post_i) = ends
        if kind == "gap_junction" and pre_i == post_i:
            r.fail(
                key(w, "post"),
                f"a gap junction joins compartment {post_k} of "
                f"{pre.cell}.{pre.section} to itself",
            )
        out.append(SynapseSpec(kind, pre_i, post_i, tuple(values)))
    return tuple(out)


def read_stimulus(r: Reader, raw, where: str, sites: Sites):
    r.mapping(raw, where)
    if "kind" not in raw:
        r.fail(key(where, "kind"), "required key is missing ('step' or 'trace')")
    kind = r.string(raw["kind"], key(where, "kind"))
    with r.at(key(where, "kind")):
        cls = REGISTRY.stimulus(kind)
    if cls is StepCurrent:
        raw = r.table(
            raw,
            where,
            required=("kind", *_SITE_KEYS, "amplitude", "delay", "duration"),
            optional=("position",),
        )
        site = sites.site(raw, where)[0]
        with r.at(where):
            return StepCurrent(
                site,
                r.number(raw["amplitude"], key(where, "amplitude")),
                r.number(raw["delay"], key(where, "delay")),
                r.number(raw["duration"], key(where, "duration")),
            )
    raw = r.table(
        raw,
        where,
        required=("kind", *_SITE_KEYS, "values", "dt"),
        optional=("position", "delay"),
    )
    site = sites.site(raw, where)[0]
    vw = key(where, "values")
    values = tuple(
        r.number(v, f"{vw}[{i}]") for i, v in enumerate(r.seq(raw["values"], vw))
    )
    with r.at(where):
        return TraceCurrent(
            site,
            values,
            r.number(raw["dt"], key(where, "dt")),
            r.number(raw.get("delay", 0.0), key(where, "delay")),
        )


def read_record(r: Reader, raw, where: str, sites: Sites) -> Recording:
    raw = r.table(
        raw, where, required=("name", *_SITE_KEYS), optional=("position", "variable")
    )
    name = r.name(raw["name"], key(where, "name"))
    if name in RESERVED_OUTPUT_NAMES:
        r.fail(
            key(where, "name"),
            f"{name!r} is reserved (the output file stores 't' and 'stats')",
        )
    site = sites.site(raw, where)[0]
    variable = r.string(raw.get("variable", "v"), key(where, "variable"))
    with r.at(where):
        return Recording(name, site, variable)
