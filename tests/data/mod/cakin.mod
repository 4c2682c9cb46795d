: Written for stable_ode's tests: a calcium pool as a one-state KINETIC scheme
: with a flux (<<) from ica and relaxation to a resting level that is a
: parameter, not a state (so dx/dt = A x + b).
NEURON {
    SUFFIX cakin
    USEION ca READ ica WRITE cai
    RANGE tau, depth, cainf
}
UNITS {
    (mA) = (milliamp)
    (mM) = (milli/liter)
    (um) = (micron)
    FARADAY = (faraday) (coulomb)
}
PARAMETER {
    tau = 20 (ms)
    depth = 0.1 (um)
    cainf = 5e-5 (mM)
}
ASSIGNED { ica (mA/cm2) }
STATE { cai (mM) }
INITIAL { cai = cainf }
BREAKPOINT { SOLVE pool METHOD sparse }
KINETIC pool {
    ~ cai << (-ica*10000/(2*FARADAY*depth))
    ~ cai <-> cainf (1/tau, 1/tau)
}
