"""Analysis of recorded traces, after a simulation, on the host (NumPy)."""

import math

import numpy as np
from numpy.typing import ArrayLike


def spike_times(t: ArrayLike, v: ArrayLike, threshold: float = 0.0) -> np.ndarray:
    """Spike times of a voltage trace: its upward crossings of `threshold`.

    A crossing is a pair of consecutive samples with `v[k] < threshold <= v[k+1]`;
    its time is interpolated linearly between `t[k]` and `t[k+1]`. A sample exactly
    at the threshold therefore counts once, on the way up; a trace that starts
    above the threshold has no spike at its first sample; non-finite samples never
    make a crossing. The arithmetic is float64 whatever the dtype of the inputs.

    This is NumPy post-processing of a finished `Simulation` (e.g.
    `spike_times(sim.ts, sim.recordings["soma"])`), not a traceable JAX function.

    **Arguments:**

    - `t`: the sample times, ms, increasing; shape `(n,)`.
    - `v`: the membrane potential at those times, mV; shape `(n,)`.
    - `threshold`: the voltage whose upward crossing is a spike, mV.

    **Returns:**

    The crossing times, ms, in increasing order; shape `(number of spikes,)`,
    float64.
    """
    t = np.asarray(t, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if t.ndim != 1:
        raise ValueError(
            f"spike_times: `t` must be 1-d (times, ms), got shape {t.shape}"
        )
    if v.shape != t.shape:
        raise ValueError(
            f"spike_times: `v` must have the shape of `t` {t.shape} (one voltage "
            f"sample per time), got {v.shape}"
        )
    if not math.isfinite(threshold):
        raise ValueError(
            f"spike_times: `threshold` must be finite (mV), got {threshold}"
        )
    k = np.flatnonzero((v[:-1] < threshold) & (v[1:] >= threshold))
    frac = (threshold - v[k]) / (v[k + 1] - v[k])
    return t[k] + frac * (t[k + 1] - t[k])
