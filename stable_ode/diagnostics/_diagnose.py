"""Diagnose mode: find the first non-finite value of a solve and name its cause.

What Aesara's NanGuardMode does for graphs, for ODE solves. `diagnose` integrates
the model on the same fixed-step grid with the same solver steps as
`stable_ode.simulate` (one jitted `lax.while_loop` that checks every new state and
stops at the first bad one), then re-runs only that step with instrumented
mechanisms and linear solver (`jax.debug.callback`) and reports the first function
whose inputs were finite and whose outputs were not. With a `loss` it also runs
the backward pass step by step (one jitted reverse `lax.scan` of per-step VJPs)
and names the first non-finite cotangent. Nothing here touches `simulate`: when
you do not call `diagnose`, it costs nothing.
"""

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._model import MembraneModel, State
from .._simulate import _grid
from .._solver import BackwardEuler
from .._term import MembraneTerm
from ._probes import (
    kinetics_function,
    kinetics_values,
    ProbedLinearSolver,
    ProbedMechanism,
    ProbedSynapse,
    Recorder,
)


@dataclasses.dataclass
class Diagnosis:
    """The result of `diagnose`. `str(diagnosis)` is a readable report.

    **Fields:**

    - `found`: whether a bad value was found (all other fields are `None` / empty
      otherwise).
    - `direction`: `"forward"` (the solve) or `"backward"` (the gradient).
    - `kind`: `"non-finite"` or `"above threshold"`.
    - `step`, `t0`, `t1`: index and time interval (ms) of the step that produced it
      (`step = -1` for the initial state).
    - `state`: the state that went bad (`"v"` or `"<Mechanism>.<gate>"`), or, going
      backward, the cotangent that went bad (`"d loss/d <state or parameter>"`).
    - `compartment`, `location`: the compartment index and `"cell 'c', section
      's', compartment i"`.
    - `value`: the bad value.
    - `stage`: what produced it: `"parameters"`, `"initial state"`, `"stimulus"`,
      `"kinetics"`, `"current"`, `"linearisation"`, `"linear solve"`, `"synapse
      kinetics"`, `"synapse current"`, `"voltage update"`, `"state update"`,
      `"loss"` or `"derivative of ..."` (backward).
    - `mechanism`: the mechanism's class name, where one is to blame.
    - `function`: the function, e.g. `"MyChannel.kinetics"`.
    - `inputs`, `outputs`: that function's inputs and outputs at the culprit
      compartment at that moment (e.g. `{"v": -212.3, "m": 0.01}`), as floats.
    - `culprit_location`: the compartment where that function went bad.
    - `parameter`: going backward, the parameter whose cotangent went bad.
    - `n_steps`: steps checked.
    - `notes`: further remarks.
    - `gradient`: with a `loss`, its gradient with respect to the model (as
      `jax.grad` of a `simulate`-based loss gives), else `None`.
    """

    found: bool
    direction: str = "forward"
    kind: str | None = None
    step: int | None = None
    t0: float | None = None
    t1: float | None = None
    state: str | None = None
    compartment: int | None = None
    location: str | None = None
    value: float | None = None
    stage: str | None = None
    mechanism: str | None = None
    function: str | None = None
    inputs: dict[str, float] = dataclasses.field(default_factory=dict)
    outputs: dict[str, float] = dataclasses.field(default_factory=dict)
    culprit_location: str | None = None
    parameter: str | None = None
    n_steps: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)
    gradient: Any = dataclasses.field(default=None, repr=False)

    def __str__(self) -> str:
        if not self.found:
            lines = [f"no non-finite value: checked {self.n_steps} steps forward"]
            if self.gradient is not None:
                lines[0] += " and every cotangent of the backward pass"
            return "\n".join(lines + [f"note: {n}" for n in self.notes])
        when = (
            "in the initial state"
            if self.step == -1
            else f"at step {self.step} (t = {self.t0:g} -> {self.t1:g} ms)"
        )
        lines = [f"first {self.kind} value ({self.direction} pass) {when}"]
        if self.state is not None:
            where = f" at {self.location}" if self.location else ""
            val = "" if self.value is None else f" = {self.value:g}"
            lines.append(f"  state:     {self.state}{where}{val}")
        if self.parameter is not None:
            lines.append(f"  parameter: {self.parameter}")
        lines.append(
            f"  produced by: {self.stage}"
            + (f" ({self.function})" if self.function else "")
        )
        if self.mechanism:
            lines.append(f"  mechanism: {self.mechanism}")
        if self.culprit_location and self.culprit_location != self.location:
            lines.append(f"  where:     {self.culprit_location}")
        if self.inputs:
            lines.append("  inputs:    " + _fmt(self.inputs))
        if self.outputs:
            lines.append("  outputs:   " + _fmt(self.outputs))
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _fmt(d: dict[str, float]) -> str:
    return ", ".join(f"{k} = {v:.6g}" for k, v in d.items())


# ------------------------------------------------------------------ helpers


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
    psolver = solver
    names = (
        {f.name for f in dataclasses.fields(solver)}
        if dataclasses.is_dataclass(solver)
        else set()
    )
    if "linear_solver" in names:
        psolver = dataclasses.replace(
            solver,
            linear_solver=ProbedLinearSolver(
                inner=solver.linear_solver or model.coupling.default_solver(),
                record=record,
            ),
        )
    return pmodel, psolver


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


# ------------------------------------------------------------ forward pass


def _check_parameters(model: MembraneModel) -> Diagnosis | None:
    leaves = jax.tree_util.tree_flatten_with_path(model)[0]
    for path, x in leaves:
        if eqx.is_inexact_array(x) and not np.all(np.isfinite(np.asarray(x))):
            j = int(np.argmax(~np.isfinite(np.asarray(x)).ravel()))
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
                notes=["a model parameter is non-finite before any step is taken"],
            )
    return None


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


def _culprit_from_records(model, records, threshold) -> Diagnosis | None:
    """A recorded call with finite inputs and non-finite outputs (or, for a
    current, a non-finite derivative): the origin of the bad value.

    Callbacks are unordered under `jit`, so records are taken in data-flow order:
    kinetics, then currents (and their linearisation), then the linear solve.
    Any call with finite inputs and non-finite outputs is a true origin."""
    priority = {
        "kinetics": 0,
        "synapse kinetics": 0,
        "current": 1,
        "synapse current": 1,
        "linear solve": 2,
    }
    records = sorted(records, key=lambda r: (priority[r["kind"]], r["group"]))
    for rec in records:
        ins, outs = rec["inputs"], rec["outputs"]
        bad_in = np.zeros(np.shape(next(iter(ins.values()))), bool)
        for x in ins.values():
            bad_in |= _bad_np(x, np.inf)
        if rec["kind"] == "linear solve":
            bad = _bad_np(outs["solution"], np.inf) & ~bad_in
            if np.any(bad):
                # Back from the operator's ordering to compartments.
                back = lambda x: np.asarray(
                    model.coupling.from_operator_order(jnp.asarray(x))
                )  # noqa: E731
                sol = back(outs["solution"])
                comp = int(np.argmax(_bad_np(sol, np.inf)))
                inputs = {
                    f"{k} [{u}]": float(back(ins[k])[comp])
                    for k, u in (("diagonal", "S"), ("rhs", "mA"))
                    if k in ins
                }
                return Diagnosis(
                    found=True,
                    stage="linear solve",
                    function="voltage system solve (lineax)",
                    inputs=inputs,
                    outputs={"dv [mV]": float(sol[comp])},
                    culprit_location=None
                    if comp is None
                    else model.layout.describe(comp),
                )
            continue
        if rec["kind"].startswith("synapse"):
            culprit = _synapse_culprit(model, rec, bad_in)
            if culprit is not None:
                return culprit
            continue
        group = model.mechanisms[rec["group"]]
        mech = group.mechanism.inner
        name = type(mech).__name__
        n = int(group.index.shape[0])
        bad_out = np.zeros(n, bool)
        for x in outs.values():
            bad_out |= _bad_np(x, np.inf)
        bad = bad_out & ~bad_in
        is_kinetics = rec["kind"] == "kinetics"
        stage = "kinetics" if is_kinetics else "current"
        func = kinetics_function(mech) if is_kinetics else f"{name}.current"
        if not np.any(bad) and rec["kind"] == "current":
            # The implicit solvers linearise the current (jax.jvp): check it.
            v = jnp.asarray(ins["v"])
            states = {k: jnp.asarray(x) for k, x in ins.items() if k != "v"}
            env = group.environment(model)
            _, di = jax.jvp(
                lambda u, mech=mech, states=states, env=env: mech.current(
                    u, states, env
                ),
                (v,),
                (jnp.ones_like(v),),
            )
            bad = _bad_np(di, np.inf) & ~bad_in
            if np.any(bad):
                stage, func = "linearisation", f"jax.jvp of {name}.current"
                outs = dict(outs, **{"di/dv": np.asarray(di)})
        if np.any(bad):
            j = int(np.argmax(bad))
            comp = int(np.asarray(group.index)[j])
            inputs = {k: float(x[j]) for k, x in ins.items()}
            if is_kinetics:
                inputs["celsius"] = float(model.celsius)
            else:
                inputs.update(_params_at(mech, j, n))
            return Diagnosis(
                found=True,
                stage=stage,
                mechanism=name,
                function=func,
                inputs=inputs,
                outputs={k: float(x[j]) for k, x in outs.items()},
                culprit_location=None if comp is None else model.layout.describe(comp),
            )
    return None


def _synapse_culprit(model, rec, bad_in) -> Diagnosis | None:
    """A synapse call with finite inputs and non-finite outputs (or, for its
    current, a non-finite derivative in `v_post`)."""
    group = model.synapses[rec["group"]]
    syn = group.synapse.inner
    ins, outs = rec["inputs"], rec["outputs"]
    bad = np.zeros(np.shape(bad_in), bool)
    for x in outs.values():
        bad |= _bad_np(x, np.inf)
    bad &= ~bad_in
    is_kinetics = rec["kind"] == "synapse kinetics"
    stage = "synapse kinetics" if is_kinetics else "synapse current"
    func = kinetics_function(syn) if is_kinetics else f"{type(syn).__name__}.current"
    if not np.any(bad) and not is_kinetics:
        v = jnp.asarray(ins["v_post"])
        states = {k: jnp.asarray(x) for k, x in ins.items() if k != "v_post"}
        env = group.environment(model)
        _, di = jax.jvp(
            lambda u: syn.current(u, states, env), (v,), (jnp.ones_like(v),)
        )
        bad = _bad_np(di, np.inf) & ~bad_in
        if np.any(bad):
            stage, func = "linearisation", f"jax.jvp of {type(syn).__name__}.current"
            outs = dict(outs, **{"di/dv": np.asarray(di)})
    if not np.any(bad):
        return None
    j = int(np.argmax(bad))
    pre, post = int(group.pre[j]), int(group.post[j])
    inputs = {k: float(x[j]) for k, x in ins.items()}
    inputs.update(_params_at(syn, j, int(group.pre.shape[0])))
    return Diagnosis(
        found=True,
        stage=stage,
        mechanism=f"synapse group {group.name!r} #{j}",
        function=func,
        inputs=inputs,
        outputs={k: float(x[j]) for k, x in outs.items()},
        culprit_location=(
            f"{model.layout.describe(pre)} -> {model.layout.describe(post)}"
        ),
    )


def _explain_step(model, solver, ts, k, y, ss, threshold, kind) -> Diagnosis:
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
        kind=kind,
        step=int(k),
        t0=float(t0),
        t1=float(t1),
        state=label,
        compartment=comp,
        location=None if comp is None else model.layout.describe(comp),
        value=value,
        notes=notes,
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
    culprit = _culprit_from_records(pmodel, rec.records, threshold)
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
    )


def _explain_initial(model, y0, threshold, kind) -> Diagnosis:
    rec = Recorder()
    pmodel, _ = _probed(model, BackwardEuler(), rec.add)
    pmodel.init_state()
    jax.effects_barrier()
    label, comp, value, mech = _first_bad_state(model, y0, threshold)
    base = dict(
        found=True,
        kind=kind,
        step=-1,
        state=label,
        compartment=comp,
        location=None if comp is None else model.layout.describe(comp),
        value=value,
    )
    culprit = _culprit_from_records(pmodel, rec.records, threshold)
    if culprit is not None:
        culprit = dataclasses.replace(culprit, **base)
        culprit.notes.append("initial states at v_init (init_states)")
        return culprit
    return Diagnosis(
        **base,
        stage="initial state",
        mechanism=mech,
        inputs={"v_init [mV]": float(model.v_init[comp])},
    )


# ----------------------------------------------------------- backward pass


def _recordings(model, ys: State):
    recs = model.layout.recordings
    if not recs:
        return {"v": ys.v}
    return {name: ys.v[:, i] for name, i in recs}


def _backward(model, solver, ts, y0_given, loss, n) -> Diagnosis:
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def init(p):
        m = eqx.combine(p, static)
        return m.init_state() if y0_given is None else y0_given

    def step(p, y, k, ss):
        return _step(solver, eqx.combine(p, static), ts[k], ts[k + 1], y, ss)[:2]

    @jax.jit
    def forward(p):
        y0 = init(p)
        ss0 = solver.init(MembraneTerm(eqx.combine(p, static)), ts[0], ts[1], y0, None)

        def body(c, k):
            y, ss = c
            y1, ss1 = step(p, y, k, ss)
            return (y1, ss1), (y, ss)

        (yn, _), (ys, sss) = jax.lax.scan(body, (y0, ss0), jnp.arange(n))
        ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b[None]]), ys, yn)
        return ys, sss

    ys, sss = forward(params)

    def loss_of(ys):
        return loss(_recordings(model, ys))

    ct_ys = jax.grad(loss_of)(ys)
    take = lambda tree, k: jax.tree_util.tree_map(lambda a: a[k], tree)  # noqa: E731
    bad_loss = [
        bool(np.any(_bad_np(x, np.inf))) for x in jax.tree_util.tree_leaves(ct_ys)
    ]
    if any(bad_loss):
        v = np.asarray(ct_ys.v)
        bad = _bad_np(v, np.inf)
        k, c = (int(a[0]) for a in np.nonzero(bad)) if np.any(bad) else (0, 0)
        return Diagnosis(
            found=True,
            direction="backward",
            kind="non-finite",
            step=k,
            t0=float(ts[k]),
            t1=float(ts[k]),
            state="d loss/d v",
            compartment=c,
            location=model.layout.describe(c),
            value=float(v[k, c]),
            stage="loss",
            function="the loss function",
            inputs={"v [mV]": float(ys.v[k, c])},
            n_steps=n,
        )

    @jax.jit
    def backward(p, ys, sss, ct_ys):
        def body(carry, k):
            ct_next, acc = carry
            ct = jax.tree_util.tree_map(jnp.add, ct_next, take(ct_ys, k + 1))
            # Once a cotangent is bad, stop feeding it on (lineax's transposed
            # solve raises on non-finite input): only the first bad step matters.
            ok = ~_bad_jnp(ct, jnp.inf)
            ct = jax.tree_util.tree_map(
                lambda a: jnp.where(ok, a, jnp.zeros_like(a)), ct
            )
            _, vjp = jax.vjp(
                lambda p, y: step(p, y, k, take(sss, k))[0], p, take(ys, k)
            )
            ct_p, ct_y = vjp(ct)
            flags = (_bad_jnp(ct_y, jnp.inf) | ~ok, _bad_jnp(ct_p, jnp.inf))
            acc = jax.tree_util.tree_map(jnp.add, acc, ct_p)
            return (ct_y, acc), flags

        zero_y = jax.tree_util.tree_map(jnp.zeros_like, take(ys, 0))
        zero_p = jax.tree_util.tree_map(jnp.zeros_like, p)
        (ct_y0, acc), flags = jax.lax.scan(
            body, (zero_y, zero_p), jnp.arange(n - 1, -1, -1)
        )
        ct_y0 = jax.tree_util.tree_map(jnp.add, ct_y0, take(ct_ys, 0))
        _, vjp0 = jax.vjp(init, p)
        (ct_init,) = vjp0(ct_y0)
        return acc, ct_init, flags

    acc, ct_init, (flag_y, flag_p) = backward(params, ys, sss, ct_ys)
    flag = np.asarray(flag_y) | np.asarray(flag_p)  # in reverse step order
    grad = jax.tree_util.tree_map(jnp.add, acc, ct_init)
    if not np.any(flag):
        if any(np.any(_bad_np(x, np.inf)) for x in jax.tree_util.tree_leaves(ct_init)):
            return _name_cotangent(model, ct_init, None, -1, ts, n, "init_states")
        return Diagnosis(found=False, n_steps=n, gradient=grad)
    r = int(np.argmax(flag))
    k = n - 1 - r
    # Re-run that step's VJP to name the cotangent and the function.
    ct_next = jax.tree_util.tree_map(jnp.zeros_like, take(ys, 0))
    if r > 0:
        # cotangent flowing into step k: recompute the suffix (cheap, finite).
        def suffix(p):
            def body(ct, kk):
                ct = jax.tree_util.tree_map(jnp.add, ct, take(ct_ys, kk + 1))
                _, vjp = jax.vjp(
                    lambda y: step(p, y, kk, take(sss, kk))[0], take(ys, kk)
                )
                return vjp(ct)[0], None

            return jax.lax.scan(body, ct_next, jnp.arange(n - 1, k, -1))[0]

        ct_next = jax.jit(suffix)(params)
    ct = jax.tree_util.tree_map(jnp.add, ct_next, take(ct_ys, k + 1))
    _, vjp = jax.vjp(lambda p, y: step(p, y, k, take(sss, k))[0], params, take(ys, k))
    ct_p, ct_y = vjp(ct)
    d = _name_cotangent(model, ct_p, ct_y, k, ts, n, None)
    blame = _blame_derivative(model, take(ys, k), take(ys, k + 1))
    if blame is not None:
        d.stage, d.mechanism, d.function, d.inputs, d.culprit_location = blame
    return d


def _name_cotangent(model, ct_p, ct_y, k, ts, n, stage) -> Diagnosis:
    state = parameter = location = None
    comp = value = None
    if ct_y is not None:
        found = _first_bad_state(model, ct_y, np.inf)
        if found is not None:
            label, comp, value, _ = found
            state = f"d loss/d {label}"
    for path, x in jax.tree_util.tree_flatten_with_path(ct_p)[0]:
        bad = _bad_np(x, np.inf).ravel()
        if np.any(bad):
            j = int(np.argmax(bad))
            parameter, pcomp = _name_leaf(model, path, j)
            if pcomp is not None:
                parameter += f" at {model.layout.describe(pcomp)}"
            if value is None:
                value = float(np.asarray(x).ravel()[j])
            break
    if comp is not None:
        location = model.layout.describe(comp)
    return Diagnosis(
        found=True,
        direction="backward",
        kind="non-finite",
        step=k,
        t0=float(ts[max(k, 0)]),
        t1=float(ts[k + 1]) if k >= 0 else float(ts[0]),
        state=state,
        parameter=parameter,
        compartment=comp,
        location=location,
        value=value,
        stage=stage or "backward step",
        function=None,
        n_steps=n,
    )


def _blame_derivative(model: MembraneModel, y0: State, y1: State):
    """The first mechanism function whose derivative (what the backward pass
    multiplies cotangents by) is non-finite at the step's states."""
    n_mech = len(model.mechanisms)
    for y in (y0, y1):
        for group, gates in zip(model.mechanisms, y.groups[:n_mech], strict=True):
            mech = group.mechanism
            name = type(mech).__name__
            n = int(group.index.shape[0])
            v = y.v[group.index]
            env = group.environment(model)

            def kin(m, v, s, env=env):
                return kinetics_values(m.kinetics(v, s, env), s)

            def cur(m, v, s, env=env):
                return m.current(v, s, env)

            def lin(m, v, s, env=env):
                return jax.jvp(
                    lambda u: m.current(u, s, env), (v,), (jnp.ones_like(v),)
                )[1]

            checks = [
                ("kinetics", kinetics_function(mech), (kin, mech, v, gates)),
                ("current", f"{name}.current", (cur, mech, v, gates)),
                ("linearisation", f"jax.jvp of {name}.current", (lin, mech, v, gates)),
            ]
            for stage, func, (fn, *args) in checks:
                out, vjp = jax.vjp(fn, *args)
                cts = vjp(jax.tree_util.tree_map(jnp.ones_like, out))
                bad = np.zeros(n, bool)
                for x in jax.tree_util.tree_leaves(cts):
                    x = np.asarray(x)
                    if x.shape == (n,):
                        bad |= _bad_np(x, np.inf)
                    elif np.any(_bad_np(x, np.inf)):
                        bad |= True
                if np.any(bad):
                    j = int(np.argmax(bad))
                    comp = int(np.asarray(group.index)[j])
                    inputs = {
                        "v": float(v[j]),
                        **{g: float(x[j]) for g, x in gates.items()},
                    }
                    inputs.update(_params_at(mech, j, n))
                    return (
                        f"derivative of {stage}",
                        name,
                        func,
                        inputs,
                        model.layout.describe(comp),
                    )
    return None


# --------------------------------------------------------------- entry points


def diagnose(
    model: MembraneModel,
    t1: float,
    dt: float,
    *,
    solver: dfx.AbstractSolver = BackwardEuler(),  # noqa: B008 (immutable Module)
    threshold: float | None = None,
    t0: float = 0.0,
    y0: State | None = None,
    loss: Callable[[dict[str, jax.Array]], jax.Array] | None = None,
) -> Diagnosis:
    """Run `model` as `stable_ode.simulate` does (fixed steps of `dt` on the grid
    `t0 + k·dt`) and report the first bad value and what produced it.

    A value is bad if it is non-finite, or (with `threshold`) if a state's
    magnitude exceeds `threshold` (in practice the voltage, in mV). The report
    names the step and time, the state and compartment (cell, section, index),
    and the first function in that step whose inputs were finite and whose
    outputs were not — a mechanism's kinetics or current, the linearisation of
    the current (`jax.jvp`), the voltage linear solve, the stimulus — with its
    inputs at that moment; or, if every function's output was finite, the
    solver's voltage or state update with the values that fed it. It works for any
    mechanism, including users' own, without changes to them.

    With `loss`, and a healthy forward pass, it then runs the backward pass one
    step at a time (a reverse scan of per-step VJPs, the same arithmetic as
    `jax.grad` through `simulate`) and reports the first non-finite cotangent:
    the step, the state or parameter (e.g. `"MyChannel.gbar at cell 'c', section
    'soma', compartment 0"`) and the mechanism function whose derivative is
    non-finite.

    **Arguments:**

    - `model`: a `MembraneModel`.
    - `t1`: end time, ms; `t0`: start time, ms (default 0).
    - `dt`: the fixed step, ms (must divide `t1 - t0`).
    - `solver`: a solver of this package or any diffrax solver whose `step`
      takes a `MembraneTerm` (default `BackwardEuler()`).
    - `threshold`: optional bound on `|state|`.
    - `y0`: initial `State` (default `model.init_state()`).
    - `loss`: optional scalar function of the recordings (a dict like
      `simulate(...).recordings` with `save_dt = dt`) to diagnose the gradient of.

    **Returns:** a `Diagnosis` (`found=False` for a healthy model; `str()` it for
    a report).

    Costs nothing when not called: `simulate` is untouched.
    """
    t0, t1, dt = float(t0), float(t1), float(dt)
    if not dt > 0:
        raise ValueError(f"dt must be > 0 ms, got {dt}")
    if not t1 > t0:
        raise ValueError(f"t1 ({t1}) must be > t0 ({t0})")
    n = _grid(t0, t1, dt, "dt")
    kind = "non-finite" if threshold is None else "non-finite or above threshold"
    thr = np.inf if threshold is None else float(threshold)
    ts = t0 + dt * jnp.arange(n + 1, dtype=model.dtype)

    bad_params = _check_parameters(model)
    if bad_params is not None:
        bad_params.n_steps = 0
        return bad_params
    y_init = model.init_state() if y0 is None else y0
    if _first_bad_state(model, y_init, thr) is not None:
        d = _explain_initial(model, y_init, thr, kind)
        d.n_steps = 0
        return d
    ss0 = solver.init(MembraneTerm(model), ts[0], ts[1], y_init, None)
    k, y, ss, bad = _search(
        solver, model, ts, y_init, ss0, jnp.asarray(thr, model.dtype)
    )
    if bool(bad):
        d = _explain_step(model, solver, ts, int(k), y, ss, thr, kind)
        if threshold is not None:
            d.kind = "non-finite" if not np.isfinite(d.value) else "above threshold"
        d.n_steps = int(k) + 1
        return d
    if loss is not None:
        return _backward(model, solver, ts, y0, loss, n)
    return Diagnosis(found=False, n_steps=n)


def diagnose_spec(loaded, threshold: float | None = None) -> Diagnosis:
    """`diagnose` for a loaded model file (`stable_ode.load_spec`): the model,
    `t_stop`, `dt` and `solver` of the file. An adaptive controller in the file
    is replaced by fixed steps of `dt` (noted in the report).

    **Arguments:** `loaded`: an object with attributes `model`, `t_stop`, `dt`
    and `solver`; `threshold`: as for `diagnose`.

    **Returns:** a `Diagnosis`.
    """
    d = diagnose(
        loaded.model,
        loaded.t_stop,
        loaded.dt,
        solver=loaded.solver,
        threshold=threshold,
    )
    if getattr(loaded, "controller", None) is not None:
        d.notes.append(
            "the file asks for an adaptive controller; diagnose ran fixed steps "
            f"of dt = {loaded.dt} ms"
        )
    return d
