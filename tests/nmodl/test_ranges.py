"""Recording an NMODL mechanism's RANGE variables that are not states, against
NEURON running the same files: NEURON's `hh.mod` (from its wheel; NEURON runs
its built-in `hh`, the same file) and dbbs' `Kv3_4__0.mod` (from the installed
`dbbs_mod_collection`) in one compartment, a current step, dt 0.025 ms,
NEURON's `secondorder = 0` against our `BackwardEuler`, float64.

- `gna_hh`, `gk_hh`, `il_hh` (assigned in `BREAKPOINT`, phase `"current"`):
  NEURON evaluates them at the start of its step, so its sample k+1 is our
  sample k (its sample 0 the initial state's, as ours);
- `minf_hh`, `ntau_hh`, and `minf`, `mtau`, `hinf`, `htau` of Kv3_4
  (assigned by `rates(v)` in the `DERIVATIVE` blocks, phase `"state"`):
  NEURON evaluates them at the step's new voltage, the same sample as ours;
- `gnabar_hh`, `gkbar` of Kv3_4 (PARAMETERs, `"constant"`): the parameter.
"""

import importlib.util
import pathlib

import numpy as np
import pytest
from conftest import MODFILE, run_fixed

import stable_ode as so
from stable_ode.nmodl import load_nmodl


KV = "glia__dbbs_mod_collection__Kv3_4__0"
DT, T1 = 0.025, 10.0
CURRENT = ("gna_hh", "gk_hh", "il_hh")
STATE = ("minf_hh", "ntau_hh") + tuple(
    f"{x}_{KV}" for x in ("minf", "mtau", "hinf", "htau")
)
CONSTANT = {"gnabar_hh": 0.12, f"gkbar_{KV}": 0.004}


@pytest.fixture(scope="module")
def mechs():
    spec = importlib.util.find_spec("dbbs_mod_collection")
    if spec is None:
        pytest.fail("dbbs-mod-collection is not installed (pip install -e .[test])")
    kv = pathlib.Path(spec.origin).parent / "mod" / f"{KV}.mod"
    return load_nmodl([MODFILE / "hh.mod", kv])


def _model(mechs, records):
    site = so.Site("c", "soma", 0.5)
    cell = so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0)],
        [so.Insert(mechs["hh"]()), so.Insert(mechs[KV]())],
    )
    recs = [so.Recording(name, site, name) for name in records]
    return so.build([cell], [so.StepCurrent(site, 0.2, 1.0, 20.0)], recs)


def test_phases(mechs):
    gates = {f"{x}{y}": "state" for x in "mhn" for y in ("inf", "tau")}
    assert mechs["hh"].nmodl.ranges == {
        "gnabar": "constant",
        "gkbar": "constant",
        "gl": "constant",
        "el": "constant",
        "gna": "current",
        "gk": "current",
        "il": "current",
        **gates,
    }
    ranges = mechs[KV].nmodl.ranges
    assert {x: ranges[x] for x in ("minf", "mtau", "gkbar")} == {
        "minf": "state",
        "mtau": "state",
        "gkbar": "constant",
    }


@pytest.mark.neuron
def test_ranges_match_neuron(mechs, nrn_compiled):
    h = nrn_compiled
    sec = h.Section(name="ranges_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    sec.insert(KV)
    ic = h.IClamp(sec(0.5))
    ic.amp, ic.delay, ic.dur = 0.2, 1.0, 20.0
    seg = sec(0.5)
    vecs = {"v": h.Vector().record(seg._ref_v)}
    for name in CURRENT + STATE:
        vecs[name] = h.Vector().record(getattr(seg, f"_ref_{name}"))
    h.usetable_hh = 0
    ref = run_fixed(h, vecs, [sec], [ic], T1, DT)

    model = _model(mechs, ("v",) + CURRENT + STATE + tuple(CONSTANT))
    rec = so.simulate(model, T1, DT).recordings
    assert ref["v"].max() > 0, "it spikes"
    assert np.max(np.abs(np.asarray(rec["v"]) - ref["v"])) < 1e-9
    for name in CURRENT + STATE:
        ours, theirs = np.asarray(rec[name]), ref[name]
        if name in CURRENT:  # NEURON's sample k+1 is ours at k
            assert ours[0] == pytest.approx(theirs[0], rel=1e-13, abs=0.0), name
            ours, theirs = ours[:-1], theirs[1:]
        err = np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs))
        print(f"{name}: max |ours - NEURON| / max |NEURON| = {err:.2g}")
        assert err < 1e-11, (name, err)
    for name, value in CONSTANT.items():
        assert np.all(np.asarray(rec[name]) == value), name


def test_errors_list_the_range_variables(mechs):
    with pytest.raises(
        ValueError,
        match=r"recording 'ena_hh': mechanism 'hh' has no state or RANGE variable "
        r"'ena' \(its states: \['h', 'm', 'n'\]; its RANGE variables: \['el', "
        r"'gk', 'gkbar', 'gl', 'gna', 'gnabar', 'hinf', 'htau', 'il', 'minf', ",
    ):
        _model(mechs, ("ena_hh",))  # an ion variable: recorded as 'ena'
    with pytest.raises(ValueError, match="cannot record variable 'gna_pas'"):
        _model(mechs, ("gna_pas",))  # pas is not inserted


LEAK_MOD = """
NEURON {
  SUFFIX leakr
  NONSPECIFIC_CURRENT i
  RANGE g, e, vstart, q
}
PARAMETER { g = 0.001 (S/cm2)  e = -70 (mV) }
ASSIGNED { v (mV)  i (mA/cm2)  vstart (mV)  q }
INITIAL { vstart = v  q = 2*g }
BREAKPOINT { i = g*(v - e) }
"""


def test_initial_only_values_are_refused(tmp_path):
    path = tmp_path / "leakr.mod"
    path.write_text(LEAK_MOD)
    cls = load_nmodl(path)["leakr"]
    assert cls.nmodl.ranges == {"g": "constant", "e": "constant", "q": "constant",
                                "i": "current"}  # fmt: skip
    site = so.Site("c", "soma", 0.5)
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(cls())])
    with pytest.raises(
        ValueError,
        match=r"recording 'vs': cannot record 'vstart' of mechanism 'leakr' "
        r"\(.*leakr.mod\): only INITIAL computes it, from the voltage",
    ):
        so.build([cell], [], [so.Recording("vs", site, "vstart_leakr")])
    model = so.build(
        [cell],
        [],
        [so.Recording(n, site, f"{n}_leakr") for n in ("i", "q")]
        + [so.Recording("v", site)],
    )
    rec = so.simulate(model, 0.1, 0.025).recordings
    v = np.asarray(rec["v"])
    np.testing.assert_allclose(np.asarray(rec["i"]), 0.001 * (v + 70.0), rtol=1e-14)
    assert np.all(np.asarray(rec["q"]) == 0.002)  # INITIAL's, from the parameters
