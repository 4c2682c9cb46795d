"""Adaptive steps: `AdaptiveSteps` and its pipeline (the user's controller inside
`NonFiniteRejecting(ClipStepSizeController(..., jump_ts=stimulus edges))`)."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._controller import NonFiniteRejecting, SafeStepTo
from .._controller._wrapped import AbstractWrappedController
from .._solver._wrapped import AbstractWrappedSolver
from .._term import MembraneTerm
from ..events._clip import arrival_clip
from ..events._stepping import (
    adaptive_span,
    deliver_at_start,
    event_jump_times,
    with_events,
)
from ._base import (
    AbstractStepping,
    check_resolution,
    Outcome,
    solution_stats,
    whole_steps,
)
from .check import check_terms
from .guard import guard


def safe_controller(
    controller: dfx.AbstractStepSizeController,
    jumps: Float[Array, " njump"],
) -> NonFiniteRejecting:
    """The controller an adaptive solve runs with a user's `controller`.

    An adaptive controller `c` becomes `NonFiniteRejecting(ClipStepSizeController(c,
    jump_ts=jumps))` (the clip inside: it keeps steps off stimulus edges, and a
    non-finite retry, which only shrinks a clipped step, stays off them too); a
    `NonFiniteRejecting(c)` keeps its settings and gets the clip put around its `c`.
    """
    _check_adaptive(controller)
    if not isinstance(controller, NonFiniteRejecting):
        controller = NonFiniteRejecting(controller)
    if jumps.size:
        controller = eqx.tree_at(
            lambda c: c.controller,
            controller,
            dfx.ClipStepSizeController(controller.controller, jump_ts=jumps),
        )
    return controller


def _check_adaptive(controller) -> None:
    if isinstance(controller, SafeStepTo) or not isinstance(
        controller, dfx.AbstractAdaptiveStepSizeController
    ):
        raise ValueError(
            f"controller={type(controller).__name__}(...) cannot reject non-finite "
            "steps; pass controller=None for fixed steps (stable_ode.SafeStepTo on "
            "the grid t0 + k*dt), a stable_ode.SafeStepTo, or an adaptive "
            "controller such as diffrax.PIDController(rtol=..., atol=...)"
        )


def _pid(controller):
    """The innermost `diffrax.PIDController` inside wrappers, or `None`."""
    while isinstance(
        controller, (AbstractWrappedController, dfx.ClipStepSizeController)
    ):
        controller = controller.controller
    return controller if isinstance(controller, dfx.PIDController) else None


def _number(x) -> float | None:
    return float(x) if isinstance(x, (int, float, np.ndarray, np.number)) else None


class AdaptiveSteps(AbstractStepping):
    """Adaptive steps: `controller` (an adaptive diffrax controller such as
    `diffrax.PIDController(rtol=..., atol=...)`, or a `stable_ode.NonFiniteRejecting`
    or `stable_ode.TimingTolerance` around one) runs as
    `NonFiniteRejecting(ClipStepSizeController(controller, jump_ts=stimulus edges))`,
    so no step is accepted with a non-finite state or error estimate and no step
    straddles a stimulus edge. The samples are interpolated at `t0 + k·save_dt`.
    """

    controller: dfx.AbstractAdaptiveStepSizeController
    dt0: float = eqx.field(static=True, converter=float)
    save_dt: float = eqx.field(static=True, converter=float)

    def __check_init__(self):
        _check_adaptive(self.controller)
        for name in ("dt0", "save_dt"):
            x = getattr(self, name)
            if not (np.isfinite(x) and x > 0):
                raise ValueError(f"{name} must be a finite number > 0 ms, got {x!r}")
        pid = _pid(self.controller)
        if pid is None:
            return
        rtol, atol = _number(pid.rtol), _number(pid.atol)
        if rtol is not None and atol is not None and rtol == 0 and atol == 0:
            raise ValueError(
                "controller: rtol and atol are both 0, a tolerance no step can "
                "meet; give atol > 0 (e.g. PIDController(rtol=0, atol=1e-5))"
            )
        for name in ("pcoeff", "icoeff", "dcoeff"):
            c = _number(getattr(pid, name))
            if c is not None and not 0 <= c <= 1:
                raise ValueError(
                    f"controller: PIDController({name}={c}) must be in [0, 1]: "
                    "larger coefficients make the step size swing between its "
                    "clip factors (diffrax's suggested settings have pcoeff <= 0.4, "
                    "icoeff <= 1, dcoeff 0)"
                )

    def save_times(self, t0: float, t1: float, dtype) -> np.ndarray:
        n = whole_steps(float(t0), float(t1), float(self.save_dt), "save_dt")
        dtype = np.dtype(dtype)
        ts = np.asarray(t0, dtype) + np.asarray(self.save_dt, dtype) * np.arange(
            n + 1, dtype=dtype
        )
        ts[-1] = t1
        check_resolution(ts, "save_dt", self.save_dt)
        return ts

    def max_steps(self, t0: float, t1: float) -> int:
        del t0, t1
        return 100_000

    def check(self, solver: dfx.AbstractSolver, dtype) -> None:
        check_terms(solver)
        inner = solver
        while isinstance(inner, AbstractWrappedSolver):
            inner = inner.solver
        if not isinstance(inner, dfx.AbstractAdaptiveSolver):
            raise ValueError(
                f"solver={type(inner).__name__}(...) has no error estimate, so it "
                "cannot take adaptive steps: use fixed steps (controller=None) or a "
                "solver with one (stable_ode.BackwardEuler(), CrankNicolson(), "
                "diffrax.Tsit5(), ...)"
            )
        pid = _pid(self.controller)
        if dtype is None or pid is None:
            return
        rtol, atol = _number(pid.rtol), _number(pid.atol)
        eps = float(jnp.finfo(dtype).eps)
        if rtol is not None and atol is not None and rtol + atol < eps:
            raise ValueError(
                f"controller: rtol={rtol:g} and atol={atol:g} are below the "
                f"resolution of {np.dtype(dtype)} (eps = {eps:.3g}): no step can "
                "meet them; use float64 or looser tolerances"
            )

    def prepare(self, model, t0: float, t1: float):
        dtype = model.dtype
        self.save_times(t0, t1, dtype)  # the checks
        # As computed before the stepping objects, eagerly and in the model's
        # dtype (the same numbers, bit for bit).
        n_save = whole_steps(t0, t1, self.save_dt, "save_dt")
        ts = t0 + self.save_dt * jnp.arange(n_save + 1, dtype=dtype)
        ts = ts.at[-1].set(t1)
        # Jumps outside (t0, t1) are harmless to the clip; not filtering them
        # keeps this working on a traced model.
        jumps = model.stimuli.jump_times().astype(dtype)
        events = event_jump_times(model, dtype)  # events: arrivals, clamp edges
        if events.shape[0]:
            jumps = jnp.concatenate([jumps, events])
        return t0, t1, ts, jumps

    def solve(
        self, model, y0, times, solver, adjoint, max_steps, progress_meter, recorder
    ) -> Outcome:
        t0, t1, ts, jumps = times
        controller = safe_controller(self.controller, jumps)
        # events: land on arrivals from threshold sources (no-op without them)
        controller = eqx.tree_at(
            lambda c: c.controller,
            controller,
            arrival_clip(controller.controller, model),
        )
        # events: point-process hooks around each step (no-op without them)
        span = adaptive_span(t0, t1, ts.dtype)
        solver = with_events(solver, model, span)
        y0 = deliver_at_start(model, t0, y0, span)  # events due at t0 (if any)
        sol = dfx.diffeqsolve(
            MembraneTerm(model),
            guard(solver, controller, check_error=True),
            t0,
            t1,
            self.dt0,
            y0,
            args=model if recorder.needs_model else None,  # ion, RANGE recordings
            saveat=dfx.SaveAt(
                subs=[
                    dfx.SubSaveAt(ts=ts, t1=True, fn=recorder),
                    dfx.SubSaveAt(t1=True),
                ],
                controller_state=True,
            ),
            stepsize_controller=controller,
            adjoint=adjoint,
            max_steps=max_steps,
            throw=False,
            progress_meter=progress_meter,
        )
        # With `t1=True` the final state is saved after the last `ts` reached: on
        # failure, the last good one (at `t_end`); the unsaved samples (`inf`)
        # after it hold its value.
        sts, _ = sol.ts
        v, final = sol.ys
        i_end = jnp.sum(jnp.isfinite(sts)) - 1
        t_end = sts[i_end]
        valid = ts <= t_end
        held = jnp.where(_bcast(valid, v[:-1]), v[:-1], v[i_end][None])
        stats, result = solution_stats(sol, t_end)
        final = jax.tree_util.tree_map(lambda x: x[0], final)
        return Outcome(ts, held, stats, result, final, sol)


def _bcast(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))


AdaptiveSteps.__init__.__doc__ = """**Arguments:**

- `controller`: an adaptive diffrax step-size controller, e.g.
    `diffrax.PIDController(rtol=0, atol=1e-5)` (not both tolerances 0; PID
    coefficients in `[0, 1]`), or a `stable_ode.NonFiniteRejecting` (its settings
    are kept) or `stable_ode.TimingTolerance` around one.
- `dt0`: the first step, ms.
- `save_dt`: the spacing of the returned samples, ms; it must divide `t1 - t0`.
"""
