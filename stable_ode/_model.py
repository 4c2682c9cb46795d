"""A membrane model as arrays: the object terms and solvers work on.

`build(cells, stimuli, ...)` (`stable_ode._build`) discretises cell
descriptions (NEURON's scheme) into a `MembraneModel`: per-compartment
geometry, the axial coupling structure, the mechanisms with per-compartment
parameter arrays, and vectorised stimuli. Its floating-point leaves
(conductances, reversal potentials, stimulus amplitudes, capacitances) are
what `jax.grad` and `jax.vmap` act on.
"""

from dataclasses import dataclass, replace

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._group import AbstractStateGroup, MechanismGroup, uses_ions
from ._ion_table import (
    BuiltIon,
    concentration_views,
    current_views,
    reads_current,
)
from ._network import SynapseGroup
from ._state import group_states, State
from ._stimulus import Site, Stimuli
from .mechanisms import AbstractKinetics, IonView
from .morphology._cell import Section
from .morphology._coupling import (
    AbstractCoupling,
)
from .morphology._discretise import (
    compartment_of,
    CompartmentInfo,
)


@dataclass(frozen=True)
class Layout:
    """Static bookkeeping: where each compartment lies, and named recordings."""

    compartments: tuple[CompartmentInfo, ...]
    recordings: tuple[tuple[str, int], ...]
    sections: tuple[tuple[str, Section, int], ...] = ()  # (cell, section, offset)
    recording_variables: tuple[str, ...] = ()  # per recording; () means all "v"
    # events: (name, group position in `groups`, variable, entry)
    point_recordings: tuple[tuple[str, int, str, int], ...] = ()
    # the names of the point recordings of mechanisms' RANGE variables (computed
    # from the model, not read from the state)
    range_recordings: tuple[str, ...] = ()

    def describe(self, index: int) -> str:
        c = self.compartments[index]
        return f"cell {c.cell!r}, section {c.section!r}, compartment {c.index}"


class Recording(eqx.Module):
    """Record `variable` at `site` under `name`.

    `variable`: `"v"` (membrane potential, mV, the default) or an ion's
    variable as NEURON names it: `"cai"`, `"cao"` (mM), `"eca"` (mV), `"ica"`
    (mA/cm², the ion's total membrane current), likewise for every ion of the
    model; or a state or `RANGE` variable of a mechanism inserted at the site,
    as NEURON names it: `"<name>_<suffix>"` (`"m_hh"`, `"gna_hh"` in S/cm²,
    `"i_pas"` in mA/cm²; the suffix is an NMODL file's `SUFFIX`, `hh`/`pas` for
    `HH`/`Passive`, else the mechanism's class name), computed from each
    sample's voltage and states (`AbstractMechanism.range_variables`; NEURON
    reports what `BREAKPOINT` computes one sample later, see `docs/nmodl.md`).
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

    def hoisted(self) -> "MembraneModel":
        """This model with every group's `hoisted` values (computed once per
        solve, before its step loop; the same numbers)."""
        return replace(
            self,
            mechanisms=tuple(g.hoisted() for g in self.mechanisms),
            synapses=tuple(g.hoisted() for g in self.synapses),
            point_processes=tuple(g.hoisted() for g in self.point_processes),
        )

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
        v_solve: Float[Array, " ncomp"] | None = None,
    ) -> Float[Array, " ncomp"]:
        """Total outward membrane current density per compartment, mA/cm², at
        voltages `v` (mV) and group states `states` (`State.groups`): density
        groups (channels) added group by group, then the point currents of the
        other groups (synapses onto the compartment, nA → mA/cm²). `v_solve`
        (mV) reaches the density mechanisms as `Environment.v_solve`."""
        i = jnp.zeros_like(v)
        point = None
        views, cache = None, {}
        if self.ions:
            views, cache = current_views(
                self, v, states, concentration_views(self, states), v_solve
            )
        for k, (group, x) in enumerate(zip(self.groups, states)):
            if group.point_current:
                point = jnp.zeros_like(v) if point is None else point
                if views is not None and _ionic(group):
                    point = group.add_current(self, point, v, x, views)
                else:
                    point = group.add_current(self, point, v, x)
            elif k in cache:
                parts = list(cache[k].values())
                total = parts[0]
                for p in parts[1:]:
                    total = total + p
                i = group.add_to(i, total)
            elif views is not None and _ionic(group):
                i = group.add_current(self, i, v, x, views, v_solve)
            elif isinstance(group, MechanismGroup):
                i = group.add_current(self, i, v, x, v_solve=v_solve)
            else:
                i = group.add_current(self, i, v, x)
        if point is not None:
            i = i + 1e-6 * point / self.area
        return i

    def edges(self) -> Float[Array, " nedge"]:
        """Times (ms) at which an input jumps: the start and end of every
        stimulus step and trace (`Stimuli.edges`) and the groups' `edges` (a
        voltage clamp's level changes). Unsorted."""
        dtype = self.area.dtype
        parts = [self.stimuli.edges().astype(dtype)]
        parts += [g.edges(dtype) for g in self.groups]
        return jnp.concatenate(parts)

    def stiff(self, states) -> Bool[Array, ""]:
        """Whether any group is stiff (`AbstractStateGroup.stiff`) with the
        group states `states` (`State.groups`)."""
        flags = [g.stiff(x) for g, x in zip(self.groups, states)]
        return jnp.any(jnp.stack([jnp.asarray(False), *flags]))

    def sample_inputs(self, t, states) -> tuple[dict[str, Array], ...]:
        """The group states `states` with every group's clock-driven inputs
        at time `t` (ms; `AbstractStateGroup.sample_inputs`)."""
        return group_states(g.sample_inputs(t, x) for g, x in zip(self.groups, states))

    def stimulus_density(self, t) -> Float[Array, " ncomp"]:
        """Injected current density at time `t`, mA/cm² (1 nA = 1e-6 mA)."""
        return 1e-6 * self.stimuli.current(t, self.n_compartments) / self.area

    def axial_density(self, v: Float[Array, " ncomp"]) -> Float[Array, " ncomp"]:
        """Axial current density into each compartment, mA/cm²."""
        return self.coupling.current(v) / self.area

    def init_state(self) -> State:
        """Voltages at `v_init`, every group's states at their initial values
        there (gates at steady state), in NEURON's order where a mechanism
        reads a concentration another one writes (`_solver/_ordered.py`)."""
        from ._solver._ordered import init_in_order

        v = self.v_init
        ordered = init_in_order(self, v)
        if ordered is not None:
            return State(v=v, groups=ordered)
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
    """Whether `group` uses ions (a mechanism group whose mechanism does, or
    an imported point process with `USEION`)."""
    return uses_ions(group)
