"""Tridiagonal solves by the Thomas algorithm as two `lax.scan`s, for short
cables on the CPU.

On the CPU, `lax.linalg.tridiagonal_solve` is a call to LAPACK `gtsv`. XLA:CPU
never compiles a loop that calls a library routine into one function, so a
short cable's step loop keeps XLA's per-iteration scheduling cost
(`docs/performance.md`) even when `set_cpu_small_loop_bytes` has raised the
threshold under which it would. The same elimination written as two scans (rows
down, then back up) leaves the loop free of library calls: for a short cable
under the raised threshold the whole step loop then becomes one compiled
function. `TridiagonalCoupling.default_solver()` chooses it where that pays
(`use_thomas`); anywhere else LAPACK's vectorised routine is as fast or faster.

No pivoting: the voltage system is symmetric and strictly diagonally dominant
(`cm/(θ·dt)` plus the membrane's slope conductance on the diagonal), for which
Gaussian elimination without pivoting is stable, and for which `gtsv` does not
exchange rows either. The values agree with `gtsv`'s to rounding, not bit for
bit (the compilers order and fuse the multiply-adds differently).
"""

from typing import Any

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array, Float, PyTree
from lineax._solver.misc import ravel_vector, unravel_solution

from .._xla import _DEFAULT_BYTES


# The rows under which `use_thomas` picks `Thomas`: a vector of the system
# occupies at most `threshold / _BYTES_DIVISOR` bytes (512 bytes at
# `set_cpu_small_loop_bytes`'s 65,536: 64 rows in float64, 128 in float32).
# Measured on HH cables of 11 to 200 compartments in both dtypes: faster than
# `gtsv` below it, about as fast near it, slower past it (the step loop no
# longer becomes one function).
_BYTES_DIVISOR = 128


def thomas(
    diagonal: Float[Array, " n"],
    lower: Float[Array, " n-1"],
    upper: Float[Array, " n-1"],
    b: Float[Array, " n"],
) -> Float[Array, " n"]:
    """Solve `A x = b` for the tridiagonal `A` with `diagonal`, sub-diagonal
    `lower` (`A[i+1, i]`) and super-diagonal `upper` (`A[i, i+1]`), by Gaussian
    elimination from the first row down and back-substitution up, each a
    `lax.scan` over the rows. No pivoting: for diagonally dominant `A`."""

    def eliminate(previous, row):
        d_prev, b_prev = previous
        low, up, d, rhs = row
        factor = low / d_prev
        reduced = (d - factor * up, rhs - factor * b_prev)
        return reduced, reduced

    _, (d_rest, b_rest) = jax.lax.scan(
        eliminate, (diagonal[0], b[0]), (lower, upper, diagonal[1:], b[1:])
    )
    d_red = jnp.concatenate([diagonal[:1], d_rest])
    b_red = jnp.concatenate([b[:1], b_rest])

    def substitute(x_next, row):
        d, up, rhs = row
        x = (rhs - up * x_next) / d
        return x, x

    x_last = b_red[-1] / d_red[-1]
    _, x_rest = jax.lax.scan(
        substitute, x_last, (d_red[:-1], upper, b_red[:-1]), reverse=True
    )
    return jnp.concatenate([x_rest, x_last[None]])


class Thomas(lx.Tridiagonal):
    """`lx.Tridiagonal` solved by the Thomas algorithm as two `lax.scan`s
    (`thomas`) instead of LAPACK `gtsv`: a short cable's default on the CPU
    under a raised small-loop threshold (`use_thomas`). Its transpose (the
    reverse mode) is `lx.Tridiagonal`'s, solved the same way. No pivoting: for
    diagonally dominant systems, such as the voltage system."""

    def compute(
        self, state, vector, options: dict[str, Any]
    ) -> tuple[PyTree[Array], lx.RESULTS, dict[str, Any]]:
        del options
        (diagonal, lower, upper), packed = state
        x = thomas(diagonal, lower, upper, ravel_vector(vector, packed))
        return unravel_solution(x, packed), lx.RESULTS.successful, {}


def use_thomas(n: int, dtype, small_loop_bytes: int) -> bool:
    """Whether a CPU solve of `n` rows of `dtype` is faster by `Thomas` than by
    `gtsv`, given XLA:CPU's small-loop threshold `small_loop_bytes`
    (`stable_ode._xla.small_loop_bytes()`): when a vector of the system takes at
    most `small_loop_bytes / 128` bytes, and only above XLA's default threshold
    (1,024 bytes; a step loop with a cable in it is not one function there
    either way, and the scans measured no faster than `gtsv`)."""
    if small_loop_bytes <= _DEFAULT_BYTES:
        return False
    return n * np.dtype(dtype).itemsize <= small_loop_bytes // _BYTES_DIVISOR
