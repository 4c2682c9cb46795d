COMMENT
A train of current pulses driven by self-events alone, written for stable_ode's
tests in the form of the pulse generators on NEURON's forum (ipulse2.mod):
INITIAL sends the first self-event, each pulse's start sends its end and each
end sends the next start, num pulses in all. (A NONSPECIFIC_CURRENT, outward:
the injected current is -i.)
ENDCOMMENT

NEURON {
    POINT_PROCESS PulseTrain
    RANGE del, ton, toff, num, amp, i, on, count
    NONSPECIFIC_CURRENT i
}

UNITS {
    (nA) = (nanoamp)
}

PARAMETER {
    del = 1 (ms)
    ton = 0.5 (ms)
    toff = 1.5 (ms)
    num = 3
    amp = 0.2 (nA)
}

ASSIGNED {
    i (nA)
    on
    count
}

INITIAL {
    on = 0
    count = 0
    net_send(del, 1)
}

BREAKPOINT {
    i = -on*amp
}

NET_RECEIVE(w) {
    if (flag == 1) {
        on = 1
        count = count + 1
        net_send(ton, 2)
    } else if (flag == 2) {
        on = 0
        if (count < num) {
            net_send(toff, 1)
        }
    }
}
