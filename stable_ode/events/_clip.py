"""Steps that land on events known only during the solve: `ArrivalClip` around
an adaptive controller, `GridClip` around fixed steps (`SafeStepTo`), both
reading the next event from the state through `EventTimes`.

The events are the arrivals of NetCons from threshold sources (read from the
sources' ring buffers) and, for the point processes whose NET_RECEIVE runs in
turn at each event (`stable_ode.nmodl._sequential`), their self-events queued
in the state and their NetCon events from spike times.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool

from .._controller import SafeStepTo, SafeStepToState
from .._controller._wrapped import AbstractWrappedController
from ._arrivals import CellArrivals, near
from ._groups import AbstractArrivalGroup
from ._sources import ThresholdSources
from ._stepping import _sequential


class EventTimes(eqx.Module):
    """Where the next event a step must land on lies, read from the state.

    **Fields:** `group`, the position of the `ThresholdSources` group in the
    state's groups (`None` without one); `arrivals`, the NetCons from those
    sources whose arrivals steps land on (one `CellArrivals`, or `None`);
    `max_dt`, ms (the shortest such delay: a step no longer than it never
    holds the arrivals of a spike it detects); `pending`, the sources'
    ring-buffer slots; `receivers`, the point-process groups whose NET_RECEIVE
    runs in turn, at positions `receiver_groups`."""

    arrivals: CellArrivals | None
    max_dt: Array
    group: int | None = eqx.field(static=True)
    pending: int = eqx.field(static=True)
    receivers: tuple[AbstractArrivalGroup, ...] = ()
    receiver_groups: tuple[int, ...] = eqx.field(static=True, default=())

    def ring(self, y):
        """The sources' ring buffer in state `y`."""
        x = y.groups[self.group]
        return jnp.stack([x[f"s{k}"] for k in range(self.pending)], axis=1)

    def next_event(self, y0, y1, keep, after):
        """`(t, at)`: the first event (ms) after `after + near(after)` that a
        step must land on (those before were delivered at `after`), and
        whether one is at `after`, from the state `y1` if `keep` else `y0`."""
        nxt, at = jnp.asarray(jnp.inf, jnp.result_type(after)), jnp.asarray(False)
        if self.arrivals is not None:
            ring = jnp.where(keep, self.ring(y1), self.ring(y0))
            nxt, at = self.arrivals.next_arrival(ring, after)
        for g, k in zip(self.receivers, self.receiver_groups):
            x = jax.tree.map(
                lambda a, b: jnp.where(keep, a, b), y1.groups[k], y0.groups[k]
            )
            t, a = g.next_event(x, after)
            nxt, at = jnp.minimum(nxt, t.astype(nxt.dtype)), at | a
        return nxt, at

    def clip(self, t0, t1, nxt):
        """The end of a step from `t0` proposed to end at `t1` (ms), cut short
        at the next event `nxt` and to at most `max_dt`. An event less than
        `near(t1)` before `t1` does not cut the step: it is delivered at `t1`
        (so no step is shorter than that)."""
        t1 = jnp.where(nxt > t1 - near(t1), t1, jnp.minimum(t1, nxt))
        return t1 if self.arrivals is None else jnp.minimum(t1, t0 + self.max_dt)


def event_times(model, sequential_only: bool = False) -> EventTimes | None:
    """The `EventTimes` of `model`, or `None` if no step needs to land on an
    event known only during the solve. `sequential_only`: the events of the
    point processes whose NET_RECEIVE runs in turn alone (fixed steps, where
    the other synapses take arrivals inside a step exactly)."""
    k = next(
        (j for j, g in enumerate(model.groups) if isinstance(g, ThresholdSources)),
        None,
    )
    parts = [
        g.cell_arrivals()
        for g in model.groups
        if isinstance(g, AbstractArrivalGroup)
        and g.cell_arrivals() is not None
        and (_sequential(g) or not sequential_only)
    ]
    seq = [(g, j) for j, g in enumerate(model.groups) if _sequential(g)]
    if (k is None or not parts) and not seq:
        return None
    arrivals, max_dt, pending = None, jnp.asarray(jnp.inf), 0
    if k is not None and parts:
        arrivals = CellArrivals(
            source=jnp.concatenate([p.source for p in parts]),
            entry=jnp.concatenate([p.entry for p in parts]),
            delay=jax.lax.stop_gradient(jnp.concatenate([p.delay for p in parts])),
            weight=jnp.zeros((sum(p.source.shape[0] for p in parts),)),
        )
        max_dt, pending = jnp.min(arrivals.delay), model.groups[k].pending
    return EventTimes(
        arrivals,
        max_dt,
        k if arrivals is not None else None,
        pending,
        tuple(g for g, _ in seq),
        tuple(j for _, j in seq),
    )


class ArrivalClip(AbstractWrappedController):
    """Wraps an adaptive controller so that steps land on the events of
    `events` (`EventTimes`), which are only known during the solve: each
    proposed step is clipped to end at the first event after its start, and
    to at most `events.max_dt`, so that a spike's arrivals are never inside
    the step that detects it. `made_jump` is set for a step that starts at
    an event (its state was changed by the delivery)."""

    controller: dfx.AbstractAdaptiveStepSizeController
    events: EventTimes

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t1, state = self.controller.init(
            terms, t0, t1, y0, dt0, args, func, error_order
        )
        nxt, _ = self.events.next_event(y0, y0, True, t0)
        return self.events.clip(t0, t1, nxt), state

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        keep, t0n, t1n, jump, state, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
        )
        nxt, at = self.events.next_event(y0, y1_candidate, keep, t0n)
        return keep, t0n, self.events.clip(t0n, t1n, nxt), jump | at, state, result


def arrival_clip(controller, model):
    """`ArrivalClip` around `controller` if `model` has NetCons from threshold
    sources or point processes whose NET_RECEIVE runs at each event, else
    `controller` unchanged."""
    events = event_times(model)
    return controller if events is None else ArrivalClip(controller, events)


class GridClipState(eqx.Module):
    """State of `GridClip`: the wrapped `SafeStepTo`'s, and whether the step
    proposed was cut short at an event."""

    inner: SafeStepToState
    clipped: Bool[Array, ""]

    @property
    def stats(self):
        """The wrapped controller's `StepStats`."""
        return self.inner.stats


class GridClip(dfx.AbstractStepSizeController[GridClipState, None]):
    """Fixed steps on a grid (`controller`, a `stable_ode.SafeStepTo`) that
    also land exactly on the events of `events` (`EventTimes`): a grid step
    with an event inside is cut at the event, and the next step goes on to
    the grid point (then to the next), so every grid time is still a step's
    end. Used for the point processes whose NET_RECEIVE runs in turn at each
    event's time (`stable_ode.nmodl._sequential`); non-finite steps are retried
    as `SafeStepTo` retries them."""

    controller: SafeStepTo
    events: EventTimes

    def wrap(self, direction):
        return eqx.tree_at(
            lambda c: c.controller, self, self.controller.wrap(direction)
        )

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        t1, state = self.controller.init(
            terms, t0, t1, y0, dt0, args, func, error_order
        )
        nxt, _ = self.events.next_event(y0, y0, True, t0)
        t1c = self.events.clip(t0, t1, nxt)
        return t1c, GridClipState(state, t1c < t1)

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        keep, t0n, t1n, jump, inner, result = self.controller.adapt_step_size(
            t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state.inner
        )
        # After a step cut short at an event, on to the grid point it aimed at
        # (`SafeStepTo` alone would keep the cut step's length, as after a
        # non-finite retry).
        target = self.controller.ts[inner.index]
        t1n = jnp.where(keep & controller_state.clipped & (t0n < target), target, t1n)
        nxt, at = self.events.next_event(y0, y1_candidate, keep, t0n)
        t1c = self.events.clip(t0n, t1n, nxt)
        return keep, t0n, t1c, jump | at, GridClipState(inner, t1c < t1n), result


def grid_clip(controller: SafeStepTo, model):
    """`GridClip` around `controller` if `model` has point processes whose
    NET_RECEIVE runs in turn at each event, else `controller` unchanged."""
    events = event_times(model, sequential_only=True)
    return controller if events is None else GridClip(controller, events)
