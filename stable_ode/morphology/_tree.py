"""Branched cells: the axial coupling on a tree of compartments and junction
nodes, whose voltage system is a `TreeLinearOperator` (`stable_ode._linear`)."""

import equinox as eqx
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array, Float, Int

from .._linear import (
    centred_forest,
    hines_schedule,
    relabelled,
    tree_plan,
    TreeLinearOperator,
    TreePlan,
    TreeSolver,
)
from .._misc import device_array, gc_paused
from ._coupling import AbstractCoupling


class TreeCoupling(AbstractCoupling):
    """Axial coupling of branched cells: compartments and junction nodes on a tree.

    NEURON's discretisation at branch points: where three or more compartments meet
    at a section end there is a node without membrane, joined to each of them
    through half a compartment's axial resistance. These junction nodes are extra
    unknowns of the voltage system with zero capacitance: the operator acts on
    compartments + junctions (a tree), while the model's state stays `(ncomp,)`.
    Since a junction has no capacitance, its voltage is always the
    conductance-weighted mean of its neighbours (Kirchhoff), so `current` eliminates
    it exactly, and the implicit step's junction rows have zero right-hand side.

    **Fields** (operator ordering: rows `0..ncomp-1` are the compartments in the
    model's order, rows `ncomp..n-1` the junctions):

    - `g`: conductance between row `k` and `parent[k]`, S (0 for roots).
    - `parent`: parent row of each row (a root is its own parent).
    - `schedule`: elimination chunks (`hines_schedule`).
    - `plan`: the chain/Schur-complement plan (`tree_plan`), or `None` to solve
      with the chunked scan (`LevelTreeSolver`).
    - `is_junction`: whether each row is a junction node (the rows after the
      compartments; stored rather than computed in the step, where the
      comparison changed XLA's fusion, hence the rounding, and was slower).
    - `children`: `(n, k)` the children of each row, padded with `n`; when a
      row has more than four, only the first two of each (`k = 2`).
    - `more_rows`: `(r,)` the rows with more than two children, when a row has
      more than four (else empty).
    - `more_children`: `(r, k' - 2)` their other children, padded with `n`.
    - `child_sum_index`: `(n,)` where `_child_sum` takes each row's sum from:
      the row itself, or `n + j` for `more_rows[j]`.
    - `n_compartments`: the number of compartments (static).

    The schedule, the plan and each row's children are those of Hines' numbering
    (breadth first from the centre, parents first), renamed: a solve does the
    arithmetic of that numbering in the same order, while the model's vectors
    enter and leave the operator's order in place (rows `0..ncomp-1`), not
    through a permutation.

    Every per-step operation is a gather (`children`, `parent`), never a
    scatter: XLA:CPU fuses gathers into the surrounding arithmetic, while
    each scatter is a kernel of its own. Where a row has more than four children
    (a soma with a dozen neurites), sums over children are additions of `(n,)`
    gathers, not a reduction over a table padded to the most children of any
    row, which would make it many times the size of the tree.
    """

    g: Float[Array, " n"]
    parent: Int[Array, " n"]
    schedule: Int[Array, "chunks width"]
    plan: TreePlan | None
    is_junction: Array
    children: Int[Array, "n k"]
    more_rows: Int[Array, " r"]
    more_children: Int[Array, "r k2"]
    child_sum_index: Int[Array, " n"]
    n_compartments: int = eqx.field(static=True)

    def _child_sum(self, x):
        """`sum over the children c of row k of x[c]`, for each row `k`.

        With at most four children per row, a reduction over the `children`
        table; otherwise each row's children added in order,
        `((x[c0] + x[c1]) + x[c2]) + …` (XLA:CPU's reduction over a wider table
        adds them in an order that depends on the table's shape and the row's
        place in it)."""
        xp = jnp.concatenate([x, jnp.zeros((1,), x.dtype)])
        (r,) = self.more_rows.shape
        if r == 0:
            return jnp.sum(xp[self.children], 1)
        total = xp[self.children[:, 0]] + xp[self.children[:, 1]]
        more = total[self.more_rows]
        for j in range(self.more_children.shape[1]):
            more = more + xp[self.more_children[:, j]]
        return jnp.concatenate([total, more])[self.child_sum_index]

    def _total(self):
        """Sum of the conductances at each row (S)."""
        return self.g + self._child_sum(self.g)

    def _neighbour_sum(self, u):
        """`sum_j g_kj u_j` for each row `k`."""
        return self.g * u[self.parent] + self._child_sum(self.g * u)

    def _junction_voltages(self, u):
        """Rows `u` with each junction set to the weighted mean of its neighbours."""
        total = self._total()
        mean = self._neighbour_sum(u) / jnp.where(self.is_junction, total, 1)
        return jnp.where(self.is_junction, mean, u)

    def current(self, v):
        u = self._junction_voltages(self.to_operator_order(v))
        return self.from_operator_order(self._neighbour_sum(u) - self._total() * u)

    def self_conductance(self):
        # Minus the diagonal of the Laplacian after eliminating the junctions:
        # a compartment next to junction J loses g²/G_J.
        total = self._total()
        gj = jnp.where(self.is_junction, total, 1)
        child_side = jnp.where(
            self.is_junction[self.parent], self.g**2 / gj[self.parent], 0
        )
        parent_side = jnp.where(self.is_junction, self.g**2 / gj, 0)
        loss = child_side + self._child_sum(parent_side)
        return self.from_operator_order(total - loss)

    def operator(self, d, theta):
        diag = self.to_operator_order(d) + theta * self._total()
        return TreeLinearOperator(
            diag, -theta * self.g, self.parent, self.schedule, self.plan
        )

    # Both are gathers from an iota (the compartments keep their places; the
    # junctions read the appended zero), not a concatenation and a slice: XLA
    # fuses them into the surrounding arithmetic as it fused the permutations of
    # Hines' numbering, so the step rounds exactly as it did with those.
    def to_operator_order(self, x):
        (n,) = self.g.shape
        rows = jnp.minimum(jnp.arange(n), self.n_compartments)
        return jnp.concatenate([x, jnp.zeros((1,), x.dtype)])[rows]

    def from_operator_order(self, x):
        return x[jnp.arange(self.n_compartments)]

    def default_solver(self) -> lx.AbstractLinearSolver:
        return TreeSolver()


def tree_coupling(
    n_compartments: int,
    edges: list[tuple[int, int, float]],
    junctions: list[list[tuple[int, float]]],
    dtype,
) -> TreeCoupling:
    """The `TreeCoupling` of compartments joined by `edges` and `junctions`.

    **Arguments:**

    - `n_compartments`: number of compartments.
    - `edges`: `(i, j, g)`: compartments `i` and `j` joined by conductance `g`, S.
    - `junctions`: per junction node, its `(compartment, g)` members, S.
    - `dtype`: floating dtype of the conductances.

    **Returns:** a `TreeCoupling`, rooted at the centre of each connected component
    (which minimises the depth, hence the number of sequential elimination steps).
    """
    with gc_paused():
        return _tree_coupling(n_compartments, edges, junctions, dtype)


def _tree_coupling(
    n_compartments: int,
    edges: list[tuple[int, int, float]],
    junctions: list[list[tuple[int, float]]],
    dtype,
) -> TreeCoupling:
    n = n_compartments + len(junctions)
    members = [m for ms in junctions for m in ms]
    sizes = [len(ms) for ms in junctions]
    e = np.asarray(edges, np.float64).reshape(-1, 3)
    m = np.asarray(members, np.float64).reshape(-1, 2)
    junction = n_compartments + np.repeat(np.arange(len(junctions)), sizes)
    ij = np.concatenate(
        [e[:, :2].astype(np.int64), np.stack([junction, m[:, 0].astype(np.int64)], 1)]
    )
    conductance = np.concatenate([e[:, 2], m[:, 1]])
    parent_aug, parent_edge, order, n_components = centred_forest(n, ij)
    if ij.shape[0] != n - n_components:
        raise ValueError(
            "the compartments' axial graph is not a forest: "
            f"{ij.shape[0]} connections among {n} nodes in {n_components} "
            "connected parts"
        )
    g_aug = np.where(parent_edge < 0, 0.0, conductance[np.maximum(parent_edge, 0)])
    # Planned in Hines' numbering (`row`: breadth first by depth, parents first),
    # then renamed to the nodes' own (below).
    row = np.empty(n, np.int64)
    row[order] = np.arange(n)
    parent = row[parent_aug[order]]
    schedule = hines_schedule(parent)
    plan = tree_plan(parent)
    # The children of each row, as rows, in increasing order, padded with `n`.
    child = np.flatnonzero(parent != np.arange(n))
    n_kids = np.bincount(parent[child], minlength=n)
    first = np.concatenate([[0], np.cumsum(n_kids)[:-1]])
    child = child[np.argsort(parent[child], kind="stable")]
    table = np.full((n, max(int(n_kids.max(initial=0)), 1)), n)
    table[parent[child], np.arange(child.shape[0]) - first[parent[child]]] = child
    # Wide rows: the first two children in `table`, the others apart.
    more_rows = np.flatnonzero(n_kids > 2) if table.shape[1] > 4 else np.zeros(0, int)
    # Renamed from Hines' rows to the nodes' own numbering (compartments first):
    # node `order[r]` is row `r`, the padding row `n` stays `n`.
    node = np.append(order, n)
    child_sum_index = np.arange(n)
    child_sum_index[order[more_rows]] = n + np.arange(more_rows.shape[0])
    i32 = lambda a: device_array(a, np.int32)  # noqa: E731
    return TreeCoupling(
        g=device_array(g_aug, dtype),
        parent=i32(parent_aug),
        schedule=i32(node[schedule]),
        plan=relabelled(plan, order),
        is_junction=device_array(np.arange(n) >= n_compartments),
        children=i32(node[(table[:, :2] if more_rows.size else table)[row]]),
        more_rows=i32(order[more_rows]),
        more_children=i32(node[table[more_rows, 2:]]),
        child_sum_index=i32(child_sum_index),
        n_compartments=n_compartments,
    )
