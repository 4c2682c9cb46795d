"""What `build` needs besides discretisation: the choice of coupling structure
for the compartment graph, and the build-time check of every group's shapes."""

import jax
import jax.numpy as jnp
import numpy as np

from ._group import MechanismGroup
from .mechanisms._scheme import kinetics_state_names, map_kinetics
from .morphology._coupling import (
    AbstractCoupling,
    dense_coupling,
    NoCoupling,
    TridiagonalCoupling,
)
from .morphology._discretise import path_order
from .morphology._tree import tree_coupling


def check_shapes(model):
    """Every group's initial states, kinetics and current have one entry per
    compartment (or synapse) of the group: else a `ValueError` naming the
    mechanism, the function and where it is inserted. Traced only
    (`jax.eval_shape`): nothing is computed."""

    def describe(group) -> str:
        if isinstance(group, MechanismGroup):
            cells = sorted({c for c, _ in group.sections})
            secs = sorted({s for _, s in group.sections})
            return f"mechanism {group.name} (cells {cells}, sections {secs})"
        return f"synapse group {group.name!r}"

    v = model.v_init
    for group in model.groups:
        n = group.compartments.shape[0]

        def check(what, leaf, group=group, n=n):
            if leaf.shape != (n,):
                raise ValueError(
                    f"{describe(group)}: {what} has shape {leaf.shape}, expected "
                    f"({n},) (one value per entry of the group)"
                )

        names = []

        def shapes(s, group=group, names=names):
            kin = group.kinetics(model, v, s)
            moved = kinetics_state_names(kin)
            names.extend(moved)
            if not set(moved) <= set(s):  # reported below
                return {}, group.current(model, v, s)
            rhs = map_kinetics(lambda k, xk: k.rhs(xk), kin, s)
            return rhs, group.current(model, v, s)

        x = jax.eval_shape(lambda g=group: g.init_states(model, v))
        for name, leaf in x.items():
            check(f"init_states()[{name!r}]", leaf)
        for ion in model.ions:
            for g, state in ion.writes_inside + ion.writes_outside:
                if model.groups[g] is group and state not in x:
                    raise ValueError(
                        f"{describe(group)}: writes {state!r} (UseIon {ion.name!r}) "
                        f"but has no state of that name (its states: {sorted(x)}); "
                        "a written concentration is the writer's state of exactly "
                        "that name"
                    )
        rhs, i = jax.eval_shape(shapes, x)
        if set(names) != set(x):
            raise ValueError(
                f"{describe(group)}: kinetics() returns states {sorted(names)} but "
                f"init_states() returns {sorted(x)}"
            )
        for name, leaf in rhs.items():
            check(f"the kinetics of state {name!r} (its rhs)", leaf)
        check("current()", i)


def _has_cycle(n: int, edges) -> bool:
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, j, _ in edges:
        ri, rj = find(i), find(j)
        if ri == rj:
            return True
        parent[ri] = rj
    return False


def choose_coupling(n, edges, junctions, dtype) -> AbstractCoupling:
    """The cheapest exact structure for the compartment graph: none, paths
    (tridiagonal, LAPACK), a forest (tree solve), or, if gap junctions close a
    cycle, a dense matrix (LU; O(n³) per step, for small models only)."""
    if not edges and not junctions:
        return NoCoupling(ncomp=n, dtype=dtype.name)
    n_nodes = n + len(junctions)
    all_edges = list(edges) + [
        (n + k, i, g) for k, members in enumerate(junctions) for i, g in members
    ]
    if _has_cycle(n_nodes, all_edges):
        return dense_coupling(n, edges, junctions, dtype)
    path = None if junctions else path_order(n, edges)
    if path is None:
        return tree_coupling(n, edges, junctions, dtype)
    order, g = path
    identity = bool(np.all(order == np.arange(n)))
    return TridiagonalCoupling(
        g=jnp.asarray(g, dtype),
        order=None if identity else jnp.asarray(order, jnp.int32),
        inverse_order=None if identity else jnp.asarray(np.argsort(order), jnp.int32),
    )
