: Written for stable_ode's tests: a calcium pool with a buffer that binds
: it, ca + b <-> cab (a KINETIC scheme nonlinear in its states), the pool's
: volume by COMPARTMENT, the buffer conserved (in amounts, as CONSERVE
: reads with COMPARTMENT), ica filling the pool and f_flux/b_flux read into
: a RANGE variable. INITIAL starts at the steady state and solves for it
: (NEURON's STEADYSTATE of a nonlinear scheme, one implicit Euler step of 1e9
: ms, does not converge from far away: from b = btot, cab = 0 it stops at
: cai = 0).
NEURON {
  SUFFIX cabuf
  USEION ca READ ica WRITE cai
  RANGE btot, kon, koff, taur, cainf, jbind
}
UNITS {
  (mM) = (milli/liter)
  (mA) = (milliamp)
  (um) = (micron)
  FARADAY = (faraday) (coulomb)
  PI = (pi) (1)
}
PARAMETER {
  btot = 0.05 (mM)
  kon = 100 (/mM-ms)
  koff = 0.1 (/ms)
  taur = 20 (ms)
  cainf = 1e-4 (mM)
}
ASSIGNED {
  ica (mA/cm2)
  diam (um)
  jbind (mM/ms)
}
STATE { cai (mM) b (mM) cab (mM) }
INITIAL {
  cai = cainf
  b = btot/(1 + kon*cainf/koff)
  cab = btot - b
  SOLVE bind STEADYSTATE sparse
}
BREAKPOINT { SOLVE bind METHOD sparse }
KINETIC bind {
  COMPARTMENT diam*diam*PI/4 {cai b cab}
  ~ cai << (-ica*PI*diam*(1e4)/(2*FARADAY))
  ~ cai + b <-> cab (kon*diam*diam*PI/4, koff*diam*diam*PI/4)
  jbind = (f_flux - b_flux)/(diam*diam*PI/4)
  ~ cai << ((cainf - cai)*diam*diam*PI/(4*taur))
  CONSERVE b + cab = btot*diam*diam*PI/4
}
