from collections.abc import Callable
from typing import Generic, TypeVar

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import PyTree

from .._misc import tree_all_finite
from ._bookkeeping import sanitise, select_tree, StepStats
from ._wrapped import AbstractWrappedController


_InnerState = TypeVar("_InnerState")


class NonFiniteRejectingState(eqx.Module, Generic[_InnerState]):
    """State of `NonFiniteRejecting`: the wrapped controller's state and the
    `StepStats` (counts, smallest step, failure time and code)."""

    inner: _InnerState
    stats: StepStats


class NonFiniteRejecting(AbstractWrappedController):
    r"""Wraps an adaptive step-size controller so that no non-finite step is ever
    accepted, and no non-finite value ever reaches the wrapped controller.

    **What it rejects.** Every step whose proposed state `y1_candidate` or error
    estimate `y_error` holds a NaN or ±inf in any leaf of the PyTree. (Plain
    `diffrax.PIDController` accepts a NaN state whose error estimate is finite,
    turns an infinite state into a NaN step size, and, where the vector field is
    non-finite over a time interval, shrinks the step until `t + dt == t` and spins
    there until `max_steps`.)

    **What happens on a rejection.** The next try covers `[t0, t0 + shrink·dt]`.
    The wrapped controller is still called (with the state replaced by `y0` and the
    error by zero: the first half of a "double where"), but all of its outputs —
    accept flag, next times, *and its new state* — are discarded, so PI/PID error
    history stays as it was and no NaN `dt` can arise. Cotangents into the
    non-finite values are selects, not products, so `jax.grad` through a solve with
    rejections stays finite as far as this controller is concerned. (A solver's own
    backward pass through a non-finite step it took is the solver's business: the
    stiff solvers of this package use finite-by-construction formulas.) Finite steps
    are decided by the wrapped controller alone.

    **When it gives up.** After `max_nonfinite` consecutive non-finite rejections
    (code `stable_ode.RESULTS.nonfinite_max_rejections`), or when the retry would be
    shorter than `dtmin` or is within 128 ulp of `t` (no real progress)
    (`stable_ode.RESULTS.nonfinite_dt_min`). The diffrax loop only accepts
    `diffrax.RESULTS`, so the controller then returns
    `diffrax.RESULTS.dt_min_reached` to stop the solve, and records its own code and
    the time of failure `t_fail` (the start of the failing step: the last good time)
    in its state. Get them with `diffrax.SaveAt(controller_state=True)`:
    `sol.controller_state.stats.result`, `.t_fail`. `stable_ode.simulate` does this
    and reports them in `Simulation.result` / `Simulation.stats`.

    **Statistics** (in `state.stats`, a `StepStats`): `num_accepted`,
    `num_rejected` (all reasons), `num_nonfinite_rejected`, `min_dt` (smallest
    accepted step), `consecutive_nonfinite`, `t_fail`, `result`.

    **Stimulus edges.** Compose as `NonFiniteRejecting(ClipStepSizeController(PID,
    jump_ts=edges))` (what `simulate` builds): the clip keeps steps from straddling
    an edge; a shrunk retry stays inside the clipped interval.

    ```python
    controller = stable_ode.NonFiniteRejecting(
        diffrax.PIDController(rtol=1e-4, atol=1e-3), shrink=0.5, max_nonfinite=20
    )
    sol = diffrax.diffeqsolve(..., stepsize_controller=controller,
                              saveat=diffrax.SaveAt(ts=ts, controller_state=True))
    sol.controller_state.stats.num_nonfinite_rejected
    ```
    """

    controller: dfx.AbstractAdaptiveStepSizeController
    shrink: float = 0.5
    max_nonfinite: int = eqx.field(static=True, default=20)
    dtmin: float | None = None

    def __check_init__(self):
        if isinstance(self.shrink, (int, float)) and not 0 < self.shrink < 1:
            raise ValueError(f"shrink must be in (0, 1), got {self.shrink}")
        if self.max_nonfinite < 1:
            raise ValueError(f"max_nonfinite must be >= 1, got {self.max_nonfinite}")
        if isinstance(self.dtmin, (int, float)) and not self.dtmin > 0:
            raise ValueError(f"dtmin must be > 0 (ms) or None, got {self.dtmin}")

    def init(
        self,
        terms: PyTree[dfx.AbstractTerm],
        t0,
        t1,
        y0,
        dt0,
        args,
        func: Callable,
        error_order,
    ):
        next_t1, inner = self.controller.init(
            terms, t0, t1, y0, dt0, args, func, error_order
        )
        t_dtype = jnp.result_type(t0, next_t1)
        return next_t1, NonFiniteRejectingState(inner, StepStats.initial(t_dtype))

    def adapt_step_size(
        self,
        t0,
        t1,
        y0,
        y1_candidate,
        args,
        y_error,
        error_order,
        controller_state: NonFiniteRejectingState,
    ):
        finite = tree_all_finite(y1_candidate, y_error)
        y1_safe = sanitise(finite, y1_candidate, y0)
        if y_error is None:
            error_safe = None
        else:
            error_safe = sanitise(finite, y_error, _zeros_like(y_error))
        (
            inner_keep,
            inner_next_t0,
            inner_next_t1,
            made_jump,
            inner_state,
            inner_result,
        ) = self.controller.adapt_step_size(
            t0, t1, y0, y1_safe, args, error_safe, error_order, controller_state.inner
        )
        # Never a NaN step, whatever the wrapped controller does.
        retry_t1 = t0 + self.shrink * (t1 - t0)
        finite = finite & jnp.isfinite(inner_next_t1) & jnp.isfinite(inner_next_t0)
        keep = finite & inner_keep
        next_t0 = jnp.where(finite, inner_next_t0, t0)
        next_t1 = jnp.where(finite, inner_next_t1, retry_t1)
        inner_state = select_tree(finite, inner_state, controller_state.inner)

        stats, ours = controller_state.stats.record(
            keep=keep,
            finite=finite,
            t0=t0,
            t1=t1,
            retry_t1=retry_t1,
            max_nonfinite=self.max_nonfinite,
            dtmin=self.dtmin,
        )
        result = dfx.RESULTS.where(finite, inner_result, ours)
        state = NonFiniteRejectingState(inner_state, stats)
        return keep, next_t0, next_t1, made_jump, state, result


def _zeros_like(tree):
    return jax.tree_util.tree_map(jnp.zeros_like, tree)


NonFiniteRejecting.__init__.__doc__ = """**Arguments:**

- `controller`: the adaptive controller that decides finite steps, e.g.
    `diffrax.PIDController(rtol=1e-4, atol=1e-3)` or a
    `diffrax.ClipStepSizeController` around one.
- `shrink`: factor in (0, 1) applied to the step after a non-finite rejection
    (default 0.5).
- `max_nonfinite`: give up after this many consecutive non-finite rejections
    (default 20, i.e. a step shrunk by up to `0.5**20 ≈ 1e-6`).
- `dtmin`: give up when a retry would be shorter than this (ms); `None` (default)
    gives up only when the retry is within 128 ulp of `t` (no real progress).
"""
