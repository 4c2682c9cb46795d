"""Reading a model file's events: `point_processes`, `netcons`, `spikes` and
the record entries `{"name", "point_process", "variable"}` (see
`docs/model-format.md`, "Point processes and NetCons")."""

from ..events import NetCon, NetStim, PointRecording, SpikeRecording, SpikeTimes
from ..events._synapses import Exp2SynGroup, ExpSynGroup
from ..events._timed import AlphaSynapseGroup, IClampGroup, SEClampGroup
from ..events._vclamp import VClampGroup
from ._reader import key, listing, Reader, suggest
from ._registry import REGISTRY
from ._sites import RESERVED_OUTPUT_NAMES


RECORDABLE = {
    "ExpSyn": ExpSynGroup.recordable,
    "Exp2Syn": Exp2SynGroup.recordable,
    "AlphaSynapse": AlphaSynapseGroup.recordable,
    "SEClamp": SEClampGroup.recordable,
    "VClamp": VClampGroup.recordable,
    "IClamp": IClampGroup.recordable,
}
"""What a point-process record may name, by kind."""

NOT_YET: dict[str, str] = {}
"""Point-process kinds of the format that are not implemented yet."""

_TRIPLES = {"VClamp": ("dur", "amp")}  # NEURON's arrays of 3: lists in a file

_NEURON_NAMES = {"del": "delay"}  # NEURON's parameter name → the field's


def read_point_processes(r: Reader, raw, where: str, sites, imported=None) -> tuple:
    """The `point_processes` list → point-process objects (each named);
    `imported`: the `POINT_PROCESS` classes of the model's `nmodl` files, by
    name."""
    out = []
    kinds = {**REGISTRY.point_processes, **(imported or {})}
    for i, item in enumerate(r.seq(raw, where)):
        w = f"{where}[{i}]"
        # an ARTIFICIAL_CELL from an NMODL file is in no section
        peek = item.get("kind") if isinstance(item, dict) else None
        art = isinstance(peek, str) and getattr(kinds.get(peek), "artificial_cell", 0)
        item = r.table(
            item,
            w,
            required=("name", "kind") if art else ("name", "kind", "cell", "section"),
            optional=("params",) if art else ("position", "params"),
        )
        name = r.name(item["name"], key(w, "name"))
        kind = r.string(item["kind"], key(w, "kind"))
        if kind in NOT_YET:
            r.fail(key(w, "kind"), NOT_YET[kind])
        if kind not in kinds:
            r.fail(
                key(w, "kind"),
                f"unknown point process kind {kind!r}{suggest(kind, kinds)} "
                f"(kinds: {listing(sorted(kinds))})",
            )
        cls = kinds[kind]
        site = () if art else (sites.site(item, w)[0],)
        pw = key(w, "params")
        params = r.mapping(item.get("params", {}), pw)
        allowed = [
            "del" if k == "delay" else k
            for k in cls.__dataclass_fields__
            if k not in ("site", "name")
        ]
        values = {}
        for k, v in params.items():
            if k not in allowed:
                r.fail(
                    key(pw, str(k)),
                    f"unknown parameter of {kind}{suggest(str(k), allowed)} "
                    f"(parameters: {', '.join(allowed)})",
                )
            if k in _TRIPLES.get(kind, ()):
                kw = key(pw, k)
                items = r.seq(v, kw)
                if len(items) != 3:
                    r.fail(kw, f"must be a list of 3 numbers, got {len(items)}")
                values[k] = tuple(
                    r.number(x, f"{kw}[{j}]") for j, x in enumerate(items)
                )
                continue
            values[_NEURON_NAMES.get(k, k)] = r.number(v, key(pw, k))
        with r.at(pw):
            out.append(cls(*site, name=name, **values))
    r.unique([p.name for p in out], where, "point process")
    return tuple(out)


def read_netcons(
    r: Reader,
    raw,
    where: str,
    kinds: dict[str, str],
    sites,
    receivers=("ExpSyn", "Exp2Syn"),
) -> tuple:
    """The `netcons` list → `NetCon`s (targets by name; `kinds`: the kind of
    each point process by name; `receivers`: the kinds that take events; a source
    `{"cell", "section", "position"}` with `threshold` is a compartment's
    voltage)."""
    names = list(kinds)
    out = []
    for i, item in enumerate(r.seq(raw, where)):
        w = f"{where}[{i}]"
        item = r.table(
            item,
            w,
            required=("source", "target"),
            optional=("threshold", "delay", "weight"),
        )
        sw = key(w, "source")
        src = r.mapping(item["source"], sw)
        cell = not ("spike_times" in src or "netstim" in src)
        if "spike_times" in src:
            r.table(src, sw, required=("spike_times",))
        elif "netstim" in src:
            r.table(src, sw, required=("netstim",))
        else:
            r.table(src, sw, required=("cell", "section"), optional=("position",))
        if "threshold" in item and not cell:
            r.fail(key(w, "threshold"), "only a cell-voltage source has a threshold")
        extra = {}
        if cell:
            source = sites.site(src, sw)[0]
            extra["threshold"] = r.number(
                item.get("threshold", 10.0), key(w, "threshold")
            )
        elif "spike_times" in src:
            tw = key(sw, "spike_times")
            times = [
                r.number(t, f"{tw}[{j}]", ge=0)
                for j, t in enumerate(r.seq(src["spike_times"], tw))
            ]
            with r.at(tw):
                source = SpikeTimes(times)
        else:
            nw = key(sw, "netstim")
            ns = r.table(
                src["netstim"],
                nw,
                optional=("interval", "number", "start", "noise", "seed"),
            )
            kw = {k: r.number(v, key(nw, k)) for k, v in ns.items() if k != "seed"}
            if "seed" in ns:
                kw["seed"] = r.integer(ns["seed"], key(nw, "seed"))
            with r.at(nw):
                source = NetStim(**kw)
        target = r.string(item["target"], key(w, "target"))
        if target not in names:
            r.fail(
                key(w, "target"),
                f"unknown point process {target!r}{suggest(target, names)} "
                f"(point processes: {listing(names)})",
            )
        if kinds[target] not in receivers:
            r.fail(
                key(w, "target"),
                f"{target!r} is a {kinds[target]}, which receives no NetCon events "
                f"(targets: {', '.join(receivers)})",
            )
        delay = r.number(item.get("delay", 1.0), key(w, "delay"), ge=0)
        if cell and not delay > 0:
            r.fail(key(w, "delay"), "must be > 0 ms for a cell-voltage source")
        weight = r.number(item.get("weight", 0.0), key(w, "weight"))
        with r.at(w):
            out.append(NetCon(source, target, delay=delay, weight=weight, **extra))
    return tuple(out)


def read_spikes(r: Reader, raw, where: str, sites) -> tuple:
    """The `spikes` list → `SpikeRecording`s (`{"name", "cell", "section",
    "position", "threshold"}`; position 0.5 and threshold 10 mV by default,
    NEURON's)."""
    out = []
    for i, item in enumerate(r.seq(raw, where)):
        w = f"{where}[{i}]"
        item = r.table(
            item,
            w,
            required=("name", "cell", "section"),
            optional=("position", "threshold", "max_spikes"),
        )
        name = r.name(item["name"], key(w, "name"))
        if name in RESERVED_OUTPUT_NAMES:
            r.fail(key(w, "name"), f"{name!r} is reserved")
        site = sites.site(item, w)[0]
        thr = r.number(item.get("threshold", 10.0), key(w, "threshold"))
        kw = {}
        if "max_spikes" in item:
            kw["max_spikes"] = r.integer(item["max_spikes"], key(w, "max_spikes"))
        with r.at(w):
            out.append(SpikeRecording(name, site, threshold=thr, **kw))
    return tuple(out)


def read_point_record(
    r: Reader, raw, where: str, kinds: dict, recordable=None
) -> PointRecording:
    """A record entry `{"name", "point_process", "variable"}`; `kinds`: the
    kind of each point process by name; `recordable`: more kinds' variables
    (imported point processes)."""
    raw = r.table(raw, where, required=("name", "point_process", "variable"))
    name = r.name(raw["name"], key(where, "name"))
    if name in RESERVED_OUTPUT_NAMES:
        r.fail(key(where, "name"), f"{name!r} is reserved")
    pp = r.string(raw["point_process"], key(where, "point_process"))
    if pp not in kinds:
        names = list(kinds)
        r.fail(
            key(where, "point_process"),
            f"unknown point process {pp!r}{suggest(pp, names)} (point processes: "
            f"{listing(names)})",
        )
    var = r.string(raw["variable"], key(where, "variable"))
    ok = {**RECORDABLE, **(recordable or {})}.get(kinds[pp], ())
    if var not in ok:
        r.fail(
            key(where, "variable"),
            f"{kinds[pp]} {pp!r} has no recordable variable {var!r} (recordable: "
            f"{list(ok) or 'none yet'})",
        )
    return PointRecording(name, pp, var)
