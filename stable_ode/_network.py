"""Networks: groups of synapses between compartments of any cells.

`Connections(synapse, pre, post)` describes many synapses of one kind at once
(parameters scalar or one per synapse); `build` turns them into vectorised
`SynapseGroup`s (chemical) or extra edges of the conductance Laplacian (gap
junctions), so the per-step cost has no Python loop over synapses or cells.
"""

from collections.abc import Sequence
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from ._group import AbstractStateGroup
from ._stimulus import Site
from .mechanisms import Environment
from .mechanisms.synapses import AbstractSynapse, GapJunction


class Connections(eqx.Module):
    """Synapses of one kind from `pre[k]` to `post[k]`, k = 0..n-1.

    **Arguments:**

    - `synapse`: an `AbstractSynapse` (e.g. `IonotropicSynapse(gmax=...)`) or a
      `GapJunction`; each floating field is a scalar (shared) or an array of
      shape `(n,)` (one value per synapse).
    - `pre`, `post`: `Site`s, or integer arrays of compartment indices (as
      `model.index(...)` returns; the fast path for large networks).
    - `name`: optional label of the group (default: the synapse class name).
    """

    synapse: AbstractSynapse | GapJunction
    pre: Sequence[Site] | np.ndarray
    post: Sequence[Site] | np.ndarray
    name: str | None = None

    def __check_init__(self):
        if not isinstance(self.synapse, (AbstractSynapse, GapJunction)):
            raise TypeError(
                f"Connections.synapse must be an AbstractSynapse or GapJunction, "
                f"got {self.synapse!r}"
            )
        if len(self.pre) != len(self.post):
            raise ValueError(
                f"Connections: {len(self.pre)} presynaptic sites but "
                f"{len(self.post)} postsynaptic sites"
            )


class SynapseGroup(AbstractStateGroup):
    """Chemical synapses of one kind, vectorised: `synapse`'s fields have shape
    `(n,)`; `pre`/`post` are compartment indices.

    A group of states whose kinetics read `v[pre]` and whose current (nA) lands
    on `v[post]`; its `Environment` is that of the postsynaptic compartments.
    """

    point_current: ClassVar[bool] = True

    synapse: AbstractSynapse
    pre: Int[Array, " n"]
    post: Int[Array, " n"]
    name: str = eqx.field(static=True)

    @property
    def compartments(self):
        return self.post

    @property
    def label(self) -> str:
        return f"synapse {self.name}"

    def environment(self, model) -> Environment:
        return Environment(
            celsius=model.celsius,
            area=model.area[self.post],
            diam=model.diameter[self.post],
            length=model.length[self.post],
        )

    def kinetics(self, model, v, states):
        return self.synapse.kinetics(v[self.pre], states, self.environment(model))

    def current(self, model, v, states):
        env = self.environment(model)
        return self.synapse.current(v[self.post], states, env)

    def add_current(self, model, i, v, states):
        return i.at[self.post].add(self.current(model, v, states))

    def init_states(self, model, v):
        return self.synapse.init_states(v[self.pre], self.environment(model))


def _indices(sites, index_of, ncomp: int, what: str) -> np.ndarray:
    if isinstance(sites, (np.ndarray, jax.Array)):
        idx = np.asarray(sites)
        if not np.issubdtype(idx.dtype, np.integer):
            raise ValueError(f"{what}: compartment indices must be integers")
        if idx.size and (idx.min() < 0 or idx.max() >= ncomp):
            raise ValueError(f"{what}: compartment index out of range [0, {ncomp})")
        return idx.astype(np.int32)
    return np.asarray([index_of(s) for s in sites], np.int32)


def cast_params(
    module,
    n: int,
    dtype,
    where: str,
    what: str,
    *,
    to_jax: bool = True,
    labels=None,
):
    """Each floating field of `module` as an array of shape `(n,)` and `dtype`
    (NumPy arrays if `to_jax=False`, for cheap concatenation while building).

    A parameter of the wrong shape, or with a non-finite (NaN or ±inf) value,
    is a `ValueError` naming `where`, the parameter and, for a non-finite
    entry, `labels[j]` (what entry `j` is, e.g. its section), if given."""
    np_dtype = np.dtype(dtype)

    def numeric_list(x):
        return (
            isinstance(x, (list, tuple))
            and len(x) > 0
            and all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in x)
        )

    def cast(path, x):
        if isinstance(x, bool) or not (
            numeric_list(x) or isinstance(x, (int, float, np.ndarray, jax.Array))
        ):
            return x
        name = jax.tree_util.keystr(tuple(path)).lstrip(".")
        a = np.asarray(x, dtype=np_dtype)
        if a.ndim == 0:
            a = np.full((n,), a, np_dtype)
        elif a.shape != (n,):
            raise ValueError(
                f"{where}: parameter {name!r} has shape {a.shape}, which does not "
                f"match the {n} {what} it applies to"
            )
        bad = ~np.isfinite(a)
        if np.any(bad):
            j = int(np.argmax(bad))
            at = "" if labels is None else f" in {labels[j]}"
            raise ValueError(
                f"{where}: parameter {name!r} is {a[j]}{at}; parameters must be finite"
            )
        return jnp.asarray(a) if to_jax else a

    return jax.tree_util.tree_map_with_path(cast, module, is_leaf=numeric_list)


def build_connections(connections: Sequence[Connections], index_of, ncomp: int, dtype):
    """`(synapse_groups, gap_edges)` with gap edges `(i, j, g in S)`."""
    groups: list[SynapseGroup] = []
    gap_edges: list[tuple[int, int, float]] = []
    for k, c in enumerate(connections):
        name = c.name or type(c.synapse).__name__
        where = f"connections[{k}] ({name})"
        pre = _indices(c.pre, index_of, ncomp, where + ".pre")
        post = _indices(c.post, index_of, ncomp, where + ".post")
        n = pre.shape[0]
        if isinstance(c.synapse, GapJunction):
            g = np.broadcast_to(np.asarray(c.synapse.g, dtype=float), (n,))
            if np.any(g < 0):
                raise ValueError(f"{where}: gap junction conductance must be >= 0 µS")
            if np.any(pre == post):
                raise ValueError(
                    f"{where}: a gap junction joins a compartment to itself"
                )
            gap_edges.extend(zip(pre.tolist(), post.tolist(), (1e-6 * g).tolist()))
            continue
        if n == 0:
            continue
        groups.append(
            SynapseGroup(
                synapse=cast_params(
                    c.synapse,
                    n,
                    dtype,
                    where,
                    "synapses",
                    labels=[f"synapse {j}" for j in range(n)],
                ),
                pre=jnp.asarray(pre),
                post=jnp.asarray(post),
                name=name,
            )
        )
    return tuple(groups), gap_edges
