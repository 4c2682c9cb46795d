: Written for stable_ode's tests: capool.mod's pool as a KINETIC block whose
: state is `ca` and which writes the ion's cai as an ASSIGNED copy of it
: (`cai = ca`, as the dbbs collection's cdp5 files do).
NEURON {
  SUFFIX cacopy
  USEION ca READ ica WRITE cai
  RANGE depth, taur, cainf
}
UNITS {
  (mM) = (milli/liter)
  (mA) = (milliamp)
  (um) = (micron)
  FARADAY = (faraday) (coulomb)
}
PARAMETER {
  depth = 0.1 (um)
  taur = 20 (ms)
  cainf = 1e-4 (mM)
}
ASSIGNED { ica (mA/cm2) cai (mM) }
STATE { ca (mM) }
INITIAL {
  ca = cainf
  cai = ca
}
BREAKPOINT { SOLVE pool METHOD sparse }
KINETIC pool {
  ~ ca << (-(10000)*ica/(2*FARADAY*depth))
  ~ ca << ((cainf - ca)/taur)
  cai = ca
}
