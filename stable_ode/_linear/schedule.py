"""Graph planning for tree solves: rooting a forest, Hines' ordering, and the
chunks (levels) of nodes that can be eliminated together."""

import heapq

import numpy as np


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
    """
    nbrs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for k, (i, j) in enumerate(edges):
        nbrs[i].append((j, k))
        nbrs[j].append((i, k))

    def bfs(start):
        dist = {start: 0}
        prev = {start: (start, -1)}
        queue = [start]
        for u in queue:
            for w, k in nbrs[u]:
                if w not in dist:
                    dist[w] = dist[u] + 1
                    prev[w] = (u, k)
                    queue.append(w)
        return queue, dist, prev

    parent = np.full(n, -1, np.int64)
    parent_edge = np.full(n, -1, np.int64)
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
            parent[u], parent_edge[u] = prev[u]
    roots = [u for u in range(n) if parent[u] == u]
    children: list[list[int]] = [[] for _ in range(n)]
    for u in range(n):
        if parent[u] != u:
            children[parent[u]].append(u)
    order = list(roots)
    for u in order:
        order.extend(children[u])
    return parent, parent_edge, np.asarray(order, np.int64), n_components


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
