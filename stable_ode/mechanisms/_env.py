"""What a mechanism sees besides its own states: temperature, geometry, ions."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from ._ions import IonView


class Environment(eqx.Module):
    """The environment of a group of compartments (or of synapses: that of
    their postsynaptic compartments), passed to a mechanism's `kinetics`,
    `current` and `init_states`.

    **Fields:**

    - `celsius`: temperature, °C (scalar).
    - `area`: lateral membrane area per compartment, cm².
    - `diam`: compartment diameter, µm.
    - `length`: compartment length, µm.
    - `ions`: `{name: IonView}` for the ions the mechanism declares in its
      `ions` class variable (`UseIon`s); empty for every other mechanism.
    - `v_solve`: mV, or `None`. Set only in `current`, when `BackwardEuler`
      linearises the membrane current at the voltage `v` it is called with:
      `v_solve` is that same voltage, not differentiated in the
      linearisation. NEURON holds what the state update computed (its
      `nrn_state`, at this voltage) while it takes `di/dv` (`nrn_cur`), and a
      mechanism imported with `neuron_schemes=True` does the same with what its
      `SOLVE`d block computes (dbbs' `Cav3_1`: `ica = ... * g`, `g` computed
      in its `DERIVATIVE` block). Other mechanisms ignore it.

    Outside a model (e.g. `HH().kinetics(v, {}, Environment(celsius=6.3))` in a
    plot) the geometry may be `None`.
    """

    celsius: Float[ArrayLike, ""]
    area: Float[Array, " n"] | None = None
    diam: Float[Array, " n"] | None = None
    length: Float[Array, " n"] | None = None
    ions: dict[str, IonView] = eqx.field(default_factory=dict)
    v_solve: Float[Array, " n"] | None = None

    def ion(self, name: str) -> IonView:
        """The `IonView` of ion `name` (`cai` is `env.ion("ca").inside`); a
        `ValueError` naming the ion if the mechanism did not declare it."""
        try:
            return self.ions[name]
        except KeyError:
            raise ValueError(
                f"ion {name!r} is not available here: declare it in the mechanism's "
                f"`ions` (e.g. `ions = (UseIon({name!r}, read=(...,)),)`); "
                f"available: {sorted(self.ions)}"
            ) from None

    @property
    def volume(self) -> Float[Array, " n"]:
        """Compartment volume `π·(diam/2)²·length`, µm³."""
        if self.diam is None or self.length is None:
            raise ValueError(
                "Environment.volume needs diam and length (this environment has "
                "no geometry: it was built outside a model)"
            )
        return jnp.pi * jnp.square(0.5 * self.diam) * self.length
