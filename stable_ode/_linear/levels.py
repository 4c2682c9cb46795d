"""`LevelTreeSolver`: Hines' elimination one chunk of independent nodes at a time."""

from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import lineax as lx

from .base import AbstractTreeSolver, promoted
from .operator import TreeLinearOperator


def hines_scan(diag, off, parent, rhs, schedule):
    """Hines elimination over `hines_schedule` chunks, as two `lax.scan`s. All
    inputs carry a trailing padding node (diagonal 1, no coupling, own parent)."""

    def eliminate(carry, chunk):
        diag, rhs = carry
        p = parent[chunk]
        f = off[chunk] / diag[chunk]
        diag = diag.at[p].add(-f * off[chunk])
        rhs = rhs.at[p].add(-f * rhs[chunk])
        return (diag, rhs), None

    (diag, rhs), _ = jax.lax.scan(eliminate, (diag, rhs), schedule)

    def substitute(x, chunk):
        value = (rhs[chunk] - off[chunk] * x[parent[chunk]]) / diag[chunk]
        return x.at[chunk].set(value), None

    x, _ = jax.lax.scan(substitute, jnp.zeros_like(rhs), schedule, reverse=True)
    return x


class LevelTreeSolver(AbstractTreeSolver):
    """Hines' elimination by levels, as Jaxley's DHS orders it: the nodes are grouped
    into chunks of mutually independent nodes (`hines_schedule`: no node shares a
    chunk with its parent, deeper nodes first); each chunk is eliminated at once (a
    gather, a division and a scatter-add into the parents), and a `lax.scan` walks
    the chunks from the leaves to the roots, then back for the back-substitution.
    `n_chunks` sequential steps, about the depth of the tree.

    Needs only the operator's `schedule`, not its `plan`: the solver for a
    `TreeLinearOperator` built without one.
    """

    needs_plan: ClassVar[bool] = False

    def compute(self, state: TreeLinearOperator, vector, options: dict[str, Any]):
        del options
        diag, off, vector = promoted(state, vector)
        (n,) = diag.shape
        dtype = diag.dtype
        # Padding node `n`: diagonal 1, no coupling, its own parent.
        one, zero = jnp.ones((1,), dtype), jnp.zeros((1,), dtype)
        x = hines_scan(
            jnp.concatenate([diag, one]),
            jnp.concatenate([off, zero]),
            jnp.concatenate([state.parent, jnp.full((1,), n, state.parent.dtype)]),
            jnp.concatenate([vector, zero]),
            state.schedule,
        )
        return x[:n], lx.RESULTS.successful, {}


LevelTreeSolver.__init__.__doc__ = """**Arguments:** none."""
