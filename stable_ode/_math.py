"""Safe elementary functions for channel kinetics.

Every built-in mechanism uses these, and users' own mechanisms should too. Each is
exact where the naive formula is finite and accurate, and finite (with a finite,
non-zero gradient) where the naive formula would overflow or divide 0 by 0.
Bounds come from `jnp.finfo(dtype)` of the argument: there is no hard-coded 20 or 88.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float


# A product of two rates, each `safe_exp(...)` times a factor of up to this much
# (rate coefficient × q10 × `safe_exp`'s slow continuation above its bound, which
# is at most 1 + log(finfo.max) ≈ 90 in float32), stays below `finfo.max`.
_RATE_FACTOR_MARGIN = 1e5


def _float(x: ArrayLike) -> Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def exp_bound(dtype) -> float:
    """The largest argument `safe_exp` evaluates exactly, for a floating `dtype`.

    It is `log(finfo(dtype).max)/2 - log(1e5)`: 32.85 in float32, 343.4 in float64.
    The half keeps *products* of two rates finite, and the `log(1e5)` margin leaves
    room for rate coefficients, q10 factors (3^((37-6.3)/10) ≈ 29) and `safe_exp`'s
    continuation above the bound. Rates at the bound (`exp(32.85) ≈ 1.9e14` /ms in
    float32) are far faster than any time step, so the bound does not change a
    gate's trajectory: it only keeps it representable.

    **Arguments:** `dtype`: a floating dtype.

    **Returns:** the bound, a Python float.
    """
    return float(np.log(np.finfo(dtype).max)) / 2 - float(np.log(_RATE_FACTOR_MARGIN))


def safe_exp(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`exp(x)`, exact for `x <= exp_bound(dtype)` and finite above it.

    Above the bound `b` it continues as `exp(b)·(1 + log1p(x - b))`: continuous,
    continuously differentiable at `b`, increasing, and never overflowing (at most
    `exp(b)·(1 + log(finfo.max))`), with a finite, non-zero gradient for every
    finite `x` (so an optimiser still sees the direction). Gradients are NaN-free
    for every finite input (the "double where" pattern).

    **Arguments:** `x`: any floating array (integers become the default float).

    **Returns:** an array of `x`'s dtype and shape.
    """
    x = _float(x)
    b = jnp.asarray(exp_bound(x.dtype), x.dtype)
    above = x > b
    e = jnp.exp(jnp.where(above, b, x))
    excess = jnp.where(above, x - b, jnp.zeros_like(x))
    return jnp.where(above, e * (1 + jnp.log1p(excess)), e)


def _series_threshold(dtype, coefficient: float, power: int) -> float:
    """`|x|` below which a series with remainder `coefficient·|x|^power` is exact
    to the dtype's machine epsilon."""
    eps = float(np.finfo(dtype).eps)
    return (eps / coefficient) ** (1.0 / power)


def x_over_expm1_threshold(dtype) -> float:
    """`|x|` below which `x_over_expm1` uses its Taylor series (0.39 in float32,
    0.014 in float64): the remainder `x⁶/30240` is below machine epsilon there."""
    return _series_threshold(dtype, 1 / 30240, 6)


def exprel_threshold(dtype) -> float:
    """`|x|` below which `exprel` uses its Taylor series (0.15 in float32, 0.0028
    in float64): the remainder `x⁵/720` is below machine epsilon there."""
    return _series_threshold(dtype, 1 / 720, 5)


def x_over_expm1(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`x / (exp(x) - 1)`, smooth and exact through its removable singularity at 0.

    Equal to 1 at `x = 0`. Near 0 (`|x| < x_over_expm1_threshold(dtype)`) it is the
    Taylor series `1 - x/2 + x²/12 - x⁴/720`, exact to machine epsilon; elsewhere
    `x / expm1(x)` for negative `x` and `x·exp(-x) / (1 - exp(-x))` for positive
    `x`. So it never divides 0 by 0 nor forms inf/inf for any finite `x`, in
    float32 or float64, and the same holds for its gradient (which is `-1/2` at 0).
    For `x → +∞` it tends to 0 (underflowing gracefully), for `x → -∞` to `-x`.

    **Arguments:** `x`: dimensionless, any floating array.

    **Returns:** an array of `x`'s dtype and shape.
    """
    x = _float(x)
    small = jnp.abs(x) < x_over_expm1_threshold(x.dtype)
    one = jnp.ones_like(x)
    xs = jnp.where(small, one, x)
    pos = xs > 0
    xp = jnp.where(pos, xs, one)
    xn = jnp.where(pos, -one, xs)
    large = xp * jnp.exp(-xp) / -jnp.expm1(-xp)
    negative = xn / jnp.expm1(xn)
    xm = jnp.where(small, x, jnp.zeros_like(x))  # no x⁴ overflow off the branch
    x2 = xm * xm
    series = 1 - xm / 2 + x2 / 12 - x2 * x2 / 720
    return jnp.where(small, series, jnp.where(pos, large, negative))


def vtrap(x: Float[ArrayLike, "*shape"], y: float | Float[ArrayLike, "*shape"]):
    """NEURON's `vtrap(x, y) = x / (exp(x/y) - 1)` from `hh.mod`, in mV.

    Written as `y · x_over_expm1(x / y)`: exact, finite and smooth at `x = 0`
    (where it equals `y`), for any finite `x`. Unlike `hh.mod`, which switches to
    `y·(1 - x/y/2)` for `|x/y| < 1e-6`, there is no first-order approximation.

    **Arguments:**

    - `x`: mV (e.g. `-(v + 40)` for HH's `alpha_m`).
    - `y`: mV, non-zero (e.g. 10).

    **Returns:** mV, `x`'s dtype and shape.
    """
    x = _float(x)
    return y * x_over_expm1(x / y)


def exprel(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`(exp(x) - 1) / x`, equal to 1 at `x = 0`; finite for any finite `x`.

    Near 0 (`|x| < exprel_threshold(dtype)`) it is the Taylor series
    `1 + x/2 + x²/6 + x³/24 + x⁴/120`, exact to machine epsilon (gradient `1/2` at
    0); elsewhere `expm1(x) / x`. Large positive `x` follows `safe_exp`'s
    continuation above its bound, so it never overflows.

    **Arguments:** `x`: dimensionless, any floating array.

    **Returns:** an array of `x`'s dtype and shape.
    """
    x = _float(x)
    small = jnp.abs(x) < exprel_threshold(x.dtype)
    xs = jnp.where(small, jnp.ones_like(x), x)
    b = jnp.asarray(exp_bound(x.dtype), x.dtype)
    regular = jnp.where(
        xs > b, (safe_exp(xs) - 1) / xs, jnp.expm1(jnp.minimum(xs, b)) / xs
    )
    xm = jnp.where(small, x, jnp.zeros_like(x))  # no x⁵ overflow off the branch
    series = 1 + xm * (1 / 2 + xm * (1 / 6 + xm * (1 / 24 + xm / 120)))
    return jnp.where(small, series, regular)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _safe_div(num, den, fill):
    zero = den == 0
    out = num / jnp.where(zero, jnp.ones_like(den), den)
    return jnp.where(zero, jnp.asarray(fill, out.dtype), out)


@_safe_div.defjvp
def _safe_div_jvp(fill, primals, tangents):
    num, den = primals
    dnum, dden = tangents
    q = _safe_div(num, den, fill)
    zero = den == 0
    safe_den = jnp.where(zero, jnp.ones_like(den), den)
    # d(n/d) = (dn - q·dd)/d: no 1/d², which would overflow for tiny d.
    dq = (dnum - q * dden) / safe_den
    return q, jnp.where(zero, jnp.zeros_like(dq), dq)


def safe_div(
    num: Float[ArrayLike, "*shape"],
    den: Float[ArrayLike, "*shape"],
    fill: float = 0.0,
) -> Float[Array, "*shape"]:
    """`num / den`, with `fill` where `den == 0` (value and gradient both finite).

    The derivative is computed as `(dnum - q·dden)/den` with `q = num/den`, never
    through `1/den²`, so it stays finite for tiny `den` whenever `q` is finite
    (e.g. `alpha/(alpha + beta)` with both rates near underflow). Where `den == 0`
    the derivative is 0.

    **Arguments:**

    - `num`, `den`: floating arrays of the same shape (or scalars); `den` is cast
      to `num`'s dtype.
    - `fill`: the value where `den == 0`.

    **Returns:** an array of `num`'s dtype.
    """
    num = _float(num)
    den = jnp.asarray(den, num.dtype)
    num, den = jnp.broadcast_arrays(num, den)
    return _safe_div(num, den, float(fill))


def safe_log(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`log(x)` for `x > tiny`; `log(tiny)` (finite) for `x <= tiny`, gradient 0 there.

    `tiny` is `finfo(dtype).tiny`. For kinetics such as Nernst potentials of
    concentrations that may reach 0.

    **Arguments:** `x`: any floating array.

    **Returns:** an array of `x`'s dtype and shape.
    """
    x = _float(x)
    tiny = jnp.asarray(jnp.finfo(x.dtype).tiny, x.dtype)
    return jnp.log(jnp.where(x > tiny, x, tiny))
