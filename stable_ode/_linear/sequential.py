"""`SequentialTreeSolver`: Hines' elimination node by node, as NEURON does it."""

from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import lineax as lx

from .base import AbstractTreeSolver, promoted
from .operator import TreeLinearOperator


def sequential_solve(order, order_parent, diag, off, rhs):
    """Hines' elimination node by node, as NEURON does it: two `fori_loop`s over
    `order` (children first; `order_parent[k]` the parent of node `order[k]`),
    each iteration a few scalar reads and writes (`dynamic_slice` /
    `dynamic_update_slice`, no scatter, so XLA:CPU compiles each loop into one
    function)."""
    (n,) = diag.shape
    at = jax.lax.dynamic_index_in_dim
    put = jax.lax.dynamic_update_index_in_dim

    def eliminate(k, carry):
        d, b = carry
        i = order[k]
        p = order_parent[k]
        o = at(off, i, keepdims=False)
        f = o / at(d, i, keepdims=False)
        d = put(d, at(d, p, keepdims=False) - f * o, p, 0)
        b = put(b, at(b, p, keepdims=False) - f * at(b, i, keepdims=False), p, 0)
        return d, b

    d, b = jax.lax.fori_loop(0, n, eliminate, (diag, rhs))

    def substitute(k, x):
        i = order[n - 1 - k]
        xp = at(x, order_parent[n - 1 - k], keepdims=False)
        value = (at(b, i, keepdims=False) - at(off, i, keepdims=False) * xp) / at(
            d, i, keepdims=False
        )
        return put(x, value, i, 0)

    return jax.lax.fori_loop(0, n, substitute, jnp.zeros_like(rhs))


class SequentialTreeSolver(AbstractTreeSolver):
    """Hines' elimination node by node, leaves to roots, then the back-substitution,
    as NEURON does it (Hines 1984): two `lax.fori_loop`s over the plan's `order`, a
    few scalar reads and writes per node. XLA:CPU compiles each loop into one
    function, so a solve is two kernels whatever the tree's shape; on an
    accelerator every iteration would be a kernel launch.

    Needs the operator's `plan` (`tree_plan`), for its `order`.
    """

    needs_plan: ClassVar[bool] = True

    def compute(self, state: TreeLinearOperator, vector, options: dict[str, Any]):
        del options
        diag, off, vector = promoted(state, vector)
        assert state.plan is not None  # checked in `init`
        plan = state.plan
        x = sequential_solve(plan.order, plan.order_parent, diag, off, vector)
        return x, lx.RESULTS.successful, {}


SequentialTreeSolver.__init__.__doc__ = """**Arguments:** none."""
