"""Helpers shared across the package: the finiteness test and the sanitised
linear solve that keeps a non-finite step out of the derivative."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Bool, PyTree


def tree_all_finite(*trees: PyTree) -> Bool[Array, ""]:
    """Whether every floating-point leaf of every tree is finite (no NaN, no ±inf).

    `None` trees (e.g. a missing error estimate) count as finite. Integer leaves are
    always finite.
    """
    leaves = [
        x
        for t in trees
        for x in jax.tree_util.tree_leaves(t)
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact)
    ]
    if not leaves:
        return jnp.asarray(True)
    # One reduction per dtype over all its leaves, not one per leaf: on small models
    # each reduction is a separate XLA kernel per step.
    by_dtype: dict = {}
    for x in leaves:
        by_dtype.setdefault(jnp.result_type(x), []).append(jnp.ravel(x))
    checks = [jnp.all(jnp.isfinite(jnp.concatenate(xs))) for xs in by_dtype.values()]
    return functools.reduce(jnp.logical_and, checks)


def _plain_solve(coupling, theta, diagonal, vector, solver):
    return lx.linear_solve(
        coupling.operator(diagonal, theta), vector, solver, throw=False
    ).value


@eqx.filter_custom_jvp
def finite_linear_solve(coupling, theta, diagonal, vector, solver) -> Array:
    """`lx.linear_solve(coupling.operator(diagonal, theta), vector, solver).value`
    whose derivative is safe from non-finite input: the "double where" around the
    solve, in tangent space.

    The value is the plain solve's, bit for bit (a non-finite system gives a
    non-finite step, which the step-size controller rejects). Under autodiff, if
    `diagonal` or `vector` holds a NaN or ±inf, the solve is linearised at a
    well-posed stand-in (`diagonal = 1`, `vector = 0`), the tangents in and out are
    selected away and the value is NaN: lineax's tangent and transposed solves
    (which raise on non-finite input, whatever the primal `throw`) only ever see a
    finite system, and a discarded step's zero cotangent cannot become `0·NaN`.

    **Arguments:**

    - `coupling`: an `AbstractCoupling` (its `operator(d, theta)` is
        `diag(d) - theta·L`, non-singular for `d = 1`).
    - `theta`: the implicitness (scalar).
    - `diagonal`: `d`, in compartment order.
    - `vector`: the right-hand side, in the operator's order.
    - `solver`: the lineax solver.

    **Returns:** the solution, in the operator's order.
    """
    return _plain_solve(coupling, theta, diagonal, vector, solver)


@finite_linear_solve.def_jvp
def _finite_linear_solve_jvp(primals, tangents):
    coupling, theta, diagonal, vector, solver = primals
    ok = jax.lax.stop_gradient(tree_all_finite(diagonal, vector))
    diagonal = jnp.where(ok, diagonal, jnp.ones_like(diagonal))
    vector = jnp.where(ok, vector, jnp.zeros_like(vector))
    tangents = jax.tree_util.tree_map(
        lambda t: None if t is None else jnp.where(ok, t, jnp.zeros_like(t)),
        tangents,
        is_leaf=_none,
    )
    out, t_out = eqx.filter_jvp(
        _plain_solve, (coupling, theta, diagonal, vector, solver), tangents
    )
    out = jnp.where(ok, out, jnp.full_like(out, jnp.nan))
    return out, jnp.where(ok, t_out, jnp.zeros_like(t_out))


def _none(x) -> bool:
    return x is None
