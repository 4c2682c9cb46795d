"""Graph planning for tree solves: rooting a forest, Hines' ordering, and the
chunks (levels) of nodes that can be eliminated together."""

import heapq

import numpy as np


def _csr(n: int, src: np.ndarray, dst: np.ndarray, key: np.ndarray):
    """Adjacency lists as CSR arrays `(indptr, dst, key)`: node `u`'s entries are
    `dst[indptr[u]:indptr[u + 1]]`, in increasing `key` (ints in `[0, 2^31)`;
    equal keys keep their order)."""
    perm = np.argsort(src * (int(key.max(initial=0)) + 1) + key, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return indptr, dst[perm], key[perm]


def _rows(rows: np.ndarray, indptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CSR positions of the entries of `rows`, in that order, and the row of
    each."""
    starts = indptr[rows]
    counts = indptr[rows + 1] - starts
    ends = np.cumsum(counts)
    pos = np.arange(int(ends[-1]) if ends.size else 0) + np.repeat(
        starts - ends + counts, counts
    )
    return pos, np.repeat(rows, counts)


def _bfs(sources: np.ndarray, indptr, dst, key, n: int):
    """Breadth-first search from `sources` at once, exactly as a queue visits
    them (each node's neighbours in CSR order, a node found first from the
    earliest node of the queue): every connected part is searched as from its
    own source alone. Python work is O(depth).

    **Returns:** `(queue, dist, prev, prev_key)`: the nodes in visiting order,
    and per node its distance, the node it was found from and that entry's
    `key` (a source: itself and -1; not reached: -1).
    """
    dist = np.full(n, -1, np.int64)
    prev = np.full(n, -1, np.int64)
    prev_key = np.full(n, -1, np.int64)
    mark = np.empty(n, np.int64)
    dist[sources], prev[sources] = 0, sources
    levels, frontier, d = [sources], sources, 0
    while frontier.size:
        pos, src = _rows(frontier, indptr)
        nb = dst[pos]
        new = dist[nb] < 0
        nb, src, pos = nb[new], src[new], pos[new]
        index = np.arange(nb.shape[0])
        mark[nb] = index
        if not (mark[nb] == index).all():  # found twice (a cycle): the first
            _, first = np.unique(nb, return_index=True)
            first.sort()
            nb, src, pos = nb[first], src[first], pos[first]
        d += 1
        dist[nb], prev[nb], prev_key[nb] = d, src, key[pos]
        levels.append(nb)
        frontier = nb
    return np.concatenate(levels), dist, prev, prev_key


def _children(parent: np.ndarray, is_root: np.ndarray):
    """The children lists of a forest as CSR arrays `(indptr, child)`, each
    node's children in increasing order."""
    child = np.flatnonzero(~is_root)
    n = parent.shape[0]
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(parent[child], minlength=n), out=indptr[1:])
    return indptr, child[np.argsort(parent[child], kind="stable")]


def _first_farthest(queue, dist, label, n_labels):
    """Per connected part (`label`), the first node of `queue` at its largest
    distance."""
    q_label, q_dist = label[queue], dist[queue]
    top = np.full(n_labels, -1, np.int64)
    np.maximum.at(top, q_label, q_dist)
    at_top = q_dist == top[q_label]
    _, first = np.unique(q_label[at_top], return_index=True)
    return queue[at_top][first]


def centred_forest(
    n: int, edges: list[tuple[int, int]]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Root every connected part of a graph at its centre, and order it as Hines does.

    The centre of a tree (the middle of a longest path) minimises its depth, hence
    the number of sequential elimination steps of a tree solve.

    **Arguments:**

    - `n`: number of nodes.
    - `edges`: `(i, j)`: nodes `i` and `j` are joined.

    **Returns:** `(parent, parent_edge, order, n_components)`:

    - `parent`: int `(n,)`, the parent of each node (a root is its own parent).
    - `parent_edge`: int `(n,)`, the index in `edges` of the edge from each node
      to its parent, `-1` for a root.
    - `order`: int `(n,)`, the nodes breadth-first by depth from the roots
      (Hines' ordering: every parent before its children).
    - `n_components`: number of connected parts. The graph is a forest exactly
      when `len(edges) == n - n_components`; the caller checks it (a cycle leaves
      `parent` a spanning forest of the graph).

    Each part is searched breadth first from its smallest node, then from the
    first farthest node found, whose first farthest node ends a longest path;
    the centre is the middle node of that path (the one nearer its start for an
    even count). Vectorised over nodes (numpy), all parts at once: Python work
    is O(depth), not O(n).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    e = np.asarray(edges, np.int64).reshape(-1, 2)
    k = np.arange(e.shape[0], dtype=np.int64)
    # Node i's list: its edges in order (of an edge (i, i), i then i).
    indptr, dst, key = _csr(
        n,
        np.concatenate([e[:, 0], e[:, 1]]),
        np.concatenate([e[:, 1], e[:, 0]]),
        np.concatenate([2 * k, 2 * k + 1]),
    )
    graph = coo_matrix((np.ones(e.shape[0]), (e[:, 0], e[:, 1])), shape=(n, n))
    n_components, label = connected_components(graph, directed=False)
    starts = np.full(n_components, n, np.int64)
    np.minimum.at(starts, label, np.arange(n))
    starts.sort()  # each part's smallest node, parts by it
    queue, dist, _, _ = _bfs(starts, indptr, dst, key, n)
    far = _first_farthest(queue, dist, label, n_components)
    queue, dist, prev, _ = _bfs(far, indptr, dst, key, n)
    other = _first_farthest(queue, dist, label, n_components)
    # The path other -> ... -> far has dist[other] + 1 nodes; the centre is the
    # one (dist[other] + 1) // 2 steps from `other`.
    centre, steps = other.copy(), (dist[other] + 1) // 2
    for s in range(int(steps.max(initial=0))):
        climb = steps > s
        centre[climb] = prev[centre[climb]]
    _, _, parent, parent_edge = _bfs(np.sort(centre), indptr, dst, key, n)
    is_root = parent == np.arange(n)
    parent_edge = np.where(is_root, -1, parent_edge // 2)
    # Hines' order: the roots, then breadth first, each node's children in
    # increasing order.
    c_indptr, child = _children(parent, is_root)
    order, _, _, _ = _bfs(np.flatnonzero(is_root), c_indptr, child, child, n)
    return parent, parent_edge, order, int(n_components)


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
    # Depth: breadth first from the roots; a node no root reaches is on a cycle.
    indptr, child = _children(parent, is_root)
    _, depth, _, _ = _bfs(np.flatnonzero(is_root), indptr, child, child, n)
    if (depth < 0).any():
        raise ValueError("parent array is not a forest (it has a cycle)")
    n_children = np.bincount(parent[~is_root], minlength=n)
    levels = int(depth.max()) + 1
    if width is None:
        # The minimum number of chunks is the number of depth levels; aim for
        # about that many, with chunks wide enough that padding stays below ~n.
        counts = np.bincount(depth)
        width = int(min(counts.max(), max(1, -(-2 * n // levels))))
    if max(levels, -(-n // width)) * 32 > n:  # many chunks: a heap of tuples
        chunks = _hu_heap(parent, is_root, depth, n_children, width)
    else:  # few chunks: one numpy step each
        chunks = _hu_numpy(parent, is_root, depth, n_children, width)
    if sum(len(c) for c in chunks) != n:
        raise ValueError("parent array is not a forest (it has a cycle)")
    out = np.full((len(chunks), width), n, np.int64)
    for k, chunk in enumerate(chunks):
        out[k, : len(chunk)] = chunk
    return out


def _hu_heap(parent, is_root, depth, n_children, width) -> list:
    """Hu's list scheduling (see `hines_schedule`), a heap on Python lists."""
    depth_, parent_, root_ = depth.tolist(), parent.tolist(), is_root.tolist()
    ready = [(-depth_[i], i) for i in np.flatnonzero(n_children == 0).tolist()]
    heapq.heapify(ready)
    remaining = n_children.tolist()
    chunks = []
    pop, push = heapq.heappop, heapq.heappush
    while ready:
        chunk = [pop(ready)[1] for _ in range(min(width, len(ready)))]
        chunks.append(chunk)
        for i in chunk:
            if not root_[i]:
                p = parent_[i]
                remaining[p] -= 1
                if remaining[p] == 0:
                    push(ready, (-depth_[p], p))
    return chunks


def _hu_numpy(parent, is_root, depth, n_children, width) -> list:
    """Hu's list scheduling (see `hines_schedule`), one numpy step per chunk: the
    ready nodes as sorted keys `(max depth - depth)·n + node` (deepest first,
    then the smallest node, as the heap pops them)."""
    n = parent.shape[0]
    top = int(depth.max())
    ready = np.flatnonzero(n_children == 0)
    ready = np.sort((top - depth[ready]) * n + ready)
    remaining = n_children.copy()
    chunks = []
    while ready.size:
        chunk = ready[:width] % n
        ready = ready[width:]
        chunks.append(chunk)
        p, c = np.unique(parent[chunk[~is_root[chunk]]], return_counts=True)
        remaining[p] -= c
        done = p[remaining[p] == 0]
        if done.size:
            keys = (top - depth[done]) * n + done
            keys.sort()
            ready = np.insert(ready, np.searchsorted(ready, keys), keys)
    return chunks
