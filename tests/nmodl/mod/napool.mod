: Written for stable_ode's tests: a sodium pool that reads cai, in a file
: NEURON registers after capool.mod (so NEURON advances it before the pool):
: mechanisms writing a concentration are advanced last registered first.
NEURON {
  SUFFIX napool
  USEION na WRITE nai
  USEION ca READ cai
  RANGE tau
}
UNITS { (mM) = (milli/liter) }
PARAMETER { tau = 2 (ms) }
ASSIGNED { cai (mM) }
STATE { nai (mM) }
INITIAL { nai = 10 }
BREAKPOINT { SOLVE state METHOD cnexp }
DERIVATIVE state {
  nai' = (10 + 1e4*cai - nai)/tau
}
