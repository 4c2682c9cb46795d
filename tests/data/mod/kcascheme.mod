: Written for stable_ode's tests: a calcium-gated K channel as a closed KINETIC
: scheme whose binding rate is proportional to cai (an ion concentration that
: another mechanism writes; not a state here), so the scheme is linear in its
: states. c + cai <-> cca <-> o.
NEURON {
    SUFFIX kcascheme
    USEION ca READ cai
    USEION k READ ek WRITE ik
    RANGE gbar
}
UNITS { (mA) = (milliamp) (mV) = (millivolt) (mM) = (milli/liter) }
PARAMETER {
    gbar = 0.02 (S/cm2)
    kon = 2000 (/mM-ms)
    koff = 0.5 (/ms)
    a = 0.4 (/ms)
    b = 0.1 (/ms)
}
ASSIGNED { v (mV) ek (mV) ik (mA/cm2) cai (mM) }
STATE { c cca o }
BREAKPOINT {
    SOLVE kin METHOD sparse
    ik = gbar*o*(v - ek)
}
INITIAL { SOLVE kin STEADYSTATE sparse }
KINETIC kin {
    ~ c + cai <-> cca (kon, koff)
    ~ cca <-> o (a*exp(v/30), b)
    CONSERVE c + cca + o = 1
}
