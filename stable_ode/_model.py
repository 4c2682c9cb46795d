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

from .mechanisms import AbstractMechanism, Gate
from .morphology._cell import Cell
from .morphology._coupling import AbstractCoupling, NoCoupling, TridiagonalCoupling
from .morphology._discretise import compartment_of, CompartmentInfo, discretise, path_order
from .morphology._tree import tree_coupling
from ._stimulus import build_stimuli, Site, Stimuli, StepCurrent, TraceCurrent


class State(eqx.Module):
    """The state of a membrane model.

    **Fields:**

    - `v`: membrane potential per compartment, mV, shape `(ncomp,)`.
    - `gates`: one dict per mechanism group (in `MembraneModel.mechanisms` order)
      mapping gate names to values in [0, 1], shape `(n_group,)`.
    """

    v: Float[Array, " ncomp"]
    gates: tuple[dict[str, Float[Array, " n"]], ...]


class MechanismGroup(eqx.Module):
    """A mechanism inserted in the compartments `index`.

    `mechanism`'s floating fields have shape `(len(index),)`. `name` and `sections`
    identify the group (for diagnostics and parameter selection).
    """

    mechanism: AbstractMechanism
    index: Int[Array, " n"]
    cell: str = eqx.field(static=True)
    sections: tuple[str, ...] = eqx.field(static=True)

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
    """

    area: Float[Array, " ncomp"]
    capacitance: Float[Array, " ncomp"]
    coupling: AbstractCoupling
    mechanisms: tuple[MechanismGroup, ...]
    stimuli: Stimuli
    celsius: Float[Array, ""]
    v_init: Float[Array, " ncomp"]
    layout: Layout = eqx.field(static=True)

    @property
    def n_compartments(self) -> int:
        return self.area.shape[0]

    @property
    def dtype(self):
        return self.area.dtype

    def gate_kinetics(self, v: Float[Array, " ncomp"]) -> tuple[dict[str, Gate], ...]:
        """Every mechanism group's gate kinetics at voltages `v`."""
        return tuple(g.mechanism.gates(v[g.index], self.celsius) for g in self.mechanisms)

    def ionic_current(
        self, v: Float[Array, " ncomp"], gates: tuple[dict[str, Array], ...]
    ) -> Float[Array, " ncomp"]:
        """Total outward membrane current density per compartment, mA/cm²."""
        i = jnp.zeros_like(v)
        for group, states in zip(self.mechanisms, gates):
            i = i.at[group.index].add(
                group.mechanism.current(v[group.index], states, self.celsius)
            )
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
        gates = tuple(
            g.mechanism.init_states(v[g.index], self.celsius) for g in self.mechanisms
        )
        return State(v=v, gates=gates)

    def index(self, cell: str, section: str, position: float = 0.5) -> int:
        """Compartment index of `section(position)` in `cell` (NEURON's `sec(x)`)."""
        for i, c in enumerate(self.layout.compartments):
            if c.cell == cell and c.section == section:
                n = sum(
                    1 for d in self.layout.compartments if d.cell == cell and d.section == section
                )
                return i + min(int(np.floor(position * n)), n - 1)
        raise KeyError(f"No section {section!r} in cell {cell!r}")


def _cast_mechanism(mech: AbstractMechanism, n: int, dtype, where: str) -> AbstractMechanism:
    def cast(x):
        if isinstance(x, bool) or not isinstance(x, (int, float, np.ndarray, jax.Array)):
            return x
        a = np.asarray(x, dtype=float) if not isinstance(x, jax.Array) else x
        if a.ndim == 0:
            return jnp.full((n,), a, dtype)
        if a.shape != (n,):
            raise ValueError(
                f"{where}: parameter array of shape {a.shape} does not match the "
                f"{n} compartments it is inserted in"
            )
        return jnp.asarray(a, dtype)

    return jax.tree_util.tree_map(cast, mech)


def build(
    cells: Sequence[Cell],
    stimuli: Sequence[StepCurrent | TraceCurrent] = (),
    recordings: Sequence[Recording] = (),
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
    # Paths (cables, unbranched cells) use LAPACK's tridiagonal solver; anything
    # branched (a junction of 3+ compartments, or a compartment with 3+
    # neighbours) uses the tree coupling, whose junction nodes stay in the solve.
    path = None if junctions else path_order(n, edges)
    coupling: AbstractCoupling
    if not edges and not junctions:
        coupling = NoCoupling(ncomp=n, dtype=dtype.name)
    elif path is None:
        coupling = tree_coupling(n, edges, junctions, dtype)
    else:
        order, g = path
        identity = bool(np.all(order == np.arange(n)))
        coupling = TridiagonalCoupling(
            g=jnp.asarray(g, dtype),
            order=None if identity else jnp.asarray(order, jnp.int32),
            inverse_order=None
            if identity
            else jnp.asarray(np.argsort(order), jnp.int32),
        )

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

    groups = []
    for cell in cells:
        for ins in cell.mechanisms:
            secs = ins.sections if ins.sections is not None else tuple(
                s.name for s in cell.sections
            )
            idx = [
                offsets[cell.name][s] + k
                for s in secs
                for k in range(cell.section(s).n_compartments)
            ]
            where = f"cell {cell.name!r}, mechanism {type(ins.mechanism).__name__}"
            groups.append(
                MechanismGroup(
                    mechanism=_cast_mechanism(ins.mechanism, len(idx), dtype, where),
                    index=jnp.asarray(idx, jnp.int32),
                    cell=cell.name,
                    sections=tuple(secs),
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
    )
