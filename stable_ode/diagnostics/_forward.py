"""The forward search of `diagnose`: the parameters, the initial state, and a
re-run of the first bad step with probed mechanisms and linear solver."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._model import MembraneModel
from .._solver import BackwardEuler
from ..events._groups import AbstractPointProcessGroup
from ..events._stepping import EventSteps
from ._common import (
    _bad_np,
    _first_bad_state,
    _name_leaf,
    _probed,
    _step,
)
from ._culprit import _culprit_from_records
from ._nmodl_source import first_bad_statement, state_line
from ._probes import Recorder
from ._report import Diagnosis, Kind, Stage


def _padded(path) -> bool:
    """Whether the model leaf at `path` is padded with `+inf` (the spike
    times of a point-process group's `Arrivals`)."""
    keys = [getattr(k, "name", None) for k in path]
    return keys[-2:] == ["arrivals", "spike"]


def _check_parameters(model: MembraneModel) -> Diagnosis | None:
    leaves = jax.tree_util.tree_flatten_with_path(model)[0]
    for path, x in leaves:
        if not eqx.is_inexact_array(x):
            continue
        x = np.asarray(x)
        bad = ~np.isfinite(x)
        if _padded(path):
            bad = bad & (x != np.inf)
        if np.any(bad):
            j = int(np.argmax(bad.ravel()))
            name, comp = _name_leaf(model, path, j)
            return Diagnosis(
                found=True,
                kind="non-finite",
                step=-1,
                stage="parameters",
                parameter=name,
                value=float(np.asarray(x).ravel()[j]),
                compartment=comp,
                location=None if comp is None else model.layout.describe(comp),
                notes=("a model parameter is non-finite before any step is taken",),
            )
    return None


def _kind(value: float) -> Kind:
    return Kind.NONFINITE if not np.isfinite(value) else Kind.ABOVE_THRESHOLD


def _explain_step(model, solver, ts, k, y, ss, threshold) -> Diagnosis:
    t0, t1 = ts[k], ts[k + 1]
    rec = Recorder()
    pmodel, psolver = _probed(model, solver, rec.add)
    y1, _, _ = eqx.filter_jit(_step)(psolver, pmodel, t0, t1, y, ss)
    jax.effects_barrier()
    found = _first_bad_state(model, y1, threshold)
    notes = []
    if found is None:
        notes.append(
            "re-running the step alone did not reproduce the bad value; the report "
            "is for the state found by the jitted search"
        )
        y1, _, _ = eqx.filter_jit(_step)(solver, model, t0, t1, y, ss)
        found = _first_bad_state(model, y1, threshold)
    label, comp, value, mech = found
    base = dict(
        found=True,
        kind=_kind(value),
        step=int(k),
        t0=float(t0),
        t1=float(t1),
        state=label,
        compartment=comp,
        location=None if comp is None else model.layout.describe(comp),
        value=value,
        notes=tuple(notes),
    )
    # Stimulus: the solvers sample it inside [t0, t1].
    for t in (t0, 0.5 * (t0 + t1), t1):
        s = np.asarray(model.stimulus_density(t))
        if np.any(_bad_np(s, np.inf)):
            c = int(np.argmax(_bad_np(s, np.inf)))
            return Diagnosis(
                **base,
                stage="stimulus",
                function="MembraneModel.stimulus_density",
                inputs={"t [ms]": float(t)},
                outputs={"stimulus [mA/cm2]": float(s[c])},
                culprit_location=model.layout.describe(c),
            )
    if isinstance(solver, EventSteps):
        # the point processes' states as the step starts from them
        y_in = solver.before(model, t0, t1, y, ss)
        delivered = _bad_delivery(model, y, y_in, base)
        if delivered is not None:
            return delivered
        y = y_in
    culprit = _culprit_from_records(pmodel, rec.records, threshold)
    if culprit is not None:
        return dataclasses.replace(culprit, **base)
    culprit = _point_process_culprit(model, y)
    if culprit is not None:
        return dataclasses.replace(culprit, **base)
    # No function produced a non-finite value: the state update did.
    if comp is None:  # a state outside v and the groups' states
        return Diagnosis(
            **base,
            stage="state update",
            function=f"{type(solver).__name__}.step",
            inputs={"dt [ms]": float(t1 - t0)},
        )
    inputs = {"dt [ms]": float(t1 - t0), "v0 [mV]": float(y.v[comp])}
    for group, states in zip(model.groups, y.groups):
        where = np.nonzero(np.asarray(group.compartments) == comp)[0]
        if where.size:
            j = int(where[0])
            for g, x in states.items():
                inputs[f"{group.label}.{g}"] = float(x[j])
            i = group.add_current(model, jnp.zeros_like(y.v), y.v, states)
            unit = "nA" if group.point_current else "mA/cm2"
            inputs[f"{group.label} current [{unit}]"] = float(i[comp])
    inputs["stimulus [mA/cm2]"] = float(model.stimulus_density(0.5 * (t0 + t1))[comp])
    stage = "voltage update" if label == "v" else "state update"
    return Diagnosis(
        **base,
        stage=stage,
        mechanism=mech,
        function=f"{type(solver).__name__}.step",
        inputs=inputs,
        culprit_location=None if comp is None else model.layout.describe(comp),
        source=None if label == "v" else state_line(model, label),
    )


def _bad_delivery(model, y, y_in, base) -> Diagnosis | None:
    """A point process whose states were finite at the step's start and
    are not once the arrivals and its other inputs before the step were
    applied (`EventSteps.before`): the event delivery produced the bad
    value."""
    for group, x0, x1 in zip(model.groups, y.groups, y_in.groups):
        if not isinstance(group, AbstractPointProcessGroup):
            continue
        for name, value in x1.items():
            bad = ~np.isfinite(np.asarray(value))
            if not np.any(bad) or not np.all(np.isfinite(np.asarray(x0[name]))):
                continue
            j = int(np.argmax(bad))
            comp = int(np.asarray(group.compartments)[j])
            inputs = {
                f"{group.label}.{k}": float(np.asarray(v)[j]) for k, v in x0.items()
            }
            return Diagnosis(
                **{
                    **base,
                    "notes": base["notes"]
                    + (
                        "the point process's state at the step's start is finite; "
                        "the events delivered to it before and inside the step "
                        "(NetCon weights, arrival times) made it non-finite",
                    ),
                },
                stage="event delivery",
                function=f"{type(group).__name__}.before_step",
                inputs=inputs,
                outputs={f"{group.label}.{name}": float(np.asarray(value)[j])},
                culprit_location=model.layout.describe(comp),
            )
    return None


def _point_process_culprit(model, y) -> Diagnosis | None:
    """A point process whose kinetics or current, evaluated eagerly at the
    step's start `y` (after the events' hooks), is non-finite for an entry
    whose states and voltage are finite; for one imported from NMODL, with
    the `.mod` line of the statement that went non-finite."""
    for group, states in zip(model.groups, y.groups):
        if not isinstance(group, AbstractPointProcessGroup):
            continue
        index = np.asarray(group.compartments)
        n = index.shape[0]
        ok = np.isfinite(np.asarray(y.v))[index]
        for x in states.values():
            x = np.asarray(x)
            if x.shape[:1] == (n,):
                ok = ok & np.all(np.isfinite(x.reshape(n, -1)), axis=1)
        calls = [
            (
                Stage.KINETICS,
                "kinetics",
                lambda g=group, x=states: g.kinetics(model, y.v, x),
            ),
            (
                Stage.CURRENT,
                "current",
                lambda g=group, x=states: g.current(model, y.v, x),
            ),
        ]
        for stage, fn, call in calls:
            out = call()
            bad = np.zeros(n, bool)
            for leaf in jax.tree_util.tree_leaves(out):
                leaf = np.asarray(leaf)
                if leaf.shape[:1] == (n,) and leaf.dtype.kind == "f":
                    bad |= ~np.all(np.isfinite(leaf.reshape(n, -1)), axis=1)
            bad &= ok
            if not np.any(bad):
                continue
            j = int(np.argmax(bad))
            comp = int(index[j])
            inputs = {"v [mV]": float(y.v[comp])}
            inputs |= {
                f"{group.label}.{k}": float(np.asarray(x)[j]) for k, x in states.items()
            }
            outputs = {}
            if fn == "current":
                outputs[f"{group.label} current [nA]"] = float(np.asarray(out)[j])
            return Diagnosis(
                found=True,
                stage=stage,
                function=f"{type(group).__name__}.{fn}",
                inputs=inputs,
                outputs=outputs,
                culprit_location=model.layout.describe(comp),
                source=first_bad_statement(group, call, j, n),
            )
    return None


def _explain_initial(model, y0, threshold) -> Diagnosis:
    rec = Recorder()
    pmodel, _ = _probed(model, BackwardEuler(), rec.add)
    pmodel.init_state()
    jax.effects_barrier()
    label, comp, value, mech = _first_bad_state(model, y0, threshold)
    base = dict(
        found=True,
        kind=_kind(value),
        step=-1,
        state=label,
        compartment=comp,
        location=None if comp is None else model.layout.describe(comp),
        value=value,
    )
    culprit = _culprit_from_records(pmodel, rec.records, threshold)
    if culprit is not None:
        notes = culprit.notes + ("initial states at v_init (init_states)",)
        return dataclasses.replace(culprit, **base, notes=notes)
    return Diagnosis(
        **base,
        stage="initial state",
        mechanism=mech,
        inputs={"v_init [mV]": float(model.v_init[comp])},
    )
