"""What a mechanism sees besides its own states: temperature and geometry."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float


class Environment(eqx.Module):
    """The environment of a group of compartments (or of synapses: that of
    their postsynaptic compartments), passed to a mechanism's `kinetics`,
    `current` and `init_states`.

    **Fields:**

    - `celsius`: temperature, °C (scalar).
    - `area`: lateral membrane area per compartment, cm².
    - `diam`: compartment diameter, µm.
    - `length`: compartment length, µm.

    Outside a model (e.g. `HH().kinetics(v, {}, Environment(celsius=6.3))` in a
    plot) the geometry may be `None`.
    """

    celsius: Float[ArrayLike, ""]
    area: Float[Array, " n"] | None = None
    diam: Float[Array, " n"] | None = None
    length: Float[Array, " n"] | None = None

    @property
    def volume(self) -> Float[Array, " n"]:
        """Compartment volume `π·(diam/2)²·length`, µm³."""
        if self.diam is None or self.length is None:
            raise ValueError(
                "Environment.volume needs diam and length (this environment has "
                "no geometry: it was built outside a model)"
            )
        return jnp.pi * jnp.square(0.5 * self.diam) * self.length
