TITLE a depressing and facilitating synapse whose NetCons keep their own state
: Written for stable_ode's tests: the Tsodyks-Markram model of short-term
: plasticity in the form ModelDB models use (a NET_RECEIVE weight vector with
: an INITIAL block, the event's time `t`, if/else, a LOCAL and an ASSIGNED
: computed on the way). Each NetCon keeps its own resources (y, z), release
: probability u and last event time tsyn.

NEURON {
    POINT_PROCESS TMSyn
    NONSPECIFIC_CURRENT i
    RANGE e, tau_1, tau_rec, tau_facil, U, u0, g
}

UNITS {
    (nA) = (nanoamp)
    (mV) = (millivolt)
    (umho) = (micromho)
}

PARAMETER {
    e = 0 (mV)
    tau_1 = 3 (ms) < 1e-9, 1e9 >
    tau_rec = 100 (ms) < 1e-9, 1e9 >
    tau_facil = 1000 (ms) < 0, 1e9 >
    U = 0.04 (1) < 0, 1 >
    u0 = 0 (1) < 0, 1 >
}

ASSIGNED {
    v (mV)
    i (nA)
    x
}

STATE {
    g (umho)
}

INITIAL {
    g = 0
}

BREAKPOINT {
    SOLVE state METHOD cnexp
    i = g*(v - e)
}

DERIVATIVE state {
    g' = -g/tau_1
}

NET_RECEIVE(weight (umho), y, z, u, tsyn (ms)) {
    LOCAL decay
    INITIAL {
        y = 0
        z = 0
        u = u0
        tsyn = t
    }
    : the resources recovered since the NetCon's last event
    z = z*exp(-(t - tsyn)/tau_rec)
    z = z + (y*(exp(-(t - tsyn)/tau_1) - exp(-(t - tsyn)/tau_rec)) / ((tau_1/tau_rec) - 1))
    decay = exp(-(t - tsyn)/tau_1)
    y = y*decay
    x = 1 - y - z
    if (tau_facil > 0) {
        u = u*exp(-(t - tsyn)/tau_facil)
        u = u + U*(1 - u)
    } else {
        u = U
    }
    g = g + weight*x*u
    y = y + x*u
    tsyn = t
}
