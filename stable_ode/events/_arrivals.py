"""Arrivals of NetCon events at a group of synapses: sorted once at build time,
found each step by two binary searches and a fixed-size window.

A step delivers the arrivals in a half-open time interval. The window holds
`W` consecutive arrivals, with `W` the largest number of arrivals in any time
interval as long as the step (`Arrivals.window`, from a table computed at
build time), so the per-step cost grows with the number of arrivals per step,
not with the number of connections or the delays. Should more arrivals than
`W` fall in one interval, the step's state is made non-finite so that the
step controller retries it in shorter steps (never a dropped event).
"""

import bisect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._misc import search_sorted


_SPANS = tuple(1e-9 * 2.0**k for k in range(64))


def _flat(columns):
    """The ring buffer's columns (`ThresholdSources.columns`) as one array,
    source by source: `(sources × pending,)` spike times (ms)."""
    return jnp.stack(columns, axis=1).reshape(-1)


def window_table(times: np.ndarray) -> tuple[int, ...]:
    """`table[k]`: the largest number of `times` in a closed interval of length
    `_SPANS[k]` ms (at least 1)."""
    t = np.sort(np.asarray(times, dtype=float))
    out = []
    for h in _SPANS:
        if t.size == 0:
            out.append(1)
            continue
        hi = np.searchsorted(t, t + h * (1 + 1e-9), side="right")
        out.append(max(1, int(np.max(hi - np.arange(t.size)))))
    return tuple(out)


class Arrivals(eqx.Module):
    """The NetCon arrivals at one group, sorted by time.

    **Fields:** `spike` (ms, the source's spike times, in the order of the
    arrivals, padded with `+inf`), `entry` (which synapse of the group),
    `netcon` (which of `weight` and `delay`), `weight` (one per NetCon, µS)
    and `delay` (one per NetCon, ms; both differentiable), `target` (one per
    NetCon: which synapse of the group), `table` (`window_table`). An
    arrival's time is `spike + delay[netcon]`.

    The order is that of the delays given to `build`: a model whose delays
    are changed afterwards (`eqx.tree_at`) must keep the arrivals in the same
    order (as any gradient or small perturbation does); `simulate` reports
    `RESULTS.event_order` otherwise (`disorder`)."""

    spike: Float[Array, " m"]
    entry: Int[Array, " m"]
    netcon: Int[Array, " m"]
    weight: Float[Array, " nnetcon"]
    delay: Float[Array, " nnetcon"]
    target: Int[Array, " nnetcon"]
    table: tuple[int, ...] = eqx.field(static=True)

    @property
    def time(self) -> Float[Array, " m"]:
        """The arrival times, ms (`+inf` in the padding)."""
        return self.spike + self.delay[self.netcon]

    def disorder(self):
        """The earliest arrival time (ms) out of the build-time order, `inf`
        if they are still sorted."""
        t = jax.lax.stop_gradient(self.time)
        bad = t[1:] < t[:-1]
        return jnp.min(jnp.where(bad, t[1:], jnp.inf), initial=jnp.inf)

    def window(self, span: float) -> int:
        """The window size for delivery intervals up to `span` ms long."""
        k = min(bisect.bisect_left(_SPANS, span), len(_SPANS) - 1)
        return self.table[k]

    def select(self, t_lo, t_hi, span: float, closed: bool):
        """The arrivals with `t_lo < time <= t_hi` (`< t_hi` unless `closed`):
        `(time, entry, weight, mask, overflow, netcon)` over a window of
        `window(span)` arrivals; `overflow` is whether more arrivals lie in the
        interval. `time` carries the gradient with respect to the delays."""
        w = self.window(span)
        time_d = self.time
        time = jax.lax.stop_gradient(time_d)
        lo = search_sorted(time, t_lo, "right")
        hi = search_sorted(time, t_hi, "right" if closed else "left")
        # The padding keeps `lo + w` in range.
        lo = jnp.minimum(lo, jnp.int32(time.shape[0] - w))
        t = jax.lax.dynamic_slice_in_dim(time_d, lo, w)
        entry = jax.lax.dynamic_slice_in_dim(self.entry, lo, w)
        nc = jax.lax.dynamic_slice_in_dim(self.netcon, lo, w)
        mask = (lo + jnp.arange(w, dtype=jnp.int32)) < hi
        return t, entry, self.weight[nc], mask, (hi - lo) > w, nc


def build_arrivals(
    spikes, entries, netcons, weights, delays, targets, dtype
) -> Arrivals:
    """`Arrivals` from per-arrival NumPy `spikes` (ms), `entries`, `netcons`
    and the per-NetCon `weights` (µS), `delays` (ms) and `targets`."""
    spikes = np.asarray(spikes, dtype=float)
    netcons = np.asarray(netcons, np.int32)
    delays = np.asarray(delays, dtype=float)
    times = spikes + delays[netcons]
    order = np.argsort(times, kind="stable")
    table = window_table(times)
    pad = max(table)
    s = np.concatenate([spikes[order], np.full((pad,), np.inf)])
    e = np.concatenate([np.asarray(entries, np.int32)[order], np.zeros(pad, np.int32)])
    n = np.concatenate([netcons[order], np.zeros(pad, np.int32)])
    return Arrivals(
        spike=jnp.asarray(s, dtype),
        entry=jnp.asarray(e),
        netcon=jnp.asarray(n),
        weight=jnp.asarray(np.asarray(weights, dtype=float), dtype),
        delay=jnp.asarray(delays, dtype),
        target=jnp.asarray(np.asarray(targets, np.int32)),
        table=table,
    )


NONE = -1e30
"""The "no spike" time (ms) in the buffers: finite, so the states stay finite,
and far enough in the past that `NONE + delay` is never delivered."""
NEVER = 1e30
"""The "no arrival yet" time (ms) of a NetCon: finite, as states must be, and
later than any solve ends."""


NETCON = "netcon:"
"""The prefix of the states a group keeps per NetCon from spike-time sources
(one per `Arrivals` NetCon): an NMODL `NET_RECEIVE`'s weight vector."""
CELL_NETCON = "cellnetcon:"
"""The prefix of the states a group keeps per NetCon from threshold sources
(one per `CellArrivals` NetCon)."""
NEXT = CELL_NETCON + "#next"
"""The state in which a group receiving NetCons from threshold sources counts,
per NetCon, its source's spikes whose arrival it has delivered
(`CellArrivals.deliver`)."""
ARRIVAL = CELL_NETCON + "#arrival"
"""The state that holds, per NetCon from a threshold source, the time (ms) of
its next arrival (its source's spike number `NEXT` plus its delay; `NEVER`
until the source fires it)."""


def is_time(t):
    return t > 0.5 * NONE


FEW = 8
"""Up to this many arrivals in a delivery window, `CellArrivals` evaluates the
jumps on those arrivals alone (more: on every NetCon)."""


NEAR_ULPS = 16


def near(t):
    """How close (ms) an event must be after a step's end `t` (ms) to be
    delivered at it: 16 units in the last place of `t` (of 1 ms at least), so
    that no step that lands on events is ever shorter (a step of an ulp or
    two is no step to the solvers: TR-BDF2's inner stage is then empty)."""
    t = jax.lax.stop_gradient(jnp.asarray(t))
    return NEAR_ULPS * jnp.finfo(t.dtype).eps * jnp.maximum(jnp.abs(t), 1.0)


def just_before(t):
    """The float before `t` (ms): the end of a delivery window that stops
    short of `t`. A window's ends carry no derivative (arrivals carry theirs
    in their age), and `nextafter` has none in JAX."""
    return jnp.nextafter(jax.lax.stop_gradient(t), -jnp.inf)


def first_after(t, after):
    """`(t, at)` over the event times `t` (ms; `inf` for none): the first
    after `after + near(after)` (`inf` if none; those up to there are
    delivered at `after`), and whether one is at `after`, to within
    `near(after)` either way."""
    d = near(after)
    end = after + d
    later = jnp.min(jnp.where(t > end, t, jnp.inf), initial=jnp.inf)
    return later, jnp.any((t >= after - d) & (t <= end))


class CellArrivals(eqx.Module):
    """The NetCons from threshold sources into one synapse group.

    **Fields:** `source` (which source), `entry` (which synapse of the group),
    `delay` (ms, > 0; differentiable), `weight` (µS; differentiable), one per
    NetCon."""

    source: Int[Array, " m"]
    entry: Int[Array, " m"]
    delay: Float[Array, " m"]
    weight: Float[Array, " m"]

    def init_next(self, dtype) -> dict:
        """The per-NetCon states `NEXT` and `ARRIVAL` at the start: no spike
        delivered, none pending."""
        return {
            NEXT: jnp.zeros(self.source.shape, dtype),
            ARRIVAL: jnp.full(self.source.shape, NEVER, dtype),
        }

    def pending(self, ring, count, k, at=None):
        """The arrival time (ms, with its gradient) of each NetCon's `k`-th
        spike (`k`: one per NetCon, counted from 0), `NEVER` where its source
        has not fired that often; of the NetCons `at` only, if given. `ring`:
        the sources' ring buffer flattened source by source (`(sources ×
        pending,)`), `count`: each source's spikes so far."""
        source, delay = (self.source, self.delay) if at is None else (
            self.source[at], self.delay[at]
        )  # fmt: skip
        slots = ring.shape[0] // count.shape[0]
        k = jax.lax.stop_gradient(k).astype(jnp.int32)
        s = ring[source * slots + jnp.mod(k, slots)]
        fired = k < jax.lax.stop_gradient(count[source]).astype(jnp.int32)
        return jnp.where(fired, s + delay, NEVER)

    def deliver(self, states, spikes, count, windows, netcon_states=False, fired=True):
        """`states` with the arrivals in each of `windows` added. A window
        `(t_hi, closed, consume, jumps)` holds each NetCon's next undelivered
        arrival (the `ARRIVAL` state) if it is at or before `t_hi` (`closed`)
        or before it, and adds it by each `(t_at, jump)` of `jumps`:
        `jump(entry, weight, age)`, `age = t_at - arrival` (ms). With
        `consume`, those arrivals are delivered: the next window sees each
        NetCon's following one (its source's next spike, `NEXT`, from the
        ring buffer). `spikes`: the sources' ring buffer as its columns
        (`ThresholdSources.columns`, one `(n,)` array per slot); `count`: each
        source's spikes so far; `fired`: whether a source may have fired since
        the last delivery (`False`: none did; `True` or a traced boolean: the
        NetCons that wait for a spike read it from the ring buffer).

        A NetCon has at most one arrival in a window: two crossings of one
        threshold are more than a step apart (the voltage must be back at or
        below the threshold at a step's end in between), and a window is at
        most a step long (adaptive steps land on every arrival). So `jump` is
        evaluated at most once per NetCon and window (on the few NetCons that
        receive, or on all of them: `_add`), and each state gets one
        scattered addition; should a NetCon's following arrival lie
        in a consuming window too, its increments are NaN, so the step is
        retried shorter (never a dropped event). A window that does not
        consume is followed by one that does over the same interval.

        The arrival times are states, read without a gather: a step compares
        them with its end as whole vectors, and the ring buffer is read only
        where something changed (a source fired, an arrival was delivered;
        `lax.cond` and `lax.switch`, so under `vmap` every step reads it).

        With `netcon_states`, `jump` takes a fourth argument, the event: `t`
        (the arrival time, ms) and the NetCons' own states (the group's states
        `cellnetcon:<name>`, one per NetCon, by `<name>`), and may return new
        values of them (keys `@<name>`), kept where a NetCon received."""
        out = dict(states)
        if fired is not False:

            def refresh(out):
                # a source fired the spike a NetCon waits for: its arrival time
                waiting = (out[NEXT] < count[self.source]) & (out[ARRIVAL] >= NEVER)
                new = self.pending(_flat(spikes), count, out[NEXT])
                return out | {ARRIVAL: jnp.where(waiting, new, out[ARRIVAL])}

            out = (
                refresh(out)
                if fired is True
                else jax.lax.cond(fired, refresh, dict, out)
            )
        for t_hi, closed, consume, jumps in windows:
            arrival = out[ARRIVAL]
            ta = jax.lax.stop_gradient(arrival)
            hit = (ta <= t_hi) if closed else (ta < t_hi)
            due = (t_hi, closed, spikes, count) if consume else None
            out = self._add(states, out, jumps, arrival, hit, due, netcon_states)
        return out

    def _add(self, states, out, jumps, arrival, hit, due, netcon_states):
        """`out` with the arrivals `arrival` (ms) of the NetCons that `hit`
        added by each `(t_at, jump)` of `jumps` (`deliver`). With `due =
        (t_hi, closed, spikes, count)` they are delivered: each such NetCon's
        `NEXT` and `ARRIVAL` move on to its source's next spike, and should
        that arrival lie in the window too, the NetCon's increments are NaN.
        The NetCons' own states are read from `states`.

        Up to `FEW` arrivals (most windows hold one or none) are first taken
        from the NetCons (`lax.top_k`), so that the jumps are evaluated on
        those alone; more, on every NetCon; none, not at all."""
        args = (states, jumps, arrival, hit, due, netcon_states)
        if hit.shape[0] <= 4 * FEW:
            return self._add_at(None, out, *args)

        def few(out):
            _, at = jax.lax.top_k(hit.astype(jnp.float32), FEW)
            return self._add_at(at.astype(jnp.int32), out, *args)

        def every(out):
            return self._add_at(None, out, *args)

        count = jnp.sum(hit)
        branch = jnp.where(count == 0, 0, jnp.where(count <= FEW, 1, 2))
        return jax.lax.switch(branch, (dict, few, every), out)

    def _add_at(self, at, out, states, jumps, arrival, hit, due, netcon_states):
        """`_add` for the NetCons `at` (distinct; `None`: all of them)."""

        def pick(x):
            return x if at is None else x[at]

        def put(key, x):
            return x if at is None else out[key].at[at].set(x)

        entry, weight, arrival, hit = map(pick, (self.entry, self.weight, arrival, hit))
        twice = None
        if due is not None:  # each NetCon's following arrival
            t_hi, closed, spikes, count = due
            k = pick(out[NEXT]) + hit.astype(out[NEXT].dtype)
            following = self.pending(_flat(spikes), count, k, at)
            following = jnp.where(hit, following, arrival)
            tn = jax.lax.stop_gradient(following)
            twice = hit & ((tn <= t_hi) if closed else (tn < t_hi))
        total: dict = {}
        for t_at, jump in jumps:
            age = jnp.where(hit, t_at - arrival, 0.0)
            if netcon_states:
                event = {"t": jnp.where(hit, arrival, t_at)}
                event |= {
                    k[len(CELL_NETCON) :]: pick(x)
                    for k, x in states.items()
                    if k.startswith(CELL_NETCON) and k not in (NEXT, ARRIVAL)
                }
                incs = jump(entry, weight, age, event)
            else:
                incs = jump(entry, weight, age)
            for key, inc in incs.items():
                if key.startswith("@"):  # a NetCon's own state: its new value
                    key = CELL_NETCON + key[1:]
                    old = pick(states[key])
                    new = jnp.where(hit, inc.astype(old.dtype), old)
                    new = new if twice is None else jnp.where(twice, jnp.nan, new)
                    out[key] = new if at is None else states[key].at[at].set(new)
                    continue
                inc = jnp.where(hit, inc, jnp.zeros_like(inc))
                if twice is not None:
                    inc = jnp.where(twice, jnp.nan, inc)
                total[key] = inc if key not in total else total[key] + inc
        for key, inc in total.items():
            out[key] = out[key].at[entry].add(inc.astype(out[key].dtype))
        if due is not None:
            out[NEXT], out[ARRIVAL] = put(NEXT, k), put(ARRIVAL, following)
        return out

    def hits(self, rows, t_lo, t_hi, closed: bool):
        """`(count, arrival)` per NetCon: how many of its arrivals lie in
        `(t_lo, t_hi]` (`closed`) or `(t_lo, t_hi)`, and their summed time (ms,
        with its gradient; 0 where none arrives). `rows`: the sources' ring
        buffer at the NetCons' sources, `(pending, m)`."""
        count, arrival = 0, 0.0
        for s in rows:
            t = s + self.delay
            ts = jax.lax.stop_gradient(t)
            later = (ts <= t_hi) if closed else (ts < t_hi)
            hit = is_time(s) & (ts > t_lo) & later
            count = count + hit.astype(jnp.int32)
            arrival = arrival + jnp.where(hit, t, 0.0)
        return count, arrival

    def next_arrival(self, ring, after):
        """`(t, at)`: the first arrival after `after + near(after)` (ms; `inf`
        if none; those before were delivered at `after`), and whether one is
        at `after` (to within `near(after)`)."""
        spikes = jax.lax.stop_gradient(ring[self.source])
        t = spikes + jax.lax.stop_gradient(self.delay)[:, None]
        return first_after(jnp.where(is_time(spikes), t, jnp.inf), after)
