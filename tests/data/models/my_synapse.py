"""A user's own synapse class, loaded by model files as "my_synapse:FixedTau"."""

import jax

import stable_ode as so


class FixedTau(so.AbstractSynapse):
    """Graded synapse with a fixed time constant: `s_inf = sigmoid((v_pre - v_th) /
    delta)`, `ds/dt = (s_inf - s) / tau`, `i = gmax·s·(v_post - e_syn)` (nA).

    **Fields:** `gmax` µS, `e_syn` mV, `tau` ms, `v_th` mV, `delta` mV.
    """

    gmax: float = 1e-3
    e_syn: float = 0.0
    tau: float = 5.0
    v_th: float = -20.0
    delta: float = 5.0

    def gates(self, v_pre, celsius):
        del celsius
        inf = jax.nn.sigmoid((v_pre - self.v_th) / self.delta)
        return {"s": so.Gate(inf=inf, rate=1.0 / self.tau)}

    def current(self, v_post, states, celsius):
        del celsius
        return self.gmax * states["s"] * (v_post - self.e_syn)
