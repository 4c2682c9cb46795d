"""Cell-voltage NetCon sources: a compartment's voltage crossing a threshold
upwards (NEURON's `NetCon(sec(x)._ref_v, target, threshold, delay, weight)`).

`ThresholdSources` is one state group for all sources of a model. Each source
keeps a fixed-size ring buffer of its `pending` most recent spike times (its
`spikes` state), so memory does not grow with the simulated time. Each NetCon
holds the time of its next arrival as a state of its target's group, read
from the ring buffer only when its source fires or the arrival is delivered,
so a step's delivery costs `O(netcons)` elementwise work and scattered
additions, not `O(netcons × max_delay / dt)`.
A crossing is located within the step by linear interpolation of `v` between
the step's start and end, `t0 + (t1 - t0)·(threshold - v0)/(v1 - v0)`, a
differentiable function of the step's states (so a spike time carries the
gradient `-(∂v/∂θ)/(dv/dt)` of everything upstream). Overwriting a spike
whose arrivals are not all delivered yet, or a spike recording fuller than
its `max_spikes`, is not silent: the source's `overflow` state records the
time, and `simulate` reports `RESULTS.event_overflow`.

`stable_ode.events._arrivals.CellArrivals` are the NetCons from these
sources into one synapse group.
"""

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._errors import check_number, InvalidArgument
from .._recordings import Recordings
from .._stimulus import Site
from ._arrivals import CellArrivals, is_time as _is_time, NONE
from ._groups import AbstractNoCurrentGroup
from ._netcon import is_artificial, pending_of, threshold_of


FIRE_T, FIRE_N = "fire:t", "fire:n"
"""The states in which an artificial cell's group holds its `net_event`s of
the last delivery (`stable_ode.nmodl._sequential`): their time (ms, `NONE`
if none) and how many, until `events._stepping` writes them to its sources
(`ThresholdSources.emit`)."""


class ThresholdSources(AbstractNoCurrentGroup):
    """All threshold sources of a model.

    **Fields:** `index`, the compartment of each source; `threshold`, mV
    (a crossing is `v0 <= threshold < v1` over a step, NEURON's `v >
    threshold` after not); `horizon`, ms, the longest delay of its NetCons (a
    buffered spike is pending until `spike + horizon`); `pending`, the ring
    buffer's size.

    **States:** `s0` ... `s{pending-1}` the ring buffer of recent spike times
    (ms, `NONE` where empty; `ring` stacks them); `count` the spikes so far;
    `overflow` the time of the first spike lost (ms, `NONE` if none)."""

    index: Int[Array, " n"]
    threshold: Float[Array, " n"]
    horizon: Float[Array, " n"]
    pending: int = eqx.field(static=True)
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="NetCon source")

    def ring(self, states) -> Float[Array, "n pending"]:
        """The ring buffer of `states`, `(n, pending)` spike times (ms)."""
        return jnp.stack([states[f"s{k}"] for k in range(self.pending)], axis=1)

    def columns(self, states) -> tuple[Float[Array, " n"], ...]:
        """The ring buffer of `states` by slot: `pending` arrays of `(n,)`
        spike times (ms)."""
        return tuple(states[f"s{k}"] for k in range(self.pending))

    def init_states(self, model, v):
        del model
        none = jnp.full(self.index.shape, NONE, v.dtype)
        out = {f"s{k}": none for k in range(self.pending)}
        return {**out, "count": jnp.zeros_like(none), "overflow": none}

    def detect(self, t0, t1, v0, v1, states):
        """`(states, cross, tc, count)` after a step from `t0` to `t1` (ms)
        that took the voltages from `v0` to `v1` (mV, all compartments): each
        source that crossed its threshold (`cross`) gets a spike at the
        interpolated crossing time `tc`; `count`: the spikes before it."""
        a, b = v0[self.index], v1[self.index]
        thr = self.threshold
        cross = (a <= thr) & (b > thr)
        # Double `where`: no 0/0 (nor its gradient) where nothing crossed.
        frac = (thr - a) / jnp.where(cross, b - a, 1.0)
        tc = t0 + (t1 - t0) * jnp.clip(jnp.where(cross, frac, 0.0), 0.0, 1.0)
        return self._record(t0, states, cross, tc)

    def emit(self, states, rows, fired, t):
        """`detect`'s result for spikes at times `t` (ms) of the sources `rows`
        where `fired` (an artificial cell's `net_event`s, at the end of a step
        that ends at `t`)."""
        n = self.index.shape[0]
        rows = jnp.where(rows >= 0, rows, n)  # -1 (no source): dropped
        cross = jnp.zeros((n,), bool).at[rows].set(fired, mode="drop")
        tc = jnp.zeros((n,), t.dtype).at[rows].set(t, mode="drop")
        t0 = jnp.min(jnp.where(cross, tc, jnp.inf))
        return self._record(t0, states, cross, tc)

    def _record(self, t0, states, cross, tc):
        """`detect`'s result for spikes at `tc` of the sources where `cross`
        (a spike overwritten in the ring buffer is lost if its arrivals after
        `t0` are not all delivered)."""
        count = states["count"]
        slot = jnp.mod(count, self.pending).astype(jnp.int32)
        ring = self.columns(states)
        # Elementwise over the slots (no gather or scatter: XLA fuses it).
        old = sum(jnp.where(slot == k, s, 0.0) for k, s in enumerate(ring))
        # The overwritten spike still has arrivals after t0 to deliver.
        pending = jax.lax.stop_gradient(old) + self.horizon > t0
        lost = cross & _is_time(old) & pending
        first = lost & ~_is_time(states["overflow"])
        out = {
            f"s{k}": jnp.where(cross & (slot == k), tc, s) for k, s in enumerate(ring)
        }
        out["count"] = count + cross.astype(count.dtype)
        out["overflow"] = jnp.where(
            first, jax.lax.stop_gradient(tc), states["overflow"]
        )
        return out, cross, tc, count


class SpikeLog(AbstractNoCurrentGroup):
    """The recorded spikes (`SpikeRecording`s): `max_spikes` slots per
    recording, entry `r·max_spikes + k` the `k`-th spike of recording `r`.

    **Fields:** `index` (each slot's compartment), `source` (the source each
    recording follows), `max_spikes`, `log_names`. **States:** `t` (ms,
    `NONE` where empty), `overflow` (at each recording's first slot: the time
    of its first spike that did not fit, ms; `NONE` if none, and in the other
    slots)."""

    index: Int[Array, " nslot"]
    source: Int[Array, " nlog"]
    max_spikes: int = eqx.field(static=True)
    log_names: tuple[str, ...] = eqx.field(static=True)
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="spike recording")

    def init_states(self, model, v):
        del model
        none = jnp.full(self.index.shape, NONE, v.dtype)
        return {"t": none, "overflow": none}

    def write(self, states, cross, tc, count):
        """`states` with the crossings `cross` at `tc` (ms) of the sources,
        which had fired `count` times before. Costs `O(recordings)`: one
        slot per recording is written, and a lost spike is noted in the
        `overflow` of the recording's first slot; nothing in the steps
        without a crossing (most; `lax.cond`)."""
        written = functools.partial(self._write, cross=cross, tc=tc, count=count)
        return jax.lax.cond(jnp.any(cross), written, dict, dict(states))

    def _write(self, states, cross, tc, count):
        c = self.max_spikes
        hit = cross[self.source]
        k = count[self.source].astype(jnp.int32)
        fits = hit & (k < c)
        first_slot = jnp.arange(self.source.shape[0], dtype=jnp.int32) * c
        slot = first_slot + jnp.minimum(k, c - 1)
        t = states["t"]
        t = t.at[slot].set(jnp.where(fits, tc[self.source], t[slot]))
        over = states["overflow"]
        old = over[first_slot]
        first = hit & ~fits & ~_is_time(old)
        t_lost = jax.lax.stop_gradient(tc[self.source])
        over = over.at[first_slot].set(jnp.where(first, t_lost, old))
        return {"t": t, "overflow": over}

    def times(self, states) -> Recordings:
        """The recorded spike times (ms) by name, padded with `inf`: one
        `(max_spikes, recordings)` array, a column sliced by name only when
        looked up."""
        t = states["t"].reshape(len(self.log_names), self.max_spikes).T
        return Recordings(jnp.where(_is_time(t), t, jnp.inf), self.log_names)


class SpikeRecording(eqx.Module):
    """Record the times at which `site`'s voltage crosses `threshold` (mV,
    default 10, NEURON's) upwards under `name`: NEURON's `NetCon.record(vec)`.
    `site` may also be an instance of an imported `ARTIFICIAL_CELL` given to
    `build`: its spikes (`net_event`s) are recorded (`threshold` unused).
    `simulate` returns them in `Simulation.spikes[name]`. Up to `max_spikes`
    (default 1,000) are kept; more is reported (`RESULTS.event_overflow`).
    The spike recordings of a model share one length, the largest of their
    `max_spikes`: each keeps (and is padded with `inf` to) that many."""

    name: str
    site: Site
    threshold: float = 10.0
    max_spikes: int = 1000

    def __check_init__(self):
        if not (isinstance(self.site, Site) or is_artificial(self.site)):
            raise InvalidArgument(
                "SpikeRecording",
                "site",
                "must be a stable_ode.Site or an imported ARTIFICIAL_CELL, got "
                f"{self.site!r}",
            )
        check_number("SpikeRecording", "threshold", self.threshold)
        k = self.max_spikes
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
            raise InvalidArgument(
                "SpikeRecording", "max_spikes", f"must be an integer >= 1, got {k!r}"
            )


def build_sources(cell_netcons, spike_recordings, index_of, dtype):
    """`(sources, log, arrivals, artificial)`: the `ThresholdSources` and
    `SpikeLog` groups (or `None`), per target kind the `CellArrivals` of
    `cell_netcons` (`(j, kind, entry, netcon)` with `j` the NetCon's position,
    for errors), and the source of each artificial cell that is one (`id` of
    the instance → source number: a source that never crosses a threshold,
    whose spikes the artificial cell's `net_event`s write, `emit`)."""
    sources: dict = {}  # (compartment, threshold) -> source number
    comp, thr, horizon, pending = [], [], [], [1]
    artificial: dict = {}

    seen: dict = {}  # (cell, section, position, threshold) -> source number

    def source(site, threshold, where) -> int:
        if is_artificial(site):
            if id(site) not in artificial:
                artificial[id(site)] = len(comp)
                comp.append(0)  # (any compartment: its voltage is not read)
                thr.append(math.inf)
                horizon.append(0.0)
            return artificial[id(site)]
        fast = (site.cell, site.section, site.position, threshold)
        if fast in seen:
            return seen[fast]
        try:
            c = int(index_of(site))
        except ValueError as e:
            raise InvalidArgument("build", where, str(e)) from None
        key = (c, float(threshold))
        if key not in sources:
            sources[key] = len(comp)
            comp.append(c)
            thr.append(float(threshold))
            horizon.append(0.0)
        seen[fast] = sources[key]
        return sources[key]

    parts: dict = {}
    for j, kind, entry, nc in cell_netcons:
        thr_j = math.inf if is_artificial(nc.source) else threshold_of(nc)
        s = source(nc.source, thr_j, f"netcons[{j}].source")
        horizon[s] = max(horizon[s], float(nc.delay))
        pending[0] = max(pending[0], pending_of(nc))
        p = parts.setdefault(kind, ([], [], [], []))
        p[0].append(s)
        p[1].append(entry)
        p[2].append(nc.delay)
        p[3].append(nc.weight)
    logged, log_names, max_spikes = [], [], 1
    for j, r in spike_recordings:
        logged.append(source(r.site, r.threshold, f"recordings[{j}].site"))
        log_names.append(str(r.name))
        max_spikes = max(max_spikes, int(r.max_spikes))
    if not comp:
        return None, None, {}, {}
    group = ThresholdSources(
        index=jnp.asarray(comp, jnp.int32),
        threshold=jnp.asarray(np.asarray(thr), dtype),
        horizon=jnp.asarray(np.asarray(horizon), dtype),
        pending=pending[0],
        names=tuple(f"source[{k}]" for k in range(len(comp))),
    )
    log = None
    if logged:
        slots = np.repeat(np.asarray(comp)[logged], max_spikes)
        log = SpikeLog(
            index=jnp.asarray(slots.astype(np.int32)),
            source=jnp.asarray(np.asarray(logged, np.int32)),
            max_spikes=max_spikes,
            log_names=tuple(log_names),
            names=tuple(f"{n}[{k}]" for n in log_names for k in range(max_spikes)),
        )
    arrivals = {
        kind: CellArrivals(
            source=jnp.asarray(np.asarray(p[0], np.int32)),
            entry=jnp.asarray(np.asarray(p[1], np.int32)),
            delay=jnp.asarray(np.asarray(p[2], float), dtype),
            weight=jnp.asarray(np.asarray(p[3], float), dtype),
        )
        for kind, p in parts.items()
    }
    return group, log, arrivals, artificial
