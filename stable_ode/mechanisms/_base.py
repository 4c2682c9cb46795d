"""The mechanism (channel) interface.

A mechanism is an `eqx.Module` whose fields are its parameters (conductances in
S/cm², reversal potentials in mV, ...). It declares its gates through
`gates(v, celsius)`, returning each gate's kinetics as a `Gate` (steady state and
relaxation rate), and its membrane current through `current(v, states, celsius)`.
Every gate `x` obeys `dx/dt = rate(v) * (inf(v) - x)`; solvers integrate it exactly
for frozen `v` (exponential Euler), vector-field solvers use the right-hand side.
"""

import abc

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._math import safe_div


class Gate(eqx.Module):
    """Kinetics of one gate at a given voltage: `dx/dt = rate * (inf - x)`.

    **Fields:**

    - `inf`: steady-state value, dimensionless in [0, 1].
    - `rate`: relaxation rate `1/tau`, 1/ms, non-negative.

    Storing the rate (not `tau`) keeps every gate update free of `inf·0`: the exact
    update for frozen voltage, `inf + (x - inf)·exp(-rate·dt)`, is finite for every
    finite rate and `dt > 0`.
    """

    inf: Float[Array, "*shape"]
    rate: Float[Array, "*shape"]


def alpha_beta_gate(
    alpha: Float[ArrayLike, "*shape"],
    beta: Float[ArrayLike, "*shape"],
    scale: float | Float[ArrayLike, ""] = 1.0,
) -> Gate:
    """A gate from opening/closing rates `alpha`, `beta` (1/ms), times `scale` (q10).

    `inf = alpha / (alpha + beta)` and `rate = scale·(alpha + beta)`, with
    `inf = 0` if both rates underflow to 0 (the gate then does not move, so the
    value of `inf` is irrelevant). Never `1/(alpha+beta)` then multiplied back.
    """
    alpha = jnp.asarray(alpha)
    total = alpha + beta
    return Gate(inf=safe_div(alpha, total), rate=scale * total)


def inf_tau_gate(
    inf: Float[ArrayLike, "*shape"], tau: Float[ArrayLike, "*shape"]
) -> Gate:
    """A gate from its steady state `inf` and time constant `tau` (ms, > 0).

    A `tau` of exactly 0 (instantaneous gate) becomes the largest finite rate
    of the dtype's safe range.
    """
    inf = jnp.asarray(inf)
    tau = jnp.asarray(tau, inf.dtype)
    fastest = float(np.sqrt(np.finfo(inf.dtype).max))
    return Gate(inf=inf, rate=safe_div(jnp.ones_like(tau), tau, fill=fastest))


class AbstractMechanism(eqx.Module):
    """A membrane mechanism: gating states and a transmembrane current.

    Subclasses are final `eqx.Module`s whose floating-point fields are parameters;
    when inserted into `n` compartments each field becomes an array of shape `(n,)`,
    so every compartment's parameter is a trainable leaf. All methods act
    elementwise on arrays of compartments.

    Implement:

    - `gates(v, celsius) -> dict[str, Gate]` (may be empty), with `v` in mV and
      `celsius` in °C;
    - `current(v, states, celsius) -> current density` in mA/cm², outward
      positive (NEURON's convention), where `states` maps each gate name to its
      value. It may be any differentiable function of `v`: implicit solvers
      linearise it exactly with `jax.jvp`.

    Use `stable_ode.safe_exp`, `vtrap`, `x_over_expm1` in rate functions so that
    no voltage can make them overflow or divide 0 by 0.
    """

    @abc.abstractmethod
    def gates(
        self, v: Float[Array, " n"], celsius: Float[ArrayLike, ""]
    ) -> dict[str, Gate]:
        """Kinetics of every gate at membrane potential `v` (mV)."""

    @abc.abstractmethod
    def current(
        self,
        v: Float[Array, " n"],
        states: dict[str, Float[Array, " n"]],
        celsius: Float[ArrayLike, ""],
    ) -> Float[Array, " n"]:
        """Outward current density, mA/cm²."""

    def init_states(
        self, v: Float[Array, " n"], celsius: Float[ArrayLike, ""]
    ) -> dict[str, Float[Array, " n"]]:
        """Initial gate values: steady state at `v` (NEURON's `finitialize`)."""
        return {name: gate.inf for name, gate in self.gates(v, celsius).items()}
