"""Hand-written stable_ode equivalents of NEURON's `cachan1.mod` (the calcium
channel of NEURON's `share/nrn/demo/release`) and of a first-order calcium
pool (`tests/data/mod/capool_ions.mod`, the pool that tests compile with
NEURON: no simple pool ships with NEURON's wheel; its `capmpr.mod` is a
kinetic pump, `cabpump.mod` a radial diffusion model), for the ion tests."""

from typing import ClassVar

import jax.numpy as jnp

import stable_ode as so


# NEURON's units library values (nrnunits.lib, SI 2019): elementary charge (C)
# and Boltzmann's constant (J/K), as `cachan1.mod`'s `e` and `k`.
E_CHARGE = 1.602176634e-19
K_BOLTZMANN = 1.380649e-23


class CaChan1(so.AbstractMechanism):
    """`cachan1.mod`: `ica = -imax·S⁵·(kca - K·cai)/(1 + kca)`, `kca =
    K·cao·exp(-0.08·(v + 70))`, one gate `S` (mA/cm², /M, ms)."""

    ions: ClassVar = (so.UseIon("ca", read=("cao", "cai"), write=("ica",)),)
    rfac: float = 1.0
    K: float = 140.0
    imax: float = 1.0

    def kinetics(self, v, states, env):
        c = 0.001 * E_CHARGE / K_BOLTZMANN / (273.0 + env.celsius)
        a = self.rfac * 1.1 * jnp.exp(0.85 * c * v)
        b = self.rfac * 0.168 * jnp.exp(-0.38 * c * v)
        return {"S": so.Relaxation(inf=a / (a + b), rate=a + b)}

    def current(self, v, states, env):
        ca = env.ion("ca")
        kca = self.K * ca.outside * jnp.exp(-0.08 * (v + 70.0))
        ica = -self.imax * states["S"] ** 5 * (kca - self.K * ca.inside) / (1 + kca)
        return {"ca": ica}


class CaPool(so.AbstractMechanism):
    """`capool_ions.mod`: `cai' = -1e4·ica·gamma/(2·F·depth) - (cai - cainf)/decay`
    (mM/ms; depth µm, decay ms)."""

    ions: ClassVar = (so.UseIon("ca", read=("ica",), write=("cai",)),)
    gamma: float = 0.05
    decay: float = 80.0
    depth: float = 0.1
    cainf: float = 5e-5

    def kinetics(self, v, states, env):
        ica = env.ion("ca").current
        drive = -1e4 * ica * self.gamma / (2 * so.FARADAY * self.depth)
        return {
            "cai": so.Relaxation(
                inf=self.cainf + self.decay * drive, rate=1.0 / self.decay
            )
        }

    def current(self, v, states, env):
        return jnp.zeros_like(v)

    def init_states(self, v, env):
        return {"cai": env.ion("ca").inside}


class CaGatedK(so.AbstractMechanism):
    """A K channel gated by calcium (defined after `CaPool`, so later in
    NEURON's order): `q' = (cai/(cai + kd) - q)·k`, `ik = gbar·q·(v - ek)`
    (S/cm², mM, /ms)."""

    ions: ClassVar = (
        so.UseIon("ca", read=("cai",)),
        so.UseIon("k", read=("ek",), write=("ik",)),
    )
    gbar: float = 0.01
    kd: float = 1e-3
    k: float = 0.5

    def kinetics(self, v, states, env):
        cai = env.ion("ca").inside
        return {"q": so.Relaxation(inf=cai / (cai + self.kd), rate=self.k + 0 * v)}

    def current(self, v, states, env):
        return {"k": self.gbar * states["q"] * (v - env.ion("k").reversal)}
