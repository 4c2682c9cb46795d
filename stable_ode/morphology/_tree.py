"""Branched cells: a lineax operator and solver for tree (Hines-ordered) matrices,
and the axial coupling that uses them.

A branched cell's voltage system `diag(d) - θ·L` has the sparsity of the cell's
tree: NEURON solves it by Gaussian elimination from the leaves to the root and
back-substitution from the root to the leaves (Hines 1984), O(n), no fill-in, no
pivoting (the matrix is symmetric and diagonally dominant). Here the elimination
is vectorised: the nodes are grouped into *chunks* of mutually independent nodes
(no node shares a chunk with its parent), every chunk is eliminated at once — a
gather, a division and a scatter-add into the parents — and a `lax.scan` walks
the chunks (leaves first), then back again for the back-substitution.
"""

import heapq
from typing import Any

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array, Float, Int

from ._coupling import AbstractCoupling


def hines_schedule(parent: np.ndarray, width: int | None = None) -> np.ndarray:
    """Group the nodes of a forest into chunks that can be eliminated together.

    Hu's list scheduling for in-trees: repeatedly take the (at most `width`) nodes
    whose children are all eliminated, deepest first. Every node lies in a strictly
    later chunk than each of its children, so chunk `k` may be eliminated in
    parallel once chunks `0..k-1` are; reversed, the chunks are a valid order for
    the back-substitution. With `width=None`, the width is chosen to keep both the
    number of chunks (sequential steps) and the padding small.

    **Arguments:**

    - `parent`: `parent[i]` is the parent of node `i`, or `i` itself for a root.
    - `width`: nodes per chunk.

    **Returns:** an int array of shape `(n_chunks, width)`; unused slots hold `n`
    (a padding node).
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.shape[0]
    if n == 0:
        return np.zeros((0, 1), np.int64)
    is_root = parent == np.arange(n)
    depth = np.full(n, -1, np.int64)
    for i in range(n):  # depth by walking up (memoised): O(n) overall
        path = []
        j = i
        while depth[j] < 0 and not is_root[j]:
            path.append(j)
            j = parent[j]
            if len(path) > n:
                raise ValueError("parent array is not a forest (it has a cycle)")
        if depth[j] < 0:
            depth[j] = 0
        d = depth[j]
        for k in reversed(path):
            d += 1
            depth[k] = d
    n_children = np.bincount(parent[~is_root], minlength=n)
    levels = int(depth.max()) + 1
    if width is None:
        # The minimum number of chunks is the number of depth levels; aim for
        # about that many, with chunks wide enough that padding stays below ~n.
        counts = np.bincount(depth)
        width = int(min(counts.max(), max(1, -(-2 * n // levels))))
    chunks = []
    ready = [(-depth[i], i) for i in range(n) if n_children[i] == 0]
    heapq.heapify(ready)
    remaining = n_children.copy()
    while ready:
        chunk = [heapq.heappop(ready)[1] for _ in range(min(width, len(ready)))]
        chunks.append(chunk)
        for i in chunk:
            if not is_root[i]:
                p = parent[i]
                remaining[p] -= 1
                if remaining[p] == 0:
                    heapq.heappush(ready, (-depth[p], p))
    out = np.full((len(chunks), width), n, np.int64)
    for k, chunk in enumerate(chunks):
        out[k, : len(chunk)] = chunk
    if sum(len(c) for c in chunks) != n:
        raise ValueError("parent array is not a forest (it has a cycle)")
    return out


class TreeLinearOperator(lx.AbstractLinearOperator):
    """A symmetric matrix with the sparsity of a forest.

    `A[i, i] = diagonal[i]`, `A[i, parent[i]] = A[parent[i], i] = off_diagonal[i]`
    for every non-root `i` (roots have `parent[i] = i` and `off_diagonal[i] = 0`).

    **Fields:**

    - `diagonal`: shape `(n,)`.
    - `off_diagonal`: shape `(n,)`.
    - `parent`: int, shape `(n,)`.
    - `schedule`: the chunks of `hines_schedule(parent)`, int `(n_chunks, width)`.
    """

    diagonal: Float[Array, " n"]
    off_diagonal: Float[Array, " n"]
    parent: Int[Array, " n"]
    schedule: Int[Array, "chunks width"]

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


class TreeSolver(lx.AbstractLinearSolver):
    """Hines elimination for `TreeLinearOperator`s, vectorised over chunks.

    Gaussian elimination from the leaves to the roots, then back-substitution, each
    a `lax.scan` over the operator's chunks of independent nodes (one gather,
    divide and scatter-add per chunk). O(n) work, `n_chunks` sequential steps (at
    least the tree's depth), no pivoting: the matrix must be nonsingular with
    nonzero pivots, as NEURON assumes — true for the voltage system, which is
    symmetric and diagonally dominant (compartments have capacitance).

    The operator is symmetric, so `transpose` is the identity on the state and the
    reverse mode of `lx.linear_solve` is one more tree solve.
    """

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]):
        del options
        if not isinstance(operator, TreeLinearOperator):
            raise ValueError(
                f"`TreeSolver` solves `TreeLinearOperator`s only, got "
                f"{type(operator).__name__}; use `lx.Tridiagonal()` for "
                f"`TridiagonalLinearOperator`s"
            )
        return operator

    def compute(self, state: TreeLinearOperator, vector, options):
        del options
        op = state
        dtype = jnp.result_type(op.diagonal, vector)
        (n,) = op.diagonal.shape
        # Padding node `n`: diagonal 1, no coupling, its own parent.
        one, zero = jnp.ones((1,), dtype), jnp.zeros((1,), dtype)
        diag = jnp.concatenate([op.diagonal.astype(dtype), one])
        off = jnp.concatenate([op.off_diagonal.astype(dtype), zero])
        parent = jnp.concatenate([op.parent, jnp.full((1,), n, op.parent.dtype)])
        rhs = jnp.concatenate([vector.astype(dtype), zero])

        def eliminate(carry, chunk):
            diag, rhs = carry
            p = parent[chunk]
            f = off[chunk] / diag[chunk]
            diag = diag.at[p].add(-f * off[chunk])
            rhs = rhs.at[p].add(-f * rhs[chunk])
            return (diag, rhs), None

        def substitute(x, chunk):
            value = (rhs[chunk] - off[chunk] * x[parent[chunk]]) / diag[chunk]
            return x.at[chunk].set(value), None

        (diag, rhs), _ = jax.lax.scan(eliminate, (diag, rhs), op.schedule)
        x, _ = jax.lax.scan(substitute, jnp.zeros_like(rhs), op.schedule, reverse=True)
        return x[:n], lx.RESULTS.successful, {}

    def transpose(self, state: TreeLinearOperator, options: dict[str, Any]):
        return state, options

    def conj(self, state: TreeLinearOperator, options: dict[str, Any]):
        return lx.conj(state), options

    def assume_full_rank(self):
        return True


TreeSolver.__init__.__doc__ = """**Arguments:**

Nothing.
"""


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

    **Fields** (operator ordering: rows `0..n-1` over compartments and junctions):

    - `g`: conductance between row `k` and `parent[k]`, S (0 for roots).
    - `parent`: parent row of each row (a root is its own parent).
    - `schedule`: elimination chunks (`hines_schedule`).
    - `rows`: operator row of each compartment, shape `(ncomp,)`.
    - `is_junction`: whether each row is a junction node.
    """

    g: Float[Array, " n"]
    parent: Int[Array, " n"]
    schedule: Int[Array, "chunks width"]
    rows: Int[Array, " ncomp"]
    is_junction: Array

    def _total(self):
        """Sum of the conductances at each row (S)."""
        return self.g + jnp.zeros_like(self.g).at[self.parent].add(self.g)

    def _neighbour_sum(self, u):
        """`sum_j g_kj u_j` for each row `k`."""
        return self.g * u[self.parent] + jnp.zeros_like(u).at[self.parent].add(
            self.g * u
        )

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
        loss = child_side + jnp.zeros_like(total).at[self.parent].add(parent_side)
        return self.from_operator_order(total - loss)

    def operator(self, d, theta):
        diag = self.to_operator_order(d) + theta * self._total()
        return TreeLinearOperator(diag, -theta * self.g, self.parent, self.schedule)

    def to_operator_order(self, x):
        return jnp.zeros(self.g.shape, x.dtype).at[self.rows].set(x)

    def from_operator_order(self, x):
        return x[self.rows]

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
    n = n_compartments + len(junctions)
    nbrs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    all_edges = list(edges)
    for k, members in enumerate(junctions):
        all_edges.extend((n_compartments + k, i, gi) for i, gi in members)
    for i, j, gij in all_edges:
        nbrs[i].append((j, gij))
        nbrs[j].append((i, gij))

    def bfs(start):
        dist = {start: 0}
        prev = {start: (start, 0.0)}
        queue = [start]
        for u in queue:
            for w, gw in nbrs[u]:
                if w not in dist:
                    dist[w] = dist[u] + 1
                    prev[w] = (u, gw)
                    queue.append(w)
        return queue, dist, prev

    parent_aug = np.full(n, -1, np.int64)
    g_aug = np.zeros(n)
    seen = np.zeros(n, bool)
    n_components = 0
    for start in range(n):
        if seen[start]:
            continue
        n_components += 1
        queue, dist, _ = bfs(start)
        far = max(queue, key=lambda u: dist[u])
        queue, dist, prev = bfs(far)
        other = max(queue, key=lambda u: dist[u])
        path = [other]
        while path[-1] != far:
            path.append(prev[path[-1]][0])
        centre = path[len(path) // 2]
        queue, _, prev = bfs(centre)
        for u in queue:
            seen[u] = True
            parent_aug[u], g_aug[u] = prev[u]
    if len(all_edges) != n - n_components:
        raise ValueError(
            "the compartments' axial graph is not a forest: "
            f"{len(all_edges)} connections among {n} nodes in {n_components} "
            "connected parts"
        )
    # Operator ordering: breadth-first by depth (Hines ordering), parents first.
    roots = [u for u in range(n) if parent_aug[u] == u]
    children: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        if parent_aug[u] != u:
            children[parent_aug[u]].append(u)
    order = list(roots)
    for u in order:
        order.extend(children[u])
    order = np.asarray(order, np.int64)
    row = np.empty(n, np.int64)
    row[order] = np.arange(n)
    parent = row[parent_aug[order]]
    g = g_aug[order]
    schedule = hines_schedule(parent)
    return TreeCoupling(
        g=jnp.asarray(g, dtype),
        parent=jnp.asarray(parent, jnp.int32),
        schedule=jnp.asarray(schedule, jnp.int32),
        rows=jnp.asarray(row[:n_compartments], jnp.int32),
        is_junction=jnp.asarray(order >= n_compartments),
    )
