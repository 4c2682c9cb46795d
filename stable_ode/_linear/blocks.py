"""`RowBlocks`: a lineax solver for operators on `(n, k)` arrays that act on each
row on its own — a block diagonal of `n` small `k × k` blocks, as the Jacobian
of `n` independent compartments' `k` coupled states (a kinetic scheme's
implicit step). optimistix's `Newton` takes it as its `linear_solver`, so a
per-compartment Newton solve costs `k` operator products and `n` small LU
solves per iteration, not a dense `(n·k) × (n·k)` one."""

from typing import Any

import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float

from ..mechanisms._scheme import _solve_batched


class RowBlocks(lx.AbstractLinearSolver):
    """Solves `A·x = b` for `A` acting on `(n, k)` arrays row by row.

    `init` reads the blocks off the operator by `k` products with the unit
    vectors of a row's entries, each set in every row at once (so each
    product is one forward-mode derivative of a function of the whole
    array), and `compute` solves each row's `k × k` system by LU (batched).
    The operator must not couple rows: that is not checked (its blocks would
    be sums of the coupled entries).

    NaN-safe: a row whose block or right-hand side is not finite gets the
    solution 0 (its system replaced by `I·x = 0`), so lineax's check of the
    solution does not raise inside the derivative of a step that went
    non-finite: the states of such a row are not finite themselves and carry
    their NaN on, and the step is rejected.
    """

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]):
        del options
        struct = operator.in_structure()
        if not isinstance(struct, jax.ShapeDtypeStruct) or len(struct.shape) != 2:
            raise ValueError(
                "`RowBlocks` solves operators on one (n, k) array, got input "
                f"structure {struct}"
            )
        if operator.out_structure() != struct:
            raise ValueError("`RowBlocks` needs a square operator (n, k) -> (n, k)")
        n, k = struct.shape
        eye = jnp.eye(k, dtype=struct.dtype)
        basis = jnp.broadcast_to(eye[:, None, :], (k, n, k))
        columns = jax.vmap(operator.mv)(basis)  # [j, c, i] = A[c, i, j]
        return jnp.transpose(columns, (1, 2, 0))

    def compute(
        self,
        state: Float[Array, "n k k"],
        vector: Float[Array, "n k"],
        options: dict[str, Any],
    ):
        del options
        x = _solve_batched(state, vector, fill=0.0)  # (see the class docstring)
        return x, lx.RESULTS.successful, {}

    def transpose(self, state, options):
        return jnp.swapaxes(state, -1, -2), options

    def conj(self, state, options):
        return jnp.conj(state), options

    def assume_full_rank(self):
        return True
