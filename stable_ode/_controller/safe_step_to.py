from collections.abc import Callable

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax.numpy as jnp
from jaxtyping import Array, Int, PyTree, Real

from .._misc import tree_all_finite
from ._bookkeeping import StepStats


class SafeStepToState(eqx.Module):
    """State of `SafeStepTo`: `index` of the grid point the current step aims for,
    and the `StepStats`."""

    index: Int[Array, ""]
    stats: StepStats


class SafeStepTo(dfx.AbstractStepSizeController[SafeStepToState, None]):
    r"""Fixed steps on a grid, as `diffrax.StepTo`, that never accepts a non-finite
    step: the safe fixed-step mode.

    Each step goes to the next grid time in `ts`. If the proposed state
    `y1_candidate` holds a NaN or ±inf in any leaf, the step is rejected and retried
    over `shrink` of its length from the same start; after a finite sub-step, the
    next sub-steps keep that length until they land exactly on the grid time they
    aim for (the last one shortened to land there), and from there on steps are the
    nominal grid steps again. So accepted states always include every grid time,
    and nothing changes on a run without non-finite steps: the same steps as
    `diffrax.StepTo(ts)`, bit for bit.

    The error estimate is not looked at unless `check_error=True` (fixed steps do
    not need it, and not using it lets XLA skip computing it).

    **Gives up** after `max_nonfinite` consecutive non-finite rejections
    (`stable_ode.RESULTS.nonfinite_max_rejections`) or when a retry would be
    shorter than `dtmin` or not advance `t` (`stable_ode.RESULTS.nonfinite_dt_min`),
    returning `diffrax.RESULTS.dt_min_reached` to the diffrax loop and recording its
    own code and the failure time `t_fail` (start of the failing step, the last good
    time) in `state.stats`; read them with `diffrax.SaveAt(controller_state=True)`.

    **Statistics** (in `state.stats`, a `StepStats`): `num_accepted`,
    `num_rejected`, `num_nonfinite_rejected`, `min_dt`, `t_fail`, `result`.

    With `SaveAt(steps=True)` the saved times include the sub-steps; keep the grid
    points (`jnp.searchsorted(sol.ts, grid)`), as `stable_ode.simulate` does, and
    allow `max_steps` a margin above `len(ts) - 1` for sub-steps.
    """

    ts: Real[Array, " times"] = eqx.field(converter=jnp.asarray)
    shrink: float = 0.5
    max_nonfinite: int = eqx.field(static=True, default=10)
    dtmin: float | None = None
    check_error: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if self.ts.ndim != 1 or len(self.ts) < 2:
            raise ValueError(
                f"ts must be one-dimensional with at least 2 times, got shape "
                f"{self.ts.shape}"
            )
        if isinstance(self.shrink, (int, float)) and not 0 < self.shrink < 1:
            raise ValueError(f"shrink must be in (0, 1), got {self.shrink}")
        if self.max_nonfinite < 1:
            raise ValueError(f"max_nonfinite must be >= 1, got {self.max_nonfinite}")
        if isinstance(self.dtmin, (int, float)) and not self.dtmin > 0:
            raise ValueError(f"dtmin must be > 0 (ms) or None, got {self.dtmin}")

    def wrap(self, direction):
        ts = self.ts * direction
        ts = eqxi.error_if(
            ts,
            ts[1:] <= ts[:-1],
            "`SafeStepTo(ts=...)` must be strictly increasing (or strictly "
            "decreasing if t0 > t1).",
        )
        return eqx.tree_at(lambda c: c.ts, self, ts)

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
        del terms, y0, args, func, error_order
        if dt0 is not None:
            raise ValueError(
                "`dt0` should be `None`: SafeStepTo(ts=...) already fixes the steps."
            )
        ts = eqxi.error_if(
            self.ts,
            (t0 != self.ts[0]) | (t1 != self.ts[-1]),
            "SafeStepTo needs `t0 == ts[0]` and `t1 == ts[-1]`.",
        )
        state = SafeStepToState(
            jnp.asarray(1, jnp.int32), StepStats.initial(jnp.result_type(ts))
        )
        return ts[1], state

    def adapt_step_size(
        self,
        t0,
        t1,
        y0,
        y1_candidate,
        args,
        y_error,
        error_order,
        controller_state: SafeStepToState,
    ):
        del y0, args, error_order
        if self.check_error:
            finite = tree_all_finite(y1_candidate, y_error)
        else:
            finite = tree_all_finite(y1_candidate)
        k = controller_state.index
        last = len(self.ts) - 1
        target = self.ts[k]
        dt = t1 - t0
        reached = t1 >= target
        k_next = jnp.where(finite & reached, jnp.minimum(k + 1, last), k)
        # Inside a subdivided grid interval: keep the sub-step, land on the target.
        sub_t1 = t1 + dt
        sub_t1 = jnp.where(sub_t1 >= target - 0.01 * dt, target, sub_t1)
        next_t1_finite = jnp.where(reached, self.ts[k_next], sub_t1)
        retry_t1 = t0 + self.shrink * dt
        next_t0 = jnp.where(finite, t1, t0)
        next_t1 = jnp.where(finite, next_t1_finite, retry_t1)

        stats, ours = controller_state.stats.record(
            keep=finite,
            finite=finite,
            t0=t0,
            t1=t1,
            retry_t1=retry_t1,
            max_nonfinite=self.max_nonfinite,
            dtmin=self.dtmin,
        )
        return finite, next_t0, next_t1, False, SafeStepToState(k_next, stats), ours


SafeStepTo.__init__.__doc__ = """**Arguments:**

- `ts`: the grid times to step to (ms), strictly increasing, from the solve's `t0`
    to its `t1` inclusive, e.g. `t0 + dt·arange(n + 1)`.
- `shrink`: factor in (0, 1) applied to a step after a non-finite rejection
    (default 0.5: the interval is retried in halves, quarters, ...).
- `max_nonfinite`: give up after this many consecutive non-finite rejections
    (default 10: a grid step divided by up to 1024).
- `dtmin`: give up when a retry would be shorter than this (ms); `None` (default)
    gives up only when it is within 128 ulp of `t` (no real progress).
- `check_error`: also reject steps whose error estimate is non-finite (default
    `False`).
"""
