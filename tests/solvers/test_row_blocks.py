"""`RowBlocks`, the lineax solver of per-compartment blocks, and the Newton
solve through optimistix that `neuron_schemes=False` kinetic schemes take
(`stable_ode.nmodl._kinetics.newton_solve`)."""

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import optimistix as optx

from stable_ode._linear.blocks import RowBlocks
from stable_ode.nmodl import _kinetics


def _blocks(n=5, k=3, seed=0):
    rng = np.random.default_rng(seed)
    return jnp.asarray(rng.normal(size=(n, k, k)) + 3 * np.eye(k))


def _operator(a):
    struct = jax.ShapeDtypeStruct(a.shape[:-1], a.dtype)
    return lx.FunctionLinearOperator(lambda x: jnp.einsum("cij,cj->ci", a, x), struct)


def test_solves_each_row_and_its_transpose():
    a = _blocks()
    b = jnp.asarray(np.random.default_rng(1).normal(size=(5, 3)))
    x = lx.linear_solve(_operator(a), b, RowBlocks()).value
    np.testing.assert_allclose(x, np.linalg.solve(a, b[..., None])[..., 0], rtol=1e-12)

    # reverse mode: through the transposed blocks
    def loss(b):
        return jnp.sum(jnp.sin(lx.linear_solve(_operator(a), b, RowBlocks()).value))

    g = jax.grad(loss)(b)
    want = np.linalg.solve(np.swapaxes(a, -1, -2), np.cos(x)[..., None])[..., 0]
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_a_non_finite_row_gives_zero_not_an_error():
    a = _blocks().at[2, 0, 0].set(jnp.nan)
    b = jnp.ones((5, 3))
    x = np.asarray(lx.linear_solve(_operator(a), b, RowBlocks()).value)
    assert np.all(x[2] == 0) and np.all(np.isfinite(x))


def test_newton_solve_goes_through_optimistix(monkeypatch):
    """A per-row nonlinear system (`x² + x·p = c` in each row) solved by
    optimistix's Newton: to rounding, non-negative, and its derivative the
    implicit function theorem's."""
    calls = []
    root_find = optx.root_find

    def counting(*args, **kwargs):
        calls.append(type(args[1]).__name__)
        return root_find(*args, **kwargs)

    monkeypatch.setattr(_kinetics.optx, "root_find", counting)
    p = jnp.asarray([[1.0, 2.0], [0.5, 3.0], [2.0, 0.1]])
    c = jnp.asarray([[2.0, 1.0], [0.3, 4.0], [1.0, 5.0]])

    def solve(p):
        return _kinetics.newton_solve(lambda x: x * x + x * p - c, jnp.ones_like(c), 8)

    x = solve(p)
    want = (-p + jnp.sqrt(p * p + 4 * c)) / 2  # the non-negative root
    np.testing.assert_allclose(x, want, rtol=1e-14)
    assert calls == ["Newton"]
    g = jax.grad(lambda p: jnp.sum(solve(p)))(p)
    np.testing.assert_allclose(g, -want / (2 * want + p), rtol=1e-12)
