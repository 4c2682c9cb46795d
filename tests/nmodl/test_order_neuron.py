"""NEURON's order of the mechanisms that write concentrations, against NEURON
(`stable_ode/_solver/_ordered.py`): two sodium pools that read `cai`, one
compartment each (L = diam = 20 µm) with `pas`, NEURON's `cachan1.mod` and
`capool.mod` (ours), 0.05 nA from 2 ms for 20 ms, 30 ms, dt 0.025 ms,
NEURON at `secondorder = 0`, our `BackwardEuler`, float64. NEURON advances
the mechanisms that write a concentration last registered first:
`canapool.mod` (registered before `capool.mod`) after the pool, reading
this step's `cai`; `napool.mod` (registered after) before it, reading the
step's start's. The files are loaded in NEURON's order (`nrnivmodl` compiles
the session's folder in name order).

Asserted: `nai` within 1e-12 mM of NEURON's in both, and the two pools'
`nai` apart by more than that (the order is seen)."""

import numpy as np
import pytest
from conftest import DEMO, OWN, run_fixed

import stable_ode as so
from stable_ode.nmodl import load_nmodl


POOLS = ("canapool", "napool")
STEP, DT, T1 = (0.05, 2.0, 20.0), 0.025, 30.0


def _neuron(h):
    secs, keep, vecs = [], [], {}
    for n in POOLS:
        sec = h.Section(name=f"order_{n}")
        sec.L = sec.diam = 20.0
        for m in ("pas", "cachan1", "capool", n):
            sec.insert(m)
        sec(0.5).cachan1.imax, sec(0.5).capool.cainf = 0.005, 5e-5
        ic = h.IClamp(sec(0.5))
        ic.amp, ic.delay, ic.dur = STEP
        keep.append(ic)
        secs.append(sec)
        vecs[n] = h.Vector().record(sec(0.5)._ref_nai)
    h.usetable_cachan1 = 0
    return run_fixed(h, vecs, secs, keep, T1, DT)


@pytest.mark.neuron
def test_writers_last_registered_first(neuron_mechanisms):
    nrn = _neuron(neuron_mechanisms)
    m = load_nmodl([DEMO / "cachan1.mod", OWN / "canapool.mod", OWN / "capool.mod",
                    OWN / "napool.mod"])  # fmt: skip
    cells, stimuli, recordings = [], [], []
    for n in POOLS:
        mechs = [
            so.Passive(),
            m["cachan1"](imax=0.005),
            m["capool"](cainf=5e-5),
            m[n](),
        ]
        cells.append(so.Cell(n, [so.Section("soma", 20.0, 20.0)],
                             [so.Insert(x) for x in mechs]))  # fmt: skip
        site = so.Site(n, "soma", 0.5)
        stimuli.append(so.StepCurrent(site, *STEP))
        recordings.append(so.Recording(n, site, variable="nai"))
    model = so.build(cells, stimuli, recordings, celsius=6.3)
    rec = so.simulate(model, T1, DT, solver=so.BackwardEuler()).recordings
    for n in POOLS:
        err = float(np.max(np.abs(np.asarray(rec[n]) - nrn[n])))
        print(f"{n}: max |nai - nai_NEURON| = {err:.2g} mM")
        assert err < 1e-12
    apart = float(np.max(np.abs(nrn["canapool"] - nrn["napool"])))
    print(f"canapool vs napool in NEURON: {apart:.2g} mM")
    assert apart > 1e-9
