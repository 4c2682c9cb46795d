"""Hodgkin–Huxley squid axon channels, exactly NEURON's built-in `hh` mechanism."""

from typing import ClassVar

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float

from .._math import safe_div, safe_exp, vtrap
from ._base import AbstractMechanism
from ._env import Environment
from ._kinetics import alpha_beta_gate, Relaxation


class HH(AbstractMechanism):
    r"""NEURON's `hh`: Na, K and leak currents with gates `m`, `h`, `n`.

    Rates (1/ms, `v` in mV), as in `hh.mod`, multiplied by
    `q10 = 3^((celsius - 6.3)/10)`:

    - `alpha_m = 0.1·vtrap(-(v+40), 10)`, `beta_m = 4·exp(-(v+65)/18)`
    - `alpha_h = 0.07·exp(-(v+65)/20)`, `beta_h = 1/(exp(-(v+35)/10) + 1)`
    - `alpha_n = 0.01·vtrap(-(v+55), 10)`, `beta_n = 0.125·exp(-(v+65)/80)`

    with `vtrap(x, y) = x/(exp(x/y) - 1)`, evaluated exactly through its removable
    singularity (v = -40 and -55 mV). Currents (mA/cm²):
    `ina = gnabar·m³·h·(v - ena)`, `ik = gkbar·n⁴·(v - ek)`, `il = gl·(v - el)`.

    **Fields** (NEURON's defaults): `gnabar` 0.12, `gkbar` 0.036, `gl` 0.0003 S/cm²;
    `ena` 50, `ek` -77, `el` -54.3 mV.

    Unlike NEURON, rates are not read from a table clamped at ±100 mV: they are
    exact at every voltage, and bounded only where `safe_exp` would overflow.
    """

    mechanism_type: ClassVar[int] = 7  # NEURON's type index

    gnabar: Float[ArrayLike, "*n"] = 0.12
    gkbar: Float[ArrayLike, "*n"] = 0.036
    gl: Float[ArrayLike, "*n"] = 0.0003
    ena: Float[ArrayLike, "*n"] = 50.0
    ek: Float[ArrayLike, "*n"] = -77.0
    el: Float[ArrayLike, "*n"] = -54.3

    def kinetics(self, v: Float[Array, " n"], states, env: Environment):
        del states
        q10 = 3.0 ** ((env.celsius - 6.3) / 10)
        return {
            "m": alpha_beta_gate(
                0.1 * vtrap(-(v + 40), 10.0), 4 * safe_exp(-(v + 65) / 18), q10
            ),
            "h": alpha_beta_gate(
                0.07 * safe_exp(-(v + 65) / 20), jax.nn.sigmoid((v + 35) / 10), q10
            ),
            "n": alpha_beta_gate(
                0.01 * vtrap(-(v + 55), 10.0), 0.125 * safe_exp(-(v + 65) / 80), q10
            ),
        }

    def _conductances(self, states):
        """`gna = gnabar·m³·h` and `gk = gkbar·n⁴`, S/cm²."""
        m, h, n = states["m"], states["h"], states["n"]
        return self.gnabar * m**3 * h, self.gkbar * jnp.square(jnp.square(n))

    def current(self, v, states, env):
        del env
        gna, gk = self._conductances(states)
        ina = gna * (v - self.ena)
        ik = gk * (v - self.ek)
        il = self.gl * (v - self.el)
        return ina + ik + il

    def range_variables(self, v, states, env):
        """NEURON's `hh` RANGE variables: `gnabar`, `gkbar`, `gl` (S/cm²), `el`
        (mV), `gna = gnabar·m³·h`, `gk = gkbar·n⁴` (S/cm²), `il` (mA/cm²), and
        each gate's `minf`, `mtau` (ms), ... at `v`."""
        gna, gk = self._conductances(states)
        gates = self.kinetics(v, states, env)
        return {
            **{f"{x}inf": gates[x].inf for x in ("m", "h", "n")},
            **{f"{x}tau": safe_div(1.0, gates[x].rate) for x in ("m", "h", "n")},
            "gnabar": jnp.broadcast_to(self.gnabar, v.shape),
            "gkbar": jnp.broadcast_to(self.gkbar, v.shape),
            "gl": jnp.broadcast_to(self.gl, v.shape),
            "el": jnp.broadcast_to(self.el, v.shape),
            "gna": gna,
            "gk": gk,
            "il": self.gl * (v - self.el),
        }


def hh_rates(
    v: Float[ArrayLike, " n"], celsius: float | Float[ArrayLike, ""] = 6.3
) -> dict[str, Relaxation]:
    """The `HH` gate kinetics at `v` (mV) and `celsius` (°C): a convenience for
    plots and tests."""
    return HH().kinetics(jnp.asarray(v), {}, Environment(celsius=celsius))
