"""Safe math: exact where the naive formula is, finite (value and gradient) where
it is not, in float32 and float64; HH rates against hh.mod."""

import jax
import jax.numpy as jnp
import mpmath
import numpy as np
import pytest

import stable_ode as so
from stable_ode._math import exprel_threshold, x_over_expm1_threshold
from stable_ode.mechanisms.hh import hh_rates


mpmath.mp.dps = 40
DTYPES = (jnp.float32, jnp.float64)
# Relative accuracy we require: a few ulps for values; gradients of the
# piecewise forms lose a little more near the series switch (cancellation in
# the closed form's derivative, remainder of the series' derivative).
VALUE_RTOL = {jnp.float32: 4e-7, jnp.float64: 1e-15}
GRAD_RTOL = {jnp.float32: 1e-5, jnp.float64: 1e-12}


def _f_ref(x):
    x = mpmath.mpf(x)
    return mpmath.mpf(1) if x == 0 else x / mpmath.expm1(x)


def _df_ref(x):
    x = mpmath.mpf(x)
    if abs(x) < 1e-15:  # series; the closed form cancels at 40 digits
        return -mpmath.mpf(1) / 2 + x / 6
    return (mpmath.expm1(x) - x * mpmath.exp(x)) / mpmath.expm1(x) ** 2


def _g_ref(x):
    x = mpmath.mpf(x)
    return mpmath.mpf(1) if x == 0 else mpmath.expm1(x) / x


def _dg_ref(x):
    x = mpmath.mpf(x)
    if abs(x) < 1e-15:
        return mpmath.mpf(1) / 2 + x / 3
    return (x * mpmath.exp(x) - mpmath.expm1(x)) / x**2


def _probe_points(threshold, dtype):
    tiny = float(np.finfo(dtype).tiny)
    t = threshold
    pts = [0.0, tiny, -tiny, 1e-30, -1e-30, 1e-6, -1e-6]
    for s in (1 - 1e-5, 1 + 1e-5):
        pts += [t * s, -t * s]
    pts += [0.5, -0.5, 3.0, -3.0, 30.0, -30.0, 80.0, -80.0, 1e3, -1e3, 1e4, -1e4]
    return np.asarray(pts, dtype)


def _close(got, ref, rtol, atol=0.0):
    ref = float(ref)
    return abs(float(got) - ref) <= rtol * abs(ref) + atol


@pytest.mark.parametrize("dtype", DTYPES)
def test_exp_bound_from_finfo(dtype):
    b = so.exp_bound(dtype)
    fmax = float(np.finfo(dtype).max)
    assert b == pytest.approx(np.log(fmax) / 2 - np.log(1e5))
    # A product of two bounded rates with factors of 100 each (coefficient × q10)
    # and the continuation's largest factor stays finite.
    big = np.exp(b) * (1 + np.log(fmax)) * 100
    assert np.isfinite(np.asarray(big, dtype) * np.asarray(big, dtype))


def test_exp_bound_differs_between_dtypes():
    assert so.exp_bound(jnp.float32) < 40 < 300 < so.exp_bound(jnp.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_safe_exp(dtype):
    b = so.exp_bound(dtype)
    below = np.asarray([-1e4, -700.0, -80.0, -1.0, 0.0, 1.0, 20.0, b * 0.999], dtype)
    v, g = jax.vmap(jax.value_and_grad(so.safe_exp))(jnp.asarray(below))
    tiny = float(np.finfo(dtype).tiny)
    ref = np.exp(below.astype(np.float64))
    np.testing.assert_allclose(v, ref, rtol=4 * VALUE_RTOL[dtype], atol=tiny)
    np.testing.assert_allclose(
        g, ref, rtol=4 * VALUE_RTOL[dtype], atol=tiny
    )  # d exp = exp
    fmax = float(np.finfo(dtype).max)
    above = np.asarray([b * 1.001, b + 1, 2 * b, 1e4, 1e30, fmax], dtype)
    v, g = jax.vmap(jax.value_and_grad(so.safe_exp))(jnp.asarray(above))
    assert v.dtype == dtype and g.dtype == dtype
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(g)) and np.all(g >= 0)
    # positive until the slope 1/(1 + u/K)² underflows, at u ≈ K/√tiny
    k = np.log(fmax)
    assert np.all(np.asarray(g)[above - b < 1e-3 * k / np.sqrt(tiny)] > 0)
    # still increasing, up to rounding (saturating towards exp(b)·(1 + K), the
    # continuation's u·s with s = 1/(1 + u/K) may round 1 ulp down)
    assert np.all(np.diff(v) >= -4 * float(np.finfo(dtype).eps) * v[1:])
    # C¹ at the bound.
    eb = np.exp(np.float64(np.asarray(b, dtype)))
    lo, hi = jax.vmap(jax.value_and_grad(so.safe_exp))(
        jnp.asarray(
            [
                np.nextafter(np.asarray(b, dtype), -np.inf),
                np.nextafter(np.asarray(b, dtype), np.inf),
            ]
        )
    )
    np.testing.assert_allclose(lo, eb, rtol=1e-5)
    np.testing.assert_allclose(hi, eb, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_safe_exp_continuation(dtype):
    """Above the bound: exp(b)·(1 + r(u)), u = x - b, with r(u) = u/(1 + u/K) and
    K = log(finfo.max): its exact derivative, increasing over the whole range,
    bounded by exp(b)·(1 + K), and finite at x = +inf."""
    b = np.asarray(so.exp_bound(dtype), dtype)
    fmax = float(np.finfo(dtype).max)
    tiny = float(np.finfo(dtype).tiny)
    k = np.log(fmax)
    u = np.geomspace(1e-6, fmax / 2, 4000).astype(dtype)
    x = (b + u).astype(dtype)
    x = x[x > b]
    v, g = jax.vmap(jax.value_and_grad(so.safe_exp))(jnp.asarray(x))
    v, g = np.asarray(v, np.float64), np.asarray(g, np.float64)
    eb = np.exp(np.float64(b))
    uu = (x - b).astype(np.float64)  # the excess as safe_exp forms it, in its dtype
    ref, dref = uu / (1 + uu / k), (1 / (1 + uu / k)) ** 2
    rtol = 10 * VALUE_RTOL[dtype]
    np.testing.assert_allclose(v, eb * (1 + ref), rtol=rtol)
    # the slope where it is representable (it underflows at u ≈ K/√tiny)
    normal = dref > 1e3 * tiny
    np.testing.assert_allclose(g[normal], (eb * dref)[normal], rtol=rtol)
    assert np.all(g[normal] > 0) and np.all(g >= 0) and np.all(np.isfinite(g))
    # increasing up to rounding (as `exp` itself): no step down of more than 4 ulp
    assert np.all(np.diff(v) >= -4 * float(np.finfo(dtype).eps) * v[1:])
    assert np.all(v <= eb * (1 + k) * (1 + rtol))
    top = so.safe_exp(jnp.asarray([np.inf, fmax], dtype))
    assert np.all(np.isfinite(top)) and float(top[0]) == float(top[1])


@pytest.mark.parametrize("dtype", DTYPES)
def test_x_over_expm1_values_and_gradients(dtype):
    t = x_over_expm1_threshold(dtype)
    xs = _probe_points(t, dtype)
    v, g = jax.vmap(jax.value_and_grad(so.x_over_expm1))(jnp.asarray(xs))
    assert v.dtype == dtype and g.dtype == dtype
    for x, vi, gi in zip(xs, np.asarray(v), np.asarray(g), strict=True):
        rv, rg = _f_ref(float(x)), _df_ref(float(x))
        tiny = float(np.finfo(dtype).tiny)
        assert _close(vi, rv, VALUE_RTOL[dtype], tiny), (x, vi, rv)
        assert _close(gi, rg, GRAD_RTOL[dtype], tiny), (x, gi, rg)
    assert float(v[0]) == 1.0 and float(g[0]) == -0.5


@pytest.mark.parametrize("dtype", DTYPES)
def test_exprel_values_and_gradients(dtype):
    t = exprel_threshold(dtype)
    b = so.exp_bound(dtype)
    xs = _probe_points(t, dtype)
    xs = xs[xs < b]  # above the bound exprel follows safe_exp's continuation
    v, g = jax.vmap(jax.value_and_grad(so.exprel))(jnp.asarray(xs))
    assert v.dtype == dtype
    for x, vi, gi in zip(xs, np.asarray(v), np.asarray(g), strict=True):
        rv, rg = _g_ref(float(x)), _dg_ref(float(x))
        tiny = float(np.finfo(dtype).tiny)
        assert _close(vi, rv, VALUE_RTOL[dtype], tiny), (x, vi, rv)
        assert _close(gi, rg, GRAD_RTOL[dtype], tiny), (x, gi, rg)
    above = jnp.asarray([b + 1, 1e4, 1e30, float(np.finfo(dtype).max)], dtype)
    v, g = jax.vmap(jax.value_and_grad(so.exprel))(above)
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(g))


@pytest.mark.parametrize("dtype", DTYPES)
def test_series_switch_is_continuous(dtype):
    """No visible step in value or slope where the series takes over."""
    for fn, t in (
        (so.x_over_expm1, x_over_expm1_threshold(dtype)),
        (so.exprel, exprel_threshold(dtype)),
    ):
        for sign in (1.0, -1.0):
            edge = np.asarray(sign * t, dtype)
            xs = jnp.asarray(
                [np.nextafter(edge, 0), edge, np.nextafter(edge, 2 * edge)], dtype
            )
            v, g = jax.vmap(jax.value_and_grad(fn))(xs)
            eps = float(np.finfo(dtype).eps)
            assert float(jnp.max(v) - jnp.min(v)) <= 4 * eps
            assert float(jnp.max(g) - jnp.min(g)) <= GRAD_RTOL[dtype]


@pytest.mark.parametrize("dtype", DTYPES)
def test_vtrap(dtype):
    for y in (10.0, -5.0, 0.3):
        xs = jnp.asarray([0.0, 1e-7, -1e-7, 2.0, -2.0, 500.0, -500.0], dtype)
        v, g = jax.vmap(jax.value_and_grad(lambda x, y=y: so.vtrap(x, y)))(xs)
        assert v.dtype == dtype
        for x, vi, gi in zip(np.asarray(xs), np.asarray(v), np.asarray(g), strict=True):
            u = float(x) / y
            assert _close(vi, y * _f_ref(u), VALUE_RTOL[dtype], 1e-30)
            assert _close(gi, _df_ref(u), GRAD_RTOL[dtype], 1e-30)
        assert float(v[0]) == pytest.approx(y, rel=VALUE_RTOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_safe_div(dtype):
    num = jnp.asarray([1.0, 0.0, 3.0, 1e-30], dtype)
    den = jnp.asarray([2.0, 0.0, 0.0, 2e-30], dtype)
    q = so.safe_div(num, den, fill=-1.0)
    np.testing.assert_array_equal(q, np.asarray([0.5, -1.0, -1.0, 0.5], dtype))
    gn, gd = jax.grad(lambda n, d: jnp.sum(so.safe_div(n, d)), argnums=(0, 1))(num, den)
    assert np.all(np.isfinite(gn)) and np.all(np.isfinite(gd))
    np.testing.assert_allclose(gn, [0.5, 0.0, 0.0, 0.5e30], rtol=1e-6)
    # d/dd (n/d) = -n/d² = -q/d: finite although d² underflows.
    np.testing.assert_allclose(gd, [-0.25, 0.0, 0.0, -0.5 / 2e-30], rtol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_alpha_beta_gate_with_underflowing_rates(dtype):
    """inf = alpha/(alpha+beta) has a finite gradient when both rates are tiny."""
    tiny = float(np.finfo(dtype).tiny)

    def inf(a):
        return so.alpha_beta_gate(a, 3 * a).inf

    for a in (1e-20, 1e3 * tiny, 0.0):
        a = jnp.asarray(a, dtype)
        v, g = jax.value_and_grad(inf)(a)
        assert np.isfinite(v) and np.isfinite(g)
        if a > 0:
            assert float(v) == pytest.approx(0.25, rel=1e-6)
            assert abs(float(g)) <= 1e-6 * 0.25 / float(
                a
            )  # exactly 0 in exact arithmetic


@pytest.mark.parametrize("dtype", DTYPES)
def test_safe_log(dtype):
    x = jnp.asarray([2.0, 0.0, -1.0], dtype)
    v = so.safe_log(x)
    g = jax.grad(lambda x: jnp.sum(so.safe_log(x)))(x)
    assert float(v[0]) == pytest.approx(np.log(2.0), rel=1e-6)
    assert np.all(np.isfinite(v)) and np.all(np.isfinite(g))
    np.testing.assert_allclose(g, [0.5, 0.0, 0.0])


# ---------------------------------------------------------------- HH vs hh.mod


def _hh_mod_rates(v, celsius=6.3):
    """hh.mod (NEURON 9) in plain numpy float64, including its vtrap switch."""
    v = np.asarray(v, np.float64)

    def vtrap(x, y):
        small = np.abs(x / y) < 1e-6
        with np.errstate(all="ignore"):
            big = x / (np.exp(x / y) - 1)
        return np.where(small, y * (1 - x / y / 2), big)

    q10 = 3 ** ((celsius - 6.3) / 10)
    with np.errstate(over="ignore"):
        ab = {
            "m": (0.1 * vtrap(-(v + 40), 10), 4 * np.exp(-(v + 65) / 18)),
            "h": (0.07 * np.exp(-(v + 65) / 20), 1 / (np.exp(-(v + 35) / 10) + 1)),
            "n": (0.01 * vtrap(-(v + 55), 10), 0.125 * np.exp(-(v + 65) / 80)),
        }
    return {k: (a, b, a / (a + b), q10 * (a + b)) for k, (a, b) in ab.items()}


def _alpha(gate_kin, celsius=6.3):
    q10 = 3 ** ((celsius - 6.3) / 10)
    return gate_kin.inf * gate_kin.rate / q10


@pytest.mark.parametrize("dtype", DTYPES)
def test_hh_rates_at_removable_singularities(dtype):
    rates = hh_rates(jnp.asarray([-40.0, -55.0], dtype))
    assert rates["m"].inf.dtype == dtype
    am = _alpha(rates["m"])
    an = _alpha(rates["n"])
    assert float(am[0]) == pytest.approx(1.0, rel=4 * VALUE_RTOL[dtype])
    assert float(an[1]) == pytest.approx(0.1, rel=4 * VALUE_RTOL[dtype])
    ref = _hh_mod_rates([-40.0, -55.0])
    for k in "mhn":
        np.testing.assert_allclose(rates[k].inf, ref[k][2], rtol=8 * VALUE_RTOL[dtype])
        np.testing.assert_allclose(rates[k].rate, ref[k][3], rtol=8 * VALUE_RTOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("v0", [-40.0, -55.0])
def test_hh_rates_continuous_and_differentiable_at_singularity(dtype, v0):
    offsets = np.asarray([-1e-2, -1e-4, -1e-6, 0.0, 1e-6, 1e-4, 1e-2])
    v = jnp.asarray(v0 + offsets, dtype)

    def rates(v):
        kin = hh_rates(v)
        return jnp.stack([kin[k].rate for k in "mhn"] + [kin[k].inf for k in "mhn"])

    # Jitted: op by op, every primitive of the rates would be compiled on its own.
    r = np.asarray(jax.jit(rates)(v), np.float64)
    # Smooth: the change across ±1e-2 mV is tiny and monotone-consistent (no spike).
    assert np.all(np.isfinite(r))
    assert np.max(np.abs(np.diff(r, axis=1))) < 1e-2
    slope = jax.jit(jax.jacfwd(lambda u: rates(u[None])[:, 0]))
    jac = jax.vmap(slope)(v)
    assert np.all(np.isfinite(jac))
    # Slope at the singularity matches the slope of the float64 hh.mod formulas a
    # little away from it (central difference).
    h = 1e-3
    ref_p, ref_m = _hh_mod_rates(v0 + 0.05 + h), _hh_mod_rates(v0 + 0.05 - h)
    kin = slope(jnp.asarray(v0 + 0.05, dtype))
    fd = np.asarray(
        [(ref_p[k][3] - ref_m[k][3]) / (2 * h) for k in "mhn"]
        + [(ref_p[k][2] - ref_m[k][2]) / (2 * h) for k in "mhn"]
    )
    np.testing.assert_allclose(
        kin, fd, rtol=2e-4 if dtype == jnp.float32 else 1e-6, atol=1e-7
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("celsius", [6.3, 37.0])
def test_hh_rates_match_hh_mod(dtype, celsius):
    vs = np.linspace(-150.0, 100.0, 2501)  # includes -40 and -55 exactly
    assert np.any(vs == -40.0) and np.any(vs == -55.0)
    kin = HH_RATES_JIT(jnp.asarray(vs, dtype), jnp.asarray(celsius, dtype))
    ref = _hh_mod_rates(vs, celsius)
    rtol = 2e-6 if dtype == jnp.float32 else 1e-12
    for k in "mhn":
        np.testing.assert_allclose(kin[k].inf, ref[k][2], rtol=rtol, atol=1e-30)
        np.testing.assert_allclose(kin[k].rate, ref[k][3], rtol=rtol)


HH_RATES_JIT = jax.jit(so.mechanisms.hh_rates)


@pytest.mark.parametrize("dtype", DTYPES)
def test_hh_rates_finite_far_outside_physiology(dtype):
    vs = jnp.asarray([-1e5, -1e4, -3000.0, -300.0, 300.0, 3000.0, 1e4, 1e5], dtype)

    def total(v):
        kin = so.mechanisms.hh_rates(v, jnp.asarray(37.0, dtype))
        return sum(jnp.sum(g.rate) + jnp.sum(g.inf) for g in kin.values())

    kin = so.mechanisms.hh_rates(vs, jnp.asarray(37.0, dtype))
    for g in kin.values():
        assert np.all(np.isfinite(g.rate)) and np.all(g.rate > 0)
        assert np.all((g.inf >= 0) & (g.inf <= 1))
        # products of rates (what a user's kinetic scheme may form) stay finite
        assert np.all(np.isfinite(g.rate * g.rate))
    grad = jax.jit(jax.vmap(jax.grad(lambda v: total(v[None]))))(vs)
    assert np.all(np.isfinite(grad))
