"""Tridiagonal solves by parallel cyclic reduction, for accelerators whose JAX
lowering of `lax.linalg.tridiagonal_solve` is a sequential loop over the rows.

On the CPU (LAPACK `gtsv`) and on CUDA GPUs (cuSPARSE `gtsv2`) the tridiagonal
solve is a library call; on a TPU, JAX lowers it to a `lax.scan` over the rows,
one dependent iteration per compartment, so a 10,000-compartment cable took
about 26 ms per solve there (`benchmarks/gpu_tpu_v5e/`). Parallel cyclic
reduction (Hockney 1965; Hockney & Jesshope, *Parallel Computers 2*, 1988)
takes `ceil(log2 n)` rounds instead, each elementwise over all rows: work
O(n log n), depth O(log n). Every row eliminates its neighbours at distance
`s`, doubling `s` each round, until each row is decoupled. It needs no
pivoting for the voltage system, which is symmetric and strictly diagonally
dominant (`cm/(θ·dt)` plus the membrane's slope conductance on the diagonal;
Hockney & Jesshope show the reduced systems stay dominant). The values agree
with `gtsv`'s to rounding, not bit for bit, which is why the CPU keeps `gtsv`.
"""

from typing import Any

import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, PyTree
from lineax._solver.misc import ravel_vector, unravel_solution


def _shift_down(x, fill, s):
    """`x[i - s]`, `fill` before the start."""
    return jnp.concatenate([fill, x[:-s]])


def _shift_up(x, fill, s):
    """`x[i + s]`, `fill` beyond the end."""
    return jnp.concatenate([x[s:], fill])


def cyclic_reduction(lower, diagonal, upper, rhs):
    """Solve the tridiagonal system with sub-diagonal `lower` (`n - 1`),
    `diagonal` (`n`), super-diagonal `upper` (`n - 1`) and right-hand side
    `rhs` (`n`) by parallel cyclic reduction."""
    n = diagonal.shape[0]
    zero = jnp.zeros((1,), diagonal.dtype)
    a = jnp.concatenate([zero, lower])  # row i: a[i]·x[i-1]
    b = diagonal
    c = jnp.concatenate([upper, zero])  # row i: c[i]·x[i+1]
    d = rhs
    s = 1
    while s < n:
        # rows beyond the ends are identity rows (b = 1, a = c = d = 0)
        pad0 = jnp.zeros((s,), b.dtype)
        pad1 = jnp.ones((s,), b.dtype)
        alpha = -a / _shift_down(b, pad1, s)
        gamma = -c / _shift_up(b, pad1, s)
        a, b, c, d = (
            alpha * _shift_down(a, pad0, s),
            b + alpha * _shift_down(c, pad0, s) + gamma * _shift_up(a, pad0, s),
            gamma * _shift_up(c, pad0, s),
            d + alpha * _shift_down(d, pad0, s) + gamma * _shift_up(d, pad0, s),
        )
        s *= 2
    return d / b


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
        x = cyclic_reduction(lower, diagonal, upper, ravel_vector(vector, packed))
        return unravel_solution(x, packed), lx.RESULTS.successful, {}
