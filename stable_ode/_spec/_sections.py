"""The loader's fast path for the common section: a plain cylinder.

A model file of many sections is mostly `{"name", "length", "diameter",
"n_compartments", "parent"}` entries with valid values. `plain_cylinder` takes
those without building the key paths of messages that will not be needed, and
`cylinder` (`stable_ode.morphology._cylinder`) builds the `Section` without
equinox's per-instance construction.
Anything else (another key, another type, a value out of range, a `Section`
that refuses its values) goes the general way (`CellReader.section`), which
reports it at its key.
"""

from ..morphology._cylinder import cylinder as cylinder
from ._reader import _NAME


_CYLINDER_KEYS = frozenset(
    ("name", "length", "diameter", "n_compartments", "parent", "parent_position")
)


def plain_cylinder(raw, largest: float) -> tuple | None:
    """`(name, length, diameter, n_compartments, parent, parent_position)` of a
    section entry `raw` whose every value is of the plain kind the general
    reader accepts unchanged (floats within `(0, largest]`, a positive integer,
    a valid name, a non-empty parent name, a position in [0, 1]), as that
    reader returns them; else `None`."""
    if type(raw) is not dict or not raw.keys() <= _CYLINDER_KEYS:
        return None
    name, length, diameter = raw.get("name"), raw.get("length"), raw.get("diameter")
    n, parent = raw.get("n_compartments", 1), raw.get("parent")
    x = raw.get("parent_position", 1.0)
    if (
        type(name) is str
        and _NAME.match(name)
        and type(length) is float
        and type(diameter) is float
        and 0.0 < length <= largest
        and 0.0 < diameter <= largest
        and type(n) is int
        and n >= 1
        and (parent is None or (type(parent) is str and parent != ""))
        and type(x) in (float, int)
        and 0.0 <= x <= 1.0
    ):
        return name, length, diameter, n, parent, float(x)
    return None
