"""Groups of states: a mechanism inserted in some compartments, a synapse group.

Every group holds its own named states (one dict in `State.groups`) and
answers the same four questions, so that the term, the solvers and
diagnostics iterate groups uniformly:

- `environment(model)`: the `Environment` its mechanism sees;
- `kinetics(model, v, states)`: how each of its states moves at the model's
  voltages `v` (a dict of `AbstractKinetics`);
- `current(model, v, states)`: its current per entry; `add_current(model, i, v,
  states)`: that current added into the accumulator
  `i` of its kind (`point_current`: densities in mA/cm², or point currents in
  nA, converted once for all point groups);
- `init_states(model, v)`: its initial states.

A mechanism group whose mechanism uses ions (`uses_ions`) also takes `ions`,
the model's ions over all compartments (`{name: IonView}` of shape `(ncomp,)`,
from `MembraneModel.ion_views`), of which its `Environment` gets its own
compartments; `currents(...)` gives its current split by ion.
"""

import abc
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from .mechanisms import AbstractKinetics, AbstractMechanism, Environment, IonView


class AbstractStateGroup(eqx.Module):
    """A group of states of a `MembraneModel` (see the module docstring).

    `point_current` is `False` for groups whose current is a density (mA/cm²,
    channels) and `True` for groups that inject point currents (nA, synapses);
    `name` labels the group in reports.
    """

    point_current: ClassVar[bool]
    name: eqx.AbstractVar[str]

    @property
    @abc.abstractmethod
    def compartments(self) -> Int[Array, " n"]:
        """The compartment each entry of the group's states belongs to (a
        mechanism's compartments; a synapse's postsynaptic compartment)."""

    @property
    @abc.abstractmethod
    def label(self) -> str:
        """How reports name the group's states: `f"{label}.{state}"`."""

    @abc.abstractmethod
    def environment(self, model) -> Environment:
        """The `Environment` of this group's mechanism in `model`."""

    def hoisted(self):
        """This group with what its steps compute from its parameters alone
        computed once: a solve calls it on every group before its step loop
        (else XLA may compute such values again in every step, and, fused into
        the gathers that read them, once per element that reads them).
        Default: the group itself."""
        return self

    def edges(self, dtype) -> Float[Array, " nedge"]:
        """Times (ms, in `dtype`) at which this group's current jumps at a time
        known before the run (a voltage clamp's level changes): fixed
        `CrankNicolson` steps treat them as stimulus edges (damped start-up
        steps). Default: none."""
        return jnp.zeros((0,), dtype)

    def stiff(self, states: dict[str, Array]) -> Bool[Array, ""]:
        """Whether, with `states` (those of a step, after the events' hooks),
        this group adds a conductance so large that its compartments' modes
        are stiff at any practical step (a voltage clamp that is on: its
        series resistance gives `τ = rs·C` of about a microsecond).
        `CrankNicolson` takes L-stable steps then. Default: `False`."""
        del states
        return jnp.asarray(False)

    def sample_inputs(self, t, states: dict[str, Array]) -> dict[str, Array]:
        """`states` with the inputs this group reads from the clock alone (a
        voltage clamp's level) set to their values at time `t` (ms), for a
        part of a step that `CrankNicolson` splits at an edge. Default:
        `states`."""
        del t
        return states

    @abc.abstractmethod
    def kinetics(
        self, model, v: Float[Array, " ncomp"], states: dict[str, Array]
    ) -> dict[str, AbstractKinetics]:
        """Kinetics of this group's states at the model's voltages `v` (mV)."""

    @abc.abstractmethod
    def current(
        self, model, v: Float[Array, " ncomp"], states: dict[str, Array]
    ) -> Float[Array, " n"]:
        """This group's outward current per entry (mA/cm² or, for
        `point_current` groups, nA) at the model's voltages `v` (mV)."""

    @abc.abstractmethod
    def add_current(
        self,
        model,
        i: Float[Array, " ncomp"],
        v: Float[Array, " ncomp"],
        states: dict[str, Array],
    ) -> Float[Array, " ncomp"]:
        """`i` plus this group's outward current (mA/cm² or, for
        `point_current` groups, nA) at the model's voltages `v` (mV)."""

    @abc.abstractmethod
    def init_states(self, model, v: Float[Array, " ncomp"]) -> dict[str, Array]:
        """Initial values of this group's states at voltages `v` (mV)."""


class MechanismGroup(AbstractStateGroup):
    """A mechanism inserted in the compartments `index`.

    `mechanism`'s floating fields have shape `(len(index),)`. Every insertion of
    the same mechanism class (with the same parameter structure) across all cells
    forms one group, so the per-step cost is one vectorised call per mechanism
    type, whatever the number of cells. `sections` lists the `(cell, section)`
    pairs it covers; `model.layout` names each compartment.
    """

    point_current: ClassVar[bool] = False

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

    def put(self, x: Float[Array, " ncomp"], y: Float[Array, " n"]):
        """`x` with `y` in place at this group's compartments."""
        if self.span is not None:
            a, b = self.span
            if a == 0 and b == x.shape[0]:
                return y
            return x.at[a:b].set(y)
        return x.at[self.index].set(y)

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

    @property
    def compartments(self):
        return self.index

    @property
    def label(self) -> str:
        return self.name

    @property
    def uses_ions(self) -> bool:
        """Whether the mechanism declares ions (`UseIon`s)."""
        return bool(self.mechanism.ions)

    def environment(self, model, ions=None, v_solve=None) -> Environment:
        """The mechanism's `Environment`; its ions from `ions` (the model's
        `{name: IonView}` over all compartments) or, if `None`, from the model's
        initial concentrations (`MembraneModel.ion_views()`); its `v_solve` from
        `v_solve` (mV, over all compartments, or `None`)."""
        v_solve = None if v_solve is None else self.take(v_solve)
        if not self.uses_ions:
            return Environment(
                celsius=model.celsius,
                area=self.take(model.area),
                diam=self.take(model.diameter),
                length=self.take(model.length),
                v_solve=v_solve,
            )
        if ions is None:
            ions = model.ion_views()
        return Environment(
            celsius=model.celsius,
            area=self.take(model.area),
            diam=self.take(model.diameter),
            length=self.take(model.length),
            ions={
                u.ion: IonView(
                    inside=self.take(ions[u.ion].inside),
                    outside=self.take(ions[u.ion].outside),
                    reversal=self.take(ions[u.ion].reversal),
                    current=self.take(ions[u.ion].current),
                    valence=ions[u.ion].valence,
                )
                for u in self.mechanism.ions
            },
            v_solve=v_solve,
        )

    def kinetics(self, model, v, states, ions=None):
        env = self.environment(model, ions)
        return self.mechanism.kinetics(self.take(v), states, env)

    def currents(self, model, v, states, ions=None, v_solve=None) -> dict[str, Array]:
        """The mechanism's current split by ion: `{ion: density, ...,
        "nonspecific": density}` (mA/cm²), checked against its `UseIon`s."""
        out = self.mechanism.current(
            self.take(v), states, self.environment(model, ions, v_solve)
        )
        if not isinstance(out, dict):
            return {"nonspecific": out}
        allowed = {u.ion for u in self.mechanism.ions if f"i{u.ion}" in u.write}
        for key in out:
            if key != "nonspecific" and key not in allowed:
                raise ValueError(
                    f"{self.name}.current returns a current of {key!r}, but the "
                    f"mechanism writes no such ion current (declare UseIon({key!r}, "
                    f"write=('i{key}',)) in its `ions`; or use 'nonspecific'); it "
                    f"writes {sorted(allowed)}"
                )
        return out

    def current(self, model, v, states, ions=None, v_solve=None):
        if not self.uses_ions:
            env = self.environment(model, v_solve=v_solve)
            return self.mechanism.current(self.take(v), states, env)
        parts = list(self.currents(model, v, states, ions, v_solve).values())
        total = parts[0]
        for p in parts[1:]:
            total = total + p
        return total

    def add_current(self, model, i, v, states, ions=None, v_solve=None):
        return self.add_to(i, self.current(model, v, states, ions, v_solve))

    def init_states(self, model, v, ions=None):
        env = self.environment(model, ions)
        return self.mechanism.init_states(self.take(v), env)

    def range_variables(self, model, v, states, ions=None) -> dict[str, Array]:
        """The mechanism's `RANGE` variables that are not states, per entry, at
        the model's voltages `v` (mV) and this group's `states`
        (`AbstractMechanism.range_variables`)."""
        env = self.environment(model, ions)
        return self.mechanism.range_variables(self.take(v), states, env)


def ion_uses(group) -> tuple:
    """The `UseIon`s of `group`: its mechanism's (a `MechanismGroup`), or the
    group's own `ions` (an imported point process's `USEION`s), else none."""
    if isinstance(group, MechanismGroup):
        return tuple(group.mechanism.ions)
    return tuple(getattr(group, "ions", ()))


def uses_ions(group) -> bool:
    """Whether `group` reads or writes ion variables (and so takes the model's
    ions, `{name: IonView}`, in `kinetics`, `current` and `init_states`)."""
    return bool(ion_uses(group))
