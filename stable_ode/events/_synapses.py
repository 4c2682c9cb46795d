"""The built-in synapses that receive NetCon events, vectorised: `ExpSyn` and
`Exp2Syn` (NEURON's equations; delivery by `AbstractArrivalGroup`'s hooks,
`stable_ode.events._groups`)."""

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..mechanisms import Relaxation
from ._arrivals import Arrivals, CellArrivals
from ._groups import _T_NONE, AbstractArrivalGroup, Held


class AbstractBuiltinSynapse(AbstractArrivalGroup):
    """What `ExpSyn` and `Exp2Syn` share: NetCons from threshold sources
    (`cell`), and the recorded current `i = g·(v - e)` (nA), computed from
    the voltage and the states at each instant."""

    cell: eqx.AbstractVar[CellArrivals | None]

    def cell_arrivals(self):
        return self.cell

    def with_current(self, v, states, ions=None):
        del ions
        return {**states, "i": self.current(None, v, states)}

    def derived(self):
        return ("i",)


class ExpSynGroup(AbstractBuiltinSynapse):
    """`ExpSyn`s, vectorised (`tau` ms, `e` mV: shape `(n,)`); states `g`
    (µS) and `i` (nA, `g·(v - e)` at the step's end)."""

    recordable: ClassVar[tuple[str, ...]] = ("g", "i")

    tau: Float[Array, " n"]
    e: Float[Array, " n"]
    index: Int[Array, " n"]
    arrivals: Arrivals | None
    cell: CellArrivals | None
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="ExpSyn")

    in_step: ClassVar[bool] = True

    def jump(self, entry, w, age):
        return {"g": w * jnp.exp(-age / self.tau[entry])}

    def average(self, entry, w, age, dt):
        tau = self.tau[entry]
        return w * tau * -jnp.expm1(-age / tau) / dt

    def kinetics(self, model, v, states):
        del model, v
        g = states["g"]
        return {
            "g": Relaxation(inf=jnp.zeros_like(g), rate=1.0 / self.tau),
            "t_delivered": Held(),
            "i": Held(),
            "x": Held(),
        }

    def current(self, model, v, states):
        del model
        return (states["g"] + states["x"]) * (v[self.index] - self.e)

    def init_states(self, model, v):
        z = jnp.zeros_like(self.tau)
        return {"g": z, "t_delivered": jnp.full_like(z, _T_NONE), "i": z, "x": z}


def _exp2_taus(tau1, tau2):
    """NEURON's INITIAL block of `exp2syn.mod`: the effective `tau1` and the
    normalisation `factor`."""
    r = tau1 / tau2
    tau1 = jnp.where(r > 0.9999, 0.9999 * tau2, jnp.where(r < 1e-9, tau2 * 1e-9, tau1))
    tp = (tau1 * tau2) / (tau2 - tau1) * jnp.log(tau2 / tau1)
    factor = 1.0 / (-jnp.exp(-tp / tau1) + jnp.exp(-tp / tau2))
    return tau1, factor


class Exp2SynGroup(AbstractBuiltinSynapse):
    """`Exp2Syn`s, vectorised (`tau1`, `tau2` ms, `e` mV); states `A`, `B`
    (µS), `g = B - A`, `i` (nA, `g·(v - e)` at the step's end)."""

    recordable: ClassVar[tuple[str, ...]] = ("A", "B", "g", "i")

    tau1: Float[Array, " n"]
    tau2: Float[Array, " n"]
    e: Float[Array, " n"]
    index: Int[Array, " n"]
    arrivals: Arrivals | None
    cell: CellArrivals | None
    names: tuple[str, ...] = eqx.field(static=True)
    kind: str = eqx.field(static=True, default="Exp2Syn")

    in_step: ClassVar[bool] = True

    def jump(self, entry, w, age):
        tau1, factor = _exp2_taus(self.tau1, self.tau2)
        a = w * factor[entry]
        return {
            "A": a * jnp.exp(-age / tau1[entry]),
            "B": a * jnp.exp(-age / self.tau2[entry]),
        }

    def average(self, entry, w, age, dt):
        tau1, factor = _exp2_taus(self.tau1, self.tau2)
        t1, t2 = tau1[entry], self.tau2[entry]
        mean_b = t2 * -jnp.expm1(-age / t2)
        mean_a = t1 * -jnp.expm1(-age / t1)
        return w * factor[entry] * (mean_b - mean_a) / dt

    def kinetics(self, model, v, states):
        del model, v
        tau1, _ = _exp2_taus(self.tau1, self.tau2)
        z = jnp.zeros_like(states["A"])
        return {
            "A": Relaxation(inf=z, rate=1.0 / tau1),
            "B": Relaxation(inf=z, rate=1.0 / self.tau2),
            "t_delivered": Held(),
            "i": Held(),
            "x": Held(),
        }

    def current(self, model, v, states):
        del model
        g = states["B"] - states["A"] + states["x"]
        return g * (v[self.index] - self.e)

    def init_states(self, model, v):
        z = jnp.zeros_like(self.tau2)
        t = jnp.full_like(z, _T_NONE)
        return {"A": z, "B": z, "t_delivered": t, "i": z, "x": z}
