"""The point processes driven by time alone: `AlphaSynapse`s (a conductance
set at the middle of each step), `SEClamp`s (a level set at the middle of
each step, its current recorded at the step's end) and the recorded currents
of `IClamp`s, vectorised as in `stable_ode.events._groups`."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ._groups import (
    AbstractClampGroup,
    AbstractNoCurrentGroup,
    AbstractPointProcessGroup,
    Held,
)


class AlphaSynapseGroup(AbstractPointProcessGroup):
    """`AlphaSynapse`s, vectorised (`onset`, `tau` ms, `gmax` µS, `e` mV);
    state `g` (µS), set at the middle of each step."""

    recordable: ClassVar[tuple[str, ...]] = ("g",)

    onset: Float[Array, " n"]
    tau: Float[Array, " n"]
    gmax: Float[Array, " n"]
    e: Float[Array, " n"]
    index: Int[Array, " n"]
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="AlphaSynapse")

    def conductance(self, t):
        """`gmax·x·exp(1 - x)`, `x = (t - onset)/tau`, 0 before `onset` (µS)."""
        x = (t - self.onset) / self.tau
        on = x > 0
        xs = jnp.where(on, x, 0.0)
        return jnp.where(on, self.gmax * xs * jnp.exp(1.0 - xs), 0.0)

    def kinetics(self, model, v, states):
        del model, v, states
        return {"g": Held()}

    def current(self, model, v, states):
        del model
        return states["g"] * (v[self.index] - self.e)

    def init_states(self, model, v):
        del model, v
        return {"g": self.conductance(jnp.zeros_like(self.tau))}

    def before_step(self, t0, t1, t_start, states, span):
        del t_start, span
        return {**states, "g": self.conductance(0.5 * (t0 + t1))}

    def jump_times(self, dtype):
        return self.onset.astype(dtype)


class SEClampGroup(AbstractClampGroup):
    """`SEClamp`s, vectorised (`rs` MΩ; `dur` ms and `amp` mV of shape
    `(3, n)`); states `vc` (mV), `on` (0 or 1), `i` (nA, injected)."""

    recordable: ClassVar[tuple[str, ...]] = ("i", "vc")

    rs: Float[Array, " n"]
    dur: Float[Array, "3 n"]
    amp: Float[Array, "3 n"]
    index: Int[Array, " n"]
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="SEClamp")

    def level(self, t):
        """`(vc, on)` at time `t` (ms), as `svclmp.mod`'s `vstim`."""
        d = jax.lax.stop_gradient(self.dur)
        e1, e2, e3 = d[0], d[0] + d[1], d[0] + d[1] + d[2]
        vc = jnp.where(
            t < e1,
            self.amp[0],
            jnp.where(t < e2, self.amp[1], jnp.where(t < e3, self.amp[2], 0.0)),
        )
        on = jnp.where(t < e3, 1.0, 0.0).astype(self.rs.dtype)
        return vc, on

    def kinetics(self, model, v, states):
        del model, v, states
        return {"vc": Held(), "on": Held(), "i": Held()}

    def current(self, model, v, states):
        del model
        return -states["on"] * (states["vc"] - v[self.index]) / self.rs

    def init_states(self, model, v):
        del model
        vc, on = self.level(jnp.zeros_like(self.rs))
        return {"vc": vc, "on": on, "i": on * (vc - v[self.index]) / self.rs}

    def before_step(self, t0, t1, t_start, states, span):
        del t_start, span
        vc, on = self.level(0.5 * (t0 + t1))
        return {**states, "vc": vc, "on": on}

    def after_step(self, t0, t1, v1, states, span, ions=None):
        del t0, t1, span
        return self.with_current(v1, states, ions)

    def with_current(self, v, states, ions=None):
        del ions
        return {**states, "i": states["on"] * (states["vc"] - v[self.index]) / self.rs}

    def derived(self):
        return ("i",)

    def sample_inputs(self, t, states):
        vc, on = self.level(t)
        return {**states, "vc": vc, "on": on}


class IClampGroup(AbstractNoCurrentGroup):
    """The recorded currents of `IClamp`s, vectorised (`delay`, `dur` ms,
    `amp` nA). An `IClamp` injects its current as a `stable_ode.StepCurrent`
    (which this group leaves alone: it adds no current); this group only
    holds, as its state `i` (nA, positive depolarising, NEURON's
    `IClamp.i`), the current the `StepCurrent` injects during each step, set
    at the step's middle (where fixed steps sample it, as NEURON does), and
    `amp` at `t = 0` if the clamp is on then (`delay = 0`, as NEURON's
    `finitialize`). It is built only for `IClamp`s that are recorded, from
    the `IClamp`'s own values: a model changed afterwards (`eqx.tree_at`)
    changes the injected current through `model.stimuli` and the recorded one
    through this group."""

    recordable: ClassVar[tuple[str, ...]] = ("i",)

    delay: Float[Array, " n"]
    dur: Float[Array, " n"]
    amp: Float[Array, " n"]
    index: Int[Array, " n"]
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="IClamp")

    def injected(self, t):
        """The injected current at time `t` (ms), nA: `amp` for `delay <= t <
        delay + dur` (`stable_ode.Stimuli.current`'s rule), else 0."""
        on = (t >= self.delay) & (t < self.delay + self.dur)
        return jnp.where(on, self.amp, jnp.zeros_like(self.amp))

    def init_states(self, model, v):
        del model, v
        return {"i": self.injected(jnp.zeros_like(self.amp))}

    def before_step(self, t0, t1, t_start, states, span):
        del t_start, span
        return {**states, "i": self.injected(0.5 * (t0 + t1))}
