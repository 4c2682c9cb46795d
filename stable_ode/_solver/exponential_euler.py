from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx

from .._math import exprel
from .._state import State
from .._term import membrane_term, MembraneTerm
from ._staggered import advance, state_rhs, trapezoid_defect


class ExponentialEuler(dfx.AbstractAdaptiveSolver):
    r"""Exponential Euler for point neurons.

    Each step: the voltage takes an exponential Euler step on its linearisation
    `dv/dt ≈ f0 + J·(v - v0)`, with `J` the exact diagonal Jacobian (ionic
    conductance from `jax.jvp`, plus the diagonal of the axial coupling):
    `v1 = v0 + dt·exprel(J·dt)·f0` (exact for a linear compartment); then every
    state is updated by its kinetics for frozen `v1` (gates exactly), every
    group from the states of the step's start (the concentrations that
    mechanisms read included; `BackwardEuler` follows NEURON's order of state
    updates instead). Stimuli are sampled at `t0 + dt/2`.

    Stable for any `dt` on isolated compartments; for cables the off-diagonal
    axial coupling is explicit, so use `BackwardEuler` or `CrankNicolson` there.
    Order 1. **Error estimate:** `dt/2·(f(y1) - f(y0))`, O(dt²).
    **Interpolation:** linear.

    Reference: Hochbruck & Ostermann, "Exponential integrators", Acta Numerica
    (2010).
    """

    term_structure: ClassVar = MembraneTerm
    interpolation_cls: ClassVar[Callable[..., dfx.LocalLinearInterpolation]] = (
        dfx.LocalLinearInterpolation
    )

    def order(self, terms):
        del terms
        return 1

    def error_order(self, terms):
        del terms
        return 2

    def init(self, terms, t0, t1, y0, args):
        del terms, t0, t1, y0, args
        return None

    def step(self, terms, t0, t1, y0: State, args, solver_state, made_jump):
        del args, made_jump
        term = membrane_term(terms)
        model = term.model
        dt = t1 - t0
        s = model.stimulus_density(0.5 * (t0 + t1))
        i0, g = term.linearised_current(y0.v, y0.groups)
        jac = -(1000 / model.capacitance) * (
            g + model.coupling.self_conductance() / model.area
        )
        dv0 = (1000 / model.capacitance) * (s - i0 + model.axial_density(y0.v))
        v1 = y0.v + dt * exprel(jac * dt) * dv0
        y1 = advance(model.kinetics(v1, y0.groups), y0, dt, v1)
        f0 = state_rhs(term, y0, s, dv=dv0)
        y_error = trapezoid_defect(f0, state_rhs(term, y1, s), dt)
        dense_info = dict(y0=y0, y1=y1)
        return y1, y_error, dense_info, solver_state, dfx.RESULTS.successful

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)
