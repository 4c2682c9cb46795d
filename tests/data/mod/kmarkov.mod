: Written for stable_ode's tests: a three-state K channel as a KINETIC scheme
: (METHOD sparse). Its Python twin: test_scheme.KMarkov.
NEURON {
    SUFFIX kmarkov
    USEION k READ ek WRITE ik
    RANGE gbar
}
UNITS { (mA) = (milliamp) (mV) = (millivolt) }
PARAMETER { gbar = 0.036 (S/cm2) }
ASSIGNED { v (mV) ek (mV) ik (mA/cm2) a1 (/ms) b1 (/ms) a2 (/ms) b2 (/ms) }
STATE { c1 c2 o }
BREAKPOINT {
    SOLVE kin METHOD sparse
    ik = gbar*o*(v - ek)
}
INITIAL { SOLVE kin STEADYSTATE sparse }
KINETIC kin {
    rates(v)
    ~ c1 <-> c2 (a1, b1)
    ~ c2 <-> o (a2, b2)
    CONSERVE c1 + c2 + o = 1
}
PROCEDURE rates(v (mV)) {
    a1 = 0.1*exp((v + 40)/20)
    b1 = 0.1*exp(-(v + 40)/20)
    a2 = 0.2*exp((v + 30)/15)
    b2 = 0.05*exp(-(v + 30)/25)
}
