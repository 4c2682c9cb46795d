"""Pieces shared by the non-finite-rejecting controllers: the sanitising "double
where" and the step statistics carried in controller state (the finiteness test is
`stable_ode._misc.tree_all_finite`)."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PyTree

from .._results import RESULTS


def select_tree(pred: Bool[Array, ""], a: PyTree, b: PyTree) -> PyTree:
    """`jnp.where(pred, a, b)` leafwise (`a` and `b` of the same structure)."""
    return jax.tree_util.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)


def sanitise(ok: Bool[Array, ""], tree: PyTree, replacement: PyTree) -> PyTree:
    """The first half of the "double where": `tree` where `ok`, else `replacement`
    (finite). Whatever is computed from the result is finite, and its cotangent
    reaching `tree` is `where(ok, ·, 0)`: a select, so a non-finite value in `tree`
    cannot turn a zero cotangent into `0·NaN = NaN`."""
    return select_tree(ok, tree, replacement)


class StepStats(eqx.Module):
    """Statistics and failure record kept in a controller's state.

    **Fields:**

    - `consecutive_nonfinite`: non-finite rejections since the last finite step.
    - `num_accepted`, `num_rejected`: accepted and rejected steps (all reasons).
    - `num_nonfinite_rejected`: steps rejected because their proposed state or error
        estimate was not finite (a subset of `num_rejected`).
    - `min_dt`: the smallest accepted step, in units of `t` (ms); `inf` before any.
        Steps shortened to land on a stimulus edge or on `t1` count too.
    - `t_fail`: the start of the step at which the controller gave up (the last
        good time: the state there is the last accepted one); `inf` if it did not.
    - `result`: a `stable_ode.RESULTS` member: `successful`, or why it gave up.
    """

    consecutive_nonfinite: Int[Array, ""]
    num_accepted: Int[Array, ""]
    num_rejected: Int[Array, ""]
    num_nonfinite_rejected: Int[Array, ""]
    min_dt: Float[Array, ""]
    t_fail: Float[Array, ""]
    result: RESULTS

    @staticmethod
    def initial(t_dtype) -> "StepStats":
        zero = jnp.asarray(0, jnp.int32)
        inf = jnp.asarray(jnp.inf, t_dtype)
        return StepStats(zero, zero, zero, zero, inf, inf, RESULTS.successful)

    def record(
        self,
        *,
        keep: Bool[Array, ""],
        finite: Bool[Array, ""],
        t0,
        t1,
        retry_t1,
        max_nonfinite: int,
        dtmin,
    ) -> tuple["StepStats", dfx.RESULTS]:
        """The statistics after the step `[t0, t1]` (kept or not, finite or not;
        a non-finite step would be retried as `[t0, retry_t1]`), and whether to
        the code for diffrax's loop: `dt_min_reached` if the controller gives up now
        (its own reason is kept in the statistics, see `give_up_reason`), else
        `successful` (diffrax's loop only accepts its own codes)."""
        consecutive = jnp.where(finite, 0, self.consecutive_nonfinite + 1)
        give_up, code = give_up_reason(consecutive, max_nonfinite, t0, retry_t1, dtmin)
        give_up = give_up & ~finite
        stats = self.update(
            keep=keep,
            finite=finite,
            give_up=give_up,
            give_up_result=code,
            t0=t0,
            dt=t1 - t0,
        )
        loop_result = dfx.RESULTS.where(
            give_up, dfx.RESULTS.dt_min_reached, dfx.RESULTS.successful
        )
        return stats, loop_result

    def update(
        self,
        *,
        keep: Bool[Array, ""],
        finite: Bool[Array, ""],
        give_up: Bool[Array, ""],
        give_up_result: RESULTS,
        t0,
        dt,
    ) -> "StepStats":
        one, zero = jnp.asarray(1, jnp.int32), jnp.asarray(0, jnp.int32)
        dt = jax.lax.stop_gradient(jnp.asarray(dt, self.min_dt.dtype))
        t0 = jax.lax.stop_gradient(jnp.asarray(t0, self.t_fail.dtype))
        return StepStats(
            consecutive_nonfinite=jnp.where(
                finite, zero, self.consecutive_nonfinite + 1
            ),
            num_accepted=self.num_accepted + jnp.where(keep, one, zero),
            num_rejected=self.num_rejected + jnp.where(keep, zero, one),
            num_nonfinite_rejected=self.num_nonfinite_rejected
            + jnp.where(finite, zero, one),
            min_dt=jnp.where(keep, jnp.minimum(self.min_dt, dt), self.min_dt),
            t_fail=jnp.where(give_up, t0, self.t_fail),
            result=RESULTS.where(give_up, give_up_result, self.result),
        )


def give_up_reason(
    consecutive: Int[Array, ""],
    max_nonfinite: int,
    t0,
    next_t1,
    dtmin,
) -> tuple[Bool[Array, ""], RESULTS]:
    """After a non-finite rejection that made `consecutive` in a row and proposes
    the retry `[t0, next_t1]`: whether to give up, and the code to give up with.

    Too many in a row → `nonfinite_max_rejections`; a retry shorter than `dtmin`, or
    than 128 ulp of `max(|t0|, 1)` → `nonfinite_dt_min`.
    """
    # a retry within ~100 ulp of `t0` cannot make real progress (and a creep of
    # such steps towards a non-finite boundary would never end)
    eps = jnp.finfo(jnp.result_type(t0, next_t1)).eps
    too_small = next_t1 - t0 <= 128 * eps * jnp.maximum(jnp.abs(t0), 1.0)
    if dtmin is not None:
        too_small = too_small | (next_t1 - t0 < dtmin)
    too_many = consecutive >= max_nonfinite
    result = RESULTS.where(
        too_small, RESULTS.nonfinite_dt_min, RESULTS.nonfinite_max_rejections
    )
    return too_small | too_many, result
