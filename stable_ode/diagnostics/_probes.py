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

from ..mechanisms import AbstractMechanism, Gate
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


def _probe_gates(record, kind, group, inputs, kin: dict[str, Gate]):
    outputs = {}
    for name, g in kin.items():
        outputs[f"{name}.inf"] = g.inf
        outputs[f"{name}.rate"] = g.rate
    _probe(record, kind, group, inputs, outputs)
    return {name: Gate(inf=g.inf, rate=g.rate) for name, g in kin.items()}


class ProbedMechanism(AbstractMechanism):
    """`inner`, recording each `gates` and `current` call (group `group`)."""

    inner: AbstractMechanism
    group: int = eqx.field(static=True)
    record: Callable = eqx.field(static=True)

    def gates(self, v, celsius):
        kin = self.inner.gates(v, celsius)
        return _probe_gates(self.record, "gates", self.group, {"v": v}, kin)

    def current(self, v, states, celsius):
        i = self.inner.current(v, states, celsius)
        _probe(self.record, "current", self.group, {"v": v, **states}, {"i": i})
        return i


class ProbedSynapse(AbstractSynapse):
    """`inner`, recording each `gates` (presynaptic side) and `current`
    (postsynaptic side) call of synapse group `group`."""

    inner: AbstractSynapse
    group: int = eqx.field(static=True)
    record: Callable = eqx.field(static=True)

    def gates(self, v_pre, celsius):
        kin = self.inner.gates(v_pre, celsius)
        inputs = {"v_pre": v_pre}
        return _probe_gates(self.record, "synapse gates", self.group, inputs, kin)

    def current(self, v_post, states, celsius):
        i = self.inner.current(v_post, states, celsius)
        inputs = {"v_post": v_post, **states}
        _probe(self.record, "synapse current", self.group, inputs, {"i": i})
        return i


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
