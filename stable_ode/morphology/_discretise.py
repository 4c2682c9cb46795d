"""NEURON's discretisation of cells into compartments and axial conductances."""

import math
from collections import defaultdict
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from .._misc import gc_paused
from ._cell import Cell, Section
from ._geometry import (
    compartment_areas,
    connecting_halves,
    cylinder_area,
    cylinder_half_resistance,
    R_SCALE,
    section_conductances,
)
from ._regions import section_values


@dataclass(frozen=True)
class CompartmentInfo:
    """Where a compartment lies: cell, section, index within the section."""

    cell: str
    section: str
    index: int


def section_area(sec: Section) -> float:
    """Lateral area of one compartment of `sec`, cm²; for a section of 3-D points
    (whose compartments differ) the smallest."""
    if sec.points is None:
        return cylinder_area(sec)
    return float(compartment_areas(sec).min())


def half_conductance(sec: Section, ra: float) -> float:
    """Conductance of half a compartment of `sec` along its axis, S; for a section
    of 3-D points (whose halves differ) the smallest.

    Resistance `Ra·(L/2n) / (π·(d/2)²)` with µm converted to cm for a cylinder.
    """
    if sec.points is None:
        return 1.0 / cylinder_half_resistance(sec, ra)
    r = connecting_halves(sec.points, sec.n_compartments).max() * R_SCALE * ra
    return 1.0 / float(r)


def compartment_of(sec: Section, position: float) -> int:
    """NEURON's `sec(x)`: index `min(floor(x·n), n-1)` of the compartment at x."""
    n = sec.n_compartments
    return min(int(math.floor(position * n)), n - 1)


def discretise(cells: list[Cell]):
    with gc_paused():
        return _discretise(cells)


def _discretise(cells: list[Cell]):
    """Compartments of `cells` and their axial graph.

    **Returns:** `(infos, area, capacitance, offsets, edges, junctions)`; `offsets[cell]
    [section]` is the index of the section's first compartment and `edges` is a
    list of `(i, j, g)` conductances (S) between compartments, after eliminating
    the membrane-less junction nodes of degree ≤ 2; junctions joining ≥ 3
    compartments are returned as `junctions`: lists of `(i, g)` pairs, `g` the
    half-compartment conductance between compartment `i` and the junction node.

    Junction nodes are NEURON's: one at each end of a section where something
    attaches, the 0 end of a non-root section being the node it hangs from (so a
    child attached at `parent(0)` shares the parent's own attachment node).
    """
    infos: list[CompartmentInfo] = []
    area: list[float] = []
    capacitance: list[float] = []
    offsets: dict[str, dict[str, int]] = {}
    values = {cell.name: section_values(cell) for cell in cells}
    # Plain copies of the sections' fields: reading a field of an equinox module
    # costs more than the arithmetic done with it, several times per section.
    plain = {
        cell.name: [SimpleNamespace(**vars(s)) for s in cell.sections] for cell in cells
    }
    for cell in cells:
        offsets[cell.name] = {}
        cm = values[cell.name][0]
        for sec in plain[cell.name]:
            offsets[cell.name][sec.name] = len(infos)
            areas = compartment_areas(sec).tolist()
            c = cm[sec.name]  # a number, or one per compartment
            cs = c.tolist() if isinstance(c, np.ndarray) else [c] * len(areas)
            for k in range(sec.n_compartments):
                infos.append(CompartmentInfo(cell.name, sec.name, k))
                area.append(areas[k])
                capacitance.append(cs[k])

    edges: list[tuple[int, int, float]] = []
    junction_members: list[list[tuple[int, float]]] = []
    for cell in cells:
        ra = values[cell.name][1]  # per section, as NEURON's Ra
        off = offsets[cell.name]
        # Junction nodes at the 0 and 1 ends of each section, created on demand.
        node_members: dict[tuple[str, float], list[tuple[int, float]]] = defaultdict(
            list
        )
        by_name = {sec.name: sec for sec in plain[cell.name]}
        for sec in plain[cell.name]:
            inner, g_first, _ = section_conductances(sec, ra[sec.name])
            start = off[sec.name]
            for k in range(sec.n_compartments - 1):
                edges.append((start + k, start + k + 1, inner[k]))
            if sec.parent is None:
                continue
            parent = by_name[sec.parent]
            x = sec.parent_position
            # As in NEURON, the 0 end of a section that has a parent is not a node
            # of its own: it is the node the section hangs from. Attaching at it
            # attaches there (recursively).
            while x == 0.0 and parent.parent is not None:
                parent, x = by_name[parent.parent], parent.parent_position
            child_first = (start, g_first)
            if 0.0 < x < 1.0:
                # Straight to the parent's compartment containing x, through the
                # child's own half resistance.
                edges.append(
                    (off[parent.name] + compartment_of(parent, x), start, g_first)
                )
            else:
                key = (parent.name, x)
                if not node_members[key]:
                    # The parent's half towards that end: the left half of its
                    # first compartment, or the right half of its last.
                    _, p_first, p_last = section_conductances(parent, ra[parent.name])
                    pk, g = (
                        (0, p_first)
                        if x == 0.0
                        else (parent.n_compartments - 1, p_last)
                    )
                    node_members[key].append((off[parent.name] + pk, g))
                node_members[key].append(child_first)
        for members in node_members.values():
            if len(members) == 2:
                (i, gi), (j, gj) = members
                edges.append((i, j, gi * gj / (gi + gj)))
            else:
                junction_members.append(members)
    return (
        infos,
        np.asarray(area),
        np.asarray(capacitance),
        offsets,
        edges,
        junction_members,
    )


def path_order(n: int, edges: list[tuple[int, int, float]]):
    """If the compartment graph is a union of paths, an ordering along them.

    **Returns:** `(order, g)` with `order` a permutation of `range(n)` and `g[k]`
    the conductance between `order[k]` and `order[k+1]` (0 where two paths meet),
    or `None` if some compartment has more than two neighbours.
    """
    nbrs: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for i, j, g in edges:
        nbrs[i].append((j, g))
        nbrs[j].append((i, g))
    if any(len(v) > 2 for v in nbrs.values()):
        return None
    seen = np.zeros(n, bool)
    order: list[int] = []
    g_out: list[float] = []
    for start in range(n):
        if seen[start] or len(nbrs[start]) == 2:
            continue
        if order:
            g_out.append(0.0)
        prev, cur = -1, start
        while True:
            seen[cur] = True
            order.append(cur)
            nxt = [(j, g) for j, g in nbrs[cur] if j != prev and not seen[j]]
            if not nxt:
                break
            prev, (cur, g) = cur, nxt[0]
            g_out.append(g)
    if len(order) != n:  # a cycle; cannot happen for trees
        return None
    return np.asarray(order), np.asarray(g_out, dtype=float)
