"""How a solve sees events: `EventSteps`, a solver wrapper that calls every
point-process group's `before_step` / `after_step` hooks around the wrapped
solver's step, and the jump times adaptive steps must land on.

Delivery is at the exact arrival time, never rounded to the grid: an arrival
strictly inside a step is added at the step's end, decayed exactly (the
synapse's states decay linearly) from the arrival time; an arrival at the
step's start (on the grid, or an adaptive step landed on it) is added before
the step, as NEURON delivers it. During a fixed step, the voltage sees the
mean over the step of the conductance of the arrivals inside it (from each
arrival's time to the step's end: the `x` state of `in_step` groups, built-in
`ExpSyn` and `Exp2Syn`), so the forward pass is continuous in the arrival
times and their gradient has the onset term; adaptive steps, which land on
every arrival (they are jump times), see it from its arrival on.

Point processes whose NET_RECEIVE runs in turn at each event (it reads the
states or sends self-events: `stable_ode.nmodl._sequential`) take steps that
land on each of their events (`stable_ode.events._clip`: `ArrivalClip` for
adaptive steps, `GridClip` for fixed ones, which cuts a grid step at an event
inside it); their `receive` runs the events at the step's end.
"""

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._group import uses_ions
from .._recordings import Recordings
from .._results import RESULTS
from .._solver._wrapped import AbstractWrappedSolver
from .._state import group_states, State
from .._term import membrane_term
from ._arrivals import Arrivals, is_time
from ._groups import AbstractArrivalGroup, AbstractPointProcessGroup
from ._sources import FIRE_N, SpikeLog, ThresholdSources


def has_events(model) -> bool:
    """Whether `model` holds point-process groups (so solves need `EventSteps`)."""
    return any(isinstance(g, AbstractPointProcessGroup) for g in model.groups)


def _hook(model, y: State, fn) -> State:
    groups = group_states(
        fn(g, x) if isinstance(g, AbstractPointProcessGroup) else x
        for g, x in zip(model.groups, y.groups)
    )
    return State(v=y.v, groups=groups)


def _sources(model, y: State):
    """The threshold sources' ring buffer in `y` by slot (`(n,)` arrays, ms)
    and their spike counts (`(n,)`), or `(None, None)`."""
    for g, x in zip(model.groups, y.groups):
        if isinstance(g, ThresholdSources):
            return g.columns(x), x["count"]
    return None, None


def _detect(model, t0, t1, v0, y1: State) -> State:
    """`y1` with the threshold crossings of the step recorded by the sources
    and the spike log."""
    groups = list(y1.groups)
    found = None
    for k, g in enumerate(model.groups):
        if isinstance(g, ThresholdSources):
            groups[k], *found = g.detect(t0, t1, v0, y1.v, groups[k])
    for k, g in enumerate(model.groups):
        if isinstance(g, SpikeLog) and found is not None:
            groups[k] = g.write(groups[k], *found)
    return State(v=y1.v, groups=group_states(groups))


class EventSteps(AbstractWrappedSolver):
    """Wraps a solver so that each step from `t0` to `t1` starts from the
    point processes' `before_step` states and ends with their `after_step`
    states (see `stable_ode.events._groups`). After the step, threshold
    sources first record the crossings of the step (from the voltages at its
    start and end), then the synapses receive the arrivals inside it.

    **Fields:** `solver`, the wrapped solver; `span`, the longest delivery
    interval, ms (the fixed step, or a few units in the last place of the
    times for adaptive steps, which land on every arrival), which sizes the
    arrival windows."""

    solver: dfx.AbstractSolver
    span: float = eqx.field(static=True)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args), jnp.asarray(t0)

    def before(self, model, t0, t1, y0: State, solver_state) -> State:
        """`y0` as the step from `t0` to `t1` starts from: the point
        processes' `before_step` states, with the arrivals from threshold
        sources delivered. (Point processes whose NET_RECEIVE runs in turn
        received the events at `t0` at the previous step's end, or, at the
        start, in `deliver_at_start`.)"""
        _, t_start = solver_state
        span = self.span
        ring0, count0 = _sources(model, y0)
        # (new spikes since the last delivery: only from artificial cells)
        emitted = any(FIRE_N in z for z in y0.groups)
        ionic = any(_clocked(g) and uses_ions(g) for g in model.point_processes)
        views = model.ion_views(y0.v, y0.groups) if ionic else None

        def deliver(g, x):
            y = g.before_step(t0, t1, t_start, x, span)
            if _sequential(g):  # (its before_step only reads the clock)
                return y
            cell = g.cell_arrivals() if isinstance(g, AbstractArrivalGroup) else None
            if cell is None or ring0 is None:
                return y
            # those at t0 (delivered), then the mean over the step of those
            # inside it (delivered after the step)
            at_t0 = [(t0, g.jump)]
            if g.in_step:
                at_t0.append((t0, g.onset_jump(t1 - t0)))
            windows = [(t0, True, True, at_t0)]
            if g.in_step:
                windows.append((t1, False, False, [(t1, g.in_step_jump(t1 - t0))]))
            return cell.deliver(y, ring0, count0, windows, g.netcon_states, emitted)

        def before(g, x):
            y = deliver(g, x)
            if not _clocked(g):
                return y
            # the values it records, at the step's clock (what a sample
            # interpolated inside the step starts from)
            return g.with_current(y0.v, y, views if uses_ions(g) else None)

        return _hook(model, y0, before)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inner, t_start = solver_state
        model = membrane_term(terms).model
        span = self.span
        y0 = self.before(model, t0, t1, y0, solver_state)
        y1, y_error, dense, inner, result = self.solver.step(
            terms, t0, t1, y0, args, inner, made_jump
        )
        v1 = y1.v
        y1 = _detect(model, t0, t1, y0.v, y1)
        ring1, count1 = _sources(model, y1)
        fired = None if count1 is None else jnp.any(count1 != _sources(model, y0)[1])
        # the ions at the step's end, for point processes that use them
        ionic = any(uses_ions(g) for g in model.point_processes)
        views = model.ion_views(v1, y1.groups) if ionic else None

        moved = []  # the voltage's changes by moving events (0 in value)

        def after(g, x):
            if isinstance(g, (ThresholdSources, SpikeLog)):
                return x
            ions = views if uses_ions(g) else None
            if _sequential(g):  # every event at t1, in turn
                y, dv = g.receive(model, t1, v1, x, span, ring1, ions)
                moved.append(jnp.zeros_like(v1).at[g.index].add(dv))
                return y
            y = g.after_step(t0, t1, v1, x, span, ions=ions)
            cell = g.cell_arrivals() if isinstance(g, AbstractArrivalGroup) else None
            if cell is None or ring1 is None:
                return y
            window = (t1, False, True, [(t1, g.jump)])
            y = cell.deliver(y, ring1, count1, [window], g.netcon_states, fired)
            return g.with_current(v1, y, ions)

        y1 = _emit(model, _hook(model, y1, after))
        if moved:
            y1 = State(v=y1.v + sum(moved[1:], moved[0]), groups=y1.groups)
        return y1, y_error, dense, (inner, t_start), result


def deliver_at_start(model, t0, y0: State, span: float) -> State:
    """`y0` with the events due at the start `t0` (ms) delivered to the point
    processes whose NET_RECEIVE runs in turn at each event (INITIAL's
    `net_send(0, ...)`, NetCon events at `t0`); `y0` itself if there are none.
    Run once before the solve rather than before every step: the step's
    trace (and its derivative's) then holds one delivery, not two."""
    if not has_sequential(model):
        return y0
    ring0, _ = _sources(model, y0)
    ionic = any(_sequential(g) and uses_ions(g) for g in model.point_processes)
    views = model.ion_views(y0.v, y0.groups) if ionic else None

    def start(g, x):
        if not _sequential(g):
            return x
        ions = views if uses_ions(g) else None
        return g.receive(model, t0, y0.v, x, span, ring0, ions)[0]

    return _emit(model, _hook(model, y0, start))


def _emit(model, y: State) -> State:
    """`y` with the spikes that artificial cells sent (`net_event`) at the
    last delivery written to their sources' ring buffers (from which the
    NetCons they drive deliver, as from a threshold crossing)."""
    firing = [k for k, x in enumerate(y.groups) if FIRE_N in x]
    if not firing:
        return y
    groups = list(y.groups)
    kinds = [type(g) for g in model.groups]
    src = kinds.index(ThresholdSources) if ThresholdSources in kinds else None
    log = kinds.index(SpikeLog) if SpikeLog in kinds else None
    for k in firing:
        g = model.groups[k]
        groups[k], fired, t = g.take_spikes(groups[k])
        rows = getattr(g, "fire_rows", None)
        if src is not None and rows is not None:
            sources = model.groups[src]  # (`emit` drops rows -1: no source)
            groups[src], *found = sources.emit(groups[src], rows, fired, t)
            if log is not None:  # the spikes recorded (`SpikeRecording`)
                groups[log] = model.groups[log].write(groups[log], *found)
    return State(v=y.v, groups=group_states(groups))


def has_sequential(model) -> bool:
    """Whether `model` holds point processes whose NET_RECEIVE runs in turn at
    each event (`stable_ode.nmodl._sequential`)."""
    return any(_sequential(g) for g in model.groups)


def _clocked(g) -> bool:
    """Whether group `g`'s currents read the clock (an imported point process
    whose BREAKPOINT reads `t`, `stable_ode.nmodl._clock`): its recorded
    values are recomputed before each step, at the step's clock."""
    return bool(getattr(g, "reads_clock", False))


def _sequential(g) -> bool:
    """Whether group `g` runs its NET_RECEIVE in turn at each event, on steps
    that land there (`stable_ode.nmodl._sequential`)."""
    return bool(getattr(g, "sequential", False))


def with_events(
    solver: dfx.AbstractSolver, model, span: float, grid_only: bool = False
) -> dfx.AbstractSolver:
    """`EventSteps(solver, span)` if `model` has point processes, else `solver`
    (unchanged, so models without events step exactly as before).
    `grid_only`: for a replay of the fixed grid that cannot land steps on
    events (`stable_ode.diagnose`), which point processes whose NET_RECEIVE
    runs at each event's time cannot take (one clear error)."""
    if not has_events(model):
        return solver
    if grid_only:
        kinds = sorted({g.kind for g in model.groups if _sequential(g)})
        if kinds:
            raise ValueError(
                f"point process {', '.join(kinds)}: its NET_RECEIVE reads the "
                "states, tests flag or sends self-events (net_send), so it runs "
                "at each event's exact time, on steps that land there; diagnose "
                "replays the fixed grid alone. Run simulate (fixed or adaptive "
                "steps) instead"
            )
    return EventSteps(solver, float(span))


def fixed_span(dt: float) -> float:
    """The delivery span of fixed steps of `dt` ms (each delivery interval is
    one step, or a few units in the last place at its start)."""
    return float(dt) * (1 + 1e-3)


def adaptive_span(t0: float, t1: float, dtype) -> float:
    """The delivery span of adaptive steps: 16 units in the last place of the
    largest time, in `dtype`."""
    big = max(abs(float(t0)), abs(float(t1)), 1.0)
    return 16 * float(np.spacing(np.asarray(big, np.dtype(dtype))))


def event_jump_times(model, dtype):
    """Every point-process group's jump times (ms), concatenated (unsorted)."""
    parts = [
        g.jump_times(dtype)
        for g in model.groups
        if isinstance(g, AbstractPointProcessGroup)
    ]
    return jnp.concatenate(parts) if parts else jnp.zeros((0,), dtype)


def event_outcome(model, final_state, result, stats):
    """`(result, stats)` with `RESULTS.event_overflow` (and `t_fail` the time
    of the first lost spike) if a threshold source overflowed, or
    `RESULTS.event_order` (`t_fail` the first arrival out of order) if the
    delays of known sources no longer keep their build-time order."""
    for g, x in zip(model.groups, final_state.groups):
        if isinstance(g, (ThresholdSources, SpikeLog)):
            t = x["overflow"]
            hit = is_time(t)
            lost = jnp.any(hit)
            t_lost = jnp.min(jnp.where(hit, t, jnp.inf)).astype(stats["t_fail"].dtype)
            ok = result == RESULTS.successful
            result = RESULTS.where(lost & ok, RESULTS.event_overflow, result)
            t_fail = jnp.where(lost & ok, t_lost, stats["t_fail"])
            stats = {**stats, "t_fail": t_fail}
    for g in model.groups:
        arrivals = getattr(g, "arrivals", None)
        if isinstance(arrivals, Arrivals):
            t_bad = arrivals.disorder().astype(stats["t_fail"].dtype)
            bad = jnp.isfinite(t_bad) & (result == RESULTS.successful)
            result = RESULTS.where(bad, RESULTS.event_order, result)
            stats = {**stats, "t_fail": jnp.where(bad, t_bad, stats["t_fail"])}
    return result, stats


def spike_log(model, state) -> Recordings | dict:
    """The recorded spike times (ms) by `SpikeRecording` name (`Recordings`:
    columns of the largest `max_spikes`, the spikes first, padded with `inf`);
    `{}` for a model without spike recordings."""
    for g, x in zip(model.groups, state.groups):
        if isinstance(g, SpikeLog):  # (a model has at most one)
            return g.times(x)
    return {}
