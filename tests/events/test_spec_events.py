"""Model-file keys `point_processes`, `netcons`, `spikes` and point-process
record entries (`../shared/spec/README.md`, "Point processes and NetCons")."""

import copy

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so


BASE = {
    "format": "stable_ode.model/1",
    "t_stop": 6.0,
    "cells": [
        {
            "name": "a",
            "sections": [{"name": "soma", "length": 20.0, "diameter": 20.0}],
            "mechanisms": [{"name": "hh"}],
        },
    ],
    "point_processes": [
        {
            "name": "syn0",
            "kind": "Exp2Syn",
            "cell": "a",
            "section": "soma",
            "position": 0.5,
            "params": {"tau1": 0.5, "tau2": 5.0, "e": 0.0},
        },
        {
            "name": "vc",
            "kind": "SEClamp",
            "cell": "a",
            "section": "soma",
            "params": {"dur1": 1.0, "amp1": -70.0, "rs": 0.5},
        },
        {
            "name": "ic",
            "kind": "IClamp",
            "cell": "a",
            "section": "soma",
            "params": {"del": 2.0, "dur": 1.0, "amp": 0.2},
        },
    ],
    "netcons": [
        {"source": {"spike_times": [1.0, 2.5]}, "target": "syn0", "weight": 0.01},
        {
            "source": {
                "netstim": {
                    "interval": 1.0,
                    "number": 3,
                    "start": 2.0,
                    "noise": 0.0,
                    "seed": 1,
                }
            },
            "target": "syn0",
            "delay": 1.0,
            "weight": 0.004,
        },
        {
            "source": {"cell": "a", "section": "soma", "position": 0.5},
            "threshold": -20.0,
            "target": "syn0",
            "delay": 1.5,
            "weight": 0.001,
        },
    ],
    "spikes": [
        {"name": "a_spikes", "cell": "a", "section": "soma", "threshold": -20.0}
    ],
    "record": [
        {"name": "soma", "cell": "a", "section": "soma"},
        {"name": "vc_i", "point_process": "vc", "variable": "i"},
        {"name": "g", "point_process": "syn0", "variable": "g"},
        {"name": "syn0_i", "point_process": "syn0", "variable": "i"},
        {"name": "ic_i", "point_process": "ic", "variable": "i"},
    ],
    "integration": {"solver": "backward_euler", "dt": 0.025, "dtype": "float64"},
}


def test_file_equals_python():
    """The file builds the model the Python API builds, array for array (so the
    same solve: the solves themselves are tested in the other files)."""
    loaded = so.load_spec(BASE)
    site = so.Site("a", "soma", 0.5)
    syn = so.Exp2Syn(site, tau1=0.5, tau2=5.0, e=0.0, name="syn0")
    vc = so.SEClamp(site, rs=0.5, dur1=1.0, amp1=-70.0, name="vc")
    ic = so.IClamp(site, delay=2.0, dur=1.0, amp=0.2, name="ic")
    ncs = [
        so.NetCon(so.SpikeTimes([1.0, 2.5]), syn, weight=0.01),
        so.NetCon(so.NetStim(1.0, 3, 2.0, 0.0, 1), syn, delay=1.0, weight=0.004),
        so.NetCon(site, syn, delay=1.5, weight=0.001, threshold=-20.0),
    ]
    cell = so.Cell(
        "a", [so.Section("soma", length=20.0, diameter=20.0)], [so.Insert(so.HH())]
    )
    rec = [
        so.Recording("soma", site),
        so.PointRecording("vc_i", vc, "i"),
        so.PointRecording("g", syn, "g"),
        so.PointRecording("syn0_i", syn, "i"),
        so.PointRecording("ic_i", ic, "i"),
        so.SpikeRecording("a_spikes", site, threshold=-20.0),
    ]
    model = so.build([cell], point_processes=[syn, vc, ic], netcons=ncs, recordings=rec)
    assert bool(eqx.tree_equal(loaded.model, model))
    assert loaded.model.layout == model.layout
    assert (loaded.t_stop, loaded.dt) == (6.0, 0.025)
    kinds = [g.kind for g in model.point_processes]
    assert kinds == ["Exp2Syn", "SEClamp", "IClamp", "NetCon source", "spike recording"]
    # the IClamp's recorded current: a group of its own, no current of its own
    ic_group = model.point_processes[2]
    assert ic_group.names == ("ic",) and float(ic_group.amp[0]) == 0.2
    v = jnp.zeros(model.n_compartments)
    assert not np.any(ic_group.add_current(model, v, v, None))


def test_run_summary_units():
    """`python -m stable_ode run` prints each recording's range in its unit,
    and counts spikes in membrane potentials only."""
    from stable_ode._cli._solve import _unit

    site = so.Site("a", "soma", 0.5)
    ic = so.IClamp(site, delay=2.0, dur=1.0, amp=0.2, name="ic")
    cases = {
        None: [so.Recording("v", site)],
        "mM": [so.Recording("c", site, "cai"), so.Recording("k", site, "ko")],
        "mA/cm2": [so.Recording("i", site, "ica")],
        "mV": [so.Recording("e", site, "eca"), so.PointRecording("l", "vc", "vc")],
        "nA": [so.PointRecording("ici", ic, "i")],
        "uS": [so.PointRecording("g", "syn0", "g")],
        "": [so.Recording("m", site, "m_hh"), so.PointRecording("u", "tm", "u")],
    }
    for unit, recs in cases.items():
        for rec in recs:
            assert _unit(rec) == unit, rec


VCLAMP = {
    "name": "vc2",
    "kind": "VClamp",
    "cell": "a",
    "section": "soma",
    "params": {"dur": [1.0, 2.0, 1.0], "amp": [-70.0, -20.0, -60.0], "gain": 1e4},
}


def test_vclamp_from_a_file():
    """Read, not run (the clamp itself is compared with NEURON elsewhere)."""
    raw = copy.deepcopy(BASE)
    raw["point_processes"] = [VCLAMP]
    raw["netcons"] = []
    raw["record"] = [{"name": "vc2_i", "point_process": "vc2", "variable": "i"}]
    loaded = so.load_spec(raw)
    site = so.Site("a", "soma", 0.5)
    vc = so.VClamp(site, (1.0, 2.0, 1.0), (-70.0, -20.0, -60.0), gain=1e4, name="vc2")
    assert loaded.spec.point_processes == (vc,)
    ((name, k, var, _),) = loaded.model.layout.point_recordings
    assert (name, var) == ("vc2_i", "i")
    assert loaded.model.groups[k].kind == "VClamp"


def _bad(edit):
    raw = copy.deepcopy(BASE)
    edit(raw)
    return raw


@pytest.mark.parametrize(
    "edit, where, message",
    [
        (
            lambda r: r["netcons"][0].update(target="nope"),
            r"netcons\[0\]\.target",
            "unknown point process",
        ),
        (lambda r: r["netcons"][0].update(delay=-1.0), r"netcons\[0\]\.delay", ">= 0"),
        (
            lambda r: r["netcons"][2].update(delay=0.0),
            r"netcons\[2\]\.delay",
            "> 0 ms for a cell-voltage source",
        ),
        (
            lambda r: r["netcons"][2]["source"].update(section="dend"),
            r"netcons\[2\]\.source\.section",
            "unknown section",
        ),
        (
            lambda r: r["netcons"][0].update(threshold=-20.0),
            r"netcons\[0\]\.threshold",
            "only a cell-voltage source",
        ),
        (
            lambda r: r["point_processes"].append(
                {**VCLAMP, "params": {"dur": [1.0, 2.0]}}
            ),
            r"point_processes\[3\]\.params\.dur",
            "3 numbers",
        ),
        (
            lambda r: r["point_processes"][0].update(kind="ExpSin"),
            r"point_processes\[0\]\.kind",
            "ExpSyn",
        ),
        (
            lambda r: r["point_processes"][0]["params"].update(tau=1.0),
            r"point_processes\[0\]\.params\.tau",
            "unknown parameter",
        ),
        (
            lambda r: r["point_processes"][0].update(section="dend"),
            r"point_processes\[0\]\.section",
            "unknown section",
        ),
        (
            lambda r: r["point_processes"][0]["params"].update(tau2=-1.0),
            r"point_processes\[0\]\.params\.tau2",
            "> 0",
        ),
        (
            lambda r: r["record"][1].update(variable="g"),
            r"record\[1\]\.variable",
            "recordable",
        ),
        (
            lambda r: r["spikes"][0].update(cell="zz"),
            r"spikes\[0\]\.cell",
            "unknown cell",
        ),
        (
            lambda r: r["spikes"][0].update(name="soma"),
            "record",
            "duplicate",
        ),
        (
            lambda r: r["netcons"][1].update(target="ic"),
            r"netcons\[1\]\.target",
            "receives no NetCon",
        ),
    ],
)
def test_bad_files(edit, where, message):
    with pytest.raises(so.SpecError, match=f"(?s){where}.*{message}"):
        so.load_spec(_bad(edit))
