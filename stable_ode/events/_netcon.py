"""NetCons and their sources: a list of spike times or NEURON's `NetStim`
(known before the run: arrival times `spike + delay`, ms, computed once at
build time in NumPy), or a compartment's voltage crossing a threshold
(`stable_ode.events._sources`).
"""

import math
from collections.abc import Sequence

import equinox as eqx
import numpy as np

from .._errors import concrete_number, InvalidArgument
from .._stimulus import Site


MIN_INTERVAL = 1.0
"""The shortest interval between two spikes of a source (ms) that the default
ring-buffer size (`NetCon.max_pending`) allows for."""


class SpikeTimes(eqx.Module):
    """A source that fires at the given `times` (ms, finite, >= 0), as NEURON's
    `VecStim` or `NetCon(None, target).event(t)`."""

    times: Sequence[float]

    def __check_init__(self):
        t = np.asarray(self.times, dtype=float)
        if t.ndim != 1:
            raise InvalidArgument("SpikeTimes", "times", "must be a list of times")
        if t.size and not (np.all(np.isfinite(t)) and np.all(t >= 0)):
            raise InvalidArgument(
                "SpikeTimes", "times", f"must be finite and >= 0 ms, got {t.tolist()}"
            )

    def spike_times(self) -> np.ndarray:
        """The spike times, ms."""
        return spike_times_of(self)


class NetStim(eqx.Module):
    """NEURON's `NetStim` (`netstim.mod`): `number` spikes (NEURON fires
    `ceil(number)`) from `start` ms, `interval` ms apart.

    With `noise` in (0, 1] the first spike is at `start + noise·interval·E₀`
    and each later interval `(1 - noise)·interval + noise·interval·Eₖ`, the
    `Eₖ` unit-mean exponential draws, as NEURON's; the draws come from
    `numpy.random.default_rng(seed)` at build time, so the spike times are
    NEURON's distribution but not NEURON's random stream (Random123): a noisy
    NetStim does not reproduce a NEURON run spike for spike.

    **Fields:** `interval`, ms (> 0; default 10); `number` (>= 0; default 10);
    `start`, ms (default 50; a negative start fires nothing, as NEURON);
    `noise` in [0, 1] (default 0); `seed`, an integer (default 0).
    """

    interval: float = 10.0
    number: float = 10
    start: float = 50.0
    noise: float = 0.0
    seed: int = 0

    def __check_init__(self):
        for name, gt, ge in (
            ("interval", 0, None),
            ("number", None, 0),
            ("start", None, None),
        ):
            x = getattr(self, name)
            if not concrete_number(x) or not math.isfinite(x):
                raise InvalidArgument(
                    "NetStim", name, f"must be a finite number, got {x!r}"
                )
            if gt is not None and not x > gt:
                raise InvalidArgument("NetStim", name, f"must be > {gt}, got {x!r}")
            if ge is not None and not x >= ge:
                raise InvalidArgument("NetStim", name, f"must be >= {ge}, got {x!r}")
        if not concrete_number(self.noise) or not 0 <= self.noise <= 1:
            raise InvalidArgument(
                "NetStim", "noise", f"must be in [0, 1], got {self.noise!r}"
            )
        if not isinstance(self.seed, (int, np.integer)) or isinstance(self.seed, bool):
            raise InvalidArgument(
                "NetStim", "seed", f"must be an integer, got {self.seed!r}"
            )

    def spike_times(self) -> np.ndarray:
        """The spike times, ms (drawn from `seed` if `noise` > 0)."""
        return spike_times_of(self)


def spike_times_of(source: "SpikeTimes | NetStim") -> np.ndarray:
    """A source's spike times, ms. (A function rather than a method: equinox
    wraps every bound method it hands out, which costs ~0.2 ms a call, too much
    for 100,000 NetCons at build time.)"""
    if isinstance(source, SpikeTimes):
        return np.sort(np.asarray(source.times, dtype=float))
    start, number, interval = source.start, source.number, source.interval
    noise = source.noise
    if start < 0 or number <= 0:
        return np.zeros((0,))
    n = int(math.ceil(number))
    if noise == 0:
        return start + interval * np.arange(n, dtype=float)
    e = np.random.default_rng(int(source.seed)).exponential(1.0, n)
    gaps = (1 - noise) * interval + noise * interval * e
    first = max(start + noise * interval * e[0], 0.0)
    return first + np.concatenate([[0.0], np.cumsum(gaps[1:])])


class NetCon(eqx.Module):
    """NEURON's `NetCon`: events from `source` reach `target` `delay` ms later
    with `weight` (µS for `ExpSyn` and `Exp2Syn`).

    **Fields:**

    - `source`: a `SpikeTimes` or a `NetStim` (known before the run), or a
      `stable_ode.Site`: that compartment's voltage crossing `threshold`
      upwards (NEURON's `NetCon(sec(x)._ref_v, target, threshold, delay,
      weight)`), located within the step by linear interpolation; or an
      instance of an imported `ARTIFICIAL_CELL` (`stable_ode.load_nmodl`)
      given to `build`: its `net_event`s are its spikes.
    - `target`: the point process (the object given to `build`) or its `name`;
      an `ExpSyn` or an `Exp2Syn`.
    - `delay`: ms (>= 0, > 0 for a `Site` or artificial-cell source; default 1).
      Differentiable for a `Site` source; fixed for the others.
    - `weight`: µS (default 0, as NEURON); differentiable.
    - `threshold`: mV (default 10, NEURON's), for a `Site` source only. NetCons
      from the same compartment with the same threshold share one source.
    - `max_pending`: for a `Site` source, the most spikes of its source that
      may be in flight at once (its ring buffer's size; default
      `ceil(delay / 1 ms) + 2`, enough for a source that fires at most once
      per ms). A source firing faster is reported (`RESULTS.event_overflow`),
      never silently dropped.
    """

    source: SpikeTimes | NetStim | Site
    target: object
    delay: float = 1.0
    weight: float = 0.0
    threshold: float | None = None
    max_pending: int | None = None

    def __check_init__(self):
        art = is_artificial(self.source)
        if not (isinstance(self.source, (SpikeTimes, NetStim, Site)) or art):
            raise InvalidArgument(
                "NetCon",
                "source",
                "must be a SpikeTimes, a NetStim, a stable_ode.Site (a "
                "compartment's voltage crossing a threshold) or an imported "
                f"ARTIFICIAL_CELL, got {self.source!r}",
            )
        cell = isinstance(self.source, Site) or art
        d = self.delay
        if not concrete_number(d) or not math.isfinite(d) or d < 0:
            raise InvalidArgument(
                "NetCon", "delay", f"must be a number >= 0 ms, got {d!r}"
            )
        if cell and not d > 0:
            raise InvalidArgument(
                "NetCon",
                "delay",
                "must be > 0 ms for a cell-voltage or artificial-cell source, "
                f"got {d!r}",
            )
        if concrete_number(self.weight) and not math.isfinite(self.weight):
            raise InvalidArgument(
                "NetCon", "weight", f"must be finite, got {self.weight!r}"
            )
        thr = self.threshold
        if thr is not None:
            if not isinstance(self.source, Site):
                raise InvalidArgument(
                    "NetCon", "threshold", "only a cell-voltage (Site) source has one"
                )
            if not concrete_number(thr) or not math.isfinite(thr):
                raise InvalidArgument(
                    "NetCon", "threshold", f"must be a finite number (mV), got {thr!r}"
                )
        k = self.max_pending
        if k is not None:
            if not cell:
                raise InvalidArgument(
                    "NetCon",
                    "max_pending",
                    "only a cell-voltage (Site) or artificial-cell source has one",
                )
            if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or k < 1:
                raise InvalidArgument(
                    "NetCon", "max_pending", f"must be an integer >= 1, got {k!r}"
                )

    def arrival_times(self) -> np.ndarray:
        """When the events reach the target, ms (known-before-the-run sources)."""
        if isinstance(self.source, Site) or is_artificial(self.source):
            raise InvalidArgument(
                "NetCon.arrival_times",
                "source",
                "a cell-voltage source's spikes are known only after the run",
            )
        return spike_times_of(self.source) + float(self.delay)


def is_artificial(source) -> bool:
    """Whether `source` is an instance of an imported `ARTIFICIAL_CELL`
    (`stable_ode.load_nmodl`), whose `net_event`s are spikes."""
    return bool(getattr(type(source), "artificial_cell", False))


def threshold_of(nc: NetCon) -> float:
    """A cell-voltage NetCon's threshold, mV (NEURON's default 10 if not
    given). Functions, not methods, for the speed of `build` (see
    `spike_times_of`)."""
    return 10.0 if nc.threshold is None else float(nc.threshold)


def pending_of(nc: NetCon) -> int:
    """The ring-buffer size a cell-voltage NetCon asks of its source."""
    if nc.max_pending is not None:
        return int(nc.max_pending)
    return int(math.ceil(float(nc.delay) / MIN_INTERVAL)) + 2
