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
from jaxtyping import Array, Float

from ._build import check_shapes, choose_coupling
from ._group import AbstractStateGroup, MechanismGroup
from ._ion_table import (
    build_ions,
    BuiltIon,
    check_variable,
    concentration_views,
    current_views,
    reads_current,
)
from ._network import build_connections, cast_params, Connections, SynapseGroup
from ._state import group_states, State
from ._stimulus import build_stimuli, Site, StepCurrent, Stimuli, TraceCurrent
from .events._build import build_events, PointRecording  # events: point processes
from .mechanisms import AbstractKinetics, IonView
from .mechanisms._ions import IonSpecies
from .morphology._cell import Cell, Section
from .morphology._coupling import (
    AbstractCoupling,
)
from .morphology._discretise import (
    compartment_of,
    CompartmentInfo,
    discretise,
)
from .morphology._geometry import compartment_diameters


@dataclass(frozen=True)
class Layout:
    """Static bookkeeping: where each compartment lies, and named recordings."""

    compartments: tuple[CompartmentInfo, ...]
    recordings: tuple[tuple[str, int], ...]
    sections: tuple[tuple[str, Section, int], ...] = ()  # (cell, section, offset)
    recording_variables: tuple[str, ...] = ()  # per recording; () means all "v"
    # events: (name, group position in `groups`, variable, entry)
    point_recordings: tuple[tuple[str, int, str, int], ...] = ()

    def describe(self, index: int) -> str:
        c = self.compartments[index]
        return f"cell {c.cell!r}, section {c.section!r}, compartment {c.index}"


class Recording(eqx.Module):
    """Record `variable` at `site` under `name`.

    `variable`: `"v"` (membrane potential, mV, the default) or an ion's
    variable as NEURON names it: `"cai"`, `"cao"` (mM), `"eca"` (mV), `"ica"`
    (mA/cm², the ion's total membrane current), likewise for every ion of the
    model. Mechanism states (`"m_hh"`) are not supported yet.
    """

    name: str
    site: Site
    variable: str = "v"


class MembraneModel(eqx.Module):
    """Compartmental membrane model (all arrays; build it with `stable_ode.build`).

    **Fields:**

    - `area`: lateral membrane area per compartment, cm².
    - `diameter`: diameter per compartment, µm.
    - `length`: length per compartment, µm.
    - `capacitance`: specific capacitance per compartment, µF/cm².
    - `coupling`: axial coupling (`AbstractCoupling`).
    - `mechanisms`: tuple of `MechanismGroup`.
    - `stimuli`: `Stimuli`.
    - `celsius`: temperature, °C.
    - `v_init`: initial membrane potential per compartment, mV.
    - `layout`: static names of compartments and recordings.
    - `synapses`: tuple of `SynapseGroup` (chemical synapses).
    - `ions`: tuple of `BuiltIon` (empty without ions): initial/constant
      concentrations and fixed reversal potentials per compartment.
    - `point_processes`: tuple of point-process groups (`stable_ode.events`:
      ExpSyn, Exp2Syn, AlphaSynapse, SEClamp, one group per kind).
    """

    area: Float[Array, " ncomp"]
    diameter: Float[Array, " ncomp"]
    length: Float[Array, " ncomp"]
    capacitance: Float[Array, " ncomp"]
    coupling: AbstractCoupling
    mechanisms: tuple[MechanismGroup, ...]
    stimuli: Stimuli
    celsius: Float[Array, ""]
    v_init: Float[Array, " ncomp"]
    layout: Layout = eqx.field(static=True)
    synapses: tuple[SynapseGroup, ...] = ()
    ions: tuple[BuiltIon, ...] = ()
    point_processes: tuple[AbstractStateGroup, ...] = ()  # events

    @property
    def n_compartments(self) -> int:
        return self.area.shape[0]

    @property
    def dtype(self):
        return self.area.dtype

    @property
    def groups(self) -> tuple[AbstractStateGroup, ...]:
        """Every group of states, in `State.groups` order: the mechanism groups,
        the synapse groups, then the point-process groups."""
        return self.mechanisms + self.synapses + self.point_processes

    def kinetics(
        self,
        v: Float[Array, " ncomp"],
        states: tuple[dict[str, Array], ...] | dict,
        current_v: Float[Array, " ncomp"] | None = None,
    ) -> tuple[dict[str, AbstractKinetics], ...] | dict:
        """Every group's kinetics at voltages `v` (mV) and group states `states`
        (`State.groups`), as a tuple in the same order.

        The ion currents that mechanisms read (`IonView.current`, NEURON's
        `ica` seen by a calcium pool) are evaluated at `current_v` (default
        `v`): `BackwardEuler` passes the step's initial voltage, as NEURON
        updates states with the currents of the start of its step."""
        if not self.ions:
            return group_states(
                g.kinetics(self, v, x) for g, x in zip(self.groups, states)
            )
        views = self.ion_views(
            v if current_v is None else current_v,
            states,
            currents=reads_current(self),
        )
        return group_states(
            g.kinetics(self, v, x, views) if _ionic(g) else g.kinetics(self, v, x)
            for g, x in zip(self.groups, states)
        )

    def ion_views(
        self, v=None, states=None, *, currents: bool = False
    ) -> dict[str, IonView]:
        """Every ion over all compartments (`{name: IonView}`, arrays of shape
        `(ncomp,)`) at group states `states` (`None`: the initial
        concentrations); with `currents`, each ion's total membrane current at
        voltages `v` (mV), else zero currents."""
        views = concentration_views(self, states)
        if currents:
            views, _ = current_views(self, v, states, views)
        return views

    def ionic_current(
        self,
        v: Float[Array, " ncomp"],
        states: tuple[dict[str, Array], ...] | dict,
    ) -> Float[Array, " ncomp"]:
        """Total outward membrane current density per compartment, mA/cm², at
        voltages `v` (mV) and group states `states` (`State.groups`): density
        groups (channels) added group by group, then the point currents of the
        other groups (synapses onto the compartment, nA → mA/cm²)."""
        i = jnp.zeros_like(v)
        point = None
        views, cache = None, {}
        if self.ions:
            views, cache = current_views(
                self, v, states, concentration_views(self, states)
            )
        for k, (group, x) in enumerate(zip(self.groups, states)):
            if group.point_current:
                point = jnp.zeros_like(v) if point is None else point
                point = group.add_current(self, point, v, x)
            elif k in cache:
                parts = list(cache[k].values())
                total = parts[0]
                for p in parts[1:]:
                    total = total + p
                i = group.add_to(i, total)
            elif views is not None and _ionic(group):
                i = group.add_current(self, i, v, x, views)
            else:
                i = group.add_current(self, i, v, x)
        if point is not None:
            i = i + 1e-6 * point / self.area
        return i

    def stimulus_density(self, t) -> Float[Array, " ncomp"]:
        """Injected current density at time `t`, mA/cm² (1 nA = 1e-6 mA)."""
        return 1e-6 * self.stimuli.current(t, self.n_compartments) / self.area

    def axial_density(self, v: Float[Array, " ncomp"]) -> Float[Array, " ncomp"]:
        """Axial current density into each compartment, mA/cm²."""
        return self.coupling.current(v) / self.area

    def init_state(self) -> State:
        """Voltages at `v_init`, every group's states at their initial values
        there (gates at steady state)."""
        v = self.v_init
        if not self.ions:
            return State(
                v=v, groups=group_states(g.init_states(self, v) for g in self.groups)
            )
        views = self.ion_views()
        return State(
            v=v,
            groups=group_states(
                g.init_states(self, v, views) if _ionic(g) else g.init_states(self, v)
                for g in self.groups
            ),
        )

    def index(self, cell: str, section: str, position: float = 0.5) -> int:
        """Compartment index of `section(position)` in `cell` (NEURON's `sec(x)`)."""
        for name, sec, offset in self.layout.sections:
            if name == cell and sec.name == section:
                return offset + compartment_of(sec, position)
        raise KeyError(f"No section {section!r} in cell {cell!r}")


def _ionic(group) -> bool:
    """Whether `group` is a mechanism group whose mechanism uses ions."""
    return isinstance(group, MechanismGroup) and group.uses_ions


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
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"duplicate cell names {sorted(dup)}")
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
    point_recs = [r for r in recordings if isinstance(r, PointRecording)]
    recordings = [r for r in recordings if not isinstance(r, PointRecording)]
    pp_groups, iclamps, point_recs = build_events(
        point_processes, netcons, point_recs, index_of, dtype
    )
    stimuli = list(stimuli) + iclamps
    # --- end events ---
    edges = edges + gap_edges
    coupling = choose_coupling(n, edges, junctions, dtype)

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
            labels = [
                f"section {s!r}"
                for s in secs
                for _ in range(cell.section(s).n_compartments)
            ]
            mech = cast_params(
                ins.mechanism,
                len(idx),
                dtype,
                where,
                "compartments",
                to_jax=False,
                labels=labels,
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

    rec_names = [r.name for r in recordings] + [r[0] for r in point_recs]
    dup = {r for r in rec_names if rec_names.count(r) > 1}
    if dup:
        raise ValueError(f"duplicate recording names {sorted(dup)}")
    ion_table = build_ions(cells, offsets, groups, ions, n, dtype)
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
        area=jnp.asarray(area, dtype),
        diameter=jnp.asarray(diameter, dtype),
        length=jnp.asarray(length, dtype),
        capacitance=jnp.asarray(cap, dtype),
        coupling=coupling,
        mechanisms=tuple(groups),
        stimuli=build_stimuli(stimuli, index_of, dtype),
        celsius=jnp.asarray(celsius, dtype),
        v_init=jnp.full((n,), v_init, dtype),
        layout=layout,
        synapses=synapse_groups,
        ions=ion_table,
        point_processes=pp_groups,
    )
    check_shapes(model)
    return model
