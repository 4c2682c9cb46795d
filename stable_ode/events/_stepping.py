"""How a solve sees events: `EventSteps`, a solver wrapper that calls every
point-process group's `before_step` / `after_step` hooks around the wrapped
solver's step, and the jump times adaptive steps must land on.

Delivery is at the exact arrival time, never rounded to the grid: an arrival
strictly inside a step is added at the step's end, decayed exactly (the
synapse's states decay linearly) from the arrival time; an arrival at the
step's start (on the grid, or an adaptive step landed on it) is added before
the step, as NEURON delivers it. So a fixed step sees an off-grid arrival's
conductance from the next step on (the voltage's error is of first order in
the step), and adaptive steps, which land on every arrival (they are jump
times), see it from its arrival on.
"""

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._solver._wrapped import AbstractWrappedSolver
from .._state import group_states, State
from .._term import membrane_term
from ._groups import AbstractPointProcessGroup


def has_events(model) -> bool:
    """Whether `model` holds point-process groups (so solves need `EventSteps`)."""
    return any(isinstance(g, AbstractPointProcessGroup) for g in model.groups)


def _hook(model, y: State, fn) -> State:
    groups = group_states(
        fn(g, x) if isinstance(g, AbstractPointProcessGroup) else x
        for g, x in zip(model.groups, y.groups)
    )
    return State(v=y.v, groups=groups)


class EventSteps(AbstractWrappedSolver):
    """Wraps a solver so that each step from `t0` to `t1` starts from the
    point processes' `before_step` states and ends with their `after_step`
    states (see `stable_ode.events._groups`).

    **Fields:** `solver`, the wrapped solver; `span`, the longest delivery
    interval, ms (the fixed step, or a few units in the last place of the
    times for adaptive steps, which land on every arrival), which sizes the
    arrival windows."""

    solver: dfx.AbstractSolver
    span: float = eqx.field(static=True)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args), jnp.asarray(t0)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inner, t_start = solver_state
        model = membrane_term(terms).model
        span = self.span
        y0 = _hook(model, y0, lambda g, x: g.before_step(t0, t1, t_start, x, span))
        y1, y_error, dense, inner, result = self.solver.step(
            terms, t0, t1, y0, args, inner, made_jump
        )
        v1 = y1.v
        y1 = _hook(model, y1, lambda g, x: g.after_step(t0, t1, v1, x, span))
        return y1, y_error, dense, (inner, t_start), result


def with_events(solver: dfx.AbstractSolver, model, span: float) -> dfx.AbstractSolver:
    """`EventSteps(solver, span)` if `model` has point processes, else `solver`
    (unchanged, so models without events step exactly as before)."""
    if not has_events(model):
        return solver
    return EventSteps(solver, float(span))


def fixed_span(dt: float) -> float:
    """The delivery span of fixed steps of `dt` ms (each delivery interval is
    one step, or a few units in the last place at its start)."""
    return float(dt) * (1 + 1e-3)


def adaptive_span(t0: float, t1: float, dtype) -> float:
    """The delivery span of adaptive steps: 16 units in the last place of the
    largest time, in `dtype`."""
    big = max(abs(float(t0)), abs(float(t1)), 1.0)
    return 16 * float(np.spacing(np.asarray(big, np.dtype(dtype))))


def event_jump_times(model, dtype):
    """Every point-process group's jump times (ms), concatenated (unsorted)."""
    parts = [
        g.jump_times(dtype)
        for g in model.groups
        if isinstance(g, AbstractPointProcessGroup)
    ]
    return jnp.concatenate(parts) if parts else jnp.zeros((0,), dtype)
