"""The culprit of a bad step: the first recorded call (kinetics, current, its
linearisation, the linear solve) whose inputs were finite and outputs not."""

import jax
import jax.numpy as jnp
import numpy as np

from ._common import _bad_np, _params_at
from ._nmodl_source import first_bad_statement, nmodl_info
from ._probes import kinetics_function
from ._report import Diagnosis


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
                lambda u, mech=mech, states=states, env=env: _total(
                    mech.current(u, states, env)
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
            source = None
            if stage != "linearisation":  # a value, not a derivative, went bad
                source = _mod_source(model, group, mech, ins, is_kinetics, j, n)
            return Diagnosis(
                found=True,
                stage=stage,
                mechanism=name,
                function=func,
                inputs=inputs,
                outputs={k: float(x[j]) for k, x in outs.items()},
                culprit_location=None if comp is None else model.layout.describe(comp),
                source=source,
            )
    return None


def _mod_source(model, group, mech, ins, is_kinetics, j, n):
    """For an imported mechanism, the `.mod` line whose statement first went
    non-finite at entry `j` when its kinetics or current is re-run eagerly on
    the recorded inputs (`None` otherwise)."""
    if nmodl_info(mech) is None:
        return None
    v = jnp.asarray(ins["v"])
    states = {k: jnp.asarray(x) for k, x in ins.items() if k != "v"}
    env = group.environment(model)
    fn = mech.kinetics if is_kinetics else mech.current
    return first_bad_statement(mech, lambda: fn(v, states, env), j, n)


def _total(i):
    """A mechanism's current: the sum of its per-ion parts if it splits it."""
    return sum(i.values()) if isinstance(i, dict) else i


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
