"""The built-in synapses that receive NetCon events, vectorised: `ExpSyn` and
`Exp2Syn` (NEURON's equations; delivery by `AbstractArrivalGroup`'s hooks,
`stable_ode.events._groups`)."""

import abc
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from ..mechanisms import Relaxation
from ._arrivals import ARRIVAL, Arrivals, CellArrivals, NEXT
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

    def delivery_states(self, z):
        """The states every instance starts with besides its conductances
        (`z`: zeros, one per instance), and the per-NetCon states of the
        delivery (`NEXT`, `ARRIVAL`) if threshold sources drive it."""
        out = {"t_delivered": jnp.full_like(z, _T_NONE), "i": z, "x": z}
        return out if self.cell is None else out | self.cell.init_next(z.dtype)

    def held(self, states) -> dict:
        """The `Held` kinetics of the states `delivery_states` adds."""
        held = ("t_delivered", "i", "x", NEXT, ARRIVAL)
        return {k: Held() for k in held if k in states}

    @abc.abstractmethod
    def parameters(self) -> dict[str, Array]:
        """The per-synapse values the jumps and kinetics read (time constants,
        ms; a normalisation), computed from the fields."""

    hoisted_parameters: eqx.AbstractVar[dict[str, Array] | None]
    """`parameters()` as a solve computed them before its step loop, or `None`."""
    at_netcons: eqx.AbstractVar[dict[str, Array] | None]
    """`parameters()` at each NetCon of `cell` (its synapse's), computed before
    the step loop, or `None`: a step then reads no gathered parameter, and its
    loops over the NetCons are whole vectors."""

    def hoisted(self):
        p = self.parameters()
        cell = self.cell
        at = None if cell is None else {k: x[cell.entry] for k, x in p.items()}
        return eqx.tree_at(
            lambda g: (g.hoisted_parameters, g.at_netcons),
            self,
            (p, at),
            is_leaf=lambda x: x is None,
        )

    def parameters_at(self, entry=None) -> dict[str, Array]:
        """`parameters()` (hoisted if they are), at the synapses `entry`
        (`None`: all of them); at the NetCons of `cell` without a gather once
        hoisted."""
        if entry is None:
            p = self.hoisted_parameters
            return self.parameters() if p is None else p
        if self.at_netcons is not None and entry is self.cell.entry:
            return self.at_netcons
        return {k: x[entry] for k, x in self.parameters_at().items()}


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
    hoisted_parameters: dict[str, Array] | None = None
    at_netcons: dict[str, Array] | None = None

    in_step: ClassVar[bool] = True

    def parameters(self):
        return {"tau": self.tau}

    def jump(self, entry, w, age):
        return {"g": w * jnp.exp(-age / self.parameters_at(entry)["tau"])}

    def average(self, entry, w, age, dt):
        tau = self.parameters_at(entry)["tau"]
        return w * tau * -jnp.expm1(-age / tau) / dt

    def kinetics(self, model, v, states):
        del model, v
        g = states["g"]
        rate = 1.0 / self.parameters_at()["tau"]
        return {"g": Relaxation(inf=jnp.zeros_like(g), rate=rate)} | self.held(states)

    def current(self, model, v, states):
        del model
        return (states["g"] + states["x"]) * (v[self.index] - self.e)

    def init_states(self, model, v):
        z = jnp.zeros_like(self.tau)
        return {"g": z} | self.delivery_states(z)


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
    hoisted_parameters: dict[str, Array] | None = None
    at_netcons: dict[str, Array] | None = None

    in_step: ClassVar[bool] = True

    def parameters(self):
        """The effective `tau1` and `tau2` (ms) and the peak normalisation
        `factor` of NEURON's INITIAL block."""
        tau1, factor = _exp2_taus(self.tau1, self.tau2)
        return {"tau1": tau1, "tau2": self.tau2, "factor": factor}

    def jump(self, entry, w, age):
        p = self.parameters_at(entry)
        a = w * p["factor"]
        return {"A": a * jnp.exp(-age / p["tau1"]), "B": a * jnp.exp(-age / p["tau2"])}

    def average(self, entry, w, age, dt):
        p = self.parameters_at(entry)
        t1, t2 = p["tau1"], p["tau2"]
        mean_b = t2 * -jnp.expm1(-age / t2)
        mean_a = t1 * -jnp.expm1(-age / t1)
        return w * p["factor"] * (mean_b - mean_a) / dt

    def kinetics(self, model, v, states):
        del model, v
        p = self.parameters_at()
        z = jnp.zeros_like(states["A"])
        return {
            "A": Relaxation(inf=z, rate=1.0 / p["tau1"]),
            "B": Relaxation(inf=z, rate=1.0 / p["tau2"]),
        } | self.held(states)

    def current(self, model, v, states):
        del model
        g = states["B"] - states["A"] + states["x"]
        return g * (v[self.index] - self.e)

    def init_states(self, model, v):
        z = jnp.zeros_like(self.tau2)
        return {"A": z, "B": z} | self.delivery_states(z)
