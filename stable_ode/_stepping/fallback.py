"""The safe fallback of a plain-first run, for the members of a `vmap`ped batch
that went non-finite only.

Unbatched it is a `lax.cond`: the plain run's result if it was finite, else the
safe solve's. Batched (`jax.custom_batching.custom_vmap`) the failing members are
gathered, `chunk` at a time, into a smaller batch that runs the safe solve, and
their results are scattered back; the clean members keep the plain run's results
untouched, so one diverging member costs the safe solve of one chunk, not of the
whole batch. Every member's result is the one it gets alone: the plain run's if
it was finite (the safe solve would give the same steps, bit for bit), else the
safe solve's.
"""

import equinox as eqx
import jax
import jax.numpy as jnp


CHUNK = 16
"""Failing members solved together per round (fewer if the batch is smaller)."""


def where_failed(safe, operands, plain, ok, chunk: int = CHUNK):
    """Per member: `plain` if `ok`, else `safe(operands)`.

    **Arguments:**

    - `safe`: a function of `operands` returning a PyTree shaped like `plain`.
    - `operands`: a PyTree (arrays and static leaves) that `safe` takes.
    - `plain`: the plain run's result (a PyTree of arrays).
    - `ok`: a boolean scalar, whether the plain run was finite.
    - `chunk`: at most how many failing members one safe solve takes, batched.

    **Returns:** a PyTree like `plain`.
    """
    dynamic, static = eqx.partition(operands, eqx.is_array)

    def run_safe(d):
        return safe(eqx.combine(d, static))

    @jax.custom_batching.custom_vmap
    def pick(dynamic, plain, ok):
        return jax.lax.cond(ok, lambda: plain, lambda: run_safe(dynamic))

    @pick.def_vmap
    def _(axis_size, in_batched, dynamic, plain, ok):
        d_batched, p_batched, ok_batched = in_batched
        n = axis_size
        ok = ok if ok_batched else jnp.broadcast_to(ok, (n,))
        plain = jax.tree_util.tree_map(
            lambda x, b: x if b else jnp.broadcast_to(x, (n,) + x.shape),
            plain,
            p_batched,
        )
        k = min(n, chunk)
        axes = jax.tree_util.tree_map(lambda b: 0 if b else None, d_batched)
        order = jnp.argsort(ok, stable=True)  # the failing members first
        n_bad = jnp.sum(~ok)

        def round_(carry):
            r, out = carry
            pos = r * k + jnp.arange(k)
            idx = order[jnp.minimum(pos, n - 1)]
            sub = jax.tree_util.tree_map(
                lambda x, b: x[idx] if b else x, dynamic, d_batched
            )
            res = jax.vmap(run_safe, in_axes=(axes,))(sub)
            # slots past the last failing member are dropped, not written
            target = jnp.where(pos < n_bad, idx, n)
            out = jax.tree_util.tree_map(
                lambda o, x: o.at[target].set(x, mode="drop"), out, res
            )
            return r + 1, out

        _, out = jax.lax.while_loop(
            lambda c: c[0] * k < n_bad, round_, (jnp.asarray(0, n_bad.dtype), plain)
        )
        return out, jax.tree_util.tree_map(lambda _: True, out)

    return pick(dynamic, plain, ok)
