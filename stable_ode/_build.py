"""`build`: cell descriptions, stimuli, connections and recordings into a
`MembraneModel` (discretisation, groups, ions, events), with the choice of
coupling structure for the compartment graph and the build-time check of
every group's shapes."""

import dataclasses
from collections import Counter
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ._group import MechanismGroup
from ._ion_table import build_ions, check_variable
from ._misc import device_array
from ._model import Layout, MembraneModel, Recording
from ._network import build_connections, cast_params, Connections
from ._record_states import is_state_variable, state_entries
from ._stimulus import build_stimuli, Site, StepCurrent, TraceCurrent
from .events._arrivals import CELL_NETCON, NETCON
from .events._build import build_events, EVENT_RECORDINGS  # events
from .mechanisms._ions import ion_variable, IonSpecies
from .mechanisms._scheme import kinetics_state_names, map_kinetics
from .morphology._cell import Cell
from .morphology._coupling import (
    AbstractCoupling,
    dense_coupling,
    NoCoupling,
    TridiagonalCoupling,
)
from .morphology._discretise import compartment_of, discretise, path_order
from .morphology._geometry import compartment_diameters
from .morphology._tree import tree_coupling


def check_shapes(model):
    """Every group's initial states, kinetics and current have one entry per
    compartment (or synapse) of the group: else a `ValueError` naming the
    mechanism, the function and where it is inserted. Traced only
    (`jax.eval_shape`): nothing is computed."""

    def describe(group) -> str:
        if isinstance(group, MechanismGroup):
            cells = sorted({c for c, _ in group.sections})
            secs = sorted({s for _, s in group.sections})
            return f"mechanism {group.name} (cells {cells}, sections {secs})"
        return f"synapse group {group.name!r}"

    v = model.v_init
    for group in model.groups:
        n = group.compartments.shape[0]

        def check(what, leaf, group=group, n=n):
            if per_netcon(what):  # one per NetCon (an NMODL weight vector)
                return
            if leaf.shape != (n,):
                raise ValueError(
                    f"{describe(group)}: {what} has shape {leaf.shape}, expected "
                    f"({n},) (one value per entry of the group)"
                )

        names = []

        def shapes(s, group=group, names=names):
            kin = group.kinetics(model, v, s)
            moved = kinetics_state_names(kin)
            names.extend(moved)
            if not set(moved) <= set(s):  # reported below
                return {}, group.current(model, v, s)
            rhs = map_kinetics(lambda k, xk: k.rhs(xk), kin, s)
            return rhs, group.current(model, v, s)

        x = jax.eval_shape(lambda g=group: g.init_states(model, v))
        for name, leaf in x.items():
            check(f"init_states()[{name!r}]", leaf)
        for ion in model.ions:
            for g, state in ion.writes_inside + ion.writes_outside:
                if model.groups[g] is group and state not in x:
                    raise ValueError(
                        f"{describe(group)}: writes {state!r} (UseIon {ion.name!r}) "
                        f"but has no state of that name (its states: {sorted(x)}); "
                        "a written concentration is the writer's state of exactly "
                        "that name"
                    )
        rhs, i = jax.eval_shape(shapes, x)
        if set(names) != set(x):
            raise ValueError(
                f"{describe(group)}: kinetics() returns states {sorted(names)} but "
                f"init_states() returns {sorted(x)}"
            )
        for name, leaf in rhs.items():
            check(f"the kinetics of state {name!r} (its rhs)", leaf)
        check("current()", i)


def per_netcon(what: str) -> bool:
    """Whether `what` (a description naming a state) is about a state a
    point-process group keeps per NetCon rather than per entry."""
    return f"'{NETCON}" in what or f"'{CELL_NETCON}" in what


def _duplicates(names) -> list:
    """The names that occur more than once in `names`, sorted."""
    return sorted(name for name, k in Counter(names).items() if k > 1)


def _has_cycle(n: int, edges) -> bool:
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j, _ in edges:
        ri, rj = find(i), find(j)
        if ri == rj:
            return True
        parent[ri] = rj
    return False


def _compartments(starts: list[int], counts: list[int]) -> np.ndarray:
    """The compartment indices `start, ..., start + count - 1` of each section in
    turn (int64)."""
    counts_ = np.asarray(counts, np.int64)
    total = int(counts_.sum())
    ends = np.cumsum(counts_)
    return np.arange(total, dtype=np.int64) + np.repeat(
        np.asarray(starts, np.int64) - (ends - counts_), counts_
    )


class _SectionLabels:
    """`labels[j]`: "section 'name'" of the section holding entry `j` of an
    inserted mechanism (what `cast_params` names in an error), computed only when
    asked for."""

    def __init__(self, secs, counts):
        self.secs = secs
        self.ends = np.cumsum(np.asarray(counts, np.int64))

    def __getitem__(self, j: int) -> str:
        return f"section {self.secs[int(np.searchsorted(self.ends, j, 'right'))]!r}"


def choose_coupling(n, edges, junctions, dtype) -> AbstractCoupling:
    """The cheapest exact structure for the compartment graph: none, paths
    (tridiagonal, LAPACK), a forest (tree solve), or, if gap junctions close a
    cycle, a dense matrix (LU; O(n³) per step, for small models only)."""
    if not edges and not junctions:
        return NoCoupling(ncomp=n, dtype=dtype.name)
    n_nodes = n + len(junctions)
    all_edges = list(edges) + [
        (n + k, i, g) for k, members in enumerate(junctions) for i, g in members
    ]
    if _has_cycle(n_nodes, all_edges):
        return dense_coupling(n, edges, junctions, dtype)
    path = None if junctions else path_order(n, edges)
    if path is None:
        return tree_coupling(n, edges, junctions, dtype)
    order, g = path
    identity = bool(np.all(order == np.arange(n)))
    return TridiagonalCoupling(
        g=jnp.asarray(g, dtype),
        order=None if identity else jnp.asarray(order, jnp.int32),
        inverse_order=None if identity else jnp.asarray(np.argsort(order), jnp.int32),
    )


def build(
    cells: Sequence[Cell],
    stimuli: Sequence[StepCurrent | TraceCurrent] = (),
    recordings: Sequence[Recording] = (),
    connections: Sequence[Connections] = (),
    point_processes: Sequence = (),
    netcons: Sequence = (),
    *,
    celsius: float = 6.3,
    v_init: float = -65.0,
    dtype=None,
    ions: dict[str, IonSpecies] | None = None,
) -> MembraneModel:
    """Discretise `cells` into a `MembraneModel`.

    **Arguments:**

    - `cells`: `Cell`s (names unique).
    - `stimuli`: `StepCurrent`s and `TraceCurrent`s.
    - `recordings`: `Recording`s (membrane potential) and
      `stable_ode.PointRecording`s (a point process's variable), returned by
      name by `simulate`.
    - `connections`: `Connections` (chemical synapses and gap junctions) between
      compartments of any cells.
    - `point_processes`: NEURON's point processes at sites
      (`stable_ode.IClamp`, `ExpSyn`, `Exp2Syn`, `AlphaSynapse`, `SEClamp`).
    - `netcons`: `stable_ode.NetCon`s from spike times or `NetStim`s into
      `ExpSyn`s and `Exp2Syn`s (see `docs/events.md`).
    - `celsius`: temperature, °C (NEURON's `celsius`, default 6.3).
    - `v_init`: initial membrane potential, mV.
    - `dtype`: `jnp.float32` or `jnp.float64` (default: JAX's default float).
    - `ions`: `{name: IonSpecies}`, the model's ion settings (initial
      concentrations mM, fixed reversal mV, valence); defaults NEURON's (see
      `stable_ode.mechanisms.UseIon`). Per-section overrides: `Cell(ions=...)`.

    **Returns:** a `MembraneModel`.
    """
    if dtype is None:
        dtype = jnp.zeros(()).dtype
    dtype = jnp.dtype(dtype)
    if dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dtype}")
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        raise ValueError(
            "dtype float64 needs 64-bit JAX: call "
            "`jax.config.update('jax_enable_x64', True)` before building the model"
        )
    for name, value in (("celsius", celsius), ("v_init", v_init)):
        if not np.isfinite(value):
            raise ValueError(f"build: {name} must be finite, got {value}")
    cells = list(cells)
    if not cells:
        raise ValueError("build needs at least one cell")
    names = [c.name for c in cells]
    dup = _duplicates(names)
    if dup:
        raise ValueError(f"duplicate cell names {dup}")
    by_name = {c.name: c for c in cells}

    infos, area, cap, offsets, edges, junctions = discretise(cells)
    n = len(infos)
    diameter, length = np.zeros(n), np.zeros(n)
    sections = []
    for cell in cells:
        for sec in cell.sections:
            start = offsets[cell.name][sec.name]
            stop = start + sec.n_compartments
            diameter[start:stop] = compartment_diameters(sec)
            length[start:stop] = sec.length / sec.n_compartments
            sections.append((cell.name, sec, start))

    def index_of(site: Site) -> int:
        if site.cell not in by_name:
            raise ValueError(f"unknown cell {site.cell!r} (cells: {names})")
        cell = by_name[site.cell]
        try:
            sec = cell.section(site.section)
        except KeyError as e:
            raise ValueError(str(e.args[0])) from None
        if not (0.0 <= site.position <= 1.0):
            raise ValueError(f"position must be in [0, 1], got {site.position}")
        return offsets[cell.name][sec.name] + compartment_of(sec, site.position)

    synapse_groups, gap_edges = build_connections(connections, index_of, n, dtype)
    # --- events: point processes and NetCons (stable_ode/events) ---
    point_recs = [r for r in recordings if isinstance(r, EVENT_RECORDINGS)]
    recordings = [r for r in recordings if not isinstance(r, EVENT_RECORDINGS)]
    pp_groups, iclamps, point_recs = build_events(
        point_processes, netcons, point_recs, index_of, dtype, celsius
    )
    stimuli = list(stimuli) + iclamps
    # --- end events ---
    edges = edges + gap_edges
    coupling = choose_coupling(n, edges, junctions, dtype)

    # One group per mechanism type (and parameter structure) across all cells.
    inserted: dict = {}
    for cell in cells:
        counts = {s.name: s.n_compartments for s in cell.sections}
        off = offsets[cell.name]
        for ins in cell.mechanisms:
            secs = ins.sections if ins.sections is not None else tuple(counts)
            idx = _compartments([off[s] for s in secs], [counts[s] for s in secs])
            where = f"cell {cell.name!r}, mechanism {type(ins.mechanism).__name__}"
            mech = cast_params(
                ins.mechanism,
                len(idx),
                dtype,
                where,
                "compartments",
                to_jax=False,
                labels=_SectionLabels(secs, [counts[s] for s in secs]),
            )
            key = jax.tree_util.tree_structure(mech)
            inserted.setdefault(key, []).append(
                (mech, idx, tuple((cell.name, s) for s in secs))
            )
    groups = []
    for parts in inserted.values():
        mechs, idxs, secs = zip(*parts)
        all_idx = np.concatenate(idxs)
        if np.unique(all_idx).size != all_idx.size:
            raise ValueError(
                f"mechanism {type(mechs[0]).__name__} is inserted twice in the same "
                f"compartment (sections {sorted(set(sum(secs, ())))})"
            )
        first = int(all_idx[0]) if all_idx.size else 0
        contiguous = bool(all_idx.size) and bool(
            np.array_equal(all_idx, np.arange(first, first + all_idx.size))
        )
        groups.append(
            MechanismGroup(
                span=(first, first + all_idx.size) if contiguous else None,
                mechanism=jax.tree_util.tree_map(
                    lambda *a: (
                        device_array(np.concatenate(a))
                        if isinstance(a[0], np.ndarray)
                        else a[0]
                    ),
                    *mechs,
                ),
                index=device_array(all_idx, jnp.int32),
                sections=sum(secs, ()),
            )
        )

    rec_names = [r.name for r in recordings] + [r[0] for r in point_recs]
    dup = _duplicates(rec_names)
    if dup:
        raise ValueError(f"duplicate recording names {dup}")
    all_groups = [*groups, *synapse_groups, *pp_groups]  # `MembraneModel.groups`
    ion_table = build_ions(cells, offsets, all_groups, ions, n, dtype)
    ion_names = [ion.name for ion in ion_table]
    state_recs = [
        r
        for r in recordings
        if r.variable != "v"
        and ion_variable(r.variable, ion_names) is None
        and is_state_variable(r.variable, groups)
    ]
    recordings = [r for r in recordings if r not in state_recs]
    variables = tuple(check_variable(r, ion_table) for r in recordings)
    layout = Layout(
        compartments=tuple(infos),
        recordings=tuple((r.name, index_of(r.site)) for r in recordings),
        sections=tuple(sections),
        recording_variables=variables if any(x != "v" for x in variables) else (),
        point_recordings=tuple(  # events: positions in `MembraneModel.groups`
            (name, len(groups) + len(synapse_groups) + k, var, entry)
            for name, k, var, entry in point_recs
        ),
    )
    model = MembraneModel(
        area=device_array(area, dtype),
        diameter=device_array(diameter, dtype),
        length=device_array(length, dtype),
        capacitance=device_array(cap, dtype),
        coupling=coupling,
        mechanisms=tuple(groups),
        stimuli=build_stimuli(stimuli, index_of, dtype),
        celsius=jnp.asarray(celsius, dtype),
        v_init=device_array(np.full(n, v_init), dtype),
        layout=layout,
        synapses=synapse_groups,
        ions=ion_table,
        point_processes=pp_groups,
    )
    check_shapes(model)
    if state_recs:  # mechanism states ("m_hh") and RANGE variables ("gna_hh"),
        # recorded as point-process variables are
        entries = state_entries(model, state_recs, index_of)
        states = jax.eval_shape(model.init_state).groups
        layout = dataclasses.replace(
            layout,
            point_recordings=layout.point_recordings + tuple(entries),
            range_recordings=tuple(
                name for name, g, var, _ in entries if var not in states[g]
            ),
        )
        model = dataclasses.replace(model, layout=layout)
    return model
