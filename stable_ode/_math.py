"""Safe elementary functions for channel kinetics.

Every built-in mechanism uses these, and users' own mechanisms should too. Each is
exact where the naive formula is finite and accurate, and finite (with a finite,
non-zero gradient) where the naive formula would overflow or divide 0 by 0.
Bounds come from `jnp.finfo(dtype)` of the argument: there is no hard-coded 20 or 88.
"""

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float


def _float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def exp_bound(dtype) -> float:
    """The largest argument `safe_exp` evaluates exactly, for a floating `dtype`.

    It is half of `log(finfo(dtype).max)` (44.4 in float32, 354.9 in float64), so
    that sums *and products* of two rates built from `safe_exp` stay finite, and
    rates stay far faster than any time step (`exp(44) ≈ 1e19 /ms`): the bound never
    changes a gate's trajectory, only keeps it representable.
    """
    return float(np.log(np.finfo(dtype).max)) / 2


def safe_exp(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`exp(x)`, exact for `x <= exp_bound(dtype)` and finite above it.

    Above the bound `b` it continues as `exp(b) * (1 + log1p(x - b))`: continuous,
    continuously differentiable at `b`, increasing, and never overflowing, with a
    finite, non-zero gradient for every finite `x` (so an optimiser still sees the
    direction). Gradients are NaN-free for every input (the "double where" pattern).
    """
    x = _float(x)
    b = jnp.asarray(exp_bound(x.dtype), x.dtype)
    above = x > b
    e = jnp.exp(jnp.where(above, b, x))
    excess = jnp.where(above, x - b, jnp.zeros_like(x))
    return jnp.where(above, e * (1 + jnp.log1p(excess)), e)


def x_over_expm1(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`x / (exp(x) - 1)`, smooth and exact through its removable singularity at 0.

    Equal to 1 at `x = 0`; uses a Taylor series near 0 (error below machine epsilon
    of the dtype), `x / expm1(x)` for negative `x` and `x·exp(-x) / (1 - exp(-x))`
    for positive `x`, so it neither divides 0 by 0 nor forms inf/inf for any finite
    `x`, in float32 or float64; the same holds for its gradient.
    """
    x = _float(x)
    eps = jnp.finfo(x.dtype).eps
    # Taylor remainder x⁴/720 below eps.
    small = jnp.abs(x) < (720 * eps) ** 0.25
    one = jnp.ones_like(x)
    xs = jnp.where(small, one, x)
    pos = xs > 0
    xp = jnp.where(pos, xs, one)
    xn = jnp.where(pos, -one, xs)
    large = xp * jnp.exp(-xp) / -jnp.expm1(-xp)
    negative = xn / jnp.expm1(xn)
    series = 1 - x / 2 + x * x / 12
    return jnp.where(small, series, jnp.where(pos, large, negative))


def vtrap(x: Float[ArrayLike, "*shape"], y: float | Float[ArrayLike, "*shape"]):
    """NEURON's `vtrap(x, y) = x / (exp(x/y) - 1)` from `hh.mod`, in mV.

    Written as `y * x_over_expm1(x / y)`: exact, finite and smooth at `x = 0`
    (where it equals `y`), for any finite `x`. `y` must be non-zero.
    """
    x = _float(x)
    return y * x_over_expm1(x / y)


def exprel(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`(exp(x) - 1) / x`, equal to 1 at `x = 0`; finite for any finite `x`.

    Large positive `x` follows `safe_exp`'s continuation above its bound.
    """
    x = _float(x)
    eps = jnp.finfo(x.dtype).eps
    small = jnp.abs(x) < (24 * eps) ** (1 / 3)
    xs = jnp.where(small, jnp.ones_like(x), x)
    b = jnp.asarray(exp_bound(x.dtype), x.dtype)
    regular = jnp.where(xs > b, (safe_exp(xs) - 1) / xs, jnp.expm1(jnp.minimum(xs, b)) / xs)
    series = 1 + x / 2 + x * x / 6
    return jnp.where(small, series, regular)


def safe_div(
    num: Float[ArrayLike, "*shape"],
    den: Float[ArrayLike, "*shape"],
    fill: float = 0.0,
) -> Float[Array, "*shape"]:
    """`num / den`, with `fill` where `den == 0` (value and gradient both finite)."""
    num = _float(num)
    den = jnp.asarray(den, num.dtype)
    zero = den == 0
    out = num / jnp.where(zero, jnp.ones_like(den), den)
    return jnp.where(zero, jnp.asarray(fill, out.dtype), out)


def safe_log(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`log(x)` for `x > 0`; `log(tiny)` (finite) for `x <= 0`, with finite gradient.

    For kinetics such as Nernst potentials of concentrations that may reach 0.
    """
    x = _float(x)
    tiny = jnp.finfo(x.dtype).tiny
    return jnp.log(jnp.where(x > tiny, x, tiny))
