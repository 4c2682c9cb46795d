"""`ChainTreeSolver`: the chains between branch points by one batched tridiagonal
solve, and their Schur complement on the branch points, again a tree."""

from typing import Any, ClassVar

import jax.numpy as jnp
import lineax as lx

from .base import AbstractTreeSolver, promoted
from .cyclic import tridiagonal_solve
from .levels import hines_scan
from .operator import TreeLinearOperator
from .plan import TreePlan


def hines_unrolled(diag, off, parent, rhs, children, chunks):
    """Hines elimination unrolled over the chunks, each level one update of the
    whole (small) vectors through gathers of the children; inputs as `hines_scan`."""
    zero = jnp.zeros((1,), diag.dtype)
    for kids in children:
        f = off / diag
        diag = diag - jnp.concatenate([jnp.sum((f * off)[kids], axis=1), zero])
        rhs = rhs - jnp.concatenate([jnp.sum((f * rhs)[kids], axis=1), zero])
    x = jnp.zeros_like(rhs)
    false = jnp.zeros((1,), bool)
    for mask in chunks[::-1]:
        mask = jnp.concatenate([mask, false])
        x = jnp.where(mask, (rhs - off * x[parent]) / diag, x)
    return x


def schur_solve(plan: TreePlan, diag, off, rhs):
    """Solve the tree system by chains (batched `gtsv`) + the reduced separator tree.

    Chain `c` is `P_c x_c + o_f e_first x_sf + o_l e_last x_sl = b_c`, so with
    `[y0, yf, yl] = P_c⁻¹ [b_c, e_first, e_last]`,
    `x_c = y0 - o_f x_sf yf - o_l x_sl yl`; putting that into the separators'
    rows leaves the reduced (Schur complement) system, again a forest.
    """
    (m,) = plan.separators.shape
    n_chains, length = plan.node.shape
    dtype = diag.dtype
    zero, one = jnp.zeros((1,), dtype), jnp.ones((1,), dtype)
    diag_e = jnp.concatenate([diag, one])
    off_e = jnp.concatenate([off, zero])
    rhs_e = jnp.concatenate([rhs, zero])
    d = diag_e[plan.node]
    du = off_e[plan.sub]
    dl = jnp.concatenate([jnp.zeros((n_chains, 1), dtype), du[:, :-1]], axis=1)
    of, ol = off_e[plan.first_edge], off_e[plan.last_edge]
    pos = jnp.arange(length, dtype=plan.last_pos.dtype)
    unit_first = jnp.broadcast_to((pos == 0).astype(dtype), (n_chains, length))
    unit_last = (pos[None, :] == plan.last_pos[:, None]).astype(dtype)
    b = jnp.stack([rhs_e[plan.node], unit_first, unit_last], axis=-1)
    y = tridiagonal_solve(dl, d, du, b)
    y0, yf, yl = y[..., 0], y[..., 1], y[..., 2]
    chains = jnp.arange(n_chains, dtype=plan.last_pos.dtype)
    lp = plan.last_pos
    # Each chain end's contribution to its separator's diagonal and right-hand side.
    d_end = jnp.concatenate([of**2 * yf[:, 0], ol**2 * yl[chains, lp], zero])
    r_end = jnp.concatenate([of * y0[:, 0], ol * y0[chains, lp], zero])
    diag_r = diag_e[plan.separators] - jnp.sum(d_end[plan.end_index], axis=1)
    rhs_r = rhs_e[plan.separators] - jnp.sum(r_end[plan.end_index], axis=1)
    links = jnp.concatenate([-of * ol * yl[:, 0], off_e])
    off_r = links[plan.reduced_source]
    parent_r = jnp.concatenate(
        [plan.reduced_parent, jnp.full((1,), m, plan.reduced_parent.dtype)]
    )
    args = (
        jnp.concatenate([diag_r, one]),
        jnp.concatenate([off_r, zero]),
        parent_r,
        jnp.concatenate([rhs_r, zero]),
    )
    if plan.reduced_schedule is None:
        xs = hines_unrolled(*args, plan.reduced_children, plan.reduced_chunks)
    else:
        xs = hines_scan(*args, plan.reduced_schedule)
    xc = y0 - (of * xs[plan.first_sep])[:, None] * yf
    xc = xc - (ol * xs[plan.last_sep])[:, None] * yl
    return jnp.concatenate([xc.reshape(-1), xs[:m]])[plan.gather]


class ChainTreeSolver(AbstractTreeSolver):
    """A Schur complement over the tree's chains. The nodes of degree ≥ 3 (and a few
    cut points that bound the chains' length) are *separators*; removing them leaves
    unbranched chains, each a tridiagonal block, all solved at once by one batched
    LAPACK `gtsv` (`lax.linalg.tridiagonal_solve`, partial pivoting within each
    chain) for the right-hand side and the two unit vectors at the chain's ends.
    Their Schur complement onto the separators is again a tree (the reduced
    system), eliminated by an unrolled Hines sweep written with gathers (or by the
    chunked scan of `LevelTreeSolver` when it is large); one fused update recovers
    the chains. A fixed number of kernels per solve, independent of the tree's
    depth: for large trees and for accelerators.

    Needs the operator's `plan` (`tree_plan`), which holds the chains and the
    reduced system.
    """

    needs_plan: ClassVar[bool] = True

    def compute(self, state: TreeLinearOperator, vector, options: dict[str, Any]):
        del options
        diag, off, vector = promoted(state, vector)
        assert state.plan is not None  # checked in `init`
        x = schur_solve(state.plan, diag, off, vector)
        return x, lx.RESULTS.successful, {}


ChainTreeSolver.__init__.__doc__ = """**Arguments:** none."""
