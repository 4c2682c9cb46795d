TITLE a gate whose steady state overflows once the membrane depolarises
: Written for stable_ode's diagnose tests: the power below is finite at rest
: and overflows (float32 and float64) above about -16 mV.

NEURON {
    SUFFIX overflow
    NONSPECIFIC_CURRENT i
    RANGE gbar, k
}

PARAMETER {
    gbar = 0.0001 (S/cm2)
    k = 400
}

STATE { x }

ASSIGNED {
    v (mV)
    i (mA/cm2)
    xinf
    base
}

BREAKPOINT {
    SOLVE states METHOD cnexp
    i = gbar * (v + 65)
}

INITIAL { x = 0 }

DERIVATIVE states {
    base = 1 + (v + 65) / 10
    xinf = base^k
    x' = (xinf - x) / 5
}
