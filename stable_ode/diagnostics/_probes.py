"""Instrumented stand-ins for a model's mechanisms, synapses and a solver's linear
solver.

They compute exactly what the wrapped object computes and, through
`jax.debug.callback`, append every call's inputs and outputs to a Python list.
They are only ever used to re-run a single step inside `diagnose`; the normal
simulation path never sees them.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import lineax as lx
import numpy as np

from ..mechanisms import AbstractKinetics, AbstractMechanism, Relaxation
from ..mechanisms._scheme import AbstractCoupledKinetics
from ..mechanisms.synapses import AbstractSynapse


class Recorder:
    """Collects `(kind, group, inputs, outputs)` records, in call order."""

    def __init__(self):
        self.records: list[dict[str, Any]] = []

    def add(self, kind: str, group: int, inputs, outputs):
        self.records.append(
            dict(
                kind=kind,
                group=group,
                inputs={k: np.asarray(v) for k, v in inputs.items()},
                outputs={k: np.asarray(v) for k, v in outputs.items()},
            )
        )


def _probe(record, kind: str, group: int, inputs: dict, outputs: dict):
    """Send one call's inputs and outputs to `record` (unordered callback)."""
    jax.debug.callback(
        lambda i, o: record(kind, group, i, o), inputs, outputs, ordered=False
    )


def kinetics_values(kinetics: dict[str, AbstractKinetics], states) -> dict:
    """The arrays that describe `kinetics` (a mechanism's `kinetics` output):
    `inf` and `rate` of a `Relaxation`; `dxdt`, the right-hand side at the
    state's value in `states`, of any other kinetics."""
    out = {}
    for name, kin in kinetics.items():
        if isinstance(kin, AbstractCoupledKinetics):
            if all(s in states for s in kin.states):
                rhs = kin.rhs(tuple(states[s] for s in kin.states))
                out.update({f"{s}.dxdt": r for s, r in zip(kin.states, rhs)})
        elif isinstance(kin, Relaxation):
            out[f"{name}.inf"] = kin.inf
            out[f"{name}.rate"] = kin.rate
        elif name in states:
            out[f"{name}.dxdt"] = kin.rhs(states[name])
    return out


def kinetics_function(owner) -> str:
    """The user function that computes `owner`'s kinetics: `gates` for a
    mechanism written for the former interface, else `kinetics`."""
    base = AbstractSynapse if isinstance(owner, AbstractSynapse) else AbstractMechanism
    legacy = type(owner).gates is not base.gates
    return f"{type(owner).__name__}.{'gates' if legacy else 'kinetics'}"


class ProbedMechanism(AbstractMechanism):
    """`inner`, recording each `kinetics` and `current` call (group `group`)."""

    inner: AbstractMechanism
    group: int = eqx.field(static=True)
    record: Callable = eqx.field(static=True)

    @property
    def ions(self):
        """The wrapped mechanism's `UseIon`s."""
        return self.inner.ions

    @property
    def mechanism_type(self):
        """The wrapped mechanism's place in NEURON's order (`BackwardEuler`
        advances mechanisms in it)."""
        return self.inner.mechanism_type

    def kinetics(self, v, states, env):
        kin = self.inner.kinetics(v, states, env)
        outputs = kinetics_values(kin, states)
        _probe(self.record, "kinetics", self.group, {"v": v, **states}, outputs)
        return kin

    def current(self, v, states, env):
        i = self.inner.current(v, states, env)
        out = {f"i[{k}]": x for k, x in i.items()} if isinstance(i, dict) else {"i": i}
        _probe(self.record, "current", self.group, {"v": v, **states}, out)
        return i

    def init_states(self, v, env):
        if type(self.inner).init_states is AbstractMechanism.init_states:
            # The default: steady states of the (probed) kinetics.
            return AbstractMechanism.init_states(self, v, env)
        return self.inner.init_states(v, env)


class ProbedSynapse(AbstractSynapse):
    """`inner`, recording each `kinetics` (presynaptic side) and `current`
    (postsynaptic side) call of synapse group `group`."""

    inner: AbstractSynapse
    group: int = eqx.field(static=True)
    record: Callable = eqx.field(static=True)

    def kinetics(self, v_pre, states, env):
        kin = self.inner.kinetics(v_pre, states, env)
        inputs = {"v_pre": v_pre, **states}
        outputs = kinetics_values(kin, states)
        _probe(self.record, "synapse kinetics", self.group, inputs, outputs)
        return kin

    def current(self, v_post, states, env):
        i = self.inner.current(v_post, states, env)
        inputs = {"v_post": v_post, **states}
        _probe(self.record, "synapse current", self.group, inputs, {"i": i})
        return i

    def init_states(self, v_pre, env):
        if type(self.inner).init_states is AbstractSynapse.init_states:
            return AbstractSynapse.init_states(self, v_pre, env)
        return self.inner.init_states(v_pre, env)


class ProbedLinearSolver(lx.AbstractLinearSolver):
    """`inner`, recording each solve's diagonal, right-hand side and solution
    (in the operator's ordering)."""

    inner: lx.AbstractLinearSolver
    record: Callable = eqx.field(static=True)

    def init(self, operator, options):
        try:
            diag = lx.diagonal(operator)
        except Exception:  # an operator structure without a diagonal rule
            diag = None
        return (self.inner.init(operator, options), diag)

    def compute(self, state, vector, options):
        inner_state, diag = state
        sol, result, stats = self.inner.compute(inner_state, vector, options)
        inputs = {"rhs": vector} if diag is None else {"diagonal": diag, "rhs": vector}
        jax.debug.callback(
            lambda i, o: self.record("linear solve", -1, i, o),
            inputs,
            {"solution": sol},
            ordered=False,
        )
        return sol, result, stats

    def transpose(self, state, options):
        inner_state, diag = state
        inner_state, options = self.inner.transpose(inner_state, options)
        return (inner_state, diag), options

    def conj(self, state, options):
        inner_state, diag = state
        inner_state, options = self.inner.conj(inner_state, options)
        return (inner_state, diag), options

    def assume_full_rank(self):
        return self.inner.assume_full_rank()
