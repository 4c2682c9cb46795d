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

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np

from .._model import MembraneModel, State
from .._solver import BackwardEuler
from .._stepping import AbstractStepping, FixedSteps
from .._term import MembraneTerm
from ..events._stepping import fixed_span, with_events
from ._backward import _backward
from ._common import _first_bad_state, _search
from ._forward import _check_parameters, _explain_initial, _explain_step
from ._report import Diagnosis


def diagnose(
    model: MembraneModel,
    t1: float,
    dt: float | None = None,
    *,
    stepping: AbstractStepping | None = None,
    solver: dfx.AbstractSolver = BackwardEuler(),  # noqa: B008 (immutable Module)
    threshold: float | None = None,
    t0: float = 0.0,
    y0: State | None = None,
    loss: Callable[[dict[str, jax.Array]], jax.Array] | None = None,
) -> Diagnosis:
    """Run `model` as `stable_ode.simulate` does (fixed steps of `dt` on the grid
    `t0 + k·dt`, the grid of `stable_ode.FixedSteps(dt)`) and report the first bad
    value and what produced it.

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
    - `dt`: the fixed step, ms (must divide `t1 - t0`); or, instead,
    - `stepping`: the `stable_ode.FixedSteps` a `simulate` call ran with: the
      same grid is checked step by step (every step, whatever its `save_every`).
      An `AdaptiveSteps` is a `ValueError`: diagnose replays fixed steps.
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
    t0, t1 = float(t0), float(t1)
    if not t1 > t0:
        raise ValueError(f"t1 ({t1}) must be > t0 ({t0})")
    stepping = _fixed_steps(dt, stepping)
    ts = jnp.asarray(stepping.grid(t0, t1, model.dtype))
    n = ts.shape[0] - 1
    thr = np.inf if threshold is None else float(threshold)

    bad_params = _check_parameters(model)
    if bad_params is not None:
        return dataclasses.replace(bad_params, n_steps=0)
    y_init = model.init_state() if y0 is None else y0
    if _first_bad_state(model, y_init, thr) is not None:
        return dataclasses.replace(_explain_initial(model, y_init, thr), n_steps=0)
    # point processes: their hooks around each step, as `simulate` steps
    solver = with_events(solver, model, fixed_span(stepping.dt), grid_only=True)
    ss0 = solver.init(MembraneTerm(model), ts[0], ts[1], y_init, None)
    k, y, ss, bad = _search(
        solver, model, ts, y_init, ss0, jnp.asarray(thr, model.dtype)
    )
    if bool(bad):
        d = _explain_step(model, solver, ts, int(k), y, ss, thr)
        return dataclasses.replace(d, n_steps=int(k) + 1)
    if loss is not None:
        return _backward(model, solver, ts, y0, loss, n)
    return Diagnosis(found=False, n_steps=n)


def _fixed_steps(dt: float | None, stepping: AbstractStepping | None) -> FixedSteps:
    """The `FixedSteps` that `diagnose(..., dt=, stepping=)` replays."""
    if stepping is None:
        if dt is None:
            raise ValueError("diagnose needs dt (ms) or stepping=FixedSteps(dt)")
        return FixedSteps(dt)
    if dt is not None:
        raise ValueError("pass dt or stepping to diagnose, not both")
    if not isinstance(stepping, FixedSteps):
        raise ValueError(
            f"diagnose replays fixed steps; got stepping={type(stepping).__name__}"
            "(...): pass stable_ode.FixedSteps(dt) with the step to check"
        )
    return stepping


def diagnose_spec(loaded, threshold: float | None = None) -> Diagnosis:
    """`diagnose` for a loaded model file (`stable_ode.load_spec`): the model,
    `t_stop`, `dt` and `solver` of the file. An adaptive controller in the file
    is replaced by fixed steps of `dt` (noted in the report).

    **Arguments:** `loaded`: a `stable_ode.LoadedModel`, or any object with
    attributes `model`, `t_stop`, `dt` and `solver`; `threshold`: as for
    `diagnose`.

    **Returns:** a `Diagnosis`.
    """
    d = diagnose(
        loaded.model,
        loaded.t_stop,
        stepping=FixedSteps(loaded.dt),
        solver=loaded.solver,
        threshold=threshold,
    )
    if getattr(loaded, "controller", None) is not None:
        note = (
            "the file asks for an adaptive controller; diagnose ran fixed steps "
            f"of dt = {loaded.dt} ms"
        )
        d = dataclasses.replace(d, notes=d.notes + (note,))
    return d
