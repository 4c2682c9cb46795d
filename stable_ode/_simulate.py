"""`simulate`: a thin convenience over `diffrax.diffeqsolve` with good defaults."""

import dataclasses

import diffrax as dfx
import equinox as eqx
import jax
from jaxtyping import Array, Bool, Float

from ._adjoint import Checkpointing
from ._backend import check_backend
from ._controller import SafeStepTo
from ._model import MembraneModel, State
from ._recordings import Recordings
from ._results import RESULTS
from ._sharding import check_sharding
from ._solver import BackwardEuler
from ._stepping import AbstractStepping, AdaptiveSteps, FixedSteps
from ._stepping._base import Recorder, traced, whole_steps as _grid  # noqa: F401 (diagnose)
from ._stepping.failure import raise_if_failed, reraise_short
from ._stepping.fixed import _reverse_only
from .events._stepping import event_outcome, has_events, spike_log


class Simulation(eqx.Module):
    """The result of `simulate`.

    **Fields:**

    - `ts`: save times, ms.
    - `recordings`: recording name → samples at `ts` (membrane potential, mV, or
      the recorded variable), a read-only mapping (`stable_ode._recordings.
      Recordings`: `sim.recordings["soma"]`, `.items()`, `dict(...)`) that holds
      one array; `"v"` → all compartments if the model names no recordings.
    - `stats`: dict of arrays: `num_steps`, `num_accepted`, `num_rejected` (all
      reasons), `num_nonfinite_rejected` (steps rejected because their state or
      error estimate held a NaN or ±inf; integers); `min_dt`, the smallest
      accepted step (ms; steps shortened to land on a stimulus edge or `t1`
      count); `t_fail`, the last good time (ms) if the solve failed, else `inf`.
    - `result`: a `stable_ode.RESULTS` member (which extends `diffrax.RESULTS`):
      `successful`, a diffrax code, or `nonfinite_max_rejections` /
      `nonfinite_dt_min` when the step controller gave up on a non-finite step.
    - `solution`: the underlying `diffrax.Solution` (its `controller_state` holds
      the controller's `StepStats`; its `ts` and `ys` are pairs: the saved
      samples, then the final state); `None` for fixed steps run plain-first
      (`FixedSteps(plain_first=True)`, the default).
    - `final_state`: the `State` at `t1` (after a failure, the last good state, at
      `stats["t_fail"]`): pass it as `y0` with `t0=t1` to continue the run.
    - `spikes`: `stable_ode.SpikeRecording` name → its threshold crossings
      (ms), padded with `inf` to the largest `max_spikes` of the model's spike
      recordings (so it keeps its shape under `jit` and `vmap`):
      `t[np.isfinite(t)]`; a read-only mapping (a `Recordings`, as `recordings`:
      `sim.spikes["pre"]`, `.items()`, `dict(...)`) that holds one array, `{}`
      without spike recordings. A run continued from a `final_state` keeps the
      earlier spikes.

    After a failure (`throw=False`), the samples at `ts > stats["t_fail"]` hold
    the last good value; `valid` masks them out.
    """

    ts: Float[Array, " nsave"]
    recordings: Recordings
    stats: dict[str, Array]
    result: RESULTS
    solution: dfx.Solution | None
    final_state: State | None = None
    spikes: Recordings | dict = eqx.field(default_factory=dict)

    @property
    def valid(self) -> Bool[Array, " nsave"]:
        """Which samples were reached by the solve (`ts <= stats["t_fail"]`)."""
        return self.ts <= self.stats["t_fail"][..., None]


def steps_from(
    dt: float,
    controller: dfx.AbstractStepSizeController | None = None,
    save_dt: float | None = None,
    optimistic: bool | None = None,
    adjoint: dfx.AbstractAdjoint = Checkpointing(),
) -> AbstractStepping:
    """The stepping object of `simulate`'s short form (`dt`, `controller`,
    `save_dt`, `optimistic`; see `simulate`)."""
    dt = float(dt)
    if controller is None or isinstance(controller, SafeStepTo):
        every = 1
        if save_dt is not None:
            every = float(save_dt) / dt
            if abs(every - round(every)) > 1e-6 or round(every) < 1:
                raise ValueError(
                    f"save_dt={save_dt} must be a whole multiple of dt={dt}"
                )
        if optimistic is None:  # plain first where a custom_vjp costs nothing
            plain_first, safe_gradient = _reverse_only(adjoint), True
        else:  # True: both loops differentiated
            plain_first, safe_gradient = bool(optimistic), not optimistic
        return FixedSteps(dt, round(every), plain_first, safe_gradient, controller)
    return AdaptiveSteps(controller, dt, dt if save_dt is None else float(save_dt))


@eqx.debug.assert_max_traces(max_traces=None)  # counted: `eqx.debug.get_num_traces`
def _solve_counted(stepping, model, y0, times, solver, adjoint, limits, recorder):
    max_steps, throw, progress_meter = limits
    model = model.hoisted()
    out = _with_events(
        model,
        stepping.solve(
            model, y0, times, solver, adjoint, max_steps, progress_meter, recorder
        ),
    )
    if throw:
        saved = raise_if_failed(out.saved, out.result, out.stats["t_fail"])
        out = eqx.tree_at(lambda o: o.saved, out, saved)
    return out


_solve = eqx.filter_jit(_solve_counted)


def _with_events(model, out):
    """`out` with a lost spike as its failure (events; a no-op without them)."""
    if not has_events(model):
        return out
    result, stats = event_outcome(model, out.final_state, out.result, out.stats)
    return eqx.tree_at(lambda o: (o.result, o.stats), out, (result, stats))


@eqx.debug.assert_max_traces(max_traces=None)
def _solve_plain_counted(stepping, model, y0, times, solver, adjoint, limits, recorder):
    max_steps, _, progress_meter = limits
    model = model.hoisted()
    out, ok = stepping.solve_plain(
        model, y0, times, solver, adjoint, max_steps, progress_meter, recorder
    )
    out = _with_events(model, out)
    # Anything short of success (a lost spike too) goes to the safe solve, which
    # reports it (and raises with `throw`).
    return out, ok & (out.result == RESULTS.successful)


_solve_plain = eqx.filter_jit(_solve_plain_counted)


def _solve_eager(stepping, model, y0, times, solver, adjoint, limits, recorder):
    """`_solve` for a call outside `jit`, `grad` and `vmap` with fixed steps run
    plain first: the plain loop is compiled and run alone, and the safe one only if
    the plain run's result does not stand (the same result as `_solve`'s, which
    compiles both loops into one program for the case that it is traced)."""
    args = (model, y0, times, solver, adjoint, limits, recorder)
    if not stepping.runs_plain_first(adjoint, limits[0], times.shape[0] - 1, model):
        return _solve(stepping, *args)
    plain = _solve_plain(stepping, *args)
    if bool(plain[1]):
        return plain[0]
    out = _solve(dataclasses.replace(stepping, plain_first=False), *args)
    return eqx.tree_at(lambda o: o.solution, out, None)


def simulate(
    model: MembraneModel,
    t1: float,
    dt: float | None = None,
    *,
    stepping: AbstractStepping | None = None,
    solver: dfx.AbstractSolver = BackwardEuler(),
    t0: float = 0.0,
    y0: State | None = None,
    adjoint: dfx.AbstractAdjoint = Checkpointing(),
    max_steps: int | None = None,
    throw: bool = True,
    progress_meter: dfx.AbstractProgressMeter = dfx.NoProgressMeter(),
    controller: dfx.AbstractStepSizeController | None = None,
    save_dt: float | None = None,
    optimistic: bool | None = None,
) -> Simulation:
    """Simulate `model` from `t0` to `t1` (ms). Non-finite steps are never accepted.

    **Arguments:**

    - `model`: a `MembraneModel` (from `stable_ode.build` or `load_spec`).
    - `t1`: end time, ms. `t0`: start time, ms (default 0).
    - `stepping`: a `stable_ode.FixedSteps(dt, save_every=1, plain_first=True)` or
      `stable_ode.AdaptiveSteps(controller, dt0, save_dt)`; or, the short form,
      `dt` with `controller`, `save_dt` and `optimistic` (below).
    - `solver`: any diffrax solver that takes one ODE term (default
      `BackwardEuler()`); generic ones such as `diffrax.Kvaerno5()` need adaptive
      steps. Checked up front (`stable_ode.check_compatible`), then run inside a
      `stable_ode.NonFiniteGuard` (see `stable_ode.guard`).
    - `y0`: initial `State` (default `model.init_state()`: `v_init`, gates at
      steady state), e.g. the `final_state` of a previous run to continue it.
    - `adjoint`: the diffrax adjoint for reverse mode (default
      `stable_ode.Checkpointing()`).
    - `max_steps`: step budget (accepted + rejected steps); default
      `stepping.max_steps(t0, t1)`: the grid steps plus `max(1000, n // 10)` for
      fixed steps, 100,000 for adaptive ones.
    - `throw`: raise a `RuntimeError` if the solve fails, naming the result code
      and the last good time (ms); else see `Simulation.result`.
    - `progress_meter`: a diffrax progress meter (default
      `diffrax.NoProgressMeter()`); it does not change the results.
    - Short form: `dt` (ms); `controller=None` (default) for `FixedSteps(dt)`, a
      `stable_ode.SafeStepTo` on the grid for `FixedSteps(dt, controller=...)`, an
      adaptive diffrax controller (or a `stable_ode.NonFiniteRejecting` /
      `TimingTolerance` around one) for `AdaptiveSteps(controller, dt, save_dt)`;
      `save_dt` (default `dt`; with fixed steps a whole multiple of `dt` that
      divides `t1 - t0`); `optimistic` (fixed steps): `None` (default) for
      `FixedSteps(plain_first=True)` with a reverse-mode-only adjoint, else
      `plain_first=False`; `True` for `plain_first=True, safe_gradient=False`;
      `False` for `plain_first=False`.

    **Returns:** a `Simulation`. When the solve cannot continue (`throw=False`),
    `result` says why, `stats["t_fail"]` is the last good time (ms), and the
    samples at `ts > t_fail` hold the last good state's value (not NaN).

    Time arguments are Python floats (they fix array shapes); `model` and `y0` may
    be traced, so `simulate` works under `jax.jit`, `jax.vmap` and `jax.grad`.
    Repeated calls with the same shapes and settings compile once.

    A float64 model on a backend whose compiler cannot take float64 (XLA:TPU's)
    raises a `NotImplementedError` (`stable_ode._errors.Unsupported`) before
    anything is traced (docs/performance.md, "On a TPU").
    """
    t0, t1 = float(t0), float(t1)
    if stepping is None:
        if dt is None:
            raise ValueError("simulate needs `dt` (ms) or `stepping=`")
        stepping = steps_from(dt, controller, save_dt, optimistic, adjoint)
    elif dt is not None or controller is not None or save_dt is not None:
        raise ValueError(
            "give either `stepping=` or the short form (`dt`, `controller`, "
            "`save_dt`), not both"
        )
    elif optimistic is not None:
        raise ValueError("`optimistic` is `FixedSteps(plain_first=...)`")
    if not isinstance(stepping, AbstractStepping):
        raise ValueError(
            "stepping must be a stable_ode.FixedSteps or stable_ode.AdaptiveSteps, "
            f"got {type(stepping).__name__}"
        )
    if not t1 > t0:
        raise ValueError(f"t1 ({t1}) must be > t0 ({t0})")
    stepping.check(solver, model.dtype)
    check_backend(model.dtype)
    times = stepping.prepare(model, t0, t1)
    y0 = model.init_state() if y0 is None else y0
    check_sharding(model=model, y0=y0)
    max_steps = stepping.max_steps(t0, t1) if max_steps is None else int(max_steps)
    limits = (max_steps, bool(throw), progress_meter)
    recorder = Recorder.of(model)
    with reraise_short():
        args = (model, y0, times, solver, adjoint, limits, recorder)
        if isinstance(stepping, FixedSteps) and not traced((model, y0)):
            out = _solve_eager(stepping, *args)
        else:
            out = _solve(stepping, *args)
        if throw and not traced((model, y0)):
            out = jax.block_until_ready(out)
    return Simulation(
        ts=out.ts,
        # Named outside the compiled solve: it keeps one saved array, whatever the
        # number of recordings.
        recordings=recorder.split(out.saved),
        stats=out.stats,
        result=out.result,
        solution=out.solution,
        final_state=out.final_state,
        spikes=spike_log(model, out.final_state) if has_events(model) else {},
    )
