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

That scan is the fallback. With a `TreePlan` (which `tree_coupling` always
attaches) the solve is a Schur complement over the tree's *chains*: the nodes of
degree ≥ 3 (and a few cut points that bound the chains' length) are
*separators*; removing them leaves unbranched paths, each a tridiagonal block,
all solved at once by one batched LAPACK `gtsv` call with three right-hand
sides; the separators form a small tree of their own (the reduced system),
solved by an unrolled Hines elimination written with gathers; one fused update
recovers the chains. A fixed number of kernels per solve, whatever the depth.
"""

import heapq
from typing import Any

import equinox as eqx
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


def _paths(neighbours: list[list[int]], separator: np.ndarray) -> list[list[int]]:
    """The connected parts of a forest without its `separator` nodes, each an
    unbranched path (all its nodes have degree ≤ 2), listed end to end."""
    seen = separator.copy()
    paths = []
    for start in range(separator.shape[0]):
        if seen[start]:
            continue
        prev, end = -1, start  # walk to one end of the path
        while True:
            step = [w for w in neighbours[end] if not separator[w] and w != prev]
            if not step:
                break
            prev, end = end, step[0]
        path = [end]
        seen[end] = True
        while True:
            step = [w for w in neighbours[path[-1]] if not separator[w] and not seen[w]]
            if not step:
                break
            path.append(step[0])
            seen[step[0]] = True
        paths.append(path)
    return paths


class TreePlan(eqx.Module):
    """Static index structure of the chain/Schur-complement tree solve (`tree_plan`).

    The `n` nodes split into `m` separators and `n_chains` chains, padded to
    `length` nodes each (padding index `n`). Every chain touches at most two
    separators, through its first and last node; the separators form a forest
    (the reduced system) whose links are chains or direct edges.

    **Fields** (int arrays; padding separator `m`, padding chain end `2·n_chains`):

    - `node`, `sub`: `(n_chains, length)`: node at each chain position, and the
      `off_diagonal` index of the edge to the next position.
    - `first_sep`, `last_sep`, `first_edge`, `last_edge`, `last_pos`: per chain,
      the separators at its two ends, the edges to them, and its last position.
    - `separators`: `(m,)` node index of each separator.
    - `end_index`: `(m, k)`: the chain ends (first ends `0..n_chains-1`, last ends
      after) attached to each separator.
    - `reduced_parent`, `reduced_source`: the reduced forest, and where each
      separator's link value comes from (a chain, or an `off_diagonal` entry).
    - `reduced_children`, `reduced_chunks`: the reduced forest's Hines chunks,
      as per-node children lists (`(chunks, m, k)`) and masks (`(chunks, m)`),
      or `reduced_schedule` (`hines_schedule`) for a scan when it is large.
    - `gather`: `(n,)` position of each node in `concat(chains.ravel(), seps)`.
    - `order`: `(n,)` every node after all of its children (the order of the
      sequential elimination, `TreeSolver(method="sequential")`).
    """

    node: Int[Array, "chains length"]
    sub: Int[Array, "chains length"]
    first_sep: Int[Array, " chains"]
    last_sep: Int[Array, " chains"]
    first_edge: Int[Array, " chains"]
    last_edge: Int[Array, " chains"]
    last_pos: Int[Array, " chains"]
    separators: Int[Array, " m"]
    end_index: Int[Array, "m k"]
    reduced_parent: Int[Array, " m"]
    reduced_source: Int[Array, " m"]
    reduced_children: Int[Array, "chunks m k"] | None
    reduced_chunks: Array | None
    reduced_schedule: Int[Array, "chunks width"] | None
    gather: Int[Array, " n"]
    order: Int[Array, " n"]


def tree_plan(
    parent: np.ndarray, max_chain: int | None = None, unroll_limit: int = 4096
) -> TreePlan:
    """The `TreePlan` of a forest, for `TreeLinearOperator(..., plan=...)`.

    **Arguments:**

    - `parent`: `parent[i]` is the parent of node `i`, or `i` itself for a root.
    - `max_chain`: longest chain; longer unbranched runs are cut by extra
      separators. `None` picks it so the padded chains hold at most `2n + 64`
      slots (chains are padded to the longest).
    - `unroll_limit`: the reduced system's Hines elimination is unrolled at trace
      time (one fused update per level) while `separators × levels` is at most
      this, and a `lax.scan` over `hines_schedule` chunks otherwise.

    **Returns:** a `TreePlan`. Python work is O(n).
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.shape[0]
    full = hines_schedule(parent)  # rejects cycles with a clear error
    order = full.ravel()[full.ravel() < n]  # children before parents
    is_root = parent == np.arange(n)
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for u in np.flatnonzero(~is_root):
        neighbours[u].append(int(parent[u]))
        neighbours[parent[u]].append(int(u))
    separator = np.array([len(x) >= 3 for x in neighbours], dtype=bool)
    paths = _paths(neighbours, separator)
    if max_chain is None:
        lengths = np.array([len(q) for q in paths] or [1])
        max_chain = int(lengths.max())
        while max_chain > 4 and (
            np.sum(-(-lengths // (max_chain + 1))) * max_chain > 2 * n + 64
        ):
            max_chain = max(4, max_chain // 2)
    if max_chain < 1:
        raise ValueError(f"max_chain must be >= 1, got {max_chain}")
    cut = False
    for q in paths:
        for j in range(max_chain, len(q), max_chain + 1):
            separator[q[j]] = cut = True
    if cut:
        paths = _paths(neighbours, separator)
    seps = np.flatnonzero(separator)
    m, n_chains = seps.shape[0], len(paths)
    length = max([len(q) for q in paths], default=1)
    reduced = np.full(n, m)
    reduced[seps] = np.arange(m)

    def edge(u, w):  # `off_diagonal` index of the edge u–w
        return u if parent[u] == w and u != w else w

    node = np.full((n_chains, length), n)
    sub = np.full((n_chains, length), n)
    first_sep = np.full(n_chains, m)
    last_sep = np.full(n_chains, m)
    first_edge = np.full(n_chains, n)
    last_edge = np.full(n_chains, n)
    last_pos = np.zeros(n_chains, np.int64)
    gather = np.empty(n, np.int64)
    for c, q in enumerate(paths):
        node[c, : len(q)] = q
        gather[q] = c * length + np.arange(len(q))
        last_pos[c] = len(q) - 1
        sub[c, : len(q) - 1] = [edge(a, b) for a, b in zip(q[:-1], q[1:])]
        s0 = [w for w in neighbours[q[0]] if separator[w]]
        s1 = [w for w in neighbours[q[-1]] if separator[w]]
        if len(q) == 1:  # both ends are the same node: split its separators
            s0, s1 = s0[:1], s0[1:]
        if s0:
            first_sep[c], first_edge[c] = reduced[s0[0]], edge(q[0], s0[0])
        if s1:
            last_sep[c], last_edge[c] = reduced[s1[0]], edge(q[-1], s1[0])
    gather[seps] = n_chains * length + np.arange(m)
    ends: list[list[int]] = [[] for _ in range(m + 1)]
    for c in range(n_chains):
        ends[first_sep[c]].append(c)
        ends[last_sep[c]].append(n_chains + c)
    k = max([len(e) for e in ends[:m]] + [1])
    end_index = np.full((m, k), 2 * n_chains)
    for s_ in range(m):
        end_index[s_, : len(ends[s_])] = ends[s_]
    # The reduced forest: links are chains joining two separators, and edges
    # between adjacent separators. Its link values live in
    # concat(chain_values (n_chains), off_diagonal (n), [0]).
    links = [
        (first_sep[c], last_sep[c], c)
        for c in range(n_chains)
        if first_sep[c] < m and last_sep[c] < m
    ]
    links += [
        (reduced[u], reduced[parent[u]], n_chains + u)
        for u in seps
        if not is_root[u] and separator[parent[u]]
    ]
    adjacent: list[list[tuple[int, int]]] = [[] for _ in range(m)]
    for a, b, source in links:
        adjacent[a].append((b, source))
        adjacent[b].append((a, source))
    reduced_parent = np.arange(m)
    reduced_source = np.full(m, n_chains + n)
    seen = np.zeros(m, bool)
    for root in range(m):
        if seen[root]:
            continue
        seen[root] = True
        queue = [root]
        for u in queue:
            for w, source in adjacent[u]:
                if not seen[w]:
                    seen[w] = True
                    reduced_parent[w], reduced_source[w] = u, source
                    queue.append(w)
    schedule = hines_schedule(reduced_parent)
    as_int = lambda a: jnp.asarray(a, jnp.int32)  # noqa: E731
    children = chunks = reduced_schedule = None
    if m * schedule.shape[0] <= unroll_limit:
        kk = 1
        lists = []
        for chunk in schedule:
            kids: list[list[int]] = [[] for _ in range(m)]
            for u in chunk[chunk < m]:
                if reduced_parent[u] != u:
                    kids[reduced_parent[u]].append(int(u))
            kk = max([kk] + [len(x) for x in kids])
            lists.append(kids)
        children = np.full((len(lists), m, kk), m)
        mask = np.zeros((len(lists), m), bool)
        for i, (kids, chunk) in enumerate(zip(lists, schedule)):
            for u in range(m):
                children[i, u, : len(kids[u])] = kids[u]
            mask[i, chunk[chunk < m]] = True
        children, chunks = as_int(children), jnp.asarray(mask)
    else:
        reduced_schedule = as_int(schedule)
    return TreePlan(
        node=as_int(node),
        sub=as_int(sub),
        first_sep=as_int(first_sep),
        last_sep=as_int(last_sep),
        first_edge=as_int(first_edge),
        last_edge=as_int(last_edge),
        last_pos=as_int(last_pos),
        separators=as_int(seps),
        end_index=as_int(end_index),
        reduced_parent=as_int(reduced_parent),
        reduced_source=as_int(reduced_source),
        reduced_children=children,
        reduced_chunks=chunks,
        reduced_schedule=reduced_schedule,
        gather=as_int(gather),
        order=as_int(order),
    )


def _hines_scan(diag, off, parent, rhs, schedule):
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


def _hines_unrolled(diag, off, parent, rhs, children, chunks):
    """Hines elimination unrolled over the chunks, each level one update of the
    whole (small) vectors through gathers of the children; inputs as `_hines_scan`."""
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


def _sequential_solve(order, parent, diag, off, rhs):
    """Hines' elimination node by node, as NEURON does it: two `fori_loop`s over
    `order` (children first), each iteration a few scalar reads and writes
    (`dynamic_slice` / `dynamic_update_slice`, no scatter, so XLA:CPU compiles
    each loop into one function)."""
    (n,) = diag.shape
    at = jax.lax.dynamic_index_in_dim
    put = jax.lax.dynamic_update_index_in_dim

    def eliminate(k, carry):
        d, b = carry
        i = order[k]
        p = parent[i]
        o = at(off, i, keepdims=False)
        f = o / at(d, i, keepdims=False)
        d = put(d, at(d, p, keepdims=False) - f * o, p, 0)
        b = put(b, at(b, p, keepdims=False) - f * at(b, i, keepdims=False), p, 0)
        return d, b

    d, b = jax.lax.fori_loop(0, n, eliminate, (diag, rhs))

    def substitute(k, x):
        i = order[n - 1 - k]
        xp = at(x, parent[i], keepdims=False)
        value = (at(b, i, keepdims=False) - at(off, i, keepdims=False) * xp) / at(
            d, i, keepdims=False
        )
        return put(x, value, i, 0)

    return jax.lax.fori_loop(0, n, substitute, jnp.zeros_like(rhs))


def _schur_solve(plan: TreePlan, diag, off, rhs):
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
    y = jax.lax.linalg.tridiagonal_solve(dl, d, du, b)
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
        xs = _hines_unrolled(*args, plan.reduced_children, plan.reduced_chunks)
    else:
        xs = _hines_scan(*args, plan.reduced_schedule)
    xc = y0 - (of * xs[plan.first_sep])[:, None] * yf
    xc = xc - (ol * xs[plan.last_sep])[:, None] * yl
    return jnp.concatenate([xc.reshape(-1), xs[:m]])[plan.gather]


class TreeLinearOperator(lx.AbstractLinearOperator):
    """A symmetric matrix with the sparsity of a forest.

    `A[i, i] = diagonal[i]`, `A[i, parent[i]] = A[parent[i], i] = off_diagonal[i]`
    for every non-root `i` (roots have `parent[i] = i` and `off_diagonal[i] = 0`).

    **Fields:**

    - `diagonal`: shape `(n,)`.
    - `off_diagonal`: shape `(n,)`.
    - `parent`: int, shape `(n,)`.
    - `schedule`: the chunks of `hines_schedule(parent)`, int `(n_chunks, width)`.
    - `plan`: a `TreePlan` of `parent` (`tree_plan(parent)`), or `None`.
      `TreeSolver` uses the chain/Schur-complement solve when it is given and the
      chunked Hines scan over `schedule` otherwise; both are exact.
    """

    diagonal: Float[Array, " n"]
    off_diagonal: Float[Array, " n"]
    parent: Int[Array, " n"]
    schedule: Int[Array, "chunks width"]
    plan: "TreePlan | None" = None

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


_METHODS = ("auto", "sequential", "chains", "scan")


class TreeSolver(lx.AbstractLinearSolver):
    """Exact solver for `TreeLinearOperator`s (Gaussian elimination in tree order).

    Three algorithms, all exact and all O(n) work:

    - `"sequential"` (needs the operator's `plan`): Hines' elimination node by
      node, leaves to roots, then the back-substitution, as NEURON does: two
      `lax.fori_loop`s of a few scalar reads and writes per node. XLA:CPU
      compiles each loop into one function, so a solve is two kernels, ~0.6 µs
      for 127 nodes; on a GPU every iteration would be a kernel launch.
    - `"chains"` (needs the `plan`, `tree_plan`; `TreeCoupling` always sets one):
      the chains between branch points are solved together by one batched LAPACK
      `gtsv` (`lax.linalg.tridiagonal_solve`, partial pivoting within each chain)
      for the right-hand side and the two unit vectors at the chain's ends; their
      Schur complement onto the separators is again a tree, eliminated by an
      unrolled Hines sweep; a fused update recovers the chains. A fixed number
      of kernels (≈ 45) per solve, independent of the tree's depth: for large
      trees and for accelerators.
    - `"scan"` (without a plan): Hines' elimination and the back-substitution,
      each a `lax.scan` over the operator's chunks of independent nodes (one
      gather, divide and scatter-add per chunk); `n_chunks` sequential steps.

    `"auto"` (default): `"sequential"` on the CPU for at most `sequential_limit`
    nodes, else `"chains"`; `"scan"` when the operator has no plan.

    None pivots across branch points: the matrix must be nonsingular with
    nonzero pivots, as NEURON assumes — true for the voltage system, which is
    symmetric and diagonally dominant (compartments have capacitance).

    The operator is symmetric, so `transpose` is the identity on the state and the
    reverse mode of `lx.linear_solve` is one more tree solve.
    """

    method: str = eqx.field(static=True, default="auto")
    sequential_limit: int = eqx.field(static=True, default=4096)

    def __check_init__(self):
        if self.method not in _METHODS:
            raise ValueError(
                f"TreeSolver method must be one of {_METHODS}, got {self.method!r}"
            )

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]):
        del options
        if not isinstance(operator, TreeLinearOperator):
            raise ValueError(
                f"`TreeSolver` solves `TreeLinearOperator`s only, got "
                f"{type(operator).__name__}; use `lx.Tridiagonal()` for "
                f"`TridiagonalLinearOperator`s"
            )
        if self.method in ("sequential", "chains") and operator.plan is None:
            raise ValueError(
                f"TreeSolver(method={self.method!r}) needs the operator's plan "
                "(`TreeLinearOperator(..., plan=tree_plan(parent))`)"
            )
        return operator

    def _method(self, op: TreeLinearOperator) -> str:
        if self.method != "auto":
            return self.method
        if op.plan is None:
            return "scan"
        (n,) = op.diagonal.shape
        if n <= self.sequential_limit and jax.default_backend() == "cpu":
            return "sequential"
        return "chains"

    def compute(self, state: TreeLinearOperator, vector, options):
        del options
        op = state
        dtype = jnp.result_type(op.diagonal, vector)
        (n,) = op.diagonal.shape
        diag, off = op.diagonal.astype(dtype), op.off_diagonal.astype(dtype)
        vector = vector.astype(dtype)
        method = self._method(op)
        if method == "sequential":
            x = _sequential_solve(op.plan.order, op.parent, diag, off, vector)
            return x, lx.RESULTS.successful, {}
        if method == "chains":
            x = _schur_solve(op.plan, diag, off, vector)
            return x, lx.RESULTS.successful, {}
        # Padding node `n`: diagonal 1, no coupling, its own parent.
        one, zero = jnp.ones((1,), dtype), jnp.zeros((1,), dtype)
        x = _hines_scan(
            jnp.concatenate([diag, one]),
            jnp.concatenate([off, zero]),
            jnp.concatenate([op.parent, jnp.full((1,), n, op.parent.dtype)]),
            jnp.concatenate([vector, zero]),
            op.schedule,
        )
        return x[:n], lx.RESULTS.successful, {}

    def transpose(self, state: TreeLinearOperator, options: dict[str, Any]):
        return state, options

    def conj(self, state: TreeLinearOperator, options: dict[str, Any]):
        return lx.conj(state), options

    def assume_full_rank(self):
        return True


TreeSolver.__init__.__doc__ = """**Arguments:**

- `method`: `"auto"` (default), `"sequential"`, `"chains"` or `"scan"` (see above).
- `sequential_limit`: the most nodes `"auto"` solves sequentially (default 4096).
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
    - `plan`: the chain/Schur-complement plan (`tree_plan`), or `None` to solve
      with the chunked scan.
    - `rows`: operator row of each compartment, shape `(ncomp,)`.
    - `is_junction`: whether each row is a junction node.
    - `children`: `(n, k)` the children of each row, padded with `n`.
    - `compartment`: `(n,)` the compartment at each row, `ncomp` for junctions.

    Every per-step operation is a gather (`children`, `compartment`, `parent`),
    never a scatter: XLA:CPU fuses gathers into the surrounding arithmetic, while
    each scatter is a kernel of its own.
    """

    g: Float[Array, " n"]
    parent: Int[Array, " n"]
    schedule: Int[Array, "chunks width"]
    plan: TreePlan | None
    rows: Int[Array, " ncomp"]
    is_junction: Array
    children: Int[Array, "n k"]
    compartment: Int[Array, " n"]

    def _child_sum(self, x):
        """`sum over the children c of row k of x[c]`, for each row `k`."""
        return jnp.sum(jnp.concatenate([x, jnp.zeros((1,), x.dtype)])[self.children], 1)

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

    def to_operator_order(self, x):
        return jnp.concatenate([x, jnp.zeros((1,), x.dtype)])[self.compartment]

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
    # The children of each row, as rows, padded with `n`.
    table = np.full((n, max([len(c) for c in children] + [1])), n)
    for k, u in enumerate(order):
        table[k, : len(children[u])] = row[children[u]]
    return TreeCoupling(
        g=jnp.asarray(g, dtype),
        parent=jnp.asarray(parent, jnp.int32),
        schedule=jnp.asarray(schedule, jnp.int32),
        plan=tree_plan(parent),
        rows=jnp.asarray(row[:n_compartments], jnp.int32),
        is_junction=jnp.asarray(order >= n_compartments),
        children=jnp.asarray(table, jnp.int32),
        compartment=jnp.asarray(np.minimum(order, n_compartments), jnp.int32),
    )
