"""`VClamp`s as one vectorised group (NEURON's `vclmp.mod`, see
`stable_ode.VClamp` for the equations)."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ._groups import AbstractClampGroup, Held


class VClampGroup(AbstractClampGroup):
    """`VClamp`s, vectorised (`dur` ms and `amp` mV of shape `(3, n)`; `gain`,
    `rstim` MΩ, `tau1`, `tau2` ms, `fac`). States: `e0`, `vo0`, `vi0` (mV,
    the clamp's states at the step's start), `stim` (mV) and `on` (0 or 1) of
    the step's middle, `h` (the step, ms), `i` (nA, injected, at the step's
    end), and `e`, `vo`, `vi` (mV, at the step's end)."""

    recordable: ClassVar[tuple[str, ...]] = ("i", "e", "vo", "vi")

    dur: Float[Array, "3 n"]
    amp: Float[Array, "3 n"]
    gain: Float[Array, " n"]
    rstim: Float[Array, " n"]
    tau1: Float[Array, " n"]
    tau2: Float[Array, " n"]
    fac: Float[Array, " n"]
    index: Int[Array, " n"]
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="VClamp")

    def level(self, t):
        """`(stim, on)` at time `t` (ms), as `vclmp.mod`'s `vstim` and the
        `t > tc` test of `icur`."""
        d = jax.lax.stop_gradient(self.dur)
        e1, e2, e3 = d[0], d[0] + d[1], d[0] + d[1] + d[2]
        stim = jnp.where(
            t < e1, self.amp[0], jnp.where(t < e2, self.amp[1], self.amp[2])
        )
        on = jnp.where(t < e3, 1.0, 0.0).astype(self.rstim.dtype)
        return stim, on

    def solve(self, v, states):
        """`(e, vo, vi)`: the `LINEAR clamp` block at voltages `v` (mV, of
        the clamped compartments) over the step `h`."""
        h = states["h"]
        t1, t2 = self.tau1 / h, self.tau2 / h
        fac = self.fac
        p = t2 * states["vo0"] / (1 + t2)
        q = self.gain / (1 + t2)
        s = states["stim"] + t1 * (states["vi0"] - states["e0"])
        e = ((1 + t1) * ((1 - fac) * v + fac * p) - s) / ((1 + t1) * fac * q + 2 + t1)
        vo = p - q * e
        return e, vo, v + fac * (vo - v)

    def injected(self, v, states):
        """The injected current (nA, positive depolarises) at `v` (mV)."""
        _, vo, _ = self.solve(v, states)
        return states["on"] * (vo - v) / self.rstim

    def kinetics(self, model, v, states):
        del model, v
        return {k: Held() for k in states}

    def current(self, model, v, states):
        del model
        return -self.injected(v[self.index], states)

    def init_states(self, model, v):
        del model
        vi = v[self.index]
        stim, on = self.level(jnp.zeros_like(self.rstim))
        z = jnp.zeros_like(vi)
        return {
            "e0": z,
            "vo0": vi,
            "vi0": vi,
            "stim": stim,
            "on": on,
            "h": jnp.ones_like(vi),
            "i": z,
            "e": z,
            "vo": vi,
            "vi": vi,
        }

    def before_step(self, t0, t1, t_start, states, span):
        del t_start, span
        stim, on = self.level(0.5 * (t0 + t1))
        h = jnp.full_like(states["h"], t1 - t0)
        return {**states, "stim": stim, "on": on, "h": h}

    def after_step(self, t0, t1, v1, states, span, ions=None):
        del t0, t1, span, ions
        v = v1[self.index]
        e, vo, vi = self.solve(v, states)
        i = states["on"] * (vo - v) / self.rstim
        new = {"e": e, "vo": vo, "vi": vi, "e0": e, "vo0": vo, "vi0": vi}
        return {**states, **new, "i": i}

    def sample_inputs(self, t, states):
        stim, on = self.level(t)
        return {**states, "stim": stim, "on": on}
