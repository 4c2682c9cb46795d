"""Parameter transforms for training: unconstrained `x` ↔ constrained parameter `y`.

An optimiser works on unconstrained `x`; the model sees `y = forward(x)`, which
respects the parameter's bounds. Sigmoid and softplus are the usual choices, but
their tails are *exponential*: in float32 the derivative of `sigmoid` is exactly 0
below x ≈ -88 (and below -20 when the exponent is clipped, as in Jaxley's
`ParamTransform`), and an unclipped `exp` gives NaN gradients far into
saturation. Once there, no gradient step can bring the parameter back.

The transforms here have *algebraic* tails instead: `Bounded` is the algebraic
sigmoid `(1 + z/√(1 + z²))/2` and `Positive` the algebraic softplus
`(z + √(z² + 4))/2`, `z = x/scale`. They are smooth, strictly increasing and
behave like sigmoid / softplus near 0, but their derivatives decay like `|z|⁻³`
and `|z|⁻²`: finite and non-zero for every moderately saturated `x` (at
`x = -100`, `3.7e-5`·range/2 for `Bounded`, not 0), never NaN for any finite `x`,
with closed-form derivatives (`jax.custom_jvp`) that cannot form `inf/inf`.
`inverse` clamps its argument just inside the bounds (`eps` of the range for
`Bounded`, `sqrt(eps)·scale` for `Positive`), so `inverse(bound)` is finite and
lands where the gradient is still non-zero.

Transforms act on PyTrees: `forward(transforms, params)` maps every leaf of
`params` through the transform at the matching place of `transforms` (a single
transform, or a PyTree of transforms that is a prefix of `params`' structure;
`None` means identity).

    import stable_ode as so
    from stable_ode import transforms as tf

    t = {"gnabar": tf.Bounded(0.0, 0.5), "gl": tf.Positive(scale=1e-3)}
    x = tf.inverse(t, {"gnabar": 0.12, "gl": 3e-4})     # to optimise
    params = tf.forward(t, x)                            # to use in the model
"""

import abc
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float


def _as_float(x) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


class AbstractTransform(eqx.Module):
    """A bijection from the real line onto a parameter's allowed range.

    Implement `forward(x) -> y` and `inverse(y) -> x`, elementwise, preserving
    the floating dtype of the argument.
    """

    @abc.abstractmethod
    def forward(self, x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
        """Unconstrained `x` to the constrained parameter."""

    @abc.abstractmethod
    def inverse(self, y: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
        """Constrained parameter `y` to unconstrained `x` (finite for every `y`)."""


# -------------------------------------------------------------- unit-free kernels


@jax.custom_jvp
def _algebraic_sigmoid(z):
    """`(p, q)` with `p = (1 + z/s)/2`, `q = 1 - p`, `s = √(1 + z²)`, each computed
    without cancellation: the smaller of the two is `1/(2·s·(s + |z|))`."""
    s = jnp.hypot(jnp.ones_like(z), z)
    tail = 1 / (2 * s * (s + jnp.abs(z)))
    neg = z < 0
    return jnp.where(neg, tail, 1 - tail), jnp.where(neg, 1 - tail, tail)


@_algebraic_sigmoid.defjvp
def _algebraic_sigmoid_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    r = 1 / jnp.hypot(jnp.ones_like(z), z)
    dp = 0.5 * r * r * r * dz  # (1/2)·s⁻³, never inf·0
    return _algebraic_sigmoid(z), (dp, -dp)


def _algebraic_sigmoid_inverse(p, q):
    """`z` with `_algebraic_sigmoid(z) = p`, given `p` and `q = 1 - p` (both > 0)."""
    return (p - q) / (2 * jnp.sqrt(p) * jnp.sqrt(q))


@jax.custom_jvp
def _algebraic_softplus(z):
    # (z + √(z²+4))/2; for z < 0 as 2/(√(z²+4) - z) (no cancellation).
    s = jnp.hypot(jnp.full_like(z, 2), z)
    return jnp.where(z < 0, 2 / (s - z), (z + s) / 2)


@_algebraic_softplus.defjvp
def _algebraic_softplus_jvp(primals, tangents):
    (z,), (dz,) = primals, tangents
    f = _algebraic_softplus(z)
    s = jnp.hypot(jnp.full_like(z, 2), z)
    return f, (f / s) * dz  # f' = (1 + z/s)/2 = f/s


# ----------------------------------------------------------------- transforms


class Bounded(AbstractTransform):
    """`y = lower + (upper - lower)·σ(x/scale)` with the algebraic sigmoid
    `σ(z) = (1 + z/√(1 + z²))/2`, so `lower < y < upper`.

    `σ'(z) = (1 + z²)^(-3/2)/2`: at `z = ∓30` it is 1.8e-5, at `∓100` 5e-7, at
    `∓1e4` 5e-13 — never exactly 0 in float32 for `|z| < 1e12`, never NaN.

    **Fields:**

    - `lower`, `upper`: the bounds, in the parameter's units (`lower < upper`).
    - `scale`: the width of the unsaturated range of `x` (default 1).
    """

    lower: float
    upper: float
    scale: float = 1.0

    def __check_init__(self):
        if not (np.all(np.asarray(self.lower) < np.asarray(self.upper))):
            raise ValueError(
                "Bounded needs lower < upper, got "
                f"lower={self.lower}, upper={self.upper}"
            )
        if not np.all(np.asarray(self.scale) > 0):
            raise ValueError(f"Bounded needs scale > 0, got {self.scale}")

    def forward(self, x):
        x = _as_float(x)
        lo, hi, sc = (
            jnp.asarray(a, x.dtype) for a in (self.lower, self.upper, self.scale)
        )
        z = x / sc
        p, q = _algebraic_sigmoid(z)
        # Offset from the nearer bound: lower <= y <= upper exactly.
        return jnp.where(z < 0, lo + (hi - lo) * p, hi - (hi - lo) * q)

    def inverse(self, y):
        y = _as_float(y)
        lo, hi, sc = (
            jnp.asarray(a, y.dtype) for a in (self.lower, self.upper, self.scale)
        )
        eps = jnp.asarray(jnp.finfo(y.dtype).eps, y.dtype)
        width = hi - lo
        p = jnp.clip((y - lo) / width, eps, 1 - eps)
        q = jnp.clip((hi - y) / width, eps, 1 - eps)
        return sc * _algebraic_sigmoid_inverse(p, q)


class Positive(AbstractTransform):
    """`y = lower + scale·g(x/scale)` with the algebraic softplus
    `g(z) = (z + √(z² + 4))/2`, so `y > lower`.

    `g(z) ≈ z` for large `z` and `≈ 1/|z|` for very negative `z`;
    `g'(z) = g(z)/√(z² + 4)`, about `1/z²`: non-zero and finite for every `z`
    whose square is representable, never NaN.

    **Fields:**

    - `lower`: the lower bound, in the parameter's units (default 0).
    - `scale`: the parameter's typical size (default 1): `y = lower + scale` at
      `x = 0`; e.g. `1e-3` for conductances in S/cm².
    """

    lower: float = 0.0
    scale: float = 1.0

    def __check_init__(self):
        if not np.all(np.asarray(self.scale) > 0):
            raise ValueError(f"Positive needs scale > 0, got {self.scale}")

    def forward(self, x):
        x = _as_float(x)
        lo, sc = (jnp.asarray(a, x.dtype) for a in (self.lower, self.scale))
        return lo + sc * _algebraic_softplus(x / sc)

    def inverse(self, y):
        y = _as_float(y)
        lo, sc = (jnp.asarray(a, y.dtype) for a in (self.lower, self.scale))
        # At or below the bound: `sqrt(eps)·scale` inside it, where the gradient
        # (~eps·...) is still well above an optimiser's epsilon.
        tol = jnp.asarray(np.sqrt(np.finfo(y.dtype).eps), y.dtype)
        d = jnp.maximum((y - lo) / sc, tol)
        return sc * (d - 1 / d)


class Identity(AbstractTransform):
    """No constraint: `y = x`."""

    def forward(self, x):
        return _as_float(x)

    def inverse(self, y):
        return _as_float(y)


# ---------------------------------------------------------------------- trees


def _is_transform(t) -> bool:
    return isinstance(t, AbstractTransform) or t is None


def _apply(transforms: Any, params: Any, method: str) -> Any:
    def one(t, sub):
        if t is None:
            return sub

        def leaf(x):
            if x is None or not eqx.is_array_like(x) or isinstance(x, bool):
                return x
            return getattr(t, method)(x)

        return jax.tree_util.tree_map(leaf, sub)

    if _is_transform(transforms):
        return one(transforms, params)
    try:
        return jax.tree_util.tree_map(one, transforms, params, is_leaf=_is_transform)
    except ValueError as e:
        raise ValueError(
            "the tree of transforms must be a prefix of the parameters' structure "
            f"(with None for untransformed parts): {e}"
        ) from None


def forward(transforms: Any, params: Any) -> Any:
    """Map unconstrained `params` to constrained ones, leaf by leaf.

    **Arguments:**

    - `transforms`: one `AbstractTransform` (applied to every leaf), or a PyTree of
      transforms (and `None` for identity) whose structure is a prefix of
      `params`'; a transform at an inner node applies to all leaves below it.
    - `params`: a PyTree of floating arrays (unconstrained).

    **Returns:** a PyTree of `params`' structure and dtypes.
    """
    return _apply(transforms, params, "forward")


def inverse(transforms: Any, params: Any) -> Any:
    """Map constrained `params` to unconstrained ones (see `forward`).

    Values on or beyond a bound map to finite values just inside it.
    """
    return _apply(transforms, params, "inverse")


class ParamTransform(eqx.Module):
    """A PyTree of transforms bundled with `forward` / `inverse` methods (the
    shape of Jaxley's `ParamTransform`, with finite gradients everywhere).

    **Fields:** `transforms`: as for `stable_ode.transforms.forward`.
    """

    transforms: Any

    def forward(self, params):
        return forward(self.transforms, params)

    def inverse(self, params):
        return inverse(self.transforms, params)
