"""A user's own mechanism, loaded by a model file as "leak_mechanism:Leak".

It sits next to the model file that names it: `load_spec` imports it from the
model file's folder.
"""

from jaxtyping import ArrayLike, Float

import stable_ode as so


class Leak(so.AbstractMechanism):
    """A leak `i = g·(v - e)` (mA/cm²): `g` in S/cm², `e` in mV (no defaults)."""

    g: Float[ArrayLike, "*n"]
    e: Float[ArrayLike, "*n"]

    def gates(self, v, celsius):
        del v, celsius
        return {}

    def current(self, v, states, celsius):
        del states, celsius
        return self.g * (v - self.e)
