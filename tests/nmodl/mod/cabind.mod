: Written for stable_ode's tests: kcascheme.mod under a name that NEURON
: registers before capool.mod (nrnivmodl compiles a folder in name order);
: NEURON still advances capool, which writes cai, first.
: c + cai <-> cca <-> o.
NEURON {
    SUFFIX cabind
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
