"""`gradient_check`: a (float32) gradient against a better-conditioned probe on a
few random directions."""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, PyTree


class GradientCheck(eqx.Module):
    """The result of `gradient_check`.

    **Fields:**

    - `directions`: the probe directions `u_k` (a PyTree like `params` with a
      leading axis of length `n_probes`; unit norm over all leaves).
    - `ad`: `∇loss(params) · u_k` from `jax.grad` of the checked loss.
    - `reference`: the same directional derivatives from the reference (a float64
      loss's gradient, or central finite differences).
    - `rel_error`: `|ad - reference| / max(|reference|, scale)` per probe, where
      `scale` is the largest `|reference|` times `rtol`-independent `1e-3`.
    - `ok`: all `rel_error <= rtol`, and every `ad` finite.
    """

    directions: PyTree[Array]
    ad: Float[Array, " nprobe"]
    reference: Float[Array, " nprobe"]
    rel_error: Float[Array, " nprobe"]
    ok: Bool[Array, ""]


def _as(dtype, tree):
    return jax.tree_util.tree_map(
        lambda x: (
            jnp.asarray(x, dtype)
            if eqx.is_array_like(x)
            and jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)
            else x
        ),
        tree,
    )


def gradient_check(
    loss: Callable[[PyTree[Array]], Float[Array, ""]],
    params: PyTree[Array],
    *,
    reference: Callable[[PyTree[Array]], Float[Array, ""]] | None = None,
    n_probes: int = 3,
    eps: float = 1e-4,
    rtol: float = 1e-2,
    key: Any = None,
) -> GradientCheck:
    """Check a (float32) gradient against a better-conditioned probe on a few random
    directions: one reverse pass of `loss`, then per probe either one gradient of a
    float64 `reference` or two evaluations of `loss` (central differences).

    In float32, the gradient of a loss through many spikes can be dominated by
    rounding amplified along the trajectory (see `docs/adjoint.md`); this tells you
    whether it is before you train on it.

    **Arguments:**

    - `loss`: `params -> scalar`, the loss whose `jax.grad` you use.
    - `params`: the point to check (a PyTree of floating arrays).
    - `reference`: optional `params -> scalar` computing the same loss more
      accurately, typically on a float64 model (needs `jax_enable_x64`); it is called
      with `params` cast to float64. Without it, central finite differences of
      `loss` itself with relative step `eps` are the reference (evaluated in the
      precision of `loss`: good to about `sqrt(machine epsilon)` only).
    - `n_probes`: number of random directions.
    - `eps`: finite-difference step, relative to the norm of `params` (at least
      `eps` absolute).
    - `rtol`: tolerance on `rel_error` for `ok`.
    - `key`: a `jax.random` key for the directions (default `PRNGKey(0)`).

    **Returns:** a `GradientCheck`.
    """
    if n_probes < 1:
        raise ValueError(f"n_probes={n_probes} must be >= 1")
    key = jax.random.PRNGKey(0) if key is None else key
    leaves, treedef = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(key, len(leaves))
    raw = [
        jax.random.normal(k, (n_probes,) + jnp.shape(x), jnp.float32)
        for k, x in zip(keys, leaves)
    ]
    norm = jnp.sqrt(sum(jnp.sum(r.reshape(n_probes, -1) ** 2, axis=1) for r in raw))
    raw = [r / norm.reshape((n_probes,) + (1,) * (r.ndim - 1)) for r in raw]
    directions = jax.tree_util.tree_unflatten(treedef, raw)

    def dot(g, k):
        return sum(
            jnp.vdot(
                jnp.asarray(a, jnp.float64 if _x64() else jnp.float32),
                jnp.asarray(d[k], jnp.float64 if _x64() else jnp.float32),
            )
            for a, d in zip(jax.tree_util.tree_leaves(g), raw)
        )

    g = jax.grad(loss)(params)
    ad = jnp.stack([dot(g, k) for k in range(n_probes)])
    if reference is not None:
        if not _x64():
            raise ValueError(
                "gradient_check(reference=...) casts params to float64: enable it "
                "with jax.config.update('jax_enable_x64', True)"
            )
        g64 = jax.grad(reference)(_as(jnp.float64, params))
        ref = jnp.stack([dot(g64, k) for k in range(n_probes)])
    else:
        pnorm = float(
            jnp.sqrt(
                sum(jnp.sum(jnp.square(jnp.asarray(x, jnp.float32))) for x in leaves)
            )
        )
        h = eps * max(1.0, pnorm)
        refs = []
        for k in range(n_probes):
            plus = jax.tree_util.tree_unflatten(
                treedef,
                [
                    x + jnp.asarray(h * d[k], jnp.asarray(x).dtype)
                    for x, d in zip(leaves, raw)
                ],
            )
            minus = jax.tree_util.tree_unflatten(
                treedef,
                [
                    x - jnp.asarray(h * d[k], jnp.asarray(x).dtype)
                    for x, d in zip(leaves, raw)
                ],
            )
            refs.append((loss(plus) - loss(minus)) / (2 * h))
        ref = jnp.stack(refs)
    ad, ref = jnp.asarray(ad), jnp.asarray(ref, ad.dtype)
    scale = 1e-3 * jnp.max(jnp.abs(ref))
    rel = jnp.abs(ad - ref) / jnp.maximum(jnp.abs(ref), scale)
    ok = jnp.all(jnp.isfinite(ad)) & jnp.all(rel <= rtol)
    return GradientCheck(directions, ad, ref, rel, ok)


def _x64() -> bool:
    return bool(jax.config.read("jax_enable_x64"))
