: Written for stable_ode's tests: Traub-style rates with removable singularities
: (inline, in an efun FUNCTION, behind a fabs guard), derivimplicit, and a
: state whose equation is not linear in it (n).
NEURON {
  SUFFIX traub
  NONSPECIFIC_CURRENT i
  RANGE gbar, vt
}
UNITS { (mA) = (milliamp) (mV) = (millivolt) }
PARAMETER { gbar = 0.01 (S/cm2) vt = -58 (mV) e = -70 (mV) }
STATE { m h n }
ASSIGNED { v (mV) i (mA/cm2) am bm ah bh }
BREAKPOINT {
  SOLVE states METHOD derivimplicit
  i = gbar*m*m*m*h*n*(v - e)
}
INITIAL { rates(v) m = am/(am+bm) h = ah/(ah+bh) n = 0.5 }
DERIVATIVE states {
  rates(v)
  m' = am*(1-m) - bm*m
  h' = ah*(1 - h) - bh*h
  n' = -n*n + 0.25*exp(-v/100)
}
PROCEDURE rates(v (mV)) { LOCAL x
  am = 0.32*(13-(v-vt))/(exp((13-(v-vt))/4)-1)
  x = v - vt - 40
  if (fabs(x) < 1e-4) {
    bm = 0.28*5
  } else {
    bm = 0.28*x/(exp(x/5)-1)
  }
  ah = 0.128*exp((17-(v-vt))/18) + efun((v+30)/7) + (v+20)/(1 - exp(-(v+20)/9))
  bh = 4/(1+exp((40-(v-vt))/5))
}
FUNCTION efun(z) {
  if (fabs(z) < 1e-4) {
    efun = 1 - z/2
  } else {
    efun = z/(exp(z) - 1)
  }
}
