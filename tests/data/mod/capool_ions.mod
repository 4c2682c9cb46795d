: Written for stable_ode's ion tests: a first-order calcium pool filled by ica
: (no simple pool ships with NEURON's wheel). Its Python twin: ion_mechanisms.CaPool.
NEURON {
    SUFFIX capool_ions
    USEION ca READ ica WRITE cai
    RANGE gamma, decay, depth, cainf
}
UNITS {
    (mA) = (milliamp)
    FARADAY = (faraday) (coulombs)
    (um) = (micron)
    (mM) = (milli/liter)
}
PARAMETER {
    gamma = 0.05
    decay = 80 (ms)
    depth = 0.1 (um)
    cainf = 5e-5 (mM)
}
ASSIGNED { ica (mA/cm2) }
STATE { cai (mM) }
BREAKPOINT { SOLVE states METHOD cnexp }
DERIVATIVE states {
    cai' = -(10000)*(ica*gamma/(2*FARADAY*depth)) - (cai - cainf)/decay
}
