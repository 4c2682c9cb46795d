COMMENT
A transmitter-pulse synapse, written for stable_ode's tests in the form of the
kinetic AMPA synapses of the NEURON book (chapter 10) and Destexhe et al.
(1994): each event opens a pulse of transmitter Cdur ms long, restarted by an
event during it (a self-event sent with net_send carries the event count as
its flag, and only the last pulse's closes it); the weight vector keeps per
NetCon whether its pulse is on, its event count, and the fraction r0 at its
last change, at time t0.
ENDCOMMENT

NEURON {
    POINT_PROCESS PulseSyn
    RANGE Cdur, Alpha, Beta, Erev, g, synon
    NONSPECIFIC_CURRENT i
}

UNITS {
    (nA) = (nanoamp)
    (mV) = (millivolt)
    (uS) = (microsiemens)
}

PARAMETER {
    Cdur = 1.0 (ms)
    Alpha = 1.1 (/ms)
    Beta = 0.19 (/ms)
    Erev = 0 (mV)
}

ASSIGNED {
    v (mV)
    i (nA)
    g (uS)
    Rinf
    Rtau (ms)
    synon
}

STATE { Ron Roff }

INITIAL {
    Rinf = Alpha/(Alpha + Beta)
    Rtau = 1/(Alpha + Beta)
    synon = 0
}

BREAKPOINT {
    SOLVE release METHOD cnexp
    g = Ron + Roff
    i = g*(v - Erev)
}

DERIVATIVE release {
    Ron' = (synon*Rinf - Ron)/Rtau
    Roff' = -Beta*Roff
}

NET_RECEIVE(weight (uS), on, nspike, r0, t0 (ms)) {
    INITIAL {
        on = 0
        nspike = 0
        r0 = 0
        t0 = 0
    }
    if (flag == 0) {
        nspike = nspike + 1
        if (!on) {
            r0 = r0*exp(-Beta*(t - t0))
            t0 = t
            on = 1
            synon = synon + weight
            state_discontinuity(Ron, Ron + r0)
            state_discontinuity(Roff, Roff - r0)
        }
        net_send(Cdur, nspike)
    }
    if (flag == nspike) {
        r0 = weight*Rinf + (r0 - weight*Rinf)*exp(-(t - t0)/Rtau)
        t0 = t
        synon = synon - weight
        state_discontinuity(Ron, Ron - r0)
        state_discontinuity(Roff, Roff + r0)
        on = 0
    }
}
