"""What every tree solver shares: its preconditions in `init`, and the transpose
and conjugate of a symmetric operator."""

import abc
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float

from .operator import TreeLinearOperator


def check_tree_operator(
    solver: lx.AbstractLinearSolver, operator: lx.AbstractLinearOperator
) -> TreeLinearOperator:
    """`operator` if it is a `TreeLinearOperator`, else a `ValueError` that names
    `solver`."""
    if not isinstance(operator, TreeLinearOperator):
        raise ValueError(
            f"`{type(solver).__name__}` solves `TreeLinearOperator`s only, got "
            f"{type(operator).__name__}; use `lx.Tridiagonal()` for "
            "`TridiagonalLinearOperator`s"
        )
    return operator


class AbstractTreeSolver(lx.AbstractLinearSolver[TreeLinearOperator]):
    """An exact solver for `TreeLinearOperator`s: Gaussian elimination in an order
    that follows the tree, O(n) work, no fill-in.

    None pivots across branch points: the matrix must be nonsingular with nonzero
    pivots, as NEURON assumes; true for the voltage system, which is symmetric and
    diagonally dominant (compartments have capacitance).

    The operator is symmetric, so `transpose` is the identity on the state and the
    reverse mode of `lx.linear_solve` is one more tree solve.
    """

    needs_plan: eqx.AbstractClassVar[bool]

    def init(
        self, operator: lx.AbstractLinearOperator, options: dict[str, Any]
    ) -> TreeLinearOperator:
        del options
        operator = check_tree_operator(self, operator)
        if self.needs_plan and operator.plan is None:
            raise ValueError(
                f"`{type(self).__name__}` needs the operator's plan "
                "(`TreeLinearOperator(..., plan=tree_plan(parent))`)"
            )
        return operator

    @abc.abstractmethod
    def compute(
        self,
        state: TreeLinearOperator,
        vector: Float[Array, " n"],
        options: dict[str, Any],
    ) -> tuple[Float[Array, " n"], lx.RESULTS, dict[str, Any]]:
        """Solve `state @ x = vector`; see `lx.AbstractLinearSolver.compute`."""

    def transpose(self, state: TreeLinearOperator, options: dict[str, Any]):
        return state, options

    def conj(self, state: TreeLinearOperator, options: dict[str, Any]):
        return lx.conj(state), options

    def assume_full_rank(self):
        return True


def promoted(
    operator: TreeLinearOperator, vector: Float[Array, " n"]
) -> tuple[Float[Array, " n"], Float[Array, " n"], Float[Array, " n"]]:
    """`(diagonal, off_diagonal, vector)` in the common floating dtype."""
    dtype = jnp.result_type(operator.diagonal, vector)
    return (
        operator.diagonal.astype(dtype),
        operator.off_diagonal.astype(dtype),
        vector.astype(dtype),
    )
