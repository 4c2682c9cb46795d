"""`stable_ode.from_neuron` and `python -m stable_ode from-neuron` against NEURON.

A small model built in NEURON with everything the converter reads — a soma and
an apical dendrite from 3-D points (tapering), a basal dendrite from `L`/`diam`
attached at `soma(0.5)`, per-section `Ra` and `cm`, `hh`, `pas` and NEURON's
demo channel `HHk` (khhchan.mod, through the NMODL importer), per-segment
parameter values from distance gradients (`cm` per segment among them), a
per-section `ek`, an `IClamp` and an
`ExpSyn` driven by a `NetStim` — is converted and simulated by both with
backward Euler at dt 0.025 ms; and NEURON's demo reconstruction `pyramid.nrn`
(hoc, 79 sections of 3-D points). Unconvertible parts are reported by name.
"""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from helpers import passive_input_resistance

import stable_ode as so
from stable_ode._neuron_import import from_neuron, FromNeuronError
from stable_ode.morphology._geometry import half_resistances


def _share() -> Path:
    return Path(importlib.util.find_spec("neuron").origin).parent / ".data" / "share"


def _khh() -> Path:
    return _share() / "nrn" / "demo" / "release" / "khhchan.mod"


def _build(h):
    """The small model; returns the objects that keep it alive and the soma."""
    soma = h.Section(name="soma")
    for p in ((0, 0, 0, 18.0), (10, 0, 0, 20.0), (20, 1, 0, 16.0)):
        h.pt3dadd(*p, sec=soma)
    apic = h.Section(name="apic")
    apic.connect(soma(1))
    for i, (x, d) in enumerate(((20, 3.0), (60, 2.5), (120, 2.0), (200, 1.2))):
        h.pt3dadd(x, 1 + i, 0, d, sec=apic)
    apic.nseg = 7
    dend = h.Section(name="dend")
    dend.connect(soma(0.5))
    dend.L, dend.diam, dend.nseg = 150, 1.5, 5
    for sec in (soma, apic, dend):
        sec.Ra = 120
    apic.Ra, dend.cm = 150, 1.5
    soma.insert("hh")
    apic.insert("hh")
    apic.insert("pas")
    dend.insert("pas")
    dend.insert("HHk")
    h.distance(0, soma(0.5))
    for seg in apic:
        x = h.distance(seg)
        seg.pas.g, seg.pas.e = 1e-4 * (1 + x / 100), -70
        seg.hh.gnabar = 0.12 * max(0.0, 1 - x / 300)
        seg.cm = 1.0 + x / 200
    for seg in dend:
        seg.pas.g, seg.pas.e = 2e-4, -65
        seg.HHk.gkbar = 0.01 * (1 + h.distance(seg) / 100)
        seg.ek = -80
    soma(0.5).hh.gkbar = 0.04
    stim = h.IClamp(soma(0.5))
    stim.delay, stim.dur, stim.amp = 1, 5, 0.3
    tip = h.IClamp(apic(1))  # at a free end node: into apic's last compartment
    tip.delay, tip.dur, tip.amp = 0.5, 2, 0.05
    syn = h.ExpSyn(dend(0.7))
    syn.tau, syn.e = 2.0, 0.0
    ns = h.NetStim()
    ns.start, ns.number, ns.interval, ns.noise = 2, 3, 2, 0
    nc = h.NetCon(ns, syn)
    nc.weight[0], nc.delay = 0.002, 0.5
    return [soma, apic, dend, stim, tip, syn, ns, nc], soma


@pytest.fixture
def neuron_settings(neuron_mechanisms):
    h = neuron_mechanisms
    old = (h.celsius, h.dt, h.tstop, h.v_init, h.secondorder, h.usetable_hh)
    old_khh = h.usetable_HHk
    h.celsius, h.dt, h.tstop, h.v_init, h.secondorder = 16.3, 0.025, 8.0, -65.0, 0
    h.usetable_hh = h.usetable_HHk = 0  # exact rates, as stable_ode's
    yield h
    h.celsius, h.dt, h.tstop, h.v_init, h.secondorder, h.usetable_hh = old
    h.usetable_HHk = old_khh


def _neuron_trace(h, sec, *more):
    """`v` at `sec(0.5)` (and at the segments `more`) at every step."""
    vs = [h.Vector().record(seg._ref_v) for seg in (sec(0.5), *more)]
    h.finitialize(h.v_init)
    h.continuerun(h.tstop)
    return np.array(vs[0]) if not more else [np.array(v) for v in vs]


def test_small_model_matches_neuron(neuron_settings):
    h = neuron_settings
    keep, soma = _build(h)
    apic = keep[1]
    syn = keep[5]
    record = {"apic": apic(0.8), "m": (apic(0.8), "m_hh"), "g": (syn, "g")}
    model = from_neuron(nmodl=[_khh()], sections=[soma], record=record)
    json.dumps(model)  # a model file
    (cell,) = model["cells"]
    sections = {s["name"]: s for s in cell["sections"]}
    assert "points" in sections["apic"] and "length" in sections["dend"]
    assert sections["dend"]["parent_position"] == 0.5
    assert model["ions"]["k"]["reversal"] == -80.0
    assert [s["position"] for s in model["stimuli"]] == [0.5, 1.0]
    hh = next(m for m in cell["mechanisms"] if m["name"] == "hh")
    assert len(hh["params"]["gnabar"]["values"]) == 1 + 7  # soma + apic
    (varying,) = [p for p in cell["properties"] if "values" in str(p)]
    assert varying["sections"] == ["apic"]
    assert len(set(varying["capacitance"]["values"])) == 7  # seg.cm, one per seg
    assert model["record"][1] == {
        "name": "apic", "cell": "cell", "section": "apic", "position": 0.8
    }  # fmt: skip
    assert model["record"][2] == {
        "name": "m", "cell": "cell", "section": "apic", "position": 0.8,
        "variable": "m_hh",
    }  # fmt: skip
    assert model["record"][3] == {
        "name": "g",
        "point_process": "ExpSyn[0]",
        "variable": "g",
    }
    # (apic(0.8) is the centre of apic's compartment 5 of 7 in NEURON)
    m_ref = h.Vector().record(apic((5 + 0.5) / 7)._ref_m_hh)
    g_ref = h.Vector().record(syn._ref_g)
    ref, ref_apic = _neuron_trace(h, soma, apic((5 + 0.5) / 7))
    recordings = so.load_spec(model).simulate().recordings
    ours = np.asarray(recordings["soma"])
    assert ref.shape == ours.shape and ref.max() > 0  # spikes
    assert np.max(np.abs(ours - ref)) < 1e-6
    assert np.max(np.abs(np.asarray(recordings["apic"]) - ref_apic)) < 1e-6
    print("m", np.max(np.abs(np.asarray(recordings["m"]) - np.array(m_ref))))
    print("g", np.max(np.abs(np.asarray(recordings["g"]) - np.array(g_ref))))
    assert np.max(np.abs(np.asarray(recordings["m"]) - np.array(m_ref))) < 1e-8
    assert np.max(np.array(g_ref)) > 1e-3  # the NetStim's three events
    assert np.max(np.abs(np.asarray(recordings["g"]) - np.array(g_ref))) < 1e-12
    with pytest.raises(FromNeuronError, match="record 'x'"):
        from_neuron(nmodl=[_khh()], sections=[soma], record={"x": 3.0})
    other = h.Section(name="other")
    stray = h.ExpSyn(other(0.5))  # not in the converted cells
    with pytest.raises(FromNeuronError, match="record 'y'.*not a converted point"):
        from_neuron(nmodl=[_khh()], sections=[soma], record={"y": (stray, "g")})
    del stray
    h.delete_section(sec=other)
    del keep


def test_pyramid_nrn_matches_neuron(neuron_settings):
    """NEURON's demo reconstruction (hoc, `pt3dadd` points, children at
    `soma(0.5)`), hh in the soma and pas elsewhere: every compartment's area and
    `ri()`, the input resistance with pas alone, and the trace as NEURON's."""
    h = neuron_settings
    before = {s.name() for s in h.allsec()}
    h.load_file(str(_share() / "nrn" / "demo" / "pyramid.nrn"))
    mine = [s for s in h.allsec() if s.name() not in before]
    try:
        soma = next(s for s in mine if s.name() == "soma")
        for s in mine:
            s.Ra = 100
            s.insert("pas")
            for seg in s:
                seg.pas.g, seg.pas.e = 1e-4, -65
        # the input resistance at soma(0.5) with pas alone: NEURON's Impedance
        # at 0 Hz against the steady state of the converted model
        h.finitialize(-65.0)
        imp = h.Impedance()
        imp.loc(0.5, sec=soma)
        imp.compute(0)
        converted = from_neuron(sections=[soma])
        passive = so.load_spec(converted).model
        at = passive.index(converted["cells"][0]["name"], "soma", 0.5)
        rin = passive_input_resistance(passive, at)
        assert abs(rin / imp.input(0.5, sec=soma) - 1) < 1e-9, rin
        soma.insert("hh")
        stim = h.IClamp(soma(0.5))
        stim.delay, stim.dur, stim.amp = 0.5, 3, 4.0
        h.tstop = 5.0
        model = from_neuron(sections=[soma])
        (cell,) = model["cells"]
        assert len(cell["sections"]) == len(mine) == 79
        loaded = so.load_spec(model)
        # every compartment's area and ri() as NEURON's (from its 3-D points)
        (ours_cell,) = loaded.spec.cells
        ra = so.morphology._regions.section_values(ours_cell)[1]
        area = np.asarray(loaded.model.area) * 1e8  # µm²
        by_name = {s.name(): s for s in mine}
        for sec in ours_cell.sections:
            n, nsec = sec.n_compartments, by_name[sec.name]
            idx = [
                loaded.model.index(cell["name"], sec.name, (k + 0.5) / n)
                for k in range(n)
            ]
            want = np.array([seg.area() for seg in nsec])
            assert np.max(np.abs(area[idx] / want - 1)) < 1e-9, sec.name
            left, right = half_resistances(sec, ra[sec.name])
            ri = np.concatenate([[left[0]], right[:-1] + left[1:]]) * 1e-6  # MΩ
            want = np.array([seg.ri() for seg in nsec])
            k = 0 if sec.parent is not None else 1  # the root's 1e30 guard
            assert np.max(np.abs(ri[k:] / want[k:] - 1), initial=0) < 1e-9, sec.name
        ref = _neuron_trace(h, soma)
        ours = np.asarray(loaded.simulate().recordings["soma"])
        assert ref.max() > 0, ref.max()
        assert np.max(np.abs(ours - ref)) < 1e-6, np.max(np.abs(ours - ref))
        del stim
    finally:
        for s in mine:
            h.delete_section(sec=s)


def test_unconvertible_parts_are_named(neuron_mechanisms, tmp_path):
    h = neuron_mechanisms
    pointer = tmp_path / "ptr.mod"
    pointer.write_text(
        "NEURON { SUFFIX ptr POINTER p RANGE g }\nPARAMETER { g = 1 }\n"
        "ASSIGNED { p }\nBREAKPOINT { }\n"
    )
    soma = h.Section(name="soma")
    soma.insert("extracellular")
    soma.insert("fastpas")
    dend = h.Section(name="dend")
    dend.connect(soma(1))
    dend.insert("HHk")  # compiled, but its .mod file is not given
    # a spike recording at the node joining soma and dend (no compartment)
    spikes = h.NetCon(soma(1)._ref_v, None, sec=soma)
    junction = h.IClamp(soma(1))  # at the node joining soma and dend
    # the run settings are NEURON globals that other tests in this process set
    h.dt, h.tstop = 0.025, 5.0
    with pytest.raises(FromNeuronError) as info:
        from_neuron(nmodl=[pointer], sections=[soma])
    text = str(info.value)
    assert len(info.value.problems) == 6, text
    for word in ("extracellular", "'fastpas'", "'HHk'", "NetCon", "POINTER"):
        assert word in text
    assert "IClamp" in text and "soma(1)" in text
    del spikes, junction


def test_threshold_netcons_and_spike_recordings(neuron_settings):
    """NetCons from a cell's voltage into an `ExpSyn` on another cell convert
    with their threshold, delay and weight, and a targetless NetCon
    (`NetCon.record`) to a spike recording; spike counts equal NEURON's, and
    spike times agree within NEURON's fixed-step slack (it detects a crossing
    at a step's end and delivers at a step boundary: up to a step per hop)."""
    h = neuron_settings
    h.tstop = 30.0
    cells = []
    for name in ("pre", "post"):
        s = h.Section(name=name)
        s.L = s.diam = 20.0
        s.insert("hh")
        cells.append(s)
    pre, post = cells
    stim = h.IClamp(pre(0.5))
    stim.delay, stim.dur, stim.amp = 1.0, 25.0, 0.2
    syn = h.ExpSyn(post(0.5))
    syn.tau, syn.e = 2.0, 0.0
    nc = h.NetCon(pre(0.5)._ref_v, syn, sec=pre)
    nc.threshold, nc.delay, nc.weight[0] = -20.0, 1.5, 0.05
    records = [h.NetCon(s(0.5)._ref_v, None, sec=s) for s in cells]
    vecs = [h.Vector() for _ in records]
    for r, vec in zip(records, vecs):
        r.record(vec)
    model = from_neuron(sections=cells)
    (entry,) = model["netcons"]
    pre_cell = entry["source"]["cell"]
    assert entry["source"] == {"cell": pre_cell, "section": "pre", "position": 0.5}
    assert (entry["threshold"], entry["delay"], entry["weight"]) == (-20.0, 1.5, 0.05)
    names = [r.hname() for r in records]
    assert [s["name"] for s in model["spikes"]] == names
    assert model["spikes"][1]["section"] == "post"
    assert model["spikes"][1]["threshold"] == 10.0
    h.finitialize(h.v_init)
    h.continuerun(h.tstop)
    spikes = so.load_spec(model).simulate().spikes
    for name, vec in zip(names, vecs):
        ours = np.asarray(spikes[name])
        ours, ref = ours[np.isfinite(ours)], np.asarray(vec)
        assert ref.size >= 2 and ours.shape == ref.shape, (name, ours, ref)
        hops = 1 if name == names[0] else 2  # post's spikes: one hop more
        assert np.max(np.abs(ours - ref)) <= hops * h.dt, (name, ours, ref)
    del records, nc, syn, stim


_GOOD = """
create soma, dend
connect dend(0), soma(1)
soma { L = 20  diam = 20  insert hh }
dend { L = 100  diam = 2  nseg = 3  insert pas  g_pas = 2e-4 }
objref stim
soma stim = new IClamp(0.5)
stim.del = 1
stim.dur = 2
stim.amp = 0.2
tstop = 5
celsius = 10
"""


def _cli(tmp_path, script: str, name: str, capsys):
    from stable_ode._cli import main

    path = tmp_path / name
    path.write_text(script)
    out = tmp_path / "model.json"
    code = main(["from-neuron", str(path), "-o", str(out)])
    return code, capsys.readouterr().err, out


def test_cli(tmp_path, capsys):
    pytest.importorskip("neuron")
    code, err, out = _cli(tmp_path, _GOOD, "good.hoc", capsys)
    assert code == 0, err
    model = json.loads(out.read_text())
    assert model["temperature"] == 10.0 and model["t_stop"] == 5.0
    assert model["stimuli"][0]["amplitude"] == 0.2
    assert model["record"] == [
        {"name": "soma", "cell": "cell", "section": "soma", "position": 0.5}
    ]
    (cell,) = model["cells"]
    assert [s["name"] for s in cell["sections"]] == ["soma", "dend"]
    pas = next(m for m in cell["mechanisms"] if m["name"] == "pas")
    assert pas["params"]["g"] == 2e-4 and pas["sections"] == ["dend"]
    so.load_spec(out)  # valid

    out.unlink()
    bad = _GOOD + "dend insert fastpas\nsoma insert extracellular\n"
    code, err, out = _cli(tmp_path, bad, "bad.hoc", capsys)
    assert code == 1
    assert "fastpas" in err and "extracellular" in err
    assert not out.exists()
