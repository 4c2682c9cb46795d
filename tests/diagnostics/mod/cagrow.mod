TITLE a calcium pool that grows without bound
: Written for stable_ode's diagnose tests: cai grows by exp(k·dt) per step
: until it overflows, while every rate the mechanism computes stays finite.

NEURON {
    SUFFIX cagrow
    USEION ca WRITE cai VALENCE 2
    RANGE k
}

PARAMETER {
    k = 100 (/ms)
}

STATE { cai (mM) }

INITIAL { cai = 5e-5 }

BREAKPOINT {
    SOLVE pool METHOD cnexp
}

DERIVATIVE pool {
    cai' = k * cai
}
