"""Reading a model file's parameter values, section lists and `properties`
entries: numbers, `{"distance": expression}` and `{"values": [...]}`."""

import numpy as np

from ..morphology import Distance, Properties
from ..morphology._expression import ExpressionError
from ._reader import key, Reader


def read_value(r: Reader, raw, where: str):
    """A parameter value: a number, `{"distance": "expression"}` or
    `{"values": [...]}` (one number per compartment of the entry's sections,
    in order; as a NumPy array, checked against the sections by `cell`)."""
    if isinstance(raw, dict):
        if "values" in raw:
            raw = r.table(raw, where, required=("values",))
            vw = key(where, "values")
            items = r.seq(raw["values"], vw)
            if not items:
                r.fail(vw, "must not be empty")
            return np.asarray([r.number(v, f"{vw}[{i}]") for i, v in enumerate(items)])
        raw = r.table(raw, where, optional=("distance", "values"))
        if "distance" not in raw:
            r.fail(where, "give {'distance': expression} or {'values': [...]}")
        text = r.string(raw["distance"], key(where, "distance"))
        try:
            return Distance(text)
        except ExpressionError as e:
            r.fail(key(where, "distance"), str(e))
    return r.number(raw, where)


def read_sections(r: Reader, raw, where: str) -> tuple[str, ...]:
    items = r.seq(raw, where)
    return tuple(r.string(s, f"{where}[{i}]") for i, s in enumerate(items))


def _property_value(r: Reader, raw, where: str):
    """`capacitance` or `axial_resistivity` of a `properties` entry: a number
    > 0 or `{"distance": expression}`; for `capacitance` also
    `{"values": [...]}`, one per compartment of the entry's sections (NEURON's
    `Ra` is one value per section, its `cm` one per segment)."""
    if not isinstance(raw, dict):
        return r.number(raw, where, gt=0)
    if "values" in raw and where.endswith("axial_resistivity"):
        r.fail(
            key(where, "values"),
            "NEURON's Ra is one value per section (sec.Ra; there is no "
            "seg.Ra): give a number or {'distance': expression} (evaluated at "
            "each section's centre), or one properties entry per section",
        )
    return read_value(r, raw, where)


def read_properties(r: Reader, raw, where: str) -> list[Properties]:
    out = []
    for i, item in enumerate(r.seq(raw, where)):
        w = f"{where}[{i}]"
        item = r.table(
            item, w, optional=("sections", "capacitance", "axial_resistivity")
        )
        sections = None
        if "sections" in item:
            sections = read_sections(r, item["sections"], key(w, "sections"))
        values = {
            k: _property_value(r, item[k], key(w, k))
            for k in ("capacitance", "axial_resistivity")
            if k in item
        }
        with r.at(w):
            out.append(Properties(sections, **values))
    return out
