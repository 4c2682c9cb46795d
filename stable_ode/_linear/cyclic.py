"""Tridiagonal solves by parallel cyclic reduction, for accelerators whose JAX
lowering of `lax.linalg.tridiagonal_solve` is a sequential loop over the rows.

On the CPU (LAPACK `gtsv`) and on CUDA GPUs (cuSPARSE `gtsv2`) the tridiagonal
solve is a library call; on a TPU, JAX lowers it to a `lax.scan` over the rows,
one dependent iteration per compartment, so a long cable's step is as slow
as its number of compartments (`benchmarks/gpu_tpu_v5e/`). Parallel cyclic
reduction (Hockney 1965; Hockney & Jesshope, *Parallel Computers 2*, 1988)
takes `ceil(log2 n)` rounds instead, each elementwise over all rows: work
O(n log n), depth O(log n). Every row eliminates its neighbours at distance
`s`, doubling `s` each round, until each row is decoupled. It needs no
pivoting for the voltage system, which is symmetric and strictly diagonally
dominant (`cm/(θ·dt)` plus the membrane's slope conductance on the diagonal;
Hockney & Jesshope show the reduced systems stay dominant). The values agree
with `gtsv`'s to rounding, not bit for bit, which is why the CPU keeps `gtsv`.
Used on a TPU by `TridiagonalCoupling.default_solver()` (cables) and by
`ChainTreeSolver`'s batched chains (`tridiagonal_solve`).
"""

from typing import Any

import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, PyTree
from lineax._solver.misc import ravel_vector, unravel_solution


def _shift(x, s, axis, fill=0.0):
    """`x[i - s]` (`s > 0`) or `x[i + |s|]` (`s < 0`) along `axis`, `fill`
    beyond the ends."""
    n = x.shape[axis]
    pad = [(0, 0)] * x.ndim
    if s > 0:
        pad[axis] = (s, 0)
        kept = jax.lax.slice_in_dim(x, 0, n - s, axis=axis)
    else:
        pad[axis] = (0, -s)
        kept = jax.lax.slice_in_dim(x, -s, n, axis=axis)
    return jnp.pad(kept, pad, constant_values=fill)


def cyclic_reduction(dl, d, du, b):
    """Solve tridiagonal systems by parallel cyclic reduction, with the
    arguments of `jax.lax.linalg.tridiagonal_solve`: `dl`, `d`, `du` of shape
    `(..., n)` (sub-diagonal with `dl[..., 0] = 0`, diagonal, super-diagonal
    with `du[..., n-1] = 0`) and right-hand sides `b` of shape `(..., n, r)`."""
    n = d.shape[-1]
    a, c = dl, du
    s = 1
    while s < n:
        # rows beyond the ends are identity rows (diagonal 1, the rest 0)
        alpha = -a / _shift(d, s, -1, fill=1.0)
        gamma = -c / _shift(d, -s, -1, fill=1.0)
        a, d, c, b = (
            alpha * _shift(a, s, -1),
            d + alpha * _shift(c, s, -1) + gamma * _shift(a, -s, -1),
            gamma * _shift(c, -s, -1),
            b
            + alpha[..., None] * _shift(b, s, -2)
            + gamma[..., None] * _shift(b, -s, -2),
        )
        s *= 2
    return b / d[..., None]


def tridiagonal_solve(dl, d, du, b):
    """`jax.lax.linalg.tridiagonal_solve(dl, d, du, b)`, by `cyclic_reduction`
    on a TPU (where JAX's is a loop over the rows), else JAX's own (LAPACK
    `gtsv` on the CPU, cuSPARSE on CUDA GPUs)."""
    if jax.default_backend() == "tpu":
        return cyclic_reduction(dl, d, du, b)
    return jax.lax.linalg.tridiagonal_solve(dl, d, du, b)


class CyclicReduction(lx.Tridiagonal):
    """`lx.Tridiagonal` with the solve by parallel cyclic reduction
    (`cyclic_reduction`): the cable's default on TPUs, where JAX's own
    tridiagonal solve is a sequential loop. Its transpose (the reverse mode) is
    `lx.Tridiagonal`'s, solved the same way. No pivoting: for diagonally
    dominant systems, such as the voltage system."""

    def compute(
        self, state, vector, options: dict[str, Any]
    ) -> tuple[PyTree[Array], lx.RESULTS, dict[str, Any]]:
        del options
        (diagonal, lower, upper), packed = state
        zero = jnp.zeros((1,), diagonal.dtype)
        x = cyclic_reduction(
            jnp.concatenate([zero, lower]),
            diagonal,
            jnp.concatenate([upper, zero]),
            ravel_vector(vector, packed)[:, None],
        )[:, 0]
        return unravel_solution(x, packed), lx.RESULTS.successful, {}
