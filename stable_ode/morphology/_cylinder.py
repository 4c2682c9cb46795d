"""`cylinder`: a plain cylinder `Section`, built the fast way (loading many)."""

from ._cell import Section


def cylinder(name, length, diameter, n=1, parent=None, position=1.0) -> Section:
    """`Section(name, length, diameter, n, parent, position)`: the same section,
    through its own `__init__` and `__check_init__` but not equinox's
    per-instance construction, which costs more than the section (it checks for
    unset fields, converters and JAX arrays in static fields, which a cylinder's
    plain values cannot have)."""
    section = object.__new__(Section)
    Section.__init__(section, name, length, diameter, n, parent, position)
    Section.__check_init__(section)
    return section
