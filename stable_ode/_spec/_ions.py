"""Reading a model file's ions: the top-level `ions` table, a cell's `ions`
list, and checking a record's `variable` (see `docs/model-format.md`)."""

from .._model import Recording
from .._record_states import neuron_suffix
from ..mechanisms._ions import ion_variable, IonSetting, IonSpecies
from ._reader import key, Reader, suggest
from ._registry import REGISTRY


def _values(r: Reader, raw: dict, where: str) -> dict:
    out = {}
    for name, kind in REGISTRY.ions.items():
        if name not in raw:
            continue
        w = key(where, name)
        if kind == "valence":
            v = raw[name]
            if isinstance(v, bool) or not isinstance(v, int) or v == 0:
                r.fail(w, f"must be a non-zero integer, got {v!r}")
            out[name] = v
        elif kind == "concentration":
            out[name] = r.number(raw[name], w, gt=0)
        else:
            out[name] = r.number(raw[name], w)
    return out


def read_ions(r: Reader, raw, where: str = "ions") -> dict[str, IonSpecies]:
    """The top-level `ions`: `{name: {inside, outside, reversal, valence}}`."""
    table = r.mapping(raw, where)
    out = {}
    for name, entry in table.items():
        w = key(where, str(name))
        if not str(name).isidentifier():
            r.fail(w, f"an ion name must be an identifier (e.g. 'ca'), got {name!r}")
        entry = r.table(entry, w, optional=tuple(REGISTRY.ions))
        out[str(name)] = IonSpecies(**_values(r, entry, w))
    return out


def read_cell_ions(r: Reader, raw, where: str) -> list[IonSetting]:
    """A cell's `ions`: `[{name, sections, inside, outside, reversal}]`."""
    out = []
    for i, entry in enumerate(r.seq(raw, where)):
        w = f"{where}[{i}]"
        optional = ("sections",) + tuple(k for k in REGISTRY.ions if k != "valence")
        entry = r.table(entry, w, required=("name",), optional=optional)
        name = r.name(entry["name"], key(w, "name"))
        sections = None
        if "sections" in entry:
            sw = key(w, "sections")
            sections = tuple(
                r.string(s, f"{sw}[{k}]")
                for k, s in enumerate(r.seq(entry["sections"], sw))
            )
        out.append(IonSetting(name, sections, **_values(r, entry, w)))
    return out


def check_variables(r: Reader, record, cells, ions: dict) -> None:
    """Every record's `variable` is `v`, an ion variable of the model's ions (used
    by a mechanism, or set in `ions`) or `<name>_<suffix>` for a mechanism of the
    model (which `build` checks against the site's mechanisms, their states and
    RANGE variables),
    else an error at its key path."""
    names = set(ions)
    suffixes = set()
    for cell in cells:
        names.update(st.ion for st in cell.ions)
        for ins in cell.mechanisms:
            names.update(u.ion for u in getattr(ins.mechanism, "ions", ()))
            suffixes.add(neuron_suffix(ins.mechanism))
    for i, rec in enumerate(record):
        if not isinstance(rec, Recording):  # events: a point-process variable
            continue
        var = rec.variable
        if var == "v" or ion_variable(var, names):
            continue
        if any(var.endswith("_" + x) and len(var) > len(x) + 1 for x in suffixes):
            continue
        choices = ["v"] + [
            f"{p}{n}{s}"
            for n in sorted(names)
            for p, s in (("", "i"), ("", "o"), ("e", ""), ("i", ""))
        ]
        r.fail(
            f"record[{i}].variable",
            f"cannot record {var!r}{suggest(var, choices)}: 'v', a state or "
            "RANGE variable of a mechanism of the model as '<name>_<suffix>' "
            f"(suffixes {sorted(suffixes)}; e.g. 'm_hh', 'gna_hh'), or an ion "
            f"variable of this model's ions {sorted(names)} ('cai', 'cao', "
            "'eca', 'ica', ...)",
        )
