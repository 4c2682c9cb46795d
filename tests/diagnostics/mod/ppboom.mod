TITLE a synapse whose current overflows once events have driven its state up
: Written for stable_ode's diagnose tests: each event adds `weight` to `A`,
: which decays with `tau`; the current grows as 10^A and overflows
: (float64) once A exceeds about 308.

NEURON {
    POINT_PROCESS PPBoom
    NONSPECIFIC_CURRENT i
    RANGE tau, gain
}

PARAMETER {
    tau = 5 (ms)
    gain = 1e-6 (nA)
}

ASSIGNED {
    v (mV)
    i (nA)
}

STATE { A }

INITIAL { A = 0 }

BREAKPOINT {
    SOLVE states METHOD cnexp
    i = -gain * 10^A
}

DERIVATIVE states {
    A' = -A / tau
}

NET_RECEIVE(weight) {
    A = A + weight
}
