"""Regions of a cell and values that vary over it.

- Section lists as NEURON's `Import3d` makes them (`somatic`, `axonal`, `basal`,
  `apical`; by SWC type for cells read from a morphology file, by name prefix
  otherwise) and `all`; name patterns with `*`. `resolve_sections` turns a list of
  such entries into section names.
- Path distance from the soma's centre (NEURON's `h.distance` from `soma(0.5)`) at
  each compartment's centre, and `Distance`, a parameter value given as a function
  of it.
- `Properties` (`_properties.py`): per-section `cm` and `Ra`, each a number or
  a `Distance`.

`Cell` applies all of them when it is built (`resolve_cell`), so that `build` sees
plain section names and one parameter value per compartment.
"""

import dataclasses
import re
from collections.abc import Callable, Sequence

import jax
import numpy as np

from .._errors import InvalidArgument
from . import _expression
from ._properties import (
    Properties as Properties,
    resolve_properties,
    section_values as section_values,
)


SECTION_LISTS = ("somatic", "axonal", "basal", "apical")
"""NEURON's section lists (after `Import3d`), by SWC type 1, 2, 3, 4."""
_PREFIXES = {"somatic": "soma", "axonal": "axon", "basal": "dend", "apical": "apic"}
_TYPES = {"somatic": 1, "axonal": 2, "basal": 3, "apical": 4}


class Distance:
    """A parameter value that is a function of the path distance from the soma's
    centre, evaluated at each compartment's centre (as a NEURON loop
    `for seg in sec: seg.gnabar_hh = f(h.distance(soma(0.5), seg))`).

    **Arguments:**

    - `function`: a callable taking a NumPy array of distances (µm) and returning
      values of the same shape (or a scalar), in the parameter's units; or a
      string in the model-file syntax, e.g. `"0.0002*(-0.8696 + 2.087*exp(0.003*x))"`
      (`x` in µm; `exp`, `log`, `abs`, `min`, `max`, `where(cond, a, b)` and
      arithmetic only; never passed to Python's `eval`).

    The soma's centre is the middle (x = 0.5) of the cell's first `somatic`
    section, or of the root section if the cell has none. Use it for any
    floating field of a mechanism in `Insert`: `Insert(HH(gnabar=Distance(f)))`,
    and for `Properties`' `capacitance` (per compartment) and
    `axial_resistivity` (per section, at its centre: NEURON's `Ra` is a section
    variable).
    The values are computed when the `Cell` is built; a non-finite value is an
    error naming the section.
    """

    def __init__(self, function: Callable | str):
        if isinstance(function, str):
            self.text: str | None = function
            tree = _expression.parse(function)
            self.function = lambda x: _expression.evaluate(tree, x)
        elif callable(function):
            self.text, self.function = None, function
        else:
            raise TypeError(
                f"Distance expects a callable or a string, got {function!r}"
            )

    def __repr__(self):
        return f"Distance({self.text if self.text is not None else self.function!r})"

    def values(self, x: np.ndarray) -> np.ndarray:
        """The values at distances `x` (µm), a float64 array of x's shape."""
        out = np.asarray(self.function(np.asarray(x, np.float64)), np.float64)
        return np.broadcast_to(out, np.shape(x)).copy()


def _pattern(entry: str) -> re.Pattern:
    return re.compile(".*".join(re.escape(p) for p in entry.split("*")) + r"\Z")


def section_lists(names: Sequence[str], types: Sequence[int] | None):
    """`{list name: [section names]}` for `SECTION_LISTS` and `all`."""
    out = {"all": list(names)}
    for lst in SECTION_LISTS:
        if types is not None:
            out[lst] = [n for n, t in zip(names, types) if t == _TYPES[lst]]
        else:
            out[lst] = [n for n in names if n.startswith(_PREFIXES[lst])]
    return out


def resolve_sections(entries, names, lists) -> tuple[str, ...]:
    """Section names for `entries` (names, `*` patterns, list names) in the
    order given, each once.

    **Raises:** `LookupError(k, problem)` for the first entry `k` that names
    nothing.
    """
    out: dict[str, None] = {}
    known = set(names)
    for k, e in enumerate(entries):
        if e in known:
            out[e] = None
        elif e in lists:
            out.update(dict.fromkeys(lists[e]))
        elif "*" in e:
            pattern = _pattern(e)
            hits = [n for n in names if pattern.match(n)]
            if not hits:
                raise LookupError(k, f"pattern {e!r} matches no section of this cell")
            out.update(dict.fromkeys(hits))
        else:
            raise LookupError(k, None)
    return tuple(out)


def path_distances(
    sections, origin: str, section_centres: bool = False
) -> dict[str, np.ndarray]:
    """Path distance (µm) from `origin`(0.5) to each compartment centre of each
    section: `{name: array of n_compartments}` (NEURON's `h.distance`); with
    `section_centres`, to each section's centre (`sec(0.5)`): arrays of one."""
    by_name = {s.name: s for s in sections}
    base: dict[str, float] = {}  # path distance from the root's 0 end

    def d_root(name: str, x: float) -> float:
        if name not in base:
            chain, n = [], name
            while n not in base:
                chain.append(n)
                p = by_name[n].parent
                if p is None:
                    base[n] = 0.0
                    chain.pop()
                    break
                n = p
            for c in reversed(chain):
                s = by_name[c]
                base[c] = base[s.parent] + s.parent_position * by_name[s.parent].length
        return base[name] + x * float(by_name[name].length)

    entry: dict[str, float] = {}  # origin's ancestors → where its path enters them
    n, x = origin, 0.5
    while n is not None:
        entry[n] = x
        s = by_name[n]
        n, x = s.parent, s.parent_position
    d_origin = d_root(origin, 0.5)
    out = {}
    for s in sections:
        n, b = s.name, None
        while n not in entry:
            b, n = by_name[n].parent_position, by_name[n].parent
        if section_centres:
            centres = np.asarray([0.5])
        else:
            centres = (np.arange(s.n_compartments) + 0.5) / s.n_compartments
        d_target = np.asarray([d_root(s.name, c) for c in centres])
        a = entry[n]
        if b is None:  # s is on the origin's path to the root
            b_arr = centres
        else:
            b_arr = np.full_like(centres, b)
        length = float(by_name[n].length)
        d_lca = d_root(n, 0.0)
        out[s.name] = (
            (d_origin - d_lca - a * length)
            + (d_target - d_lca - b_arr * length)
            + np.abs(a - b_arr) * length
        )
    return out


def _problem(owner, argument, problem):
    return InvalidArgument(owner, argument, problem)


def _valid_tree(sections) -> bool:
    from ._cell_checks import _first_cycle

    positions = {s.name: i for i, s in enumerate(sections)}
    if len(positions) != len(sections):
        return False
    if any(s.parent is not None and s.parent not in positions for s in sections):
        return False
    if sum(s.parent is None for s in sections) != 1:
        return False
    return _first_cycle(sections, positions) is None


def resolve_cell(owner, sections, mechanisms, ions, properties, types):
    """`(mechanisms, ions, properties)` with section entries turned into names and
    `Distance` values into per-compartment arrays (in `build`'s order: sections
    as listed, compartments in order). Returned as given if the sections are no
    valid tree (`Cell`'s own checks then report that first).

    **Raises:** `InvalidArgument` at the entry's key path.
    """
    from ._cell import Insert
    from ._cell_checks import _listing, _suggest

    if not _valid_tree(sections):
        return mechanisms, ions, properties

    names = [s.name for s in sections]
    lists = section_lists(names, types)
    by_name = {s.name: s for s in sections}

    def names_of(entries, where):
        if entries is None:
            return None
        try:
            return resolve_sections(entries, names, lists)
        except LookupError as e:
            k, problem = e.args
            bad = entries[k]
            if problem is None:
                problem = (
                    f"unknown section {bad!r}{_suggest(bad, names)}: not a section "
                    f"of this cell (sections: {_listing(names)})"
                )
            raise _problem(owner, f"{where}.sections[{k}]", problem) from None

    cache: dict = {}  # path distances, computed once if needed

    def centre_distances(section_centres: bool):
        if section_centres not in cache:
            roots = [s.name for s in sections if s.parent is None]
            origin = lists["somatic"][0] if lists["somatic"] else roots[0]
            cache[section_centres] = path_distances(sections, origin, section_centres)
        return cache[section_centres]

    out_mechanisms = []
    for m, ins in enumerate(mechanisms):
        if not isinstance(ins, Insert):
            out_mechanisms.append(ins)  # Cell's own check reports it
            continue
        secs = names_of(ins.sections, f"mechanisms[{m}]")
        mech = ins.mechanism
        leaves = jax.tree_util.tree_leaves(
            mech, is_leaf=lambda v: isinstance(v, Distance)
        )
        if any(isinstance(v, Distance) for v in leaves):
            distances = centre_distances(False)
            order = names if secs is None else secs
            x = np.concatenate([distances[s] for s in order])
            labels = [s for s in order for _ in range(by_name[s].n_compartments)]
            mech = _apply(mech, x, labels, owner, f"mechanisms[{m}]")
        out_mechanisms.append(Insert(mech, secs))
    out_ions = []
    for m, st in enumerate(ions):
        secs = names_of(getattr(st, "sections", None), f"ions[{m}]")
        if secs is not None:
            st = dataclasses.replace(st, sections=secs)
        out_ions.append(st)
    out_properties = resolve_properties(
        owner, properties, sections, names_of, centre_distances
    )
    return tuple(out_mechanisms), tuple(out_ions), tuple(out_properties)


def _apply(mech, x, labels, owner, where):
    def value(path, v):
        if not isinstance(v, Distance):
            return v
        name = jax.tree_util.keystr(tuple(path)).lstrip(".")
        try:
            out = v.values(x)
        except Exception as e:  # a user's function failing
            raise _problem(owner, f"{where}.{name}", f"{v!r} failed: {e}") from None
        bad = ~np.isfinite(out)
        if np.any(bad):
            j = int(np.argmax(bad))
            raise _problem(
                owner,
                f"{where}.{name}",
                f"{v!r} is {out[j]} at distance {x[j]:g} µm in section "
                f"{labels[j]!r}; parameters must be finite",
            )
        return out

    return jax.tree_util.tree_map_with_path(
        value, mech, is_leaf=lambda v: isinstance(v, Distance)
    )
