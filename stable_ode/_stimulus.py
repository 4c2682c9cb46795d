"""Current stimuli (nA) injected into one compartment each.

Step and sampled-trace currents are piecewise constant; their edges are returned
by `Stimuli.jump_times` so that adaptive steps can stop on them, and fixed-step
solvers sample them at the middle of each step (as NEURON does), which is exact
when the edges lie on the step grid.
"""

from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, Int

from ._errors import check_number, concrete_number, InvalidArgument


_check = check_number


class Site(eqx.Module):
    """A point of a cell: `section(position)` as in NEURON, `position` in [0, 1].

    The compartment it names is `stable_ode.morphology.compartment_of(section,
    position)`.
    """

    cell: str
    section: str
    position: float = 0.5

    def __check_init__(self):
        x = self.position
        if concrete_number(x) and not (0.0 <= x <= 1.0):
            raise InvalidArgument(
                f"Site({self.cell!r}, {self.section!r})",
                "position",
                f"must be in [0, 1], got {x!r}",
            )


class StepCurrent(eqx.Module):
    """`amplitude` nA from `delay` (ms, >= 0) for `duration` (ms, >= 0), into
    `site`."""

    site: Site
    amplitude: float
    delay: float
    duration: float

    def __check_init__(self):
        _check("StepCurrent", "amplitude", self.amplitude)
        _check("StepCurrent", "delay", self.delay, ge=0)
        _check("StepCurrent", "duration", self.duration, ge=0)


class TraceCurrent(eqx.Module):
    """Samples `values` (nA, at least one) held for `dt` ms (> 0) each, from
    `delay` ms (>= 0), into `site`."""

    site: Site
    values: Float[ArrayLike, " nsamples"]
    dt: float
    delay: float = 0.0

    def __check_init__(self):
        if isinstance(self.values, (list, tuple)) and not self.values:
            raise InvalidArgument(
                "TraceCurrent", "values", "must hold at least one sample"
            )
        _check("TraceCurrent", "dt", self.dt, gt=0)
        _check("TraceCurrent", "delay", self.delay, ge=0)


STIMULUS_KINDS: dict[str, type[StepCurrent] | type[TraceCurrent]] = {
    "step": StepCurrent,
    "trace": TraceCurrent,
}
"""The stimulus classes by the `kind` a model file names them with."""


class Stimuli(eqx.Module):
    """All stimuli of a model, vectorised (no Python loop at trace time).

    Amplitudes and trace values are floating leaves, so they are differentiable.
    """

    step_index: Int[Array, " nstep"]
    step_amplitude: Float[Array, " nstep"]
    step_delay: Float[Array, " nstep"]
    step_duration: Float[Array, " nstep"]
    trace_index: Int[Array, " ntrace"]
    trace_values: Float[Array, "ntrace nsamples"]
    trace_dt: Float[Array, " ntrace"]
    trace_delay: Float[Array, " ntrace"]

    def current(self, t: Float[ArrayLike, ""], ncomp: int) -> Float[Array, " ncomp"]:
        """Injected current per compartment at time `t`, nA."""
        dtype = self.step_amplitude.dtype
        out = jnp.zeros((ncomp,), dtype)
        if self.step_index.shape[0]:
            on = (t >= self.step_delay) & (t < self.step_delay + self.step_duration)
            amp = jnp.where(
                on, self.step_amplitude, jnp.zeros_like(self.step_amplitude)
            )
            out = out.at[self.step_index].add(amp)
        if self.trace_index.shape[0]:
            nsamp = self.trace_values.shape[1]
            k = jnp.floor((t - self.trace_delay) / self.trace_dt)
            valid = (k >= 0) & (k < nsamp)
            kk = jnp.clip(k, 0, nsamp - 1).astype(jnp.int32)
            vals = jnp.take_along_axis(self.trace_values, kk[:, None], axis=1)[:, 0]
            out = out.at[self.trace_index].add(
                jnp.where(valid, vals, jnp.zeros_like(vals))
            )
        return out

    def edges(self) -> Float[Array, " nedge"]:
        """Start and end times (ms) of every step and trace (not trace samples)."""
        nsamp = self.trace_values.shape[1]
        return jnp.concatenate(
            [
                self.step_delay,
                self.step_delay + self.step_duration,
                self.trace_delay,
                self.trace_delay + nsamp * self.trace_dt,
            ]
        )

    def jump_times(self) -> Float[Array, " njump"]:
        """Times (ms) at which any stimulus is discontinuous: the start and end of
        every step, and every sample boundary of every trace. Unsorted and possibly
        repeated (`diffrax.ClipStepSizeController(jump_ts=...)` sorts them); works
        on traced stimuli (a model passed into `jax.jit`)."""
        n = self.trace_values.shape[1]
        k = jnp.arange(n + 1, dtype=self.trace_dt.dtype)[None, :]
        traces = self.trace_delay[:, None] + self.trace_dt[:, None] * k
        return jnp.concatenate(
            [self.step_delay, self.step_delay + self.step_duration, jnp.ravel(traces)]
        )


def build_stimuli(
    stimuli: Sequence[StepCurrent | TraceCurrent], index_of, dtype
) -> Stimuli:
    steps = [s for s in stimuli if isinstance(s, StepCurrent)]
    traces = [s for s in stimuli if isinstance(s, TraceCurrent)]
    for s in stimuli:
        if not isinstance(s, (StepCurrent, TraceCurrent)):
            raise TypeError(f"Unknown stimulus {s!r}: use StepCurrent or TraceCurrent")
        if isinstance(s, StepCurrent) and (s.duration < 0 or s.delay < 0):
            raise ValueError(f"Stimulus {s!r}: delay and duration must be >= 0 ms")
        if isinstance(s, TraceCurrent) and not (s.dt > 0):
            raise ValueError(f"Stimulus {s!r}: dt must be > 0 ms")
    nsamp = max([int(np.size(s.values)) for s in traces], default=0)
    values = np.zeros((len(traces), nsamp))
    for i, s in enumerate(traces):
        v = np.ravel(np.asarray(s.values, dtype=float))
        values[i, : v.size] = v

    def arr(x, dt=dtype):
        return jnp.asarray(np.asarray(x, dtype=float), dt)

    return Stimuli(
        step_index=jnp.asarray([index_of(s.site) for s in steps], jnp.int32),
        step_amplitude=arr([s.amplitude for s in steps]),
        step_delay=arr([s.delay for s in steps]),
        step_duration=arr([s.duration for s in steps]),
        trace_index=jnp.asarray([index_of(s.site) for s in traces], jnp.int32),
        trace_values=arr(values),
        trace_dt=arr([s.dt for s in traces]),
        trace_delay=arr([s.delay for s in traces]),
    )
