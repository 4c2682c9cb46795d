"""A membrane model as arrays: the object terms and solvers work on.

`build(cells, stimuli, ...)` discretises cell descriptions (NEURON's scheme) into a
`MembraneModel`: per-compartment geometry, the axial coupling structure, the
mechanisms with per-compartment parameter arrays, and vectorised stimuli. Its
floating-point leaves (conductances, reversal potentials, stimulus amplitudes,
capacitances) are what `jax.grad` and `jax.vmap` act on.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._network import build_connections, cast_params, Connections, SynapseGroup
from ._stimulus import build_stimuli, Site, StepCurrent, Stimuli, TraceCurrent
from .mechanisms import AbstractMechanism, Gate
from .morphology._cell import Cell
from .morphology._coupling import (
    AbstractCoupling,
    dense_coupling,
    NoCoupling,
    TridiagonalCoupling,
)
from .morphology._discretise import (
    compartment_of,
    CompartmentInfo,
    discretise,
    path_order,
)
from .morphology._tree import tree_coupling


class State(eqx.Module):
    """The state of a membrane model.

    **Fields:**

    - `v`: membrane potential per compartment, mV, shape `(ncomp,)`.
    - `gates`: one dict per mechanism group (in `MembraneModel.mechanisms` order)
      mapping gate names to values in [0, 1], shape `(n_group,)`.
    - `synapses`: one dict per synapse group (in `MembraneModel.synapses` order)
      mapping state names to values, shape `(n_synapses,)`.

    Either is `{}` rather than `()` when there are no groups (see `group_states`).
    """

    v: Float[Array, " ncomp"]
    gates: tuple[dict[str, Float[Array, " n"]], ...]
    synapses: tuple[dict[str, Float[Array, " n"]], ...] | dict = eqx.field(
        default_factory=dict
    )


def group_states(per_group) -> tuple | dict:
    """Per-group states as a tuple, or `{}` when there are no groups.

    (An empty tuple is a singleton; equinox's buffer rewriting inside diffrax's
    implicit Runge–Kutta solvers cannot tell its occurrences apart and fails with
    "Only arrays can be treated as buffers". A fresh `{}` has no such problem.)
    """
    out = tuple(per_group)
    return out if out else {}


def relaxation_rhs(kinetics, states):
    """`rate·(inf - x)` (1/ms) for every state `x` of every group."""
    return group_states(
        {k: kin[k].rate * (kin[k].inf - x[k]) for k in x}
        for kin, x in zip(kinetics, states)
    )


class MechanismGroup(eqx.Module):
    """A mechanism inserted in the compartments `index`.

    `mechanism`'s floating fields have shape `(len(index),)`. Every insertion of
    the same mechanism class (with the same parameter structure) across all cells
    forms one group, so the per-step cost is one vectorised call per mechanism
    type, whatever the number of cells. `sections` lists the `(cell, section)`
    pairs it covers; `model.layout` names each compartment.
    """

    mechanism: AbstractMechanism
    index: Int[Array, " n"]
    sections: tuple[tuple[str, str], ...] = eqx.field(static=True)
    span: tuple[int, int] | None = eqx.field(static=True, default=None)

    def take(self, x: Float[Array, " ncomp"]) -> Float[Array, " n"]:
        """`x` at this group's compartments (a slice when they are contiguous,
        which spares a gather per step)."""
        if self.span is not None:
            return x[self.span[0] : self.span[1]]
        return x[self.index]

    def add_to(self, x: Float[Array, " ncomp"], y: Float[Array, " n"]):
        """`x` with `y` added at this group's compartments."""
        if self.span is not None:
            a, b = self.span
            if a == 0 and b == x.shape[0]:
                return x + y
            return x.at[a:b].add(y)
        return x.at[self.index].add(y)

    @property
    def name(self) -> str:
        return type(self.mechanism).__name__


@dataclass(frozen=True)
class Layout:
    """Static bookkeeping: where each compartment lies, and named recordings."""

    compartments: tuple[CompartmentInfo, ...]
    recordings: tuple[tuple[str, int], ...]

    def describe(self, index: int) -> str:
        c = self.compartments[index]
        return f"cell {c.cell!r}, section {c.section!r}, compartment {c.index}"


class Recording(eqx.Module):
    """Record the membrane potential at `site` under `name`."""

    name: str
    site: Site


class MembraneModel(eqx.Module):
    """Compartmental membrane model (all arrays; build it with `stable_ode.build`).

    **Fields:**

    - `area`: lateral membrane area per compartment, cm².
    - `capacitance`: specific capacitance per compartment, µF/cm².
    - `coupling`: axial coupling (`AbstractCoupling`).
    - `mechanisms`: tuple of `MechanismGroup`.
    - `stimuli`: `Stimuli`.
    - `celsius`: temperature, °C.
    - `v_init`: initial membrane potential per compartment, mV.
    - `layout`: static names of compartments and recordings.
    - `synapses`: tuple of `SynapseGroup` (chemical synapses).
    """

    area: Float[Array, " ncomp"]
    capacitance: Float[Array, " ncomp"]
    coupling: AbstractCoupling
    mechanisms: tuple[MechanismGroup, ...]
    stimuli: Stimuli
    celsius: Float[Array, ""]
    v_init: Float[Array, " ncomp"]
    layout: Layout = eqx.field(static=True)
    synapses: tuple[SynapseGroup, ...] = ()

    @property
    def n_compartments(self) -> int:
        return self.area.shape[0]

    @property
    def dtype(self):
        return self.area.dtype

    def gate_kinetics(self, v: Float[Array, " ncomp"]) -> tuple[dict[str, Gate], ...]:
        """Every mechanism group's gate kinetics at voltages `v`."""
        return tuple(
            g.mechanism.gates(g.take(v), self.celsius) for g in self.mechanisms
        )

    def synapse_kinetics(
        self, v: Float[Array, " ncomp"]
    ) -> tuple[dict[str, Gate], ...]:
        """Every synapse group's state kinetics, driven by presynaptic voltages."""
        return tuple(g.synapse.gates(v[g.pre], self.celsius) for g in self.synapses)

    def ionic_current(
        self,
        v: Float[Array, " ncomp"],
        gates: tuple[dict[str, Array], ...],
        synapses: tuple[dict[str, Array], ...] = (),
    ) -> Float[Array, " ncomp"]:
        """Total outward membrane current density per compartment, mA/cm²:
        channels, plus chemical synapses onto the compartment (nA → mA/cm²)."""
        i = jnp.zeros_like(v)
        for group, states in zip(self.mechanisms, gates):
            i = group.add_to(
                i, group.mechanism.current(group.take(v), states, self.celsius)
            )
        if self.synapses:
            isyn = jnp.zeros_like(v)
            for group, states in zip(self.synapses, synapses):
                isyn = isyn.at[group.post].add(
                    group.synapse.current(v[group.post], states, self.celsius)
                )
            i = i + 1e-6 * isyn / self.area
        return i

    def stimulus_density(self, t) -> Float[Array, " ncomp"]:
        """Injected current density at time `t`, mA/cm² (1 nA = 1e-6 mA)."""
        return 1e-6 * self.stimuli.current(t, self.n_compartments) / self.area

    def axial_density(self, v: Float[Array, " ncomp"]) -> Float[Array, " ncomp"]:
        """Axial current density into each compartment, mA/cm²."""
        return self.coupling.current(v) / self.area

    def init_state(self) -> State:
        """Voltages at `v_init`, every gate at its steady state there."""
        v = self.v_init
        gates = group_states(
            g.mechanism.init_states(g.take(v), self.celsius) for g in self.mechanisms
        )
        synapses = group_states(
            g.synapse.init_states(v[g.pre], self.celsius) for g in self.synapses
        )
        return State(v=v, gates=gates, synapses=synapses)

    def index(self, cell: str, section: str, position: float = 0.5) -> int:
        """Compartment index of `section(position)` in `cell` (NEURON's `sec(x)`)."""
        for i, c in enumerate(self.layout.compartments):
            if c.cell == cell and c.section == section:
                n = sum(
                    1
                    for d in self.layout.compartments
                    if d.cell == cell and d.section == section
                )
                return i + min(int(np.floor(position * n)), n - 1)
        raise KeyError(f"No section {section!r} in cell {cell!r}")


def build(
    cells: Sequence[Cell],
    stimuli: Sequence[StepCurrent | TraceCurrent] = (),
    recordings: Sequence[Recording] = (),
    connections: Sequence[Connections] = (),
    *,
    celsius: float = 6.3,
    v_init: float = -65.0,
    dtype=None,
) -> MembraneModel:
    """Discretise `cells` into a `MembraneModel`.

    **Arguments:**

    - `cells`: `Cell`s (names unique).
    - `stimuli`: `StepCurrent`s and `TraceCurrent`s.
    - `recordings`: `Recording`s, returned by name by `simulate`.
    - `connections`: `Connections` (chemical synapses and gap junctions) between
      compartments of any cells.
    - `celsius`: temperature, °C (NEURON's `celsius`, default 6.3).
    - `v_init`: initial membrane potential, mV.
    - `dtype`: `jnp.float32` or `jnp.float64` (default: JAX's default float).

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
    cells = list(cells)
    if not cells:
        raise ValueError("build needs at least one cell")
    names = [c.name for c in cells]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"duplicate cell names {sorted(dup)}")
    by_name = {c.name: c for c in cells}

    infos, area, cap, offsets, edges, junctions = discretise(cells)
    n = len(infos)

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
    edges = edges + gap_edges
    coupling = _choose_coupling(n, edges, junctions, dtype)

    # One group per mechanism type (and parameter structure) across all cells.
    inserted: dict = {}
    for cell in cells:
        for ins in cell.mechanisms:
            secs = (
                ins.sections
                if ins.sections is not None
                else tuple(s.name for s in cell.sections)
            )
            idx = [
                offsets[cell.name][s] + k
                for s in secs
                for k in range(cell.section(s).n_compartments)
            ]
            where = f"cell {cell.name!r}, mechanism {type(ins.mechanism).__name__}"
            mech = cast_params(
                ins.mechanism, len(idx), dtype, where, "compartments", to_jax=False
            )
            key = jax.tree_util.tree_structure(mech)
            inserted.setdefault(key, []).append(
                (mech, idx, tuple((cell.name, s) for s in secs))
            )
    groups = []
    for parts in inserted.values():
        mechs, idxs, secs = zip(*parts)
        all_idx = [i for idx in idxs for i in idx]
        if len(set(all_idx)) != len(all_idx):
            raise ValueError(
                f"mechanism {type(mechs[0]).__name__} is inserted twice in the same "
                f"compartment (sections {sorted(set(sum(secs, ())))})"
            )
        contiguous = bool(all_idx) and all_idx == list(
            range(all_idx[0], all_idx[0] + len(all_idx))
        )
        groups.append(
            MechanismGroup(
                span=(all_idx[0], all_idx[0] + len(all_idx)) if contiguous else None,
                mechanism=jax.tree_util.tree_map(
                    lambda *a: (
                        jnp.asarray(np.concatenate(a))
                        if isinstance(a[0], np.ndarray)
                        else a[0]
                    ),
                    *mechs,
                ),
                index=jnp.asarray(all_idx, jnp.int32),
                sections=sum(secs, ()),
            )
        )

    rec_names = [r.name for r in recordings]
    dup = {r for r in rec_names if rec_names.count(r) > 1}
    if dup:
        raise ValueError(f"duplicate recording names {sorted(dup)}")
    layout = Layout(
        compartments=tuple(infos),
        recordings=tuple((r.name, index_of(r.site)) for r in recordings),
    )
    return MembraneModel(
        area=jnp.asarray(area, dtype),
        capacitance=jnp.asarray(cap, dtype),
        coupling=coupling,
        mechanisms=tuple(groups),
        stimuli=build_stimuli(stimuli, index_of, dtype),
        celsius=jnp.asarray(celsius, dtype),
        v_init=jnp.full((n,), v_init, dtype),
        layout=layout,
        synapses=synapse_groups,
    )


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


def _choose_coupling(n, edges, junctions, dtype) -> AbstractCoupling:
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
