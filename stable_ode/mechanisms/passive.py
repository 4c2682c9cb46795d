"""Passive leak, exactly NEURON's `pas`."""

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._base import AbstractMechanism
from ._env import Environment


class Passive(AbstractMechanism):
    """NEURON's `pas`: `i = g·(v - e)` in mA/cm².

    **Fields:** `g` conductance density, S/cm² (default 0.001); `e` reversal
    potential, mV (default -70), NEURON's defaults.
    """

    mechanism_type: ClassVar[int] = 2  # NEURON's type index

    g: Float[ArrayLike, "*n"] = 0.001
    e: Float[ArrayLike, "*n"] = -70.0

    def kinetics(self, v: Float[Array, " n"], states, env: Environment):
        del v, states, env
        return {}

    def current(self, v, states, env):
        del states, env
        return self.g * (v - self.e)

    def range_variables(self, v, states, env):
        """NEURON's `pas` RANGE variables: `g` (S/cm²), `e` (mV) and `i = g·(v -
        e)` (mA/cm²)."""
        del states, env
        return {
            "g": jnp.broadcast_to(self.g, v.shape),
            "e": jnp.broadcast_to(self.e, v.shape),
            "i": self.g * (v - self.e),
        }
