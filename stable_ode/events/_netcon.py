"""NetCons whose source is known before the run: a list of spike times or
NEURON's `NetStim`. Their arrival times (`spike + delay`, ms) are computed once,
at build time, in NumPy.
"""

import math
from collections.abc import Sequence

import equinox as eqx
import numpy as np

from .._errors import concrete_number, InvalidArgument
from .._stimulus import Site


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

    - `source`: a `SpikeTimes` or a `NetStim` (known before the run). A cell's
      voltage crossing a threshold (a `Site` source) is not supported yet.
    - `target`: the point process (the object given to `build`) or its `name`;
      an `ExpSyn` or an `Exp2Syn`.
    - `delay`: ms (>= 0; default 1, as NEURON). Gradients do not flow to it.
    - `weight`: µS (default 0, as NEURON); differentiable.
    """

    source: SpikeTimes | NetStim | Site
    target: object
    delay: float = 1.0
    weight: float = 0.0

    def __check_init__(self):
        if isinstance(self.source, Site):
            raise InvalidArgument(
                "NetCon",
                "source",
                "a cell-voltage source (threshold crossing) is not supported yet; "
                "use SpikeTimes or NetStim",
            )
        if not isinstance(self.source, (SpikeTimes, NetStim)):
            raise InvalidArgument(
                "NetCon",
                "source",
                f"must be a SpikeTimes or a NetStim, got {self.source!r}",
            )
        d = self.delay
        if not concrete_number(d) or not math.isfinite(d) or d < 0:
            raise InvalidArgument(
                "NetCon", "delay", f"must be a number >= 0 ms, got {d!r}"
            )
        if concrete_number(self.weight) and not math.isfinite(self.weight):
            raise InvalidArgument(
                "NetCon", "weight", f"must be finite, got {self.weight!r}"
            )

    def arrival_times(self) -> np.ndarray:
        """When the events reach the target, ms."""
        return spike_times_of(self.source) + float(self.delay)
