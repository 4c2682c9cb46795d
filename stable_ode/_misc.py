"""Helpers shared across the package: the finiteness test, the sanitised
linear solve that keeps a non-finite step out of the derivative, a search of a
sorted array in signed indices, and a pause of Python's cyclic garbage collector
for the model-building loops."""

import contextlib
import functools
import gc

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, PyTree


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector paused inside the block (restored after,
    if it was on). Building a model of many sections creates many small lists
    and tuples, each of which counts towards a collection, and with JAX loaded a
    collection walks hundreds of thousands of objects: paused, such loops run
    several times faster. Nothing is freed later than it would be without
    cycles (reference counting still frees everything else at once)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def device_array(x, dtype=None) -> Array:
    """`x` (numpy values) as a JAX array of `dtype` (default: its own), cast on
    the host (numpy) and put on the device with `jax.device_put`:
    `jnp.asarray` compiles a small XLA program for every new shape, which for
    the dozens of index arrays of a model costs more than building them."""
    x = np.asarray(x, None if dtype is None else jnp.dtype(dtype))
    if x.dtype == np.float64 and not jax.config.jax_enable_x64:
        x = x.astype(np.float32)
    return jax.device_put(x)


def search_sorted(a: Array, v: ArrayLike, side: str = "left") -> Array:
    """`jnp.searchsorted(a, v, side=side)` (int32) by bisection in signed 32-bit
    indices: where `v` would go in the sorted 1-d `a`, before equal values
    (`"left"`) or after them (`"right"`). JAX's own searchsorted bisects in
    unsigned indices, which were the only unsigned 32-bit arithmetic in our float64
    programs when XLA:TPU's compiler rejected them ("Binary op compare with
    different element types: s32[] and u32[]")."""
    if side not in ("left", "right"):
        raise ValueError(f"search_sorted: side={side!r}; expected 'left' or 'right'")
    n = a.shape[0]
    if n >= 2**30:  # `lo + hi` must not overflow
        raise ValueError(f"search_sorted: {n} sorted values; at most 2**30 - 1")
    v = jnp.asarray(v)
    lo = jnp.zeros(v.shape, jnp.int32)
    if n == 0:
        return lo
    hi = jnp.full(v.shape, n, jnp.int32)

    def halve(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        at = a[jnp.minimum(mid, n - 1)]
        after = (at <= v) if side == "right" else (at < v)
        more = lo < hi
        return jnp.where(more & after, mid + 1, lo), jnp.where(more & ~after, mid, hi)

    lo, _ = jax.lax.fori_loop(0, n.bit_length(), halve, (lo, hi))
    return lo


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
    A non-finite tangent or cotangent of a finite system (inside a rejected step,
    the linearisation of its NaN states makes one) is solved as zero by those
    solves (`_NonRaising`) and carried past them as NaN (`_nan_carrier`), as
    any other operation carries it, for `NonFiniteGuard` to select away.

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
        functools.partial(_plain_solve, solver=_NonRaising(solver)),
        (coupling, theta, diagonal, vector),
        tangents[:4],
    )
    out = jnp.where(ok, out, jnp.full_like(out, jnp.nan))
    return out, jnp.where(ok, t_out + _nan_carrier(tangents, t_out), 0)


def _nan_carrier(tangents, like) -> Array:
    """`0·Σ tangents`, broadcast like `like`: zero for finite tangents, NaN if
    any is not finite — and, transposed, a NaN in any entry of the cotangent of
    `like` gives a NaN cotangent to every input. It carries the NaN past the
    sanitised tangent and transposed solves (`_NonRaising`) as any other
    operation would carry it; the `NonFiniteGuard` selects it away in a rejected
    step, and anywhere else it stays visible."""
    leaves = [
        t
        for t in jax.tree_util.tree_leaves(tangents)
        if jnp.issubdtype(jnp.result_type(t), jnp.inexact)
    ]
    total = sum(
        (jnp.sum(t).astype(like.dtype) for t in leaves), jnp.zeros((), like.dtype)
    )
    return jnp.broadcast_to(0 * total, like.shape)


class _NonRaising(lx.AbstractLinearSolver):
    """`inner`, for the tangent and transposed solves of `finite_linear_solve`:
    a non-finite right-hand side is solved as zeros and gives zeros.

    Lineax runs those solves with `throw=True` (there is nowhere to return
    their result), so a NaN tangent or cotangent that reaches them raises "A
    linear solver received non-finite input" even where the primal system is
    finite. Inside a rejected step that happens: the guard zeroes the step's
    cotangent, but the step's own linearisation holds NaN coefficients (its
    trial state is NaN), and `0·NaN` forms in the transposed map before the
    cotangent reaches the solve. `_nan_carrier` keeps such a NaN visible."""

    inner: lx.AbstractLinearSolver

    def init(self, operator, options):
        return self.inner.init(operator, options)

    def compute(self, state, vector, options):
        ok = tree_all_finite(vector)
        zero = functools.partial(_select, ok)
        sol, result, stats = self.inner.compute(
            state, jax.tree_util.tree_map(zero, vector), options
        )
        return jax.tree_util.tree_map(zero, sol), result, stats

    def transpose(self, state, options):
        return self.inner.transpose(state, options)

    def conj(self, state, options):
        return self.inner.conj(state, options)

    def assume_full_rank(self):
        return self.inner.assume_full_rank()


def _select(ok, x):
    return jnp.where(ok, x, jnp.zeros_like(x))


def _none(x) -> bool:
    return x is None
