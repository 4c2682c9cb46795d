: Written for stable_ode's tests: Hodgkin-Huxley kinetics in the alpha/beta
: form, with nonspecific currents (no ions), rates as FUNCTIONs, a vtrap-style
: guard written inline, and a q10.
NEURON {
  SUFFIX hhns
  NONSPECIFIC_CURRENT ina, ik, il
  RANGE gnabar, gkbar, gl, ena, ek, el
}
UNITS { (mA) = (milliamp) (mV) = (millivolt) (S) = (siemens) }
PARAMETER {
  gnabar = 0.12 (S/cm2)
  gkbar = 0.036 (S/cm2)
  gl = 0.0003 (S/cm2)
  ena = 50 (mV)
  ek = -77 (mV)
  el = -54.3 (mV)
}
ASSIGNED { v (mV) celsius (degC) ina (mA/cm2) ik (mA/cm2) il (mA/cm2) q10 }
STATE { m h n }
BREAKPOINT {
  SOLVE states METHOD cnexp
  ina = gnabar*m^3*h*(v - ena)
  ik = gkbar*n^4*(v - ek)
  il = gl*(v - el)
}
INITIAL {
  q10 = 3^((celsius - 6.3)/10)
  m = am(v)/(am(v) + bm(v))
  h = ah(v)/(ah(v) + bh(v))
  n = an(v)/(an(v) + bn(v))
}
DERIVATIVE states {
  q10 = 3^((celsius - 6.3)/10)
  m' = q10*(am(v)*(1 - m) - bm(v)*m)
  h' = q10*(ah(v)*(1 - h) - bh(v)*h)
  n' = q10*(an(v)*(1 - n) - bn(v)*n)
}
FUNCTION am(v (mV)) { LOCAL x
  x = v + 40
  if (fabs(x) < 1e-6) {
    am = 1
  } else {
    am = 0.1*x/(1 - exp(-x/10))
  }
}
FUNCTION bm(v (mV)) { bm = 4*exp(-(v + 65)/18) }
FUNCTION ah(v (mV)) { ah = 0.07*exp(-(v + 65)/20) }
FUNCTION bh(v (mV)) { bh = 1/(exp(-(v + 35)/10) + 1) }
FUNCTION an(v (mV)) { an = 0.01*(v + 55)/(1 - exp(-(v + 55)/10)) }
FUNCTION bn(v (mV)) { bn = 0.125*exp(-(v + 65)/80) }
