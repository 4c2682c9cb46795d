"""`POINT_PROCESS` files imported as point processes: NEURON's own
`expsyn.mod` and `exp2syn.mod` (from the wheel's `modfile` folder; NEURON's
built-in `ExpSyn` and `Exp2Syn` are these files) against our built-in
`ExpSyn` / `Exp2Syn` and against NEURON, and a KINETIC point process of ours
(`mod/kinchan.mod`) against NEURON.

One HH compartment per cell (L = diam = 20 µm, 6.3 °C), an `ExpSyn` (tau 2
ms) driven by spike times 1.0 and 2.5 ms and an `Exp2Syn` (tau1 0.5, tau2 3
ms, e -10 mV) by spike times 2, 5 and 8 ms through a 1 ms delay, dt 0.025 ms,
our `BackwardEuler` against NEURON's `secondorder = 0`. Asserted: the
imported and built-in synapses give the same trace to 1e-12 mV and states to
1e-15 µS; against NEURON 1e-8 mV (measured values in `docs/nmodl.md`).
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_load_error, MODFILE, OWN
from helpers import finite_difference_grad

import stable_ode as so
from stable_ode.nmodl import load_nmodl, NmodlError


T1, DT = 15.0, 0.025


@pytest.fixture(scope="module")
def mechs():
    return load_nmodl([MODFILE / "expsyn.mod", MODFILE / "exp2syn.mod"])


def _setup(exp_syn, exp2_syn, cell):
    site = so.Site(cell, "soma", 0.5)
    s1 = exp_syn(site, tau=2.0, e=0.0, name=f"{cell}1")
    s2 = exp2_syn(site, tau1=0.5, tau2=3.0, e=-10.0, name=f"{cell}2")
    ncs = [
        so.NetCon(so.SpikeTimes([1.0, 2.5]), s1, delay=0.0, weight=0.004),
        so.NetCon(so.SpikeTimes([2.0, 5.0, 8.0]), s2, delay=1.0, weight=0.003),
    ]
    rec = [
        so.Recording(cell, site),
        so.PointRecording(f"{cell}.g", s1, "g"),
        so.PointRecording(f"{cell}.A", s2, "A"),
        so.PointRecording(f"{cell}.B", s2, "B"),
        so.PointRecording(f"{cell}.i1", s1, "i"),
        so.PointRecording(f"{cell}.i2", s2, "i"),
    ]
    return [s1, s2], ncs, rec


@pytest.fixture(scope="module")
def ours(mechs):
    cells = [
        so.Cell(c, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for c in ("imported", "builtin")
    ]
    p1, n1, r1 = _setup(mechs["ExpSyn"], mechs["Exp2Syn"], "imported")
    p2, n2, r2 = _setup(so.ExpSyn, so.Exp2Syn, "builtin")
    model = so.build(cells, point_processes=p1 + p2, netcons=n1 + n2,
                     recordings=r1 + r2)  # fmt: skip
    sim = so.simulate(model, T1, DT, solver=so.BackwardEuler())
    return {k: np.asarray(v) for k, v in sim.recordings.items()}


def test_imported_equals_builtin(ours):
    assert np.max(ours["imported"]) > 0, "the synapses make the cell spike"
    err = float(np.max(np.abs(ours["imported"] - ours["builtin"])))
    print(f"imported vs built-in: max |Δv| = {err:.2g} mV")
    assert err < 1e-12
    for k in ("g", "A", "B", "i1", "i2"):
        assert np.max(np.abs(ours[f"imported.{k}"])) > 1e-3
        np.testing.assert_allclose(
            ours[f"imported.{k}"], ours[f"builtin.{k}"], rtol=0, atol=1e-15
        )


@pytest.mark.neuron
def test_imported_against_neuron(ours, neuron_mechanisms):
    h = neuron_mechanisms
    sec = h.Section(name="point_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    s1, s2 = h.ExpSyn(sec(0.5)), h.Exp2Syn(sec(0.5))
    s1.tau, s1.e = 2.0, 0.0
    s2.tau1, s2.tau2, s2.e = 0.5, 3.0, -10.0
    c1, c2 = h.NetCon(None, s1), h.NetCon(None, s2)
    c1.weight[0], c2.weight[0] = 0.004, 0.003
    v = h.Vector().record(sec(0.5)._ref_v)
    a, b = h.Vector().record(s2._ref_A), h.Vector().record(s2._ref_B)
    i1, i2 = h.Vector().record(s1._ref_i), h.Vector().record(s2._ref_i)
    h.usetable_hh, h.secondorder, h.dt, h.celsius = 0, 0, DT, 6.3
    h.CVode().active(0)
    h.finitialize(-65.0)
    for t in (1.0, 2.5):
        c1.event(t)
    for t in (3.0, 6.0, 9.0):
        c2.event(t)
    for _ in range(round(T1 / DT)):
        h.fadvance()
    err = float(np.max(np.abs(ours["imported"] - np.array(v))))
    print(f"imported vs NEURON: max |Δv| = {err:.2g} mV")
    assert err < 1e-8
    np.testing.assert_allclose(ours["imported.A"], np.array(a), rtol=0, atol=1e-14)
    np.testing.assert_allclose(ours["imported.B"], np.array(b), rtol=0, atol=1e-14)
    # BREAKPOINT's `i`: NEURON's nrn_cur computes it at the start of a step,
    # so its sample k+1 is ours at k (the step's end), as the built-ins', but
    # at the arrivals' samples (NEURON's has the events at t_k delivered).
    t = np.arange(round(T1 / DT) + 1) * DT
    arrivals = [1.0, 2.5, 3.0, 6.0, 9.0]
    keep = np.all(np.abs(t[:-1, None] - np.asarray(arrivals)) > 1e-9, axis=1)
    for k, theirs in (("i1", i1), ("i2", i2)):
        assert np.max(np.abs(np.array(theirs))) > 0.1
        d = np.abs(ours[f"imported.{k}"][:-1] - np.array(theirs)[1:])
        di = float(np.max(d[keep]))
        print(f"imported {k} vs NEURON: {di:.2g} nA")
        assert di < 1e-9
    del c1, c2, s1, s2, sec


NET = """NEURON { POINT_PROCESS P NONSPECIFIC_CURRENT i RANGE tau }
PARAMETER { tau = 2 (ms) }
ASSIGNED { v (mV) i (nA) }
STATE { g }
BREAKPOINT { SOLVE s METHOD cnexp i = g*v }
DERIVATIVE s { g' = -g/tau }
"""  # 6 lines


@pytest.mark.parametrize(
    "body, construct, line, words",
    [
        ("NET_RECEIVE(w) {\n  w = 2\n}\n", "NET_RECEIVE", 8, "the weight w"),
        ("NET_RECEIVE(w) {\n  net_event(t)\n}\n", "net_event()", 8, "not supported"),
        ("NET_RECEIVE(w) {\n  i = g\n}\n", "NET_RECEIVE", 8, "BREAKPOINT or"),
        ("NET_RECEIVE(w) {\n  tau = 1\n}\n", "NET_RECEIVE", 8, "assigns tau"),
        (
            "NET_RECEIVE(w, y) {\n  INITIAL { g = 1 }\n  g = g + w\n}\n",
            "INITIAL",
            8,
            "weight vector's elements (y)",
        ),
    ],
)
def test_unsupported_net_receive(tmp_path, body, construct, line, words):
    """What a NET_RECEIVE may not do. (One that reads the states, tests
    `flag` or sends self-events runs in turn at each event:
    `test_self_events.py`.)"""
    assert_load_error(tmp_path / "p.mod", NET + body, construct, line, words)


@pytest.mark.parametrize("where", ["INITIAL", "PROCEDURE"])
def test_net_send_outside_net_receive_is_an_error(tmp_path, where):
    """`net_send` in INITIAL needs a NET_RECEIVE to receive it; in a
    PROCEDURE it is not supported."""
    path = tmp_path / "p.mod"
    if where == "INITIAL":
        text = NET + "INITIAL {\n  net_send(1, 1)\n}\n"
    else:
        text = NET + "PROCEDURE go() {\n  net_send(1, 1)\n}\n"
        text += "NET_RECEIVE(w) {\n  go()\n}\n"
    path.write_text(text)
    with pytest.raises(NmodlError, match="net_send is supported in NET_RECEIVE"):
        load_nmodl(path)


def test_voltage_dependent_decay_is_an_error(tmp_path):
    path = tmp_path / "p.mod"
    path.write_text(
        NET.replace("g' = -g/tau", "g' = -g*exp(v/10)/tau")
        + "NET_RECEIVE(w) {\n  g = g + w\n}\n"
    )
    with pytest.raises(NmodlError, match="rate set by the parameters and celsius"):
        load_nmodl(path)


def test_model_file_point_process(tmp_path):
    """The model file's `point_processes` take an imported `POINT_PROCESS` by
    name (from the top-level `nmodl` key), NetCons target it and records
    name its states: the same run as the built-in `ExpSyn`."""
    import json

    (tmp_path / "p.mod").write_text(
        NET.replace("i = g*v", "i = g*(v - e)").replace(
            "tau = 2 (ms)", "tau = 2 (ms) e = 0 (mV)"
        )
        + "NET_RECEIVE(w) {\n  g = g + w\n}\n"
    )

    cell = {
        "mechanisms": [{"name": "hh"}],
        "sections": [{"name": "soma", "length": 20.0, "diameter": 20.0}],
    }
    model = {
        "format": "stable_ode.model/1",
        "t_stop": 5.0,
        "nmodl": ["p.mod"],
        "cells": [{"name": "a", **cell}, {"name": "b", **cell}],
        "point_processes": [
            {"name": "s", "kind": "P", "cell": "a", "section": "soma",
             "params": {"tau": 1.5}},
            {"name": "t", "kind": "ExpSyn", "cell": "b", "section": "soma",
             "params": {"tau": 1.5}}],
        "netcons": [{"source": {"spike_times": [1.0]}, "target": x, "delay": 0.5,
                     "weight": 0.01} for x in "st"],
        "record": [{"name": "va", "cell": "a", "section": "soma"},
                   {"name": "vb", "cell": "b", "section": "soma"},
                   {"name": "gs", "point_process": "s", "variable": "g"},
                   {"name": "gt", "point_process": "t", "variable": "g"}],
        "integration": {"solver": "backward_euler", "dt": 0.025},
    }  # fmt: skip
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    out = {
        k: np.asarray(x) for k, x in so.load_spec(path).simulate().recordings.items()
    }
    assert np.max(out["gs"]) > 0.005
    np.testing.assert_allclose(out["va"], out["vb"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(out["gs"], out["gt"], rtol=0, atol=1e-15)


def _chain(mechs):
    """Cell `a` (an IClamp) drives `b1` through an imported `Exp2Syn` and `b2`
    through the built-in one (delay 2.113 ms, off the grid); `b1` drives `c1`
    through an imported `ExpSyn`, `b2` drives `c2` through the built-in one
    (1.37 ms): two copies of one chain, one model."""
    cells = [
        so.Cell(c, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for c in ("a", "b1", "b2", "c1", "c2")
    ]
    site = {c.name: so.Site(c.name, "soma", 0.5) for c in cells}
    par2 = dict(tau1=0.3, tau2=2.5, e=0.0)
    pps = [
        so.IClamp(site["a"], delay=1.0, dur=1.0, amp=0.5),
        mechs["Exp2Syn"](site["b1"], **par2, name="i2"),
        so.Exp2Syn(site["b2"], **par2, name="b2"),
        mechs["ExpSyn"](site["c1"], tau=2.0, e=0.0, name="i1"),
        so.ExpSyn(site["c2"], tau=2.0, e=0.0, name="b1"),
    ]
    src = ["a", "a", "b1", "b2"]
    ncs = [
        so.NetCon(site[s], pp, d, w, threshold=-20.0)
        for s, pp, d, w in zip(
            src, pps[1:], [2.113, 2.113, 1.37, 1.37], [0.012, 0.012, 0.02, 0.02]
        )
    ]
    rec = [so.Recording(c, site[c]) for c in site]
    rec += [so.SpikeRecording(f"{c}.spikes", site[c], -20.0, 2) for c in site]
    return so.build(cells, point_processes=pps, netcons=ncs, recordings=rec)


def test_cell_voltage_source_into_an_imported_point_process(mechs):
    """NetCons from a cell's threshold crossing into imported point processes
    deliver as into the built-in ones: in fixed steps (an arrival inside a
    step enters the voltage's step as its mean over the step) and in adaptive
    steps (which land on the arrivals) the two chains agree to rounding
    (measured 0 and 6e-14 mV)."""
    model = _chain(mechs)
    ctl = dfx.PIDController(rtol=1e-8, atol=1e-8)
    fixed = so.simulate(model, 12.0, 0.025)
    adaptive = so.simulate(
        model, 12.0, 0.025, solver=so.CrankNicolson(), controller=ctl
    )
    for out in (fixed, adaptive):
        r = {k: np.asarray(x) for k, x in out.recordings.items()}
        sp = {k: np.asarray(x) for k, x in out.spikes.items()}
        assert np.isfinite(sp["c1.spikes"][0]), "the chain reaches its end"
        for imported, builtin in (("b1", "b2"), ("c1", "c2")):
            np.testing.assert_allclose(r[imported], r[builtin], rtol=0, atol=1e-9)
            np.testing.assert_allclose(
                sp[f"{imported}.spikes"], sp[f"{builtin}.spikes"], rtol=0, atol=1e-9
            )


def test_gradients_through_an_imported_point_process(mechs):
    """d(sum of v of b1)/d(weight, delay) of the NetCon from a's crossing into
    the imported Exp2Syn, and d/d(its tau2), against central differences
    (float64, fixed steps)."""
    model = _chain(mechs)

    def with_params(m, p):
        m = eqx.tree_at(lambda m: m.point_processes[2].cell.weight, m, p[0:1])
        m = eqx.tree_at(lambda m: m.point_processes[2].cell.delay, m, p[1:2])
        return eqx.tree_at(lambda m: m.point_processes[2].params["tau2"], m, p[2:3])

    def loss(p):
        return jnp.sum(so.simulate(with_params(model, p), 6.0, 0.025).recordings["b1"])

    assert "tau2" in model.point_processes[2].params  # the imported Exp2Syn
    p0 = jnp.asarray([0.012, 2.113, 2.5])
    grad = np.asarray(jax.grad(loss)(p0))
    fd = finite_difference_grad(loss, p0, eps=1e-6)
    print("grad", grad, "fd", fd)
    assert np.all(np.abs(grad) > 1e-2)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


@pytest.mark.neuron
def test_kinetic_point_process_against_neuron(neuron_mechanisms):
    """`kinchan.mod` (ours, in tests/nmodl/mod): a POINT_PROCESS whose states
    move by a KINETIC scheme (`C <-> O <-> D`, voltage-dependent rates,
    CONSERVE, its steady state in INITIAL) on an HH compartment driven to
    spike by a current step, from NEURON's initial populations. Against
    NEURON: v, the three states and, under the one-step rule, `i` (measured
    1.4e-11 mV, 8.6e-14, 9.5e-12 nA)."""
    h = neuron_mechanisms
    sec = h.Section(name="kinchan_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    syn = h.KinChan(sec(0.5))
    ic = h.IClamp(sec(0.5))
    ic.delay, ic.dur, ic.amp = 1.0, 10.0, 0.1
    names = ("C", "O", "D", "i")
    rec = {x: h.Vector().record(getattr(syn, f"_ref_{x}")) for x in names}
    rec["v"] = h.Vector().record(sec(0.5)._ref_v)
    h.usetable_hh, h.secondorder, h.dt, h.celsius = 0, 0, DT, 6.3
    h.CVode().active(0)
    h.finitialize(-65.0)
    for _ in range(round(T1 / DT)):
        h.fadvance()
    theirs = {k: np.array(x) for k, x in rec.items()}
    del ic, syn, sec

    cls = load_nmodl(OWN / "kinchan.mod")["KinChan"]
    site = so.Site("c", "soma", 0.5)
    syn = cls(site, name="k")
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    recs = [so.Recording("v", site)] + [so.PointRecording(x, syn, x) for x in names]
    model = so.build(
        [cell],
        [so.StepCurrent(site, 0.1, 1.0, 10.0)],
        point_processes=[syn],
        recordings=recs,
    )
    # From NEURON's initial populations: its STEADYSTATE sparse stops 1.9e-8
    # short of the exact steady state that ours computes.
    y0 = model.init_state()
    (k,) = [j for j, g in enumerate(model.groups) if "KinChan" in type(g).__name__]
    start = {x: jnp.asarray(theirs[x][:1]) for x in ("C", "O", "D")}
    for x in start:
        assert abs(float(y0.groups[k][x][0]) - theirs[x][0]) < 1e-7
    groups = list(y0.groups)
    groups[k] = groups[k] | start
    y0 = so.State(v=y0.v, groups=tuple(groups))
    out = so.simulate(model, T1, DT, solver=so.BackwardEuler(), y0=y0)
    ours = {k: np.asarray(x) for k, x in out.recordings.items()}
    assert ours["v"].max() > 20 and ours["O"].max() > 0.3
    total = ours["C"] + ours["O"] + ours["D"]
    assert np.max(np.abs(total - 1)) < 1e-14
    dv = float(np.max(np.abs(ours["v"] - theirs["v"])))
    ds = max(float(np.max(np.abs(ours[k] - theirs[k]))) for k in "COD")
    di = float(np.max(np.abs(ours["i"][:-1] - theirs["i"][1:])))
    print(f"KinChan vs NEURON: {dv:.2g} mV, states {ds:.2g}, i {di:.2g} nA")
    assert dv < 1e-8 and ds < 1e-12 and di < 1e-9


def test_off_grid_spike_times_into_an_imported_point_process(mechs):
    """Spike-time arrivals off the grid (1.013 and 2.51 ms, delay 0.37 ms)
    into imported and built-in `Exp2Syn`s: in fixed steps each enters the
    voltage's step as its mean over the step, so the two cells agree to
    rounding (measured 0 mV)."""
    cells = [
        so.Cell(c, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for c in ("imported", "builtin")
    ]
    par = dict(tau1=0.5, tau2=3.0, e=0.0)
    a = mechs["Exp2Syn"](so.Site("imported", "soma", 0.5), **par, name="a")
    b = so.Exp2Syn(so.Site("builtin", "soma", 0.5), **par, name="b")
    ncs = [
        so.NetCon(so.SpikeTimes([1.013, 2.51]), s, delay=0.37, weight=0.004)
        for s in (a, b)
    ]
    recs = [so.Recording(c.name, so.Site(c.name, "soma", 0.5)) for c in cells]
    model = so.build(cells, point_processes=[a, b], netcons=ncs, recordings=recs)
    out = so.simulate(model, 10.0, DT, solver=so.BackwardEuler())
    r = {k: np.asarray(x) for k, x in out.recordings.items()}
    assert r["imported"].max() > 0, "the synapse makes the cell spike"
    np.testing.assert_allclose(r["imported"], r["builtin"], rtol=0, atol=1e-12)


def test_two_arrivals_of_one_netcon_in_one_step(mechs):
    """Two arrivals of one NetCon inside one fixed step (2.005 and 2.015 ms)
    into an imported `Exp2Syn` (no weight vector) are added together in that
    step, as into the built-in one: no step is retried, and the two cells
    (each in a model of its own) agree to rounding."""
    par = dict(tau1=0.5, tau2=3.0, e=0.0)
    out = {}
    for name, kind in (("imported", mechs["Exp2Syn"]), ("builtin", so.Exp2Syn)):
        cell = so.Cell(name, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        site = so.Site(name, "soma", 0.5)
        syn = kind(site, **par, name="s")
        nc = so.NetCon(so.SpikeTimes([1.005, 1.015]), syn, delay=1.0, weight=0.004)
        model = so.build([cell], point_processes=[syn], netcons=[nc],
                         recordings=[so.Recording("v", site)])  # fmt: skip
        sim = so.simulate(model, 6.0, DT, solver=so.BackwardEuler())
        assert int(sim.stats["num_steps"]) == round(6.0 / DT), name
        out[name] = np.asarray(sim.recordings["v"])
    assert out["imported"].max() > -60
    np.testing.assert_allclose(out["imported"], out["builtin"], rtol=0, atol=1e-12)
