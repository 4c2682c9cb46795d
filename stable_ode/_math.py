"""Safe elementary functions for channel kinetics.

Every built-in mechanism uses these, and users' own mechanisms should too. Each is
exact where the naive formula is finite and accurate, and finite (with a finite
gradient, non-zero until it underflows) where the naive formula would overflow or
divide 0 by 0.
Bounds come from `jnp.finfo(dtype)` of the argument: there is no hard-coded 20 or 88.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float


# A product of two rates, each `safe_exp(...)` times a factor of up to this much
# (rate coefficient × q10 × `safe_exp`'s bounded continuation above its bound,
# which is below 1 + log(finfo.max) ≈ 90 in float32), stays below `finfo.max`.
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


def _continuation_scale(dtype) -> float:
    """`K = log(finfo(dtype).max)`: the bound of `safe_exp`'s continuation factor."""
    return float(np.log(np.finfo(dtype).max))


def _rational_and_slope(u):
    """`r(u) = u/(1 + u/K)` for `u >= 0` and its derivative `1/(1 + u/K)²`, with
    `K = _continuation_scale(dtype)`: `r(0) = 0` with slope 1 there, increasing,
    and below `K`. One division (`s = 1/(1 + u/K)`) serves both."""
    k = _continuation_scale(u.dtype)
    s = 1 / (1 + u * (1 / k))
    return u * s, s * s


@jax.custom_jvp
def _continuation(u):
    """`r(u)` (`_rational_and_slope`), differentiable with its exact slope (the
    quotient rule's `1/y - (u/K)/y²` cancels to noise, even below 0, once
    `u/K` is large)."""
    return _rational_and_slope(u)[0]


@_continuation.defjvp
def _continuation_jvp(primals, tangents):
    (u,), (du,) = primals, tangents
    value, slope = _rational_and_slope(u)
    return value, du * slope


def safe_exp(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`exp(x)`, exact for `x <= exp_bound(dtype)` and finite above it.

    Above the bound `b` it continues as `exp(b)·(1 + r(x - b))` with the rational
    `r(u) = u/(1 + u/K)`, `K = log(finfo.max)` (88.7 in float32, 709.8 in
    float64): continuous, continuously differentiable at `b` (slope `exp(b)` on
    both sides), increasing, and never overflowing (below `exp(b)·(1 +
    log(finfo.max))`, for every `x` up to `+inf`). Its gradient is
    `exp(b)/(1 + (x - b)/K)²`: finite everywhere, positive (so an optimiser still
    sees the direction) until it underflows where `x - b` exceeds `K/√tiny`
    (`8e20` in float32, `5e156` in float64). Gradients are NaN-free for every
    finite input (the "double where" pattern). A rational rather than a
    logarithm: it costs one division, where a logarithm (XLA:CPU does not
    vectorise float64 `log`) or a logarithm read off the float's bits costs more.

    **Arguments:** `x`: any floating array (integers become the default float).

    **Returns:** an array of `x`'s dtype and shape.
    """
    x = _float(x)
    b = jnp.asarray(exp_bound(x.dtype), x.dtype)
    above = x > b
    e = jnp.exp(jnp.where(above, b, x))
    # `minimum`: `x = +inf` gives `r(finfo.max)`, finite, not `inf·0`.
    excess = jnp.where(
        above, jnp.minimum(x - b, jnp.finfo(x.dtype).max), jnp.zeros_like(x)
    )
    return jnp.where(above, e * (1 + _continuation(excess)), e)


def x_over_expm1_threshold(dtype) -> float:
    """`|x|` below which `x_over_expm1` uses its Taylor series: 0.5 for every
    dtype. The series (through `x¹⁴`, remainder below `6e-18` there) is exact to
    float64's machine epsilon below it, and above it the closed form's
    `1 - exp(-|x|)` is at least 0.39, so it loses no accuracy to cancellation."""
    del dtype
    return 0.5


def exprel_threshold(dtype) -> float:
    """`|x|` below which `exprel` uses its Taylor series: 0.5 for every dtype.
    The series (through `x¹⁴`, remainder below `5e-17` there) is exact to
    float64's machine epsilon below it, and above it `exp(x) - 1` is at least
    0.39 in magnitude, so it loses no accuracy to cancellation."""
    del dtype
    return 0.5


# Taylor coefficients of x/(eˣ - 1) = 1 - x/2 + Σ B₂ₖ x²ᵏ/(2k)! (Bernoulli
# numbers), k = 1..7, highest first for Horner's rule in x².
_X_OVER_EXPM1_SERIES = (
    7 / 6 / 87178291200,
    -691 / 2730 / 479001600,
    5 / 66 / 3628800,
    -1 / 30 / 40320,
    1 / 42 / 720,
    -1 / 30 / 24,
    1 / 6 / 2,
)
# ... and of its derivative, -1/2 + Σ B₂ₖ x²ᵏ⁻¹/(2k-1)!, k = 1..7: the odd part's
# coefficients, highest first for Horner's rule in x² (times x).
_X_OVER_EXPM1_SLOPE_SERIES = (
    7 / 6 / 6227020800,
    -691 / 2730 / 39916800,
    5 / 66 / 362880,
    -1 / 30 / 5040,
    1 / 42 / 120,
    -1 / 30 / 6,
    1 / 6,
)


def _horner_x2(x2, coefficients):
    poly = jnp.full_like(x2, coefficients[0])
    for c in coefficients[1:]:
        poly = c + x2 * poly
    return poly


@jax.custom_jvp
def _x_over_expm1(x):
    threshold = x_over_expm1_threshold(x.dtype)
    a = jnp.abs(x)
    small = a < threshold
    # One exponential for both signs (XLA:CPU's `expm1` is not vectorised in
    # float32, so it costs far more than `exp`), and no select
    # on `x` itself: with `e = exp(-|x|)`, `x/(exp(x) - 1)` is `|x|/(1 - e)` for
    # `x < 0` and `|x|·e/(1 - e)` for `x > 0`. Off the series' branch `1 - e` is
    # at least 0.39, so `maximum(1 - e, 0.25)` changes nothing there; it keeps the
    # unused branch finite at 0. (Selecting a safe `x` first, `where(small, 1,
    # x)`, would keep that select as a kernel of its own, a sizeable part of a
    # small model's step.)
    e = jnp.exp(-a)
    closed = a * jnp.where(x > 0, e, jnp.ones_like(x)) / jnp.maximum(1 - e, 0.25)
    xm = jnp.clip(x, -threshold, threshold)  # no x¹⁴ overflow off the branch
    x2 = xm * xm
    series = 1 - xm / 2 + x2 * _horner_x2(x2, _X_OVER_EXPM1_SERIES)
    return jnp.where(small, series, closed)


@_x_over_expm1.defjvp
def _x_over_expm1_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    f = _x_over_expm1(x)
    threshold = x_over_expm1_threshold(x.dtype)
    small = jnp.abs(x) < threshold
    # Off the series' branch, f' = f·(1 - (f + x))/x: with `e^x = 1 + x/f`, the
    # quotient rule's (e^x - 1 - x·e^x)/(e^x - 1)² is that. `f + x` first: it is
    # exact where f ≈ -x (x → -∞; `1 - f - x` lost the 1 for |x| > 2^53), and
    # `1 - (f + x)` cancels nothing there (it is ≥ 0.22 in magnitude for |x| ≥ 0.5).
    # Near 0 the derivative's own Taylor series. Cheaper than differentiating the
    # formula itself.
    xs = jnp.where(small, jnp.ones_like(x), x)
    closed = f * (1 - (f + x)) / xs
    xm = jnp.clip(x, -threshold, threshold)
    slope = -0.5 + xm * _horner_x2(xm * xm, _X_OVER_EXPM1_SLOPE_SERIES)
    return f, jnp.where(small, slope, closed) * dx


def x_over_expm1(x: Float[ArrayLike, "*shape"]) -> Float[Array, "*shape"]:
    """`x / (exp(x) - 1)`, smooth and exact through its removable singularity at 0.

    Equal to 1 at `x = 0`. Near 0 (`|x| < x_over_expm1_threshold(dtype)`, 0.5) it
    is the Taylor series `1 - x/2 + x²/12 - x⁴/720 + …` through `x¹⁴`, exact to
    machine epsilon; elsewhere, with `e = exp(-|x|)`, it is `|x| / (1 - e)` for
    negative `x` and `|x|·e / (1 - e)` for positive `x`: one exponential, never
    overflowing, and `1 - e ≥ 0.39` so nothing cancels. So it never divides 0 by
    0 nor forms inf/inf for any finite `x`, in float32 or float64, and the same
    holds for its gradient (which is `-1/2` at 0). For `x → +∞` it tends to 0
    (underflowing gracefully), for `x → -∞` to `-x`.

    The derivative is its own closed form, `f·(1 - (f + x))/x` with `f` the value,
    and near 0 its own Taylor series (a `jax.custom_jvp`; it differentiates again
    for higher derivatives), accurate to a few ulp: cheaper in a backward pass than
    differentiating the formula above.

    **Arguments:** `x`: dimensionless, any floating array.

    **Returns:** an array of `x`'s dtype and shape.
    """
    return _x_over_expm1(_float(x))


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

    Near 0 (`|x| < exprel_threshold(dtype)`, 0.5) it is the Taylor series
    `1 + x/2 + x²/6 + … + x¹⁴/15!`, exact to machine epsilon (gradient `1/2` at
    0); elsewhere `(safe_exp(x) - 1) / x`, one exponential with nothing to cancel
    (`|exp(x) - 1| ≥ 0.39` there). Large positive `x` follows `safe_exp`'s
    continuation above its bound, so it never overflows.

    **Arguments:** `x`: dimensionless, any floating array.

    **Returns:** an array of `x`'s dtype and shape.
    """
    x = _float(x)
    threshold = exprel_threshold(x.dtype)
    small = jnp.abs(x) < threshold
    regular = (safe_exp(x) - 1) / jnp.where(small, jnp.ones_like(x), x)
    xm = jnp.clip(x, -threshold, threshold)  # no x¹⁴ overflow off the branch
    series = jnp.ones_like(x)
    for n in range(14, 0, -1):  # Σ xᵏ/(k+1)!, k = 0..14, by Horner's rule
        series = 1 + xm / (n + 1) * series
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
