"""Self-events and NET_RECEIVE blocks that read the states: `mod/pulsesyn.mod`
(ours, the transmitter-pulse synapse in the form of the NEURON book's kinetic
AMPA synapse), whose NET_RECEIVE tests `flag`, sends `net_send(Cdur,
nspike)`, reads its states (`state_discontinuity(Ron, Ron + r0)`) and sets
`synon`, which its DERIVATIVE block reads. Such a point process runs its
NET_RECEIVE at each event's time on steps that land there
(`stable_ode.nmodl._sequential`), adaptive or fixed (cut at the events).

Two NetCons into one synapse on one compartment, one of them with an event
inside its own pulse (the pulse restarts; the first pulse's self-event finds
an old flag and does nothing). Asserted: against NEURON's CVODE running the
same file (HH, t = 8 ms, during a pulse): the synapse's states to 1e-8
relative (measured 9e-10, CVODE's tolerance) and v to 1e-6 relative
(measured 1e-7); NetCons from threshold crossings equal the same spike times
as lists; fixed steps converge at their order through the events, and
follow NEURON's fixed step to rounding where the events are on the grid (the
import errors of what is still not supported are in `test_point.py`);
gradients with respect to a NetCon's weight and delay, the rates and the
pulse's duration against central differences (float64) and finite in
float32.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import OWN, run_cvode
from helpers import finite_difference_grad

import stable_ode as so
from stable_ode.nmodl import load_nmodl


DT = 0.025
T1 = 8.0
# (spike times ms, delay ms, weight µS); 1.6 + 0.37 is inside the pulse that
# 1.013 + 0.37 opened (Cdur 1 ms)
NETCONS = [([1.013, 1.6, 5.51, 7.333], 0.37, 0.01), ([2.2, 2.71, 6.1], 0.5, 0.006)]
STATES = ("Ron", "Roff", "synon")


@pytest.fixture(scope="module")
def pulse_syn():
    return load_nmodl(OWN / "pulsesyn.mod")["PulseSyn"]


def _model(pulse_syn, post="hh", dtype=None, netcons=NETCONS):
    mech = so.HH() if post == "hh" else so.Passive(g=1e-4, e=-65.0)
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(mech)])
    site = so.Site("c", "soma", 0.5)
    syn = pulse_syn(site, name="s")
    ncs = [so.NetCon(so.SpikeTimes(t), syn, delay=d, weight=w) for t, d, w in netcons]
    rec = [so.Recording("v", site)] + [so.PointRecording(k, syn, k) for k in STATES]
    return so.build(
        [cell], point_processes=[syn], netcons=ncs, recordings=rec, dtype=dtype
    )


def _last(out):
    return [float(np.asarray(out.recordings[k])[-1]) for k in ("v", *STATES)]


CTL = dfx.PIDController(rtol=1e-9, atol=1e-9)


@pytest.mark.neuron
def test_pulse_synapse_against_cvode(pulse_syn, neuron_mechanisms):
    h = neuron_mechanisms
    out = so.simulate(_model(pulse_syn), T1, DT, solver=so.CrankNicolson(),
                      controller=CTL)  # fmt: skip
    ours = _last(out)

    sec = h.Section(name="pulse_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    syn = h.PulseSyn(sec(0.5))
    ncs = []
    for _, _, w in NETCONS:
        ncs.append(h.NetCon(None, syn))
        ncs[-1].weight[0] = w
    events = [(nc, t + d) for nc, (times, d, _) in zip(ncs, NETCONS) for t in times]
    run_cvode(h, T1, events)
    theirs = [sec(0.5).v, syn.Ron, syn.Roff, syn.synon]
    del ncs, syn
    h.delete_section(sec=sec)

    print("ours", ours, "NEURON (CVODE)", theirs)
    assert theirs[3] == 0.01, "the first NetCon's pulse is on at t1"
    assert theirs[1] > 1e-3 and theirs[2] > 1e-3
    np.testing.assert_allclose(ours[1:], theirs[1:], rtol=1e-8)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)


@pytest.mark.neuron
def test_pulse_train_against_cvode(neuron_mechanisms):
    """`mod/pulsetrain.mod`: current pulses driven by self-events alone,
    the first sent by INITIAL with delay 0 (delivered before the first step,
    with no NetCon: weight 0), on an HH compartment, against CVODE at t = 6 ms
    (after three pulses, the cell having fired): v to 1e-6 relative."""
    h = neuron_mechanisms
    train = load_nmodl(OWN / "pulsetrain.mod")["PulseTrain"]
    par = {"del": 0.0, "ton": 0.513, "toff": 1.2, "num": 3.0, "amp": 0.5}
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    site = so.Site("c", "soma", 0.5)
    tr = train(site, del_=0.0, **{k: x for k, x in par.items() if k != "del"},
               name="tr")  # fmt: skip
    rec = [so.Recording("v", site), so.PointRecording("count", tr, "count")]
    model = so.build([cell], point_processes=[tr], recordings=rec)
    out = so.simulate(model, 6.0, DT, solver=so.CrankNicolson(), controller=CTL)
    ours = [float(np.asarray(out.recordings[k])[-1]) for k in ("v", "count")]

    sec = h.Section(name="train_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    pp = h.PulseTrain(sec(0.5))
    for k, x in par.items():
        setattr(pp, k, x)
    vmax = h.Vector().record(sec(0.5)._ref_v)
    run_cvode(h, 6.0)
    theirs = [sec(0.5).v, pp.count]
    peak = max(vmax)
    del pp, vmax
    h.delete_section(sec=sec)

    print("ours", ours, "NEURON (CVODE)", theirs, "peak", peak)
    assert theirs[1] == 3 and peak > 0, "three pulses, the cell fired"
    assert ours[1] == 3
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)


@pytest.mark.neuron
def test_from_neuron(neuron_mechanisms):
    """`from_neuron` converts a NEURON model whose `PulseSyn` is driven by a
    `NetStim` into NEURON's fixed steps (backward Euler, dt 0.025), which
    cut a step at each event inside it. With the NetStim's events and the
    pulses' ends on the grid (where NEURON's fixed step, which delivers at
    step boundaries, delivers them at their time too), the converted run
    follows NEURON's fixed step to rounding (measured 2e-9 mV, asserted
    1e-6 mV over every step)."""
    from stable_ode._neuron_import import from_neuron

    h = neuron_mechanisms
    soma = h.Section(name="pulse_from_neuron")
    soma.L = soma.diam = 20.0
    soma.insert("hh")
    syn = h.PulseSyn(soma(0.5))
    ns = h.NetStim()
    ns.start, ns.number, ns.interval, ns.noise = 1.0, 4, 1.7, 0
    nc = h.NetCon(ns, syn)
    nc.weight[0], nc.delay = 0.01, 0.5
    h.usetable_hh, h.secondorder, h.dt, h.celsius, h.tstop = 0, 0, DT, 6.3, 9.0
    h.v_init = -65.0
    model = from_neuron(nmodl=[OWN / "pulsesyn.mod"], sections=[soma])
    assert model["integration"] == {
        "solver": "backward_euler", "dt": DT, "dtype": "float64"
    }  # fmt: skip
    ours = np.asarray(so.load_spec(model).simulate().recordings["soma"])
    v = h.Vector().record(soma(0.5)._ref_v)
    h.CVode().active(0)
    h.finitialize(h.v_init)
    h.continuerun(h.tstop)
    theirs = np.asarray(v)
    err = np.max(np.abs(ours - theirs))
    print(f"from_neuron PulseSyn, fixed steps: max |ours - NEURON| {err:.3g} mV")
    assert np.ptp(theirs) > 1.0, "the pulses move the voltage"
    assert err < 1e-6
    del nc, ns, syn, v
    h.delete_section(sec=soma)


def test_threshold_sources_equal_spike_lists(pulse_syn):
    """NetCons from a presynaptic cell's threshold crossings (run in turn
    after the spike-time NetCons) equal NetCons from those spike times given
    as a list, in adaptive and in fixed steps: the synapse's states at the
    end to rounding (they see the same event times), the voltage to the
    tolerance's effect of the two step sequences (adaptive) or to rounding
    (fixed: the same grid, cut at the same events)."""
    pre = so.Cell("pre", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    post = so.Cell("post", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    s_pre, s_post = so.Site("pre", "soma", 0.5), so.Site("post", "soma", 0.5)

    def model(source):
        syn = pulse_syn(s_post, name="s")
        pps = [so.IClamp(s_pre, delay=0.5, dur=20.0, amp=0.3), syn]
        thr = dict(threshold=-20.0) if source is s_pre else {}
        nc = so.NetCon(source, syn, delay=0.6, weight=0.02, **thr)
        rec = [so.Recording("v", s_post)]
        rec += [so.PointRecording(k, syn, k) for k in STATES]
        rec.append(so.SpikeRecording("pre.spikes", s_pre, -20.0, 8))
        return so.build([pre, post], point_processes=pps, netcons=[nc], recordings=rec)

    ctl = dfx.PIDController(rtol=1e-8, atol=1e-8)
    adaptive = dict(solver=so.CrankNicolson(), controller=ctl)
    fixed = dict(solver=so.CrankNicolson())
    # adaptive: the two step sequences differ (the tolerance's effect on v);
    # fixed: the same grid, cut at the same event times (v to rounding)
    for kw, v_atol in ((adaptive, 1e-3), (fixed, 1e-9)):
        cell = so.simulate(model(s_pre), 14.0, DT, **kw)
        spikes = np.asarray(cell.spikes["pre.spikes"])
        spikes = spikes[np.isfinite(spikes)]
        print("spikes", spikes)
        assert spikes.size >= 2, "the presynaptic cell fires repeatedly"
        listed = so.simulate(model(so.SpikeTimes(list(spikes))), 14.0, DT, **kw)
        a, b = _last(cell), _last(listed)
        print("threshold", a, "listed", b)
        assert a[1] > 1e-3 and a[3] == 0.02, "a pulse is on at the end"
        np.testing.assert_allclose(a[1:], b[1:], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(a[0], b[0], rtol=0, atol=v_atol)


def test_model_file(tmp_path, pulse_syn):
    """The same synapse from a model file (`nmodl`, `point_processes`,
    `netcons`, an adaptive and a fixed-step `integration`) runs as the
    Python model."""
    import json
    import shutil

    shutil.copy(OWN / "pulsesyn.mod", tmp_path / "pulsesyn.mod")
    model = {
        "format": "stable_ode.model/1",
        "t_stop": 4.0,
        "nmodl": ["pulsesyn.mod"],
        "cells": [{"name": "c", "mechanisms": [{"name": "pas", "params":
                   {"g": 1e-4, "e": -65.0}}], "sections": [{"name": "soma",
                   "length": 20.0, "diameter": 20.0}]}],
        "point_processes": [{"name": "s", "kind": "PulseSyn", "cell": "c",
                             "section": "soma"}],
        "netcons": [{"source": {"spike_times": t}, "target": "s", "delay": d,
                     "weight": w} for t, d, w in NETCONS],
        "record": [{"name": "v", "cell": "c", "section": "soma"}]
        + [{"name": k, "point_process": "s", "variable": k} for k in STATES],
        "integration": {"solver": "crank_nicolson", "dt": DT, "controller":
                        {"kind": "pid", "rtol": 1e-7, "atol": 1e-7}},
    }  # fmt: skip
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    got = so.load_spec(path).simulate()
    ctl = dfx.PIDController(rtol=1e-7, atol=1e-7)
    want = so.simulate(_model(pulse_syn, post="pas"), 4.0, DT,
                       solver=so.CrankNicolson(), controller=ctl)  # fmt: skip
    assert _last(want)[1] > 1e-3
    np.testing.assert_allclose(_last(got), _last(want), rtol=1e-12)

    model["integration"] = {"solver": "backward_euler", "dt": DT}
    path.write_text(json.dumps(model))
    got = so.load_spec(path).simulate()
    want = so.simulate(_model(pulse_syn, post="pas"), 4.0, DT)
    np.testing.assert_allclose(_last(got), _last(want), rtol=1e-12)


def test_event_at_the_start(pulse_syn):
    """A NetCon event at t = 0 (spike time 0, delay 0) runs before the first
    step: the same as one at 1e-9 ms, to that shift's effect."""
    ctl = dfx.PIDController(rtol=1e-8, atol=1e-8)
    out = [
        _last(so.simulate(_model(pulse_syn, post="pas", netcons=[([0.0], d, 0.01)]),
                          0.5, DT, solver=so.CrankNicolson(), controller=ctl))
        for d in (0.0, 1e-9)
    ]  # fmt: skip
    print("at 0", out[0], "at 1e-9", out[1])
    assert out[0][3] == 0.01 and out[0][1] > 1e-3, "the pulse is on"
    np.testing.assert_allclose(out[0], out[1], rtol=1e-7)


def test_fixed_steps(pulse_syn):
    """Fixed steps cut a grid step at each event inside it (and go on to the
    grid point): against a converged adaptive run, backward Euler's error in
    `v` halves with dt and CrankNicolson's quarters (first and second order
    through the events), the synapse's states exact to rounding. Events an
    ulp before or after a grid point (where the step between would be no
    step) run at the grid point: the same as exactly there. `diagnose`,
    which replays the grid alone, refuses such a model with one error."""
    model = _model(pulse_syn)
    ctl = dfx.PIDController(rtol=1e-10, atol=1e-10)
    ref = _last(so.simulate(model, T1, DT, solver=so.CrankNicolson(), controller=ctl))
    for solver, order in ((so.BackwardEuler(), 1), (so.CrankNicolson(), 2)):
        errs = []
        for dt in (DT, DT / 2):
            out = so.simulate(model, T1, dt, solver=solver)
            events = int(out.stats["num_steps"]) - round(T1 / dt)
            assert events >= 8, "steps were cut at the events"
            got = _last(out)
            np.testing.assert_allclose(got[1:], ref[1:], rtol=1e-12, atol=1e-15)
            errs.append(abs(got[0] - ref[0]))
        ratios = np.asarray(errs[:-1]) / np.asarray(errs[1:])
        print(type(solver).__name__, "errors", errs, "ratios", ratios)
        np.testing.assert_allclose(ratios, 2.0**order, rtol=0.1)

    grid = 264 * DT  # 6.6 ms, not exactly 6.6 in binary
    near = [float(np.nextafter(grid, d)) for d in (-np.inf, np.inf)]
    runs = [
        _last(so.simulate(_model(pulse_syn, netcons=[([t], 0.0, 0.01)]), 7.0, DT,
                          solver=so.CrankNicolson()))
        for t in (grid, *near)
    ]  # fmt: skip
    print("on the grid and an ulp off it", runs)
    assert runs[0][3] == 0.01 and runs[0][1] > 1e-3, "the pulse is on"
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-12)
    np.testing.assert_allclose(runs[2], runs[0], rtol=1e-12)

    with pytest.raises(ValueError, match="PulseSyn: its NET_RECEIVE .* diagnose"):
        so.diagnose(model, T1, DT)


def test_gradients(pulse_syn):
    """d(v at the end)/d(weight and delay of a NetCon, Alpha, Beta, Cdur)
    against central differences (float64; adaptive steps at 1e-10, and fixed
    steps); finite in float32 (fixed steps). The delay and `Cdur` (the
    `net_send` delay) move events: their derivatives come from the jump of
    the rates at each event."""
    model = _model(pulse_syn, post="pas")

    def with_params(m, p):
        g = m.point_processes[0]
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.weight, m,
                        g.arrivals.weight.at[0].set(p[0]))  # fmt: skip
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.delay, m,
                        g.arrivals.delay.at[0].set(p[1]))  # fmt: skip
        par = g.params | {k: g.params[k].at[0].set(x) for k, x in
                          zip(("Alpha", "Beta", "Cdur"), p[2:])}  # fmt: skip
        return eqx.tree_at(lambda m: m.point_processes[0].params, m, par)

    def loss(p, m, tol):
        ctl = dfx.PIDController(rtol=tol, atol=tol)
        out = so.simulate(with_params(m, p), T1, DT, solver=so.CrankNicolson(),
                          controller=ctl)  # fmt: skip
        return out.recordings["v"][-1]

    # One compiled function gives the gradient and the values of the finite
    # differences (the value of `value_and_grad` is the solve's).
    loss64 = jax.jit(jax.value_and_grad(lambda p, m: loss(p, m, 1e-10)))
    p0 = jnp.asarray([0.01, 0.37, 1.1, 0.19, 1.0])
    grad = np.asarray(loss64(p0, model)[1])
    fd = finite_difference_grad(lambda p: loss64(p, model)[0], p0, eps=1e-5)
    print("grad", grad, "fd", fd)
    assert np.all(np.abs(grad) > 1e-3)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)

    # Fixed steps (CrankNicolson, dt 0.025): the derivatives with respect to
    # the weight, Alpha and Beta are those of the discrete solution (FD to
    # rounding); those with respect to the event times (delay, Cdur) are the
    # rate jumps at the events, the discrete solution's to the scheme's order
    # (measured 1.3e-4 and 3.6e-5 relative; backward Euler 0.1 and 2e-3).
    def loss_fixed(p, m):
        out = so.simulate(with_params(m, p), T1, DT, solver=so.CrankNicolson())
        return out.recordings["v"][-1]

    fixed = jax.jit(jax.value_and_grad(loss_fixed))
    grad = np.asarray(fixed(p0, model)[1])
    fd = finite_difference_grad(lambda p: fixed(p, model)[0], p0, eps=1e-6)
    print("fixed steps: grad", grad, "fd", fd)
    np.testing.assert_allclose(grad[[0, 2, 3]], fd[[0, 2, 3]], rtol=1e-7)
    np.testing.assert_allclose(grad[[1, 4]], fd[[1, 4]], rtol=1e-3)

    model32 = _model(pulse_syn, post="pas", dtype=jnp.float32)
    grad32 = fixed(p0.astype(jnp.float32), model32)[1]
    assert grad32.dtype == jnp.float32 and np.all(np.isfinite(grad32))
