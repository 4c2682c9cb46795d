TITLE a synapse that carries part of its current as calcium
: Written for stable_ode's tests: a POINT_PROCESS with USEION (it reads the
: calcium reversal potential and writes ica, in nA, which NEURON adds to its
: segment's ica over the segment's area, so a calcium pool there fills).

NEURON {
    POINT_PROCESS CaSyn
    USEION ca READ eca WRITE ica
    NONSPECIFIC_CURRENT i
    RANGE tau, e, frac, ica
}

UNITS {
    (nA) = (nanoamp)
    (mV) = (millivolt)
    (uS) = (microsiemens)
}

PARAMETER {
    tau = 5 (ms)
    e = 0 (mV)
    frac = 0.2 (1)
}

ASSIGNED {
    v (mV)
    i (nA)
    ica (nA)
    eca (mV)
}

STATE {
    g (uS)
}

INITIAL {
    g = 0
}

BREAKPOINT {
    SOLVE state METHOD cnexp
    i = (1 - frac)*g*(v - e)
    ica = frac*g*(v - eca)
}

DERIVATIVE state {
    g' = -g/tau
}

NET_RECEIVE(weight (uS)) {
    g = g + weight
}
