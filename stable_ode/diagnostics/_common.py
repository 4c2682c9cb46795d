"""What the forward and backward searches of `diagnose` share: bad-value
tests, the model's states by name, the probed model and a single step."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._model import MembraneModel, State
from .._solver._voltage import AbstractVoltageSolver
from .._term import MembraneTerm
from ..events._stepping import EventSteps
from ._probes import ProbedLinearSolver, ProbedMechanism, ProbedSynapse


def _bad_np(x, threshold) -> np.ndarray:
    x = np.asarray(x)
    with np.errstate(invalid="ignore"):
        return ~np.isfinite(x) | (np.abs(x) > threshold)


def _bad_jnp(tree, threshold) -> jax.Array:
    leaves = [x for x in jax.tree_util.tree_leaves(tree) if eqx.is_inexact_array(x)]
    if not leaves:
        return jnp.asarray(False)
    return jnp.any(
        jnp.stack(
            [jnp.any(~jnp.isfinite(x) | (jnp.abs(x) > threshold)) for x in leaves]
        )
    )


def _state_entries(model: MembraneModel, y: State):
    """`(label, compartment indices, values, mechanism name)` of every state."""
    out = [("v", np.arange(model.n_compartments), np.asarray(y.v), None)]
    # Every group's states, located at their compartments (synapses: the
    # postsynaptic one).
    for group, states in zip(model.groups, y.groups):
        comps = np.asarray(group.compartments)
        for state, val in states.items():
            out.append((f"{group.label}.{state}", comps, np.asarray(val), group.name))
    return out


def _mech_name(mech) -> str:
    if isinstance(mech, ProbedMechanism):
        mech = mech.inner
    return type(mech).__name__


def _first_bad_state(model, y, threshold):
    """The first bad state (voltage before gates); within it the first
    non-finite compartment, else the one furthest above the threshold."""
    for label, idx, val, mech in _state_entries(model, y):
        bad = _bad_np(val, threshold)
        if np.any(bad):
            nonfinite = ~np.isfinite(val)
            if np.any(nonfinite):
                j = int(np.argmax(nonfinite))
            else:
                j = int(np.argmax(np.where(bad, np.abs(val), -np.inf)))
            return label, int(idx[j]), float(val[j]), mech
    # Any other state (e.g. synapse states): named by its path in the State.
    for path, val in jax.tree_util.tree_flatten_with_path(y)[0]:
        name = jax.tree_util.keystr(tuple(path)).lstrip(".")
        if name.startswith(("v", "groups")) or not eqx.is_inexact_array(val):
            continue
        val = np.asarray(val).ravel()
        bad = _bad_np(val, threshold)
        if np.any(bad):
            j = int(np.argmax(bad))
            return f"{name}[{j}]", None, float(val[j]), None
    return None


def _params_at(mech, j: int, n: int) -> dict[str, float]:
    """Floating fields of a mechanism at its `j`-th compartment."""
    out = {}
    for f in dataclasses.fields(mech):
        x = getattr(mech, f.name)
        if eqx.is_inexact_array(x) and x.shape == (n,):
            out[f.name] = float(x[j])
    return out


def _probed(model: MembraneModel, solver, record):
    groups = tuple(
        dataclasses.replace(
            group,
            mechanism=ProbedMechanism(inner=group.mechanism, group=i, record=record),
        )
        for i, group in enumerate(model.mechanisms)
    )
    synapses = tuple(
        dataclasses.replace(
            group, synapse=ProbedSynapse(inner=group.synapse, group=i, record=record)
        )
        for i, group in enumerate(model.synapses)
    )
    pmodel = dataclasses.replace(model, mechanisms=groups, synapses=synapses)
    return pmodel, _probed_solver(model, solver, record)


def _probed_solver(model: MembraneModel, solver, record):
    """`solver` with its linear solver probed (inside the events' wrapper)."""
    if isinstance(solver, EventSteps):
        return dataclasses.replace(
            solver, solver=_probed_solver(model, solver.solver, record)
        )
    if isinstance(solver, AbstractVoltageSolver):
        return dataclasses.replace(
            solver,
            linear_solver=ProbedLinearSolver(
                inner=solver.linear_solver or model.coupling.default_solver(),
                record=record,
            ),
        )
    return solver


def _step(solver, model, t0, t1, y, ss):
    y1, _, _, ss1, result = solver.step(
        MembraneTerm(model), t0, t1, y, None, ss, jnp.asarray(False)
    )
    return y1, ss1, result


@eqx.filter_jit
def _search(solver, model, ts, y0, ss0, threshold):
    n = ts.shape[0] - 1

    def cond(c):
        k, _, _, bad = c
        return (k < n) & ~bad

    def body(c):
        k, y, ss, _ = c
        y1, ss1, _ = _step(solver, model, ts[k], ts[k + 1], y, ss)
        bad = _bad_jnp(y1, threshold)
        keep = lambda a, b: jnp.where(bad, a, b)  # noqa: E731
        y_next = jax.tree_util.tree_map(keep, y, y1)
        ss_next = jax.tree_util.tree_map(keep, ss, ss1)
        return jnp.where(bad, k, k + 1), y_next, ss_next, bad

    return jax.lax.while_loop(cond, body, (jnp.asarray(0), y0, ss0, jnp.asarray(False)))


def _name_leaf(model: MembraneModel, path, j: int) -> tuple[str, int | None]:
    """A readable name for the model leaf at `path`, element `j`, and its
    compartment (where the leaf is per-compartment)."""
    keys = [
        getattr(k, "name", getattr(k, "idx", getattr(k, "key", None))) for k in path
    ]
    if len(keys) >= 4 and keys[0] == "mechanisms" and keys[2] == "mechanism":
        group = model.mechanisms[keys[1]]
        comp = int(np.asarray(group.index)[j])
        return f"{_mech_name(group.mechanism)}.{keys[3]}", comp
    name = jax.tree_util.keystr(tuple(path)).lstrip(".")
    if name in ("area", "diameter", "length", "capacitance", "v_init"):
        return name, j
    return f"{name}[{j}]", None
