"""The membrane model as a diffrax term.

`MembraneTerm.vf` is the full right-hand side, so any diffrax solver (`Tsit5`,
`Kvaerno5`, ...) integrates it unchanged:

    C dv/dt = 1000·(-i_ion(v, x) + i_stim(t) + i_axial(v))    (mV/ms, mA/cm², µF/cm²)
    dx/dt   = kinetics(v, x, env).rhs(x)    (each state x of every group)

The factor 1000 converts mA/cm² over µF/cm² to mV/ms. Besides `vf`, the term
exposes the structure the stiff solvers of this package use: the model's
kinetics objects (`MembraneModel.kinetics`), the exact linearisation of the
ionic current, and the coupling operator.
"""

import diffrax as dfx
import jax
import jax.numpy as jnp
from diffrax._term import WrapTerm  # no public name: diffrax exports no WrapTerm
from jaxtyping import Array, Float

from ._model import MembraneModel
from ._state import group_states, State
from .mechanisms._scheme import map_kinetics


def kinetics_rhs(kinetics, states):
    """`dx/dt` (per ms) of every state of every group, from the groups'
    kinetics objects (`MembraneModel.kinetics`) and states (`State.groups`)."""
    return group_states(
        map_kinetics(lambda k, xk: k.rhs(xk), kin, x)
        for kin, x in zip(kinetics, states)
    )


class MembraneTerm(dfx.AbstractTerm):
    """A `MembraneModel` as a `diffrax.AbstractTerm` (control: time)."""

    model: MembraneModel

    def vf(self, t, y: State, args) -> State:
        del args
        m = self.model
        dv = (1000.0 / m.capacitance) * (
            -m.ionic_current(y.v, y.groups)
            + m.stimulus_density(t)
            + m.axial_density(y.v)
        )
        return State(v=dv, groups=kinetics_rhs(m.kinetics(y.v, y.groups), y.groups))

    def contr(self, t0, t1, **kwargs):
        del kwargs
        return t1 - t0

    def prod(self, vf: State, control) -> State:
        return jax.tree_util.tree_map(lambda v: v * control, vf)

    def linearised_current(
        self, v: Float[Array, " ncomp"], states, hold: bool = False
    ) -> tuple[Float[Array, " ncomp"], Float[Array, " ncomp"]]:
        """Ionic current density at `v` (mA/cm²) and its exact derivative
        `di/dv` (S/cm²) for frozen group states `states` (`State.groups`), by
        one `jax.jvp`. With `hold`, the mechanisms see `v` as
        `Environment.v_solve` too, outside the derivative: `di/dv` for what
        their state update computed held, as NEURON's (imported mechanisms with
        `neuron_schemes=True`; others are unaffected).

        Each compartment's current depends only on its own voltage (synaptic
        currents on the postsynaptic one; their states are frozen), so the
        directional derivative along ones is the diagonal of the Jacobian.
        """
        return jax.jvp(
            lambda u: self.model.ionic_current(u, states, v if hold else None),
            (v,),
            (jnp.ones_like(v),),
        )


def membrane_term(terms) -> MembraneTerm:
    """The `MembraneTerm` inside `terms` as passed to `AbstractSolver.step`.

    diffrax wraps terms in `WrapTerm` (for the direction of integration); the
    structured methods are reached through it, as diffrax's Langevin solvers do.
    """
    term = terms
    while isinstance(term, WrapTerm):
        term = term.term
    if not isinstance(term, MembraneTerm):
        raise ValueError(
            f"this solver needs a stable_ode.MembraneTerm, got {type(term).__name__}; "
            "use a diffrax solver (e.g. diffrax.Kvaerno5) for other terms"
        )
    return term
