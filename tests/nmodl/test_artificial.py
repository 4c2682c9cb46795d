"""`ARTIFICIAL_CELL`s imported from NMODL: NEURON's own
`demo/release/invlfire.mod` (`IntervalFire`: a leaky integrator `m` that
fires when it reaches 1 or, with no input, every `invl` ms; its NET_RECEIVE
reads the event's `t`, sends self-events, moves them with `net_move` and
spikes with `net_event`), a NetCon source into an `ExpSyn` on an HH
compartment. Asserted: without input, the chain equals the same `ExpSyn`
driven by the artificial cell's spike times as a list, to rounding (fixed
steps); with inputs (which move its self-event, and one that makes it fire
early), against NEURON's CVODE running the same file: the artificial cell's
`m` and spike times to 1e-12, the synapse and the voltage to CVODE's tolerance;
and the errors of what an artificial cell may not do."""

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import assert_load_error, DEMO, run_cvode

import stable_ode as so
from stable_ode.nmodl import load_nmodl


T1, DT = 20.0, 0.025
INPUTS = [
    (2.3, 0.3),
    (9.1, 0.2),
    (13.7, 1.2),
    (19.0, 0.2),
]  # (time ms, weight) into the cell


@pytest.fixture(scope="module")
def interval_fire():
    return load_nmodl(DEMO / "invlfire.mod")["IntervalFire"]


def _model(interval_fire, inputs=(), spike_times=None, bystander=False):
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    site = so.Site("c", "soma", 0.5)
    syn = so.ExpSyn(site, tau=2.0, name="syn")
    rec = [so.Recording("v", site), so.PointRecording("g", syn, "g")]
    if spike_times is not None:
        src = so.SpikeTimes(spike_times)
        ncs = [so.NetCon(src, syn, delay=1.0, weight=0.004)]
        return so.build([cell], point_processes=[syn], netcons=ncs, recordings=rec)
    art = interval_fire(tau=5.0, invl=4.0, name="a")
    ncs = [so.NetCon(art, syn, delay=1.0, weight=0.004)]
    ncs += [so.NetCon(so.SpikeTimes([t]), art, delay=0.0, weight=w) for t, w in inputs]
    rec += [so.PointRecording(k, art, k) for k in ("m", "t0")]
    rec += [so.SpikeRecording("spikes", art)]
    pps = [syn, art]
    if bystander:  # an instance that fires at other times and is no source
        pps.append(interval_fire(tau=5.0, invl=3.0, name="b"))
    return so.build([cell], point_processes=pps, netcons=ncs, recordings=rec)


def test_natural_firing_equals_spike_times(interval_fire):
    """(With a second instance that is no NetCon source: its spikes reach
    nothing.)"""
    out = so.simulate(_model(interval_fire, bystander=True), T1, DT)
    fired = np.asarray(out.spikes["spikes"])
    fired = fired[np.isfinite(fired)]
    np.testing.assert_allclose(fired, [4.0, 8.0, 12.0, 16.0, 20.0], rtol=0, atol=1e-12)
    ref = so.simulate(_model(interval_fire, spike_times=list(fired)), T1, DT)
    v, v_ref = np.asarray(out.recordings["v"]), np.asarray(ref.recordings["v"])
    assert np.max(v) > 0, "the synapse makes the cell spike"
    err = float(np.max(np.abs(v - v_ref)))
    print(f"artificial cell vs its spike times as a list: {err:.2g} mV")
    assert err < 1e-12


def _neuron_chain(h, inputs):
    """The `_model` chain in NEURON, from the same `invlfire.mod`: `(sections,
    objects, recorded vectors, NetCon events, spike-time vector)`."""
    sec = h.Section(name="art_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    syn = h.ExpSyn(sec(0.5))
    syn.tau = 2.0
    art = h.IntervalFire()
    art.tau, art.invl = 5.0, 4.0
    out_nc = h.NetCon(art, syn)
    out_nc.delay, out_nc.weight[0] = 1.0, 0.004
    spikes = h.Vector()
    out_nc.record(spikes)
    refs = {"v": sec(0.5)._ref_v, "g": syn._ref_g, "m": art._ref_m}
    vecs = {k: h.Vector().record(r) for k, r in refs.items()}
    ins = []
    for _, w in inputs:
        ins.append(h.NetCon(None, art))
        ins[-1].weight[0] = w
    events = [(nc, t) for nc, (t, _) in zip(ins, inputs)]
    return [sec], [syn, art, out_nc, *ins], vecs, events, spikes


@pytest.mark.neuron
def test_against_cvode(interval_fire, neuron_mechanisms):
    h = neuron_mechanisms
    ctl = dfx.PIDController(rtol=1e-9, atol=1e-9)
    model = _model(interval_fire, INPUTS)
    out = so.simulate(model, T1, DT, solver=so.CrankNicolson(), controller=ctl)
    ours = {k: float(np.asarray(x)[-1]) for k, x in out.recordings.items()}
    fired = np.asarray(out.spikes["spikes"])
    fired = fired[np.isfinite(fired)]

    secs, keep, _, events, spikes = _neuron_chain(h, INPUTS)
    run_cvode(h, T1, events)
    syn, art = keep[:2]
    theirs = {"v": secs[0](0.5).v, "g": syn.g, "m": art.m}
    times = np.array(spikes)
    del syn, art
    keep.clear()
    h.delete_section(sec=secs[0])

    print("ours", ours, "NEURON (CVODE)", theirs, "spikes", times)
    assert len(times) >= 4 and not np.allclose(np.diff(times), 4.0), "moved"
    assert theirs["m"] > 0.1, "an input since its last spike"
    np.testing.assert_allclose(fired, times, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours["m"], theirs["m"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(ours["g"], theirs["g"], rtol=1e-8)
    np.testing.assert_allclose(ours["v"], theirs["v"], rtol=1e-6)


@pytest.mark.neuron
def test_against_neuron_fixed_step(interval_fire, neuron_mechanisms):
    """Backward Euler against NEURON's fixed step (`secondorder = 0`) at dt
    0.025 ms. NEURON runs an artificial cell's NET_RECEIVE at each event's
    own time, as ours does: its `m` and spike times agree to rounding (but
    for the samples at an input's time, which ours records after the input
    and NEURON before). Its
    fixed step delivers the synapse's events (spike + 1 ms, off the grid) at
    the step boundary within dt/2 of them, ours at their time: the voltage
    then differs by no more than NEURON's own fixed step differs from its
    CVODE (the scheme's error plus that rounding), measured here on the same
    chain."""
    h = neuron_mechanisms
    model = _model(interval_fire, INPUTS)
    out = so.simulate(model, T1, DT, solver=so.BackwardEuler())
    ours = {k: np.asarray(x) for k, x in out.recordings.items()}
    fired = np.asarray(out.spikes["spikes"])
    fired = fired[np.isfinite(fired)]

    secs, keep, vecs, events, spikes = _neuron_chain(h, INPUTS)
    h.CVode().active(0)
    h.celsius, h.dt, h.secondorder, h.usetable_hh = 6.3, DT, 0, 0
    h.finitialize(-65.0)
    for nc, t in events:
        nc.event(t)
    for _ in range(round(T1 / DT)):
        h.fadvance()
    fixed = {k: np.array(x) for k, x in vecs.items()}
    times = np.array(spikes)
    # The same chain under CVODE, sampled on our grid: NEURON's own error.
    cvode_v = run_cvode(h, T1, events, {"v": secs[0](0.5)._ref_v}, DT)["v"]
    keep.clear()
    h.delete_section(sec=secs[0])

    print("spike times: ours", fired, "NEURON", times)
    assert len(times) >= 4 and not np.allclose(np.diff(times), 4.0), "moved"
    assert not np.allclose(times / DT, np.round(times / DT)), "off the grid"
    np.testing.assert_allclose(fired, times, rtol=0, atol=1e-12)
    # A sample at an input's time: ours records `m` after the event, NEURON's
    # fixed step before it (it delivers the event in the step that starts
    # there); elsewhere they agree.
    at = np.array([round(t / DT) for t, _ in INPUTS])
    np.testing.assert_allclose(fixed["m"][at], ours["m"][at - 1], rtol=0, atol=1e-12)
    fixed["m"][at] = ours["m"][at]
    np.testing.assert_allclose(ours["m"], fixed["m"], rtol=0, atol=1e-12)
    own = float(np.max(np.abs(fixed["v"] - cvode_v)))
    err = float(np.max(np.abs(ours["v"] - fixed["v"])))
    print(f"max |dv| over the trace: ours vs NEURON's fixed step {err:.3g} mV; "
          f"NEURON's fixed step vs its CVODE {own:.3g} mV")  # fmt: skip
    assert err <= own


def test_gradients_through_spike_times(interval_fire):
    """The artificial cell's spike times depend on `invl` (`net_send(firetime())`,
    `net_move`, `net_event(t)`); the derivatives of its recorded spike times
    and of the synapse's conductance at the end agree with central
    differences (fixed steps: both are exact functions of `invl` there, the
    steps landing on the events and the arrivals decaying exactly). In
    adaptive steps this gradient once failed (`nextafter` has no derivative;
    `test_threshold.py::test_window_ends_carry_no_derivative`)."""
    import equinox as eqx

    model = _model(interval_fire, INPUTS[:1])
    k = [g.kind for g in model.point_processes].index("IntervalFire")

    @jax.jit
    def f(invl):
        m = eqx.tree_at(lambda m: m.point_processes[k].params["invl"], model, invl)
        out = so.simulate(m, 8.0, DT)
        s = out.spikes["spikes"]
        return jnp.stack(
            [jnp.sum(jnp.where(jnp.isfinite(s), s, 0.0)), out.recordings["g"][-1]]
        )

    x = model.point_processes[k].params["invl"]
    grad = jax.jacrev(f)(x)[:, 0]
    h = 1e-4
    fd = (f(x + h) - f(x - h)) / (2 * h)
    print("d(spike times, g)/d invl:", grad, "central differences:", fd)
    assert float(grad[0]) > 1  # two spikes, each moved with invl
    np.testing.assert_allclose(grad, fd, rtol=1e-7)


HEAD = """NEURON { ARTIFICIAL_CELL A }
PARAMETER { tau = 5 (ms) }
ASSIGNED { m }
"""  # 3 lines


@pytest.mark.parametrize(
    "body, construct, line, words",
    [
        (
            "NET_RECEIVE(w) {\n  m = v\n  net_event(t)\n}\n",
            "ARTIFICIAL_CELL",
            5,
            "in no compartment",
        ),
        ("INITIAL { m = 0 }\n", "ARTIFICIAL_CELL", 1, "without NET_RECEIVE"),
        (
            "INITIAL {\n  net_event(t)\n}\nNET_RECEIVE(w) { m = w }\n",
            "net_event()",
            5,
            "NET_RECEIVE only",
        ),
    ],
)
def test_errors(tmp_path, body, construct, line, words):
    assert_load_error(tmp_path / "a.mod", HEAD + body, construct, line, words)


def test_netcon_from_an_artificial_cell_not_built(interval_fire):
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    syn = so.ExpSyn(so.Site("c", "soma", 0.5), name="syn")
    nc = so.NetCon(interval_fire(name="a"), syn, weight=0.004)
    with pytest.raises(ValueError, match="artificial cell not given to build"):
        so.build([cell], point_processes=[syn], netcons=[nc])
    with pytest.raises(ValueError, match="artificial-cell source"):
        so.NetCon(interval_fire(name="a"), syn, delay=0.0)


def test_model_file(tmp_path, interval_fire):
    """In a model file an artificial cell is a `point_processes` entry without
    a site (`kind`: its name from the `nmodl` key), NetCons target it and
    records name what it holds: as the same model built in Python."""
    import json
    import shutil

    shutil.copy(DEMO / "invlfire.mod", tmp_path / "invlfire.mod")
    model = {
        "format": "stable_ode.model/1",
        "t_stop": 10.0,
        "nmodl": ["invlfire.mod"],
        "cells": [{"name": "c", "mechanisms": [{"name": "hh"}],
                   "sections": [{"name": "soma", "length": 20.0, "diameter": 20.0}]}],
        "point_processes": [{"name": "a", "kind": "IntervalFire",
                             "params": {"tau": 5.0, "invl": 4.0}}],
        "netcons": [{"source": {"spike_times": [t]}, "target": "a", "delay": 0.0,
                     "weight": w} for t, w in INPUTS[:2]],
        "record": [{"name": "m", "point_process": "a", "variable": "m"}],
        "integration": {"solver": "backward_euler", "dt": DT},
    }  # fmt: skip
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    ours = np.asarray(so.load_spec(path).simulate().recordings["m"])
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    art = interval_fire(tau=5.0, invl=4.0, name="a")
    ncs = [
        so.NetCon(so.SpikeTimes([t]), art, delay=0.0, weight=w) for t, w in INPUTS[:2]
    ]
    built = so.build(
        [cell],
        point_processes=[art],
        netcons=ncs,
        recordings=[so.PointRecording("m", art, "m")],
    )
    ref = np.asarray(so.simulate(built, 10.0, DT).recordings["m"])
    assert np.max(ours) > 0.3
    np.testing.assert_array_equal(ours, ref)
    model["point_processes"][0] |= {"cell": "c", "section": "soma"}
    path.write_text(json.dumps(model))
    with pytest.raises(so.SpecError, match=r"point_processes\[0\]\.cell: unknown key"):
        so.load_spec(path)
