"""Recording a mechanism's state or RANGE variable by NEURON's name (`m_hh`,
`gna_hh`, `i_pas`): against NEURON's `_ref_m_hh`, `_ref_gna_hh`, ..., in a model
file, and the errors naming the recording.

NEURON computes `gna_hh`, `gk_hh`, `il_hh` and `i_pas` in `BREAKPOINT`, at the
start of its step: its sample k+1 is the value at the voltage and states of its
sample k (sample 0 that of the initial state), which is our sample k. It
computes `minf_hh`, `ntau_hh`, ... in its state update at the step's new
voltage: the same sample as ours."""

import diffrax as dfx
import numpy as np
import pytest

import stable_ode as so


DT, T1 = 0.025, 10.0
SOMA, DEND = so.Site("c", "soma", 0.5), so.Site("c", "dend", 0.5)
STATES = ("m_hh", "h_hh", "n_hh")
RANGES = {"gna_hh": SOMA, "gk_hh": SOMA, "il_hh": SOMA, "i_pas": DEND}
GATES = ("minf_hh", "hinf_hh", "ntau_hh")
CONSTANT = {"gnabar_hh": (SOMA, 0.12), "el_hh": (SOMA, -54.3), "g_pas": (DEND, 1e-3)}


def _cell():
    return so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0), so.Section("dend", 100.0, 2.0, 3, "soma")],
        [so.Insert(so.HH(), ["soma"]), so.Insert(so.Passive(), ["dend"])],
    )


def _records():
    return (
        [so.Recording("v", SOMA)]
        + [so.Recording(s, SOMA, s) for s in STATES + GATES]
        + [so.Recording(s, site, s) for s, site in RANGES.items()]
        + [so.Recording(s, site, s) for s, (site, _) in CONSTANT.items()]
    )


@pytest.mark.neuron
def test_hh_states_match_neuron():
    from neuron import h

    h.load_file("stdrun.hoc")
    soma, dend = h.Section(name="rs_soma"), h.Section(name="rs_dend")
    try:
        soma.L = soma.diam = 20.0
        dend.L, dend.diam, dend.nseg = 100.0, 2.0, 3
        dend.connect(soma(1))
        for s in (soma, dend):
            s.Ra, s.cm = 35.4, 1.0
        soma.insert("hh")
        dend.insert("pas")
        stim = h.IClamp(soma(0.5))
        stim.delay, stim.dur, stim.amp = 1.0, 20.0, 0.3
        vecs = {"v": h.Vector().record(soma(0.5)._ref_v)}
        for s in STATES + GATES:
            vecs[s] = h.Vector().record(getattr(soma(0.5), f"_ref_{s}"))
        for s, site in RANGES.items():
            seg = (soma if site is SOMA else dend)(0.5)
            vecs[s] = h.Vector().record(getattr(seg, f"_ref_{s}"))
        h.usetable_hh, h.secondorder, h.dt, h.celsius = 0, 0, DT, 6.3
        h.CVode().active(0)
        h.finitialize(-65.0)
        for _ in range(round(T1 / DT)):
            h.fadvance()
        ref = {k: np.array(v) for k, v in vecs.items()}
    finally:
        h.delete_section(sec=dend)
        h.delete_section(sec=soma)

    model = so.build([_cell()], [so.StepCurrent(SOMA, 0.3, 1.0, 20.0)], _records())
    rec = so.simulate(model, T1, DT).recordings
    assert ref["v"].max() > 0  # it spikes
    assert np.max(np.abs(np.asarray(rec["v"]) - ref["v"])) < 1e-9
    for s in STATES:
        err = np.max(np.abs(np.asarray(rec[s]) - ref[s]))
        assert err < 1e-11, (s, err)
    for s in GATES:
        err = np.max(np.abs(np.asarray(rec[s]) - ref[s])) / np.max(np.abs(ref[s]))
        print(f"{s}: max |ours - NEURON| / max |NEURON| = {err:.2g}")
        assert err < 1e-11, (s, err)
    for s in RANGES:  # NEURON's sample k+1 is ours at k (module docstring)
        ours = np.asarray(rec[s])
        assert ours[0] == pytest.approx(ref[s][0], rel=1e-13, abs=0.0), s
        err = np.max(np.abs(ours[:-1] - ref[s][1:])) / np.max(np.abs(ref[s]))
        print(f"{s}: max |ours - NEURON| / max |NEURON| = {err:.2g}")
        assert err < 1e-11, (s, err)
    for s, (_, value) in CONSTANT.items():
        assert np.all(np.asarray(rec[s]) == value), s


def test_errors_name_the_recording():
    with pytest.raises(ValueError, match="'gd': no mechanism named by 'm_hh'"):
        so.build([_cell()], [], [so.Recording("gd", DEND, "m_hh")])
    with pytest.raises(
        ValueError,
        match=r"'q': mechanism 'hh' has no state or RANGE variable 'q' \(its "
        r"states: \['h', 'm', 'n'\]; its RANGE variables: \['el', 'gk', 'gkbar', "
        r"'gl', 'gna', 'gnabar', 'hinf', 'htau', 'il', 'minf', 'mtau', 'ninf', "
        r"'ntau'\]",
    ):
        so.build([_cell()], [], [so.Recording("q", SOMA, "q_hh")])
    with pytest.raises(ValueError, match=r"'p': mechanism 'pas' has no state or "):
        so.build([_cell()], [], [so.Recording("p", DEND, "gna_pas")])
    with pytest.raises(ValueError, match="cannot record variable 'm_xyz'"):
        so.build([_cell()], [], [so.Recording("x", SOMA, "m_xyz")])


def test_model_file_records_a_state():
    spec = {
        "format": "stable_ode.model/1",
        "t_stop": 0.5,
        "cells": [
            {
                "name": "c",
                "sections": [{"name": "soma", "length": 20.0, "diameter": 20.0}],
                "mechanisms": [{"name": "hh"}],
            }
        ],
        "record": [
            {"name": "m", "cell": "c", "section": "soma", "variable": "m_hh"},
            {"name": "h", "cell": "c", "section": "soma", "variable": "h_hh"},
            {"name": "gna", "cell": "c", "section": "soma", "variable": "gna_hh"},
            {"name": "v", "cell": "c", "section": "soma"},
        ],
        "integration": {"dt": 0.025},
    }
    rec = so.load_spec(spec).simulate().recordings
    m = np.asarray(rec["m"])
    assert m.shape == np.asarray(rec["v"]).shape
    assert 0.0 < m[0] < 0.1  # m_inf at -65 mV: 0.053
    gna = 0.12 * m**3 * np.asarray(rec["h"])  # S/cm², at each sample's states
    np.testing.assert_allclose(np.asarray(rec["gna"]), gna, rtol=1e-14, atol=0)
    spec["record"][0]["variable"] = "m_pas"
    with pytest.raises(so.SpecError, match=r"record\[0\]\.variable"):
        so.load_spec(spec)
    spec["record"][0]["variable"] = "gx_hh"
    with pytest.raises(
        so.SpecError, match=r"record\[0\]\.variable: .*no state or RANGE variable 'gx'"
    ):
        so.load_spec(spec)


@pytest.mark.parametrize(
    "stepping",
    [
        so.FixedSteps(0.025, plain_first=False),
        so.AdaptiveSteps(dfx.PIDController(rtol=1e-4, atol=1e-6), 0.025, 0.1),
    ],
    ids=["grid", "adaptive"],
)
def test_range_variables_in_every_stepping(stepping):
    """The RANGE variable is the function of each saved sample's states, whatever
    the stepping (each passes the model to the recorder)."""
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    recs = [so.Recording(s, so.Site("c", "soma"), s) for s in ("m_hh", "h_hh")]
    recs.append(so.Recording("gna", so.Site("c", "soma"), "gna_hh"))
    model = so.build([cell], [so.StepCurrent(SOMA, 0.3, 0.2, 5.0)], recs)
    rec = so.simulate(model, 2.0, stepping=stepping).recordings
    m, h = np.asarray(rec["m_hh"]), np.asarray(rec["h_hh"])
    np.testing.assert_allclose(np.asarray(rec["gna"]), 0.12 * m**3 * h, rtol=1e-14)
    assert np.ptp(m) > 0.01  # the current step moves the gates
