"""Parameter transforms: finite forward / inverse / gradient everywhere, gradients
that survive moderate saturation in float32, and PyTree handling."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from stable_ode import transforms as tf


DTYPES = (jnp.float32, jnp.float64)
TRANSFORMS = (
    tf.Bounded(-1.0, 1.0),
    tf.Bounded(0.0, 0.5, scale=2.0),
    tf.Positive(),
    tf.Positive(scale=1e-3),
    tf.Positive(lower=-70.0, scale=10.0),
)


def _grad(t, x):
    return jax.vmap(jax.grad(t.forward))(x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t", TRANSFORMS, ids=lambda t: repr(t))
def test_extreme_inputs_finite(t, dtype):
    x = jnp.asarray([-1e4, -1e3, 1e3, 1e4], dtype)
    y = t.forward(x)
    g = _grad(t, x)
    assert y.dtype == dtype and g.dtype == dtype
    assert np.all(np.isfinite(y)) and np.all(np.isfinite(g))
    assert np.all(g > 0)  # not NaN, not 0: the optimiser still sees a direction
    lo = float(jnp.asarray(t.lower, dtype))
    assert np.all(np.asarray(y) >= lo)
    if isinstance(t, tf.Bounded):
        assert np.all(np.asarray(y) <= float(jnp.asarray(t.upper, dtype)))
    # Even absurd inputs give finite values and non-NaN gradients.
    big = jnp.asarray([-float(np.finfo(dtype).max), 1e30, -1e30], dtype)
    assert np.all(np.isfinite(t.forward(big)))
    assert not np.any(np.isnan(_grad(t, big)))


@pytest.mark.parametrize("t", TRANSFORMS, ids=lambda t: repr(t))
def test_gradient_survives_moderate_saturation_in_float32(t):
    """Where Jaxley's clipped sigmoid (exp clipped at 20) has gradient 0 and an
    unclipped one NaN, ours is small but non-zero."""
    x = jnp.asarray(np.linspace(-100.0, -30.0, 71), jnp.float32) * jnp.asarray(
        t.scale, jnp.float32
    )
    g = _grad(t, x)
    assert np.all(np.isfinite(g)) and np.all(g > 0)
    if isinstance(t, tf.Bounded):
        g_up = _grad(t, -x)
        assert np.all(np.isfinite(g_up)) and np.all(g_up > 0)
    # The plain sigmoid, for contrast: its float32 gradient is gone at -100.
    assert float(jax.grad(jax.nn.sigmoid)(jnp.float32(-100.0))) < 1e-40


@pytest.mark.parametrize("dtype", DTYPES)
def test_inverse_of_bounds_finite(dtype):
    b = tf.Bounded(-1.0, 1.0)
    p = tf.Positive(lower=0.5)
    ys = jnp.asarray([-1.0, 1.0, -2.0, 2.0], dtype)
    xb = b.inverse(ys)
    xp = p.inverse(jnp.asarray([0.5, 0.0, -3.0], dtype))
    assert xb.dtype == dtype and xp.dtype == dtype
    assert np.all(np.isfinite(xb)) and np.all(np.isfinite(xp))
    # ... and land where the gradient is still non-zero.
    assert np.all(_grad(b, xb) > 0) and np.all(_grad(p, xp) > 0)
    np.testing.assert_allclose(
        b.forward(xb), [-1.0, 1.0, -1.0, 1.0], atol=4 * float(np.finfo(dtype).eps)
    )
    gi = jax.vmap(jax.grad(b.inverse))(ys)
    assert not np.any(np.isnan(gi))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t", TRANSFORMS, ids=lambda t: repr(t))
def test_round_trip(t, dtype):
    rtol = 1e-5 if dtype == jnp.float32 else 1e-12
    # x -> y -> x is well conditioned only away from saturation (y keeps the
    # information); y -> x -> y everywhere.
    x = jnp.asarray(np.linspace(-5, 5, 41), dtype) * jnp.asarray(t.scale, dtype)
    np.testing.assert_allclose(
        t.inverse(t.forward(x)), x, rtol=rtol, atol=rtol * t.scale
    )
    x = jnp.asarray(np.linspace(-20, 20, 41), dtype) * jnp.asarray(t.scale, dtype)
    y = t.forward(x)
    np.testing.assert_allclose(t.forward(t.inverse(y)), y, rtol=rtol)
    assert np.all(np.diff(np.asarray(y)) > 0)  # strictly increasing


@pytest.mark.parametrize("t", TRANSFORMS, ids=lambda t: repr(t))
def test_gradient_matches_finite_differences(t):
    x = np.asarray([-300.0, -7.0, -0.3, 0.0, 0.4, 5.0, 250.0]) * t.scale
    g = _grad(t, jnp.asarray(x))
    h = 1e-6 * np.maximum(1.0, np.abs(x))
    fd = (
        np.asarray(t.forward(jnp.asarray(x + h)))
        - np.asarray(t.forward(jnp.asarray(x - h)))
    ) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5)
    # Near 0 the transforms behave like sigmoid / softplus: slope range/2 resp. 1/2.
    if isinstance(t, tf.Bounded):
        assert float(g[3]) == pytest.approx((t.upper - t.lower) / (2 * t.scale))
    else:
        assert float(g[3]) == pytest.approx(0.5)


def test_pytrees():
    params = {
        "hh": {"gnabar": jnp.asarray([0.12, 0.2]), "gl": jnp.asarray(3e-4)},
        "v": -65.0,
    }
    transforms = {
        "hh": {"gnabar": tf.Bounded(0.0, 0.5), "gl": tf.Positive(scale=1e-3)},
        "v": None,
    }
    x = tf.inverse(transforms, params)
    assert jax.tree_util.tree_structure(x) == jax.tree_util.tree_structure(params)
    assert float(x["v"]) == -65.0
    y = tf.forward(transforms, x)
    leaves = jax.tree_util.tree_leaves
    for a, b in zip(leaves(y), leaves(params), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    # A transform at an inner node applies to every leaf below it.
    pos = tf.forward(
        {"hh": tf.Positive(), "v": None}, {"hh": {"a": -1e4, "b": 3.0}, "v": -1.0}
    )
    assert float(pos["hh"]["a"]) > 0 and float(pos["v"]) == -1.0
    # A single transform for the whole tree; the bundled ParamTransform.
    pt = tf.ParamTransform(tf.Positive())
    tree = pt.forward([jnp.float32(-50.0), {"k": jnp.float32(2.0)}])
    assert tree[0].dtype == jnp.float32 and float(tree[0]) > 0
    # Gradients through a PyTree of transforms are finite at saturation.
    g = jax.grad(
        lambda x: sum(
            jnp.sum(v) for v in jax.tree_util.tree_leaves(tf.forward(transforms, x))
        )
    )(
        {
            "hh": {"gnabar": jnp.asarray([-1e4, 1e4]), "gl": jnp.asarray(-1e4)},
            "v": jnp.asarray(0.0),
        }
    )
    assert all(
        np.all(np.isfinite(v)) and np.all(v > 0) for v in jax.tree_util.tree_leaves(g)
    )


def test_structure_mismatch_and_bad_bounds_are_clear():
    with pytest.raises(ValueError, match="prefix"):
        tf.forward({"a": tf.Positive(), "b": tf.Positive()}, {"a": 1.0})
    with pytest.raises(ValueError, match="lower < upper"):
        tf.Bounded(1.0, 1.0)
    with pytest.raises(ValueError, match="scale > 0"):
        tf.Positive(scale=0.0)


@pytest.mark.parametrize("x0", [-30.0, -60.0])
def test_sgd_step_from_saturated_start_moves(x0):
    """Plain SGD, float32: the parameter moves toward the target."""
    t = tf.Bounded(-1.0, 1.0)
    target = jnp.float32(0.5)

    def loss(x):
        return jnp.square(t.forward(x) - target)

    opt = optax.sgd(50.0)
    x = jnp.float32(x0)
    state = opt.init(x)
    g = jax.grad(loss)(x)
    updates, state = opt.update(g, state)
    x1 = optax.apply_updates(x, updates)
    assert np.isfinite(x1) and float(x1) > x0
    # y's change can be below float32 resolution this deep in saturation; it
    # must never go the wrong way.
    assert float(loss(x1)) <= float(loss(x))


@pytest.mark.parametrize("x0", [-100.0, -1e4, "lower bound"])
@pytest.mark.parametrize(
    "t", [tf.Bounded(-1.0, 1.0), tf.Positive()], ids=["bounded", "positive"]
)
def test_adam_steps_from_deep_saturation_move(t, x0):
    target = jnp.float32(0.5)
    x = t.inverse(jnp.float32(t.lower)) if x0 == "lower bound" else jnp.float32(x0)
    x_start = float(x)

    def loss(x):
        return jnp.square(t.forward(x) - target)

    opt = optax.adam(0.1 * max(1.0, abs(x_start)) ** 0.5)
    state = opt.init(x)
    for _ in range(3):
        g = jax.grad(loss)(x)
        # optax's bias correction mixes int32 and float: not strict-promotion clean.
        with jax.numpy_dtype_promotion("standard"):
            updates, state = opt.update(g, state)
        x = optax.apply_updates(x, updates)
    assert np.isfinite(x) and float(x) > x_start
    if abs(x_start) > 1000:  # y moves below float32 resolution there
        assert float(loss(x)) <= float(loss(jnp.float32(x_start)))
    else:
        assert float(loss(x)) < float(loss(jnp.float32(x_start)))
