TITLE a cluster of voltage-gated channels with inactivation: a KINETIC point process
: Written for stable_ode's tests (a POINT_PROCESS whose states move by a
: KINETIC scheme with voltage-dependent rates and a CONSERVE statement).

NEURON {
    POINT_PROCESS KinChan
    NONSPECIFIC_CURRENT i
    RANGE gmax, e, a, b, kd, kr, g
}

PARAMETER {
    gmax = 0.002 (uS)
    e = 0 (mV)
    a = 0.5 (/ms)
    b = 0.5 (/ms)
    kd = 0.2 (/ms)
    kr = 0.05 (/ms)
}

ASSIGNED {
    v (mV)
    i (nA)
    g (uS)
}

STATE { C O D }

INITIAL {
    SOLVE scheme STEADYSTATE sparse
}

BREAKPOINT {
    SOLVE scheme METHOD sparse
    g = gmax * O
    i = g * (v - e)
}

KINETIC scheme {
    ~ C <-> O (a * exp((v + 40) / 10), b * exp(-(v + 40) / 20))
    ~ O <-> D (kd, kr)
    CONSERVE C + O + D = 1
}
