"""Synapses: conductance-based chemical synapses and gap junctions.

A chemical synapse couples a presynaptic compartment to a postsynaptic one. Its
states move with kinetics driven by the presynaptic voltage (`kinetics(v_pre,
states, env)`, the same `AbstractKinetics` objects as channels, so the stiff
solvers integrate them exactly for frozen voltage), and it injects a current
into the postsynaptic compartment (`current(v_post, states, env)`, nA, outward
positive). Conductances are absolute (µS), as for NEURON's point processes,
since a synapse is a point. `env` is the `Environment` of the postsynaptic
compartments.
"""

import abc

import equinox as eqx
from jaxtyping import Array, ArrayLike, Float

from .._math import safe_exp
from ._base import steady_states
from ._env import Environment
from ._kinetics import AbstractKinetics, Relaxation


class AbstractSynapse(eqx.Module):
    """Interface for chemical synapses.

    Subclasses are final `eqx.Module`s whose floating fields are parameters;
    inserted as `n` synapses, each becomes an array of shape `(n,)`.

    Implement `kinetics(v_pre, states, env) -> dict[str, AbstractKinetics]`
    (driven by the presynaptic voltage, mV) and `current(v_post, states, env)`
    (nA, outward positive, a differentiable function of the postsynaptic
    voltage: implicit solvers linearise it exactly with `jax.jvp`); optionally
    `init_states(v_pre, env)` (default: each `Relaxation`'s steady state at
    `v_pre`, with `kinetics` called with `states={}`). `env` is the
    `Environment` of the postsynaptic compartments.

    A synapse written for the former interface, `gates(v_pre, celsius)` and
    `current(v_post, states, celsius)`, still works: the default `kinetics`
    calls `gates(v_pre, env.celsius)`, and `current` receives the `Environment`
    in place of `celsius`.
    """

    def kinetics(
        self,
        v_pre: Float[Array, " n"],
        states: dict[str, Float[Array, " n"]],
        env: Environment,
    ) -> dict[str, AbstractKinetics]:
        """Kinetics of the synapse's states at presynaptic voltage `v_pre` (mV)."""
        del states
        return self.gates(v_pre, env.celsius)

    def gates(
        self, v_pre: Float[Array, " n"], celsius: Float[ArrayLike, ""]
    ) -> dict[str, Relaxation]:
        """The former interface (kinetics depending on `v_pre` and `celsius`)."""
        raise TypeError(
            f"{type(self).__name__} defines no kinetics: implement "
            f"kinetics(v_pre, states, env) (or the former gates(v_pre, celsius)), "
            "returning {} for a mechanism without states"
        )

    @abc.abstractmethod
    def current(
        self,
        v_post: Float[Array, " n"],
        states: dict[str, Float[Array, " n"]],
        env: Environment,
    ) -> Float[Array, " n"]:
        """Outward current into the postsynaptic compartment, nA."""

    def init_states(
        self, v_pre: Float[Array, " n"], env: Environment
    ) -> dict[str, Float[Array, " n"]]:
        """Initial states: steady state at the presynaptic `v_pre`."""
        try:
            kinetics = self.kinetics(v_pre, {}, env)
        except KeyError as e:
            raise TypeError(
                f"{type(self).__name__}.kinetics reads state {e.args[0]!r}; "
                f"implement {type(self).__name__}.init_states(v_pre, env)"
            ) from None
        return steady_states(self, kinetics)


class IonotropicSynapse(AbstractSynapse):
    r"""Graded ionotropic synapse (Abbott & Marder 1998; Jaxley's `IonotropicSynapse`).

    The open fraction `s` of postsynaptic receptors relaxes towards a sigmoid of
    the presynaptic voltage:

        s_inf(v_pre) = 1 / (1 + exp((v_th - v_pre)/delta))
        ds/dt        = (s_inf - s) / tau_s,   tau_s = (1 - s_inf) / k_minus   (ms)
        i            = gmax · s · (v_post - e_syn)                              (nA)

    i.e. `rate = 1/tau_s = k_minus·(1 + exp((v_pre - v_th)/delta))`, computed with
    `safe_exp` so no presynaptic voltage overflows it or forms `1/0`. With
    `E = safe_exp((v_pre - v_th)/delta)`, `s_inf = E/(1 + E)` and `rate =
    k_minus·(1 + E)` share one exponential. `E/(1 + E)` is finite for any finite
    voltage (`1 + E ≥ 1`, and `E` stays below `finfo.max` by `safe_exp`'s
    bound), and so is its derivative `E/(1 + E)²`: the bound keeps `(1 + E)²`
    finite.

    **Fields:** `gmax` maximal conductance, µS (default 1e-4); `e_syn` reversal
    potential, mV (0: excitatory; e.g. -80 for inhibitory); `k_minus` unbinding
    rate, 1/ms (0.025); `v_th` half-activation presynaptic voltage, mV (-35);
    `delta` slope, mV (10). Defaults are Jaxley's. The state starts at steady
    state for the presynaptic `v_init` (Jaxley starts it at 0.2).
    """

    gmax: Float[ArrayLike, "*n"] = 1e-4
    e_syn: Float[ArrayLike, "*n"] = 0.0
    k_minus: Float[ArrayLike, "*n"] = 0.025
    v_th: Float[ArrayLike, "*n"] = -35.0
    delta: Float[ArrayLike, "*n"] = 10.0

    def kinetics(self, v_pre, states, env):
        del states, env
        e = safe_exp((v_pre - self.v_th) / self.delta)
        return {"s": Relaxation(inf=e / (1 + e), rate=self.k_minus * (1 + e))}

    def current(self, v_post, states, env):
        del env
        return self.gmax * states["s"] * (v_post - self.e_syn)


class GapJunction(eqx.Module):
    """Electrical coupling `i = g·(v_a - v_b)` (nA) between two compartments.

    Handled implicitly with the axial coupling (it is one more edge of the
    conductance Laplacian), so it cannot destabilise a step. **Fields:** `g`,
    conductance in µS (default 1e-3).
    """

    g: Float[ArrayLike, "*n"] = 1e-3
