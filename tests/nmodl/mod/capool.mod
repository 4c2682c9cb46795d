: Written for stable_ode's tests: a calcium pool filled by ica (a
: concentration state the ion model couples to every calcium current).
NEURON {
  SUFFIX capool
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
ASSIGNED { ica (mA/cm2) }
STATE { cai (mM) }
INITIAL { cai = cainf }
BREAKPOINT { SOLVE state METHOD cnexp }
DERIVATIVE state {
  cai' = -(10000)*ica/(2*FARADAY*depth) + (cainf - cai)/taur
}
