"""`TreeLinearOperator`: a symmetric matrix with the sparsity of a forest."""

import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float, Int

from .plan import TreePlan


class TreeLinearOperator(lx.AbstractLinearOperator):
    """A symmetric matrix with the sparsity of a forest.

    `A[i, i] = diagonal[i]`, `A[i, parent[i]] = A[parent[i], i] = off_diagonal[i]`
    for every non-root `i` (roots have `parent[i] = i` and `off_diagonal[i] = 0`).

    **Fields:**

    - `diagonal`: shape `(n,)`.
    - `off_diagonal`: shape `(n,)`.
    - `parent`: int, shape `(n,)`.
    - `schedule`: the chunks of `hines_schedule(parent)`, int `(n_chunks, width)`.
    - `plan`: a `TreePlan` of `parent` (`tree_plan(parent)`), or `None`. The
      sequential and chain solvers need it; the level solver needs `schedule`
      alone (see `TreeSolver`).
    """

    diagonal: Float[Array, " n"]
    off_diagonal: Float[Array, " n"]
    parent: Int[Array, " n"]
    schedule: Int[Array, "chunks width"]
    plan: TreePlan | None = None

    def mv(self, vector):
        out = self.diagonal * vector + self.off_diagonal * vector[self.parent]
        return out.at[self.parent].add(self.off_diagonal * vector)

    def as_matrix(self):
        (n,) = self.diagonal.shape
        rows = jnp.arange(n)
        m = jnp.zeros((n, n), self.diagonal.dtype).at[rows, rows].set(self.diagonal)
        m = m.at[rows, self.parent].add(self.off_diagonal)
        return m.at[self.parent, rows].add(self.off_diagonal)

    def transpose(self):
        return self

    def in_structure(self):
        return jax.ShapeDtypeStruct(self.diagonal.shape, self.diagonal.dtype)

    def out_structure(self):
        return self.in_structure()


@lx.linearise.register(TreeLinearOperator)
@lx.materialise.register(TreeLinearOperator)
def _(operator):
    return operator


@lx.diagonal.register(TreeLinearOperator)
def _(operator):
    return operator.diagonal


@lx.conj.register(TreeLinearOperator)
def _(operator):
    return TreeLinearOperator(
        operator.diagonal.conj(),
        operator.off_diagonal.conj(),
        operator.parent,
        operator.schedule,
        operator.plan,
    )


@lx.is_symmetric.register(TreeLinearOperator)
def _(operator):
    del operator
    return True


@lx.is_diagonal.register(TreeLinearOperator)
@lx.is_tridiagonal.register(TreeLinearOperator)
@lx.has_unit_diagonal.register(TreeLinearOperator)
@lx.is_lower_triangular.register(TreeLinearOperator)
@lx.is_upper_triangular.register(TreeLinearOperator)
@lx.is_positive_semidefinite.register(TreeLinearOperator)
@lx.is_negative_semidefinite.register(TreeLinearOperator)
def _(operator):
    del operator
    return False
