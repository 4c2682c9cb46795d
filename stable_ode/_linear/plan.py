"""The chain/Schur-complement plan of a tree solve: separators, chains and the
reduced separator forest, as static index arrays (`tree_plan`)."""

import equinox as eqx
import numpy as np
from jaxtyping import Array, Int

from .._misc import device_array
from .schedule import hines_schedule


def _paths(neighbours: list[list[int]], separator: list[bool]) -> list[list[int]]:
    """The connected parts of a forest without its `separator` nodes, each an
    unbranched path (all its nodes have degree ≤ 2), listed end to end."""
    seen = list(separator)
    paths = []
    for start in range(len(separator)):
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
      sequential elimination, `SequentialTreeSolver`).
    - `order_parent`: `(n,)` the parent of each node of `order` (`parent[order]`,
      so that the elimination reads it without going through `order`).
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
    order_parent: Int[Array, " n"]


def relabelled(plan: TreePlan, label: np.ndarray) -> TreePlan:
    """`plan` for the same forest with node `i` renamed `label[i]` (a
    permutation of `0..n-1`): the same chains, separators and orders, so a solve
    with it does the same arithmetic in the same order, on renamed nodes."""
    label = np.asarray(label, np.int64)
    (n,) = label.shape
    pad = np.append(label, n)  # the padding node `n` keeps its name

    def nodes(a):  # node names (padding `n`) renamed
        return device_array(pad[np.asarray(a)], np.int32)

    n_chains = plan.node.shape[0]
    source = np.asarray(plan.reduced_source)
    edge = source >= n_chains  # `n_chains + node`: an `off_diagonal` entry
    source = np.where(edge, n_chains + pad[np.maximum(source - n_chains, 0)], source)
    gather = np.empty(n, np.int64)
    gather[label] = np.asarray(plan.gather)
    return eqx.tree_at(
        lambda p: (
            p.node, p.sub, p.first_edge, p.last_edge, p.separators,
            p.reduced_source, p.gather, p.order, p.order_parent,
        ),
        plan,
        (
            nodes(plan.node), nodes(plan.sub), nodes(plan.first_edge),
            nodes(plan.last_edge), nodes(plan.separators),
            device_array(source, np.int32), device_array(gather, np.int32),
            nodes(plan.order), nodes(plan.order_parent),
        ),
    )  # fmt: skip


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
    parent_ = parent.tolist()
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for u in np.flatnonzero(~is_root).tolist():
        neighbours[u].append(parent_[u])
        neighbours[parent_[u]].append(u)
    separator = [len(x) >= 3 for x in neighbours]
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
    is_sep = np.asarray(separator, bool).reshape(n)
    seps = np.flatnonzero(is_sep)
    m, n_chains = seps.shape[0], len(paths)
    length = max([len(q) for q in paths], default=1)
    reduced = np.full(n, m)
    reduced[seps] = np.arange(m)

    def edge(u, w):  # `off_diagonal` index of the edge u–w
        return u if parent_[u] == w and u != w else w

    # The chains, flattened: chain `c` is `flat[start[c]:start[c] + size[c]]`.
    size = np.array([len(q) for q in paths], np.int64)
    flat = np.array([u for q in paths for u in q], np.int64)
    chain = np.repeat(np.arange(n_chains), size)
    start = np.cumsum(size) - size
    at = np.arange(flat.shape[0]) - start[chain]  # position in its chain
    node = np.full((n_chains, length), n)
    node[chain, at] = flat
    gather = np.empty(n, np.int64)
    gather[flat] = chain * length + at
    last_pos = size - 1
    sub = np.full((n_chains, length), n)
    inner = at < last_pos[chain]  # an edge to the next position
    a, b = flat[inner], flat[np.flatnonzero(inner) + 1]
    sub[chain[inner], at[inner]] = np.where((parent[a] == b) & (a != b), a, b)
    first_sep = np.full(n_chains, m)
    last_sep = np.full(n_chains, m)
    first_edge = np.full(n_chains, n)
    last_edge = np.full(n_chains, n)
    for c, q in enumerate(paths):
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
    first_, last_ = first_sep.tolist(), last_sep.tolist()
    for c in range(n_chains):
        ends[first_[c]].append(c)
        ends[last_[c]].append(n_chains + c)
    k = max([len(e) for e in ends[:m]] + [1])
    end_index = np.full((m, k), 2 * n_chains)
    n_ends = np.array([len(e) for e in ends[:m]], np.int64)
    end_index[np.repeat(np.arange(m), n_ends), np.arange(int(n_ends.sum()))
              - np.repeat(np.cumsum(n_ends) - n_ends, n_ends)] = np.array(
        [x for e in ends[:m] for x in e], np.int64
    )  # fmt: skip
    # The reduced forest: links are chains joining two separators, and edges
    # between adjacent separators. Its link values live in
    # concat(chain_values (n_chains), off_diagonal (n), [0]).
    links = [
        (first_[c], last_[c], c)
        for c in range(n_chains)
        if first_[c] < m and last_[c] < m
    ]
    reduced_ = reduced.tolist()
    links += [
        (reduced_[u], reduced_[parent_[u]], n_chains + u)
        for u in seps.tolist()
        if parent_[u] != u and separator[parent_[u]]
    ]
    adjacent: list[list[tuple[int, int]]] = [[] for _ in range(m)]
    for a_, b_, source in links:
        adjacent[a_].append((b_, source))
        adjacent[b_].append((a_, source))
    reduced_parent_ = list(range(m))
    reduced_source_ = [n_chains + n] * m
    seen = [False] * m
    for root in range(m):
        if seen[root]:
            continue
        seen[root] = True
        queue = [root]
        for u in queue:
            for w, source in adjacent[u]:
                if not seen[w]:
                    seen[w] = True
                    reduced_parent_[w], reduced_source_[w] = u, source
                    queue.append(w)
    reduced_parent = np.array(reduced_parent_, np.int64).reshape(m)
    reduced_source = np.array(reduced_source_, np.int64).reshape(m)
    schedule = hines_schedule(reduced_parent)
    as_int = lambda a: device_array(a, np.int32)  # noqa: E731
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
        children, chunks = as_int(children), device_array(mask)
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
        order_parent=as_int(parent[order]),
    )
