"""Point processes whose `NET_RECEIVE` runs as NEURON runs it: at each
event's time, on the states at that time, one event after another.

The group of a `POINT_PROCESS` file whose `NET_RECEIVE` does more than add to
states that decay exactly (`_point_analysis.receive_increments`) — it reads
the states or `v`, sets values the kinetics read, tests `flag` or sends
self-events with `net_send(delay, flag)` — is an
`AbstractNmodlSequentialGroup`:

- steps land on every event (the step controller is clipped to the next
  event: `stable_ode.events._clip.ArrivalClip` for adaptive steps,
  `GridClip` for fixed ones, which cuts a grid step at an event inside it),
  and the events at a step's end are delivered by `receive` after the step
  (and before the first step, those at the start: INITIAL's `net_send(0,
  ...)`, a NetCon event at t = 0; `events._stepping.deliver_at_start`): the
  self-events due then, the NetCon events from spike times and the NetCon
  events from threshold sources (each in turn, on the states the previous one
  left), then the self-events that these sent with delay 0;
- a self-event carries the flag given to `net_send` and the weight vector of
  the event that sent it (NEURON's rule; one that INITIAL sent has weight 0
  and no vector), and waits in a queue of
  `queue_slots` events per instance (the states `queue:t<k>`, ms, `1e30` when
  empty; `queue:flag<k>`; `queue:src<k>`, which NetCon's vector); a full
  queue makes the step non-finite;
- the `ASSIGNED`s that NET_RECEIVE sets and no other block computes (the
  `synon` of a pulse synapse) are held per instance between events, as
  states;
- `net_move(t)` moves the self-event the instance sent last (the state
  `queue:last`, its slot); `net_event(t)` (an `ARTIFICIAL_CELL`'s spike) is
  held in the states `fire:t`, `fire:n` until the event stepping writes it to
  the instance's NetCon source (`events._sources.ThresholdSources.emit`).

Events at exactly the same time run in that order (self-events first);
NEURON runs them in the order it queued them.

Gradients flow through everything the events compute (weights, weight
vectors, parameters, the event's `t`) and through the events' times (NetCon
delays, `net_send` delays): the steps land on an event without its
derivative, so `_run` adds the derivative of moving the event (the jump of
the point process's rates and of the voltage's rate at the event) as a term
that is zero in value.
"""

from typing import ClassVar

import jax
import jax.numpy as jnp

from ..events._arrivals import CELL_NETCON, first_after, near, NETCON, NONE
from ..events._groups import Held
from ..events._sources import FIRE_N, FIRE_T
from ..mechanisms import AbstractKinetics
from . import _runtime
from ._codegen import fire_names, move_names, py, send_names
from ._point import AbstractNmodlPointGroup
from ._queue import (
    add_rows,
    EMPTY,
    enqueue,
    LAST,
    move,
    put_rows,
    queue_keys,
    take_rows,
)


DV = "@dv"
"""During a delivery: the voltage's change (mV, per instance; 0 in value)."""


class AbstractNmodlSequentialGroup(AbstractNmodlPointGroup):
    """The instances of one imported point process whose NET_RECEIVE runs in
    turn at each event (see the module docstring)."""

    sequential: ClassVar[bool] = True
    in_step: ClassVar[bool] = False
    in_step_states: ClassVar[tuple[str, ...]] = ()
    queue_slots: ClassVar[int] = 8

    def init_states(self, model, v, ions=None):
        out = super().init_states(model, v, ions)
        z = jnp.zeros_like(out["t_delivered"])
        for k in range(self.queue_slots):
            t, f, src = queue_keys(k)
            out |= {t: jnp.full_like(z, EMPTY), f: z, src: z}
        if self.spec.ns.get("N_MOVES"):  # the slot of the last self-event sent
            out[LAST] = jnp.full_like(z, -1.0)
        if self.spec.ns.get("N_FIRES"):  # a net_event of the last delivery
            out |= {FIRE_T: jnp.full_like(z, NONE), FIRE_N: z}
        if self.spec.n_initial_sends:  # INITIAL's self-events: of no NetCon
            m = self._initial(model, v, ions)
            none = jnp.full(z.shape, -1, jnp.int32)
            full = jnp.asarray(False)
            for k in range(self.spec.n_initial_sends):
                sent, t, f = (getattr(m, x) for x in send_names(k))
                sent = _runtime.as_n(sent, z) != 0
                out, b = enqueue(out, self.queue_slots, None, sent, t, f, none, z)
                full = full | b
            out = {k: jnp.where(full, jnp.nan, x) for k, x in out.items()}
        return out

    def kinetics(self, model, v, states, ions=None):
        out = super().kinetics(model, v, states, ions)
        return out | {k: Held() for k in states if k.startswith(("queue:", "fire:"))}

    def before_step(self, t0, t1, t_start, states, span):
        del t_start, span  # (the events at t0 are delivered by `receive`)
        return self.sample_inputs(0.5 * (t0 + t1), states)

    def jump_times(self, dtype):
        # Not the events: the steps land on them exactly (not just before and
        # after), by `next_event`.
        return self.clock_times(dtype)

    def take_spikes(self, states):
        """`(states, fired, t)`: whether each instance sent a spike
        (`net_event`) at the last delivery, and when (ms); `states` without
        them (non-finite where one sent two at once: a source's ring buffer
        takes one spike per source and step)."""
        n = states[FIRE_N]
        out = dict(states)
        out[FIRE_N] = jnp.zeros_like(n)
        out[FIRE_T] = jnp.full_like(n, NONE)
        two = jnp.any(n > 1)
        out = {k: jnp.where(two, jnp.nan, x) for k, x in out.items()}
        return out, n > 0, states[FIRE_T]

    # -- where steps must land -----------------------------------------------

    def next_event(self, states, after):
        """`(t, at)`: the first self-event or NetCon event from spike times
        after `after + near(after)` (ms, `inf` if none; those before were
        delivered at `after`), and whether one is at `after` (up to
        `near(after)`, either way). (Events from threshold sources:
        `EventTimes`' own.)"""
        times = [states[queue_keys(k)[0]] for k in range(self.queue_slots)]
        t = jax.lax.stop_gradient(jnp.concatenate(times))
        t = jnp.where(t < 0.5 * EMPTY, t, jnp.inf)
        if self.arrivals is not None:
            a = jax.lax.stop_gradient(self.arrivals.time)
            t = jnp.concatenate([t, a])
        return first_after(t, after)

    # -- delivery ---------------------------------------------------------------

    def receive(self, model, t1, v1, states, span, ring, ions=None):
        """`(states, dv)`: `states` after the events due at the step's end
        `t1` (ms; every event in `(t_delivered, t1 + near(t1)]`), at voltages
        `v1` (mV, all compartments), and the change of the voltage at each
        instance's compartment (mV: zero, with the derivative with respect to
        the event times); `ring`: the threshold sources' ring buffer as
        columns (`ThresholdSources.columns`), or `None`. Steps without events
        (most) skip the delivery (`lax.cond`; under `vmap` both branches
        run)."""
        t_lo = states["t_delivered"][0]
        t_due = t1 + near(t1)  # events up to `near(t1)` after `t1` run at `t1`
        spike = cell = None
        due = jnp.any(jnp.stack(self._due(states, t_due)))
        if self.arrivals is not None:
            spike = self.arrivals.select(t_lo, t_due, span, True)
            due = due | jnp.any(spike[3])
        if self.cell is not None and ring is not None:
            rows = jnp.stack(ring)[:, self.cell.source]
            cell = self.cell.hits(rows, t_lo, t_due, True)
            due = due | jnp.any(cell[0] > 0)

        def deliver(states):
            ctx = _Context(self, model, v1, ions)  # (only on steps with events)
            # One round function for both passes over the self-events: JAX
            # caches a scan body's trace by function object, so the second
            # pass reuses the first one's (NET_RECEIVE's Python is traced once).
            round_ = self._queue_round(ctx, t_due)
            out, bad = self._queue_pass(round_, dict(states))
            if spike is not None:
                t, entry, _, mask, overflow, nc = spike
                out, b = self._in_turn(ctx, out, entry, nc, t, mask)
                bad = bad | b | overflow
            if cell is not None:
                count, arrival = cell
                m = self.cell.entry.shape[0]
                src = ctx.n_spike + jnp.arange(m, dtype=jnp.int32)
                out, b = self._in_turn(
                    ctx, out, self.cell.entry, src, arrival, count > 0
                )
                bad = bad | b | jnp.any(count > 1)
            out, b = self._queue_pass(round_, out)  # those sent with delay 0
            bad = bad | b | jnp.any(jnp.stack(self._due(out, t_due)))
            return {
                k: x if k == "t_delivered" else jnp.where(bad, jnp.nan, x)
                for k, x in out.items()
            }

        start = dict(states) | {DV: jnp.zeros_like(states["t_delivered"])}
        out = jax.lax.cond(due, deliver, lambda x: dict(x), start)
        dv = out.pop(DV)
        out["t_delivered"] = jnp.full_like(states["t_delivered"], t_due)
        return self.with_current(v1, out, ions), dv

    def _due(self, states, t1):
        """Per slot: whether each instance's self-event there is due by `t1`."""
        out = []
        for k in range(self.queue_slots):
            t = states[queue_keys(k)[0]]
            out.append((t <= t1) & (t < 0.5 * EMPTY))
        return out

    def _queue_pass(self, round_, states):
        """Every instance's due self-events, earliest first: `queue_slots`
        rounds of `round_` (`_queue_round`), each running each instance's
        earliest due event (vectorised over the instances)."""
        (states, bad), _ = jax.lax.scan(
            round_, (states, jnp.asarray(False)), None, length=self.queue_slots
        )
        return states, bad

    def _queue_round(self, ctx, t1):
        """The scan body of `_queue_pass`: run each instance's earliest
        self-event due by `t1` (ms)."""

        def round_(carry, _):
            states, bad = carry
            keys = [queue_keys(k) for k in range(self.queue_slots)]
            t = jnp.stack([states[k[0]] for k in keys], 1)  # (n, slots)
            due = (t <= t1) & (t < 0.5 * EMPTY)
            first = jnp.argmin(jnp.where(due, t, jnp.inf), axis=1)
            on = jnp.any(due, axis=1)
            pick = jax.nn.one_hot(first, len(keys), dtype=bool) & on[:, None]
            te = jnp.take_along_axis(t, first[:, None], 1)[:, 0]
            flag = jnp.stack([states[k[1]] for k in keys], 1)
            flag = jnp.take_along_axis(flag, first[:, None], 1)[:, 0]
            src = jnp.stack([states[k[2]] for k in keys], 1)
            src = jnp.take_along_axis(src, first[:, None], 1)[:, 0]
            src = jnp.where(on, src, 0.0).astype(jnp.int32)
            states = dict(states)
            for j, (tk, _, _) in enumerate(keys):  # taken out before it runs
                states[tk] = jnp.where(pick[:, j], EMPTY, states[tk])
            states, b = self._run(ctx, states, None, src, te, flag, on)
            return (states, bad | b), None

        return round_

    def _in_turn(self, ctx, states, entry, src, t, mask):
        """NetCon events (flag 0) at instances `entry` from NetCons `src` at
        times `t` (ms) where `mask`, one after another."""

        def one(carry, ev):
            states, bad = carry
            e, s, te, on = ev
            states, b = self._run(
                ctx, states, e[None], s[None], te[None], None, on[None]
            )
            return (states, bad | b), None

        (states, bad), _ = jax.lax.scan(
            one,
            (states, jnp.asarray(False)),
            (entry.astype(jnp.int32), src.astype(jnp.int32), t, mask),
        )
        return states, bad

    def _run(self, ctx, states, rows, src, t, flag, on):
        """NET_RECEIVE for the events at instances `rows` (`(k,)`, distinct;
        `None`: one event at every instance, `(n,)`)
        from NetCons `src` at times `t` with flags `flag` (`None`: 0) where
        `on`: `(states, overflow)`."""
        sp = self.spec
        held = (*sp.module.states, *sp.counters)
        own = {x: take_rows(states[x], rows) for x in held}
        # `src` -1: a self-event that INITIAL sent, of no NetCon (weight 0)
        some = src >= 0
        at_src = jnp.maximum(src, 0)
        vec = {
            a: jnp.where(some, ctx.vector(states, a)[at_src], 0.0) for a in sp.vector
        }
        w = jnp.where(some, ctx.weight[at_src], 0.0)
        v = take_rows(ctx.v, rows)

        def at(x):
            return self._vars(
                ctx.params(rows), v, x, self.celsius, ctx.geometry(rows),
                ctx.ion_rows(rows),
            )  # fmt: skip

        # The event's instant moved by `shift` (0, with the event time's
        # derivative): the states run that much longer at their rates before
        # it, and that much shorter at their rates after it. Zero in value; in
        # the derivative, the jump of the rates at the event.
        shift = t - jax.lax.stop_gradient(t)
        rate0, i0 = self._rates(at(own), own, v)
        moved = {x: own[x] + shift * rate0[x] if x in rate0 else own[x] for x in held}
        m = at(moved)
        m.t = t
        lv = sp.ns["pr_NET_RECEIVE"](
            m, w, *vec.values(), flag=0.0 if flag is None else flag
        )
        after = {x: _runtime.as_n(getattr(m, py(x)), w) for x in held}
        rate1, i1 = self._rates(at(after), after, v)
        after = {x: y - shift * rate1[x] if x in rate1 else y for x, y in after.items()}
        # the voltage's rate jumps with the current: -1e-3·Δi/(C·area) mV/ms
        dv = jnp.where(on, shift * 1e-3 * (i1 - i0) / take_rows(ctx.charge, rows), 0.0)
        out = dict(states)
        out[DV] = add_rows(out[DV], rows, dv)
        for x in held:
            out[x] = put_rows(out[x], rows, jnp.where(on, after[x], own[x]))
        for a in sp.vector:
            new = _runtime.as_n(getattr(lv, py(a)), w)
            out = ctx.set_vector(out, a, jnp.where(on, src, -1), new)
        bad = jnp.asarray(False)
        for k in range(sp.ns.get("N_MOVES", 0)):  # (before this event's sends)
            moved, tm = (getattr(m, x) for x in move_names(k))
            moved = on & (_runtime.as_n(moved, w) != 0)
            out, b = move(out, self.queue_slots, rows, moved, _runtime.as_n(tm, w))
            bad = bad | b
        for k in range(sp.n_sends):
            sent, ts, fs = (getattr(m, x) for x in send_names(k))
            sent = on & (_runtime.as_n(sent, w) != 0)
            out, b = enqueue(out, self.queue_slots, rows, sent, ts, fs, src, w)
            bad = bad | b
        for k in range(sp.ns.get("N_FIRES", 0)):
            fired, tf = (getattr(m, x) for x in fire_names(k))
            fired = on & (_runtime.as_n(fired, w) != 0)
            tf = _runtime.as_n(tf, w).astype(out[FIRE_T].dtype)
            old = take_rows(out[FIRE_T], rows)
            out[FIRE_T] = put_rows(out[FIRE_T], rows, jnp.where(fired, tf, old))
            out[FIRE_N] = add_rows(out[FIRE_N], rows, fired)
        return out, bad

    def _rates(self, m, x, v):
        """The states' rates (/ms, by name; the states that DERIVATIVE moves)
        and the point process's current (nA, outward) at the variables `m`
        (states `x`)."""
        kin = {}
        for d in self.spec.derivs:
            kin |= d(m.copy())
        rates = {
            s: kin[s].rhs(x[s])
            for s in self.spec.module.states
            if isinstance(kin.get(s), AbstractKinetics)
        }
        self.spec.ns["breakpoint"](m)
        parts = [getattr(m, py(n)) for n in self.spec.module.nonspecific]
        parts += [getattr(m, py(n)) for _, n in self.spec.ion_writes]
        i = sum(parts[1:], parts[0]) if parts else 0.0
        return rates, _runtime.as_n(i, v)


class _Context:
    """What one delivery reads at every event: the voltages, geometry and
    ions at the instances' compartments, and the NetCons' weights and weight
    vectors (spike-time NetCons first, then those from threshold sources:
    a NetCon's number `src` indexes both)."""

    def __init__(self, group, model, v, ions):
        self.group = group
        self.v = v[group.index]
        self.diam = model.diameter[group.index]
        self.area = model.area[group.index] * 1e8  # µm²
        # C·area, µF: a current of 1 nA moves v by 1e-3/charge mV/ms
        self.charge = model.capacitance[group.index] * model.area[group.index]
        self.ions = group._ions(ions)
        a, c = group.arrivals, group.cell
        self.n_spike = 0 if a is None else a.weight.shape[0]
        parts = [x.weight for x in (a, c) if x is not None]
        self.weight = jnp.concatenate(parts) if parts else jnp.zeros((1,), v.dtype)

    def params(self, rows):
        return {f: take_rows(x, rows) for f, x in self.group.params.items()}

    def geometry(self, rows):
        return dict(diam=take_rows(self.diam, rows), area=take_rows(self.area, rows))

    def ion_rows(self, rows):
        if self.ions is None:
            return None
        return {k: take_rows(x, rows) for k, x in self.ions.items()}

    def vector(self, states, a):
        parts = [states[p + a] for p in (NETCON, CELL_NETCON) if p + a in states]
        return jnp.concatenate(parts) if parts else jnp.zeros_like(self.weight)

    def set_vector(self, states, a, src, new):
        """`states` with element `a` of NetCons `src` (`-1`: none) set to `new`."""
        out = dict(states)
        lo = 0
        for p in (NETCON, CELL_NETCON):
            if p + a not in states:
                continue
            x = states[p + a]
            n = x.shape[0]
            at = jnp.where((src >= lo) & (src < lo + n), src - lo, n)
            out[p + a] = x.at[at].set(new.astype(x.dtype), mode="drop")
            lo += n
        return out
