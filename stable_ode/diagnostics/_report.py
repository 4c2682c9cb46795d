"""The report of `diagnose`: a frozen `Diagnosis` whose categorical fields are
enums (`Direction`, `Kind`, `Stage`; string-valued, so `d.stage == "current"`
holds)."""

import dataclasses
import enum
from typing import Any


class Direction(enum.StrEnum):
    """Which pass a bad value was found in."""

    FORWARD = "forward"
    BACKWARD = "backward"


class Kind(enum.StrEnum):
    """What made a value bad."""

    NONFINITE = "non-finite"
    ABOVE_THRESHOLD = "above threshold"


class Stage(enum.StrEnum):
    """What produced the bad value."""

    PARAMETERS = "parameters"
    INITIAL_STATE = "initial state"
    INIT_STATES = "init_states"
    STIMULUS = "stimulus"
    KINETICS = "kinetics"
    CURRENT = "current"
    LINEARISATION = "linearisation"
    LINEAR_SOLVE = "linear solve"
    SYNAPSE_KINETICS = "synapse kinetics"
    SYNAPSE_CURRENT = "synapse current"
    VOLTAGE_UPDATE = "voltage update"
    STATE_UPDATE = "state update"
    EVENT_DELIVERY = "event delivery"
    LOSS = "loss"
    BACKWARD_STEP = "backward step"
    DERIVATIVE_OF_KINETICS = "derivative of kinetics"
    DERIVATIVE_OF_CURRENT = "derivative of current"
    DERIVATIVE_OF_LINEARISATION = "derivative of linearisation"


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """The result of `diagnose`. `str(diagnosis)` is a readable report.

    **Fields:**

    - `found`: whether a bad value was found (all other fields are `None` / empty
      otherwise).
    - `direction`: a `Direction`, `"forward"` (the solve) or `"backward"` (the
      gradient).
    - `kind`: a `Kind`, `"non-finite"` or `"above threshold"`.
    - `step`, `t0`, `t1`: index and time interval (ms) of the step that produced it
      (`step = -1` for the initial state).
    - `state`: the state that went bad (`"v"` or `"<Mechanism>.<gate>"`), or, going
      backward, the cotangent that went bad (`"d loss/d <state or parameter>"`).
    - `compartment`, `location`: the compartment index and `"cell 'c', section
      's', compartment i"`.
    - `value`: the bad value.
    - `stage`: a `Stage`, what produced it: `"parameters"`, `"initial state"`,
      `"stimulus"`, `"kinetics"`, `"current"`, `"linearisation"`, `"linear
      solve"`, `"synapse kinetics"`, `"synapse current"`, `"voltage update"`,
      `"state update"`, `"loss"` or `"derivative of ..."` (backward).
    - `mechanism`: the mechanism's class name, where one is to blame.
    - `function`: the function, e.g. `"MyChannel.kinetics"`.
    - `inputs`, `outputs`: that function's inputs and outputs at the culprit
      compartment at that moment (e.g. `{"v": -212.3, "m": 0.01}`), as floats.
    - `culprit_location`: the compartment where that function went bad.
    - `source`: for a mechanism imported from NMODL, the `.mod` line to blame
      (a `ModLine`: `path`, `line`, `text`; `str()` gives `"cad.mod:42:
      cai' = ..."`): the statement whose value first went non-finite, or,
      for a bad state update, the state's equation; else `None`.
    - `parameter`: going backward, the parameter whose cotangent went bad.
    - `n_steps`: steps checked.
    - `notes`: further remarks (a tuple of strings).
    - `gradient`: with a `loss`, its gradient with respect to the model (as
      `jax.grad` of a `simulate`-based loss gives), else `None`.
    """

    found: bool
    direction: Direction = Direction.FORWARD
    kind: Kind | None = None
    step: int | None = None
    t0: float | None = None
    t1: float | None = None
    state: str | None = None
    compartment: int | None = None
    location: str | None = None
    value: float | None = None
    stage: Stage | None = None
    mechanism: str | None = None
    function: str | None = None
    inputs: dict[str, float] = dataclasses.field(default_factory=dict)
    outputs: dict[str, float] = dataclasses.field(default_factory=dict)
    culprit_location: str | None = None
    source: Any = None
    parameter: str | None = None
    n_steps: int = 0
    notes: tuple[str, ...] = ()
    gradient: Any = dataclasses.field(default=None, repr=False)

    def __post_init__(self):
        # Accept the enums' string values; store the enums (an unknown string is
        # a ValueError here, not a silently wrong report).
        for name, cls in (("direction", Direction), ("kind", Kind), ("stage", Stage)):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, cls(value))
        object.__setattr__(self, "notes", tuple(self.notes))

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
        if self.source is not None:
            lines.append(f"  source:    {self.source}")
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
