"""NET_RECEIVE weight vectors: `mod/tmsyn.mod` (ours, the Tsodyks–Markram
synapse in the form ModelDB models write it), whose NetCons each keep their
own resources, release probability and last event time, set by an INITIAL
block inside NET_RECEIVE and updated at each of their events from the event's
time `t`.

On an HH compartment (L = diam = 20 µm, 6.3 °C): two synapses, one
facilitating (`tau_facil` > 0) and one not (the `else` branch, `u0` > 0);
the first driven by two NetCons whose weight vectors must stay apart. Asserted
against NEURON running the same file: fixed steps (dt 0.025, arrivals on the
grid, our `BackwardEuler` against `secondorder = 0`) to 1e-8 mV and the
conductances to 1e-15 µS; off-grid arrivals in adaptive steps against CVODE
to 1e-5 (relative); NetCons from a cell's threshold crossing equal to the
same spike times given as a list; two events of one NetCon inside one step
applied in turn; a model file running as the Python model; gradients against
central differences.
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import OWN
from helpers import finite_difference_grad

import stable_ode as so
from stable_ode.nmodl import load_nmodl


DT = 0.025
FACIL = dict(e=0.0, tau_1=3.0, tau_rec=100.0, tau_facil=1000.0, U=0.04, u0=0.0)
DEPRESS = dict(e=0.0, tau_1=2.0, tau_rec=40.0, tau_facil=0.0, U=0.3, u0=0.1)
# (synapse, spike times ms, delay ms, weight µS)
ON_GRID = [
    (0, [1.0, 3.0, 5.0, 7.0, 9.0], 1.0, 0.01),
    (0, [2.0, 2.5, 12.0], 0.5, 0.006),
    (1, [4.0, 6.0, 6.5, 11.0], 0.25, 0.004),
]
OFF_GRID = [
    (0, [1.013, 3.0071, 5.51, 7.333], 0.37, 0.01),
    (0, [2.2, 2.71], 0.5, 0.006),
    (1, [4.0123, 6.05, 6.6], 0.25, 0.004),
]


@pytest.fixture(scope="module")
def tm_syn():
    return load_nmodl(OWN / "tmsyn.mod")["TMSyn"]


def _model(tm_syn, netcons, post="hh", dtype=None):
    mech = so.HH() if post == "hh" else so.Passive(g=1e-4, e=-65.0)
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(mech)])
    site = so.Site("c", "soma", 0.5)
    syns = [tm_syn(site, **FACIL, name="f"), tm_syn(site, **DEPRESS, name="d")]
    ncs = [
        so.NetCon(so.SpikeTimes(t), syns[k], delay=d, weight=w)
        for k, t, d, w in netcons
    ]
    rec = [so.Recording("v", site)]
    rec += [so.PointRecording(f"g{k}", s, "g") for k, s in enumerate(syns)]
    return so.build(
        [cell], point_processes=syns, netcons=ncs, recordings=rec, dtype=dtype
    )


def _neuron(h, netcons, t1, cvode=False, post="hh"):
    """NEURON running `tmsyn.mod` on the same compartment: `(v, g0, g1)` per
    step (fixed steps) or at `t1` (CVODE, rtol = atol = 1e-10)."""
    sec = h.Section(name="tm_soma")
    sec.L = sec.diam = 20.0
    if post == "hh":
        sec.insert("hh")
    else:
        sec.insert("pas")
        sec.g_pas, sec.e_pas = 1e-4, -65.0
    syns = [h.TMSyn(sec(0.5)), h.TMSyn(sec(0.5))]
    for s, par in zip(syns, (FACIL, DEPRESS)):
        for k, x in par.items():
            setattr(s, k, x)
    ncs = []
    for k, _, _, w in netcons:
        ncs.append(h.NetCon(None, syns[k]))
        ncs[-1].weight[0] = w
    recs = [h.Vector().record(sec(0.5)._ref_v)]
    recs += [h.Vector().record(s._ref_g) for s in syns]
    cv = h.CVode()
    h.usetable_hh, h.secondorder, h.dt, h.celsius = 0, 0, DT, 6.3
    cv.active(1 if cvode else 0)
    if cvode:
        cv.rtol(1e-10)
        cv.atol(1e-10)
    h.finitialize(-65.0)
    for nc, (_, times, d, _) in zip(ncs, netcons):
        for t in times:
            nc.event(t + d)
    if cvode:
        cv.solve(t1)
        out = [sec(0.5).v, syns[0].g, syns[1].g]
    else:
        for _ in range(round(t1 / DT)):
            h.fadvance()
        out = [np.array(r) for r in recs]
    cv.active(0)
    del ncs, syns, recs
    h.delete_section(sec=sec)
    return out


@pytest.mark.neuron
def test_weight_vectors_against_neuron(tm_syn, neuron_mechanisms):
    """Fixed steps, arrivals on the grid: v to 1e-8 mV, both synapses'
    conductances to 1e-15 µS (measured 7e-11 mV and 2e-18 µS with one
    NetCon)."""
    t1 = 16.0
    out = so.simulate(_model(tm_syn, ON_GRID), t1, DT, solver=so.BackwardEuler())
    ours = {k: np.asarray(x) for k, x in out.recordings.items()}
    v, g0, g1 = _neuron(neuron_mechanisms, ON_GRID, t1)
    assert ours["v"].max() > 0, "the synapses make the cell spike"
    assert g0.max() > 1e-3 and g1.max() > 1e-3
    dv = float(np.max(np.abs(ours["v"] - v)))
    dg = max(float(np.max(np.abs(ours[k] - g))) for k, g in (("g0", g0), ("g1", g1)))
    print(f"TMSyn vs NEURON: {dv:.2g} mV, g {dg:.2g} uS")
    assert dv < 1e-8 and dg < 1e-15


def test_each_netcon_keeps_its_own_vector(tm_syn):
    """Two NetCons into one facilitating synapse: the same as two synapses
    with one NetCon each (the second NetCon's first event releases `U` of
    full resources, whatever the first one did)."""
    one = [(0, [1.0, 3.0, 5.0], 1.0, 0.01), (1, [2.0, 2.5], 0.5, 0.006)]
    both = [(0, [1.0, 3.0, 5.0], 1.0, 0.01), (0, [2.0, 2.5], 0.5, 0.006)]
    a = _model(tm_syn, one, post="pas")
    # the same parameters for the second synapse: a copy of the first's
    a = eqx.tree_at(
        lambda m: m.point_processes[0].params,
        a,
        {k: jnp.full_like(x, x[0]) for k, x in a.point_processes[0].params.items()},
    )
    b = _model(tm_syn, both, post="pas")
    ga = so.simulate(a, 8.0, DT).recordings
    gb = so.simulate(b, 8.0, DT).recordings
    total = np.asarray(ga["g0"]) + np.asarray(ga["g1"])
    assert np.max(total) > 1e-3
    np.testing.assert_allclose(np.asarray(gb["g0"]), total, rtol=0, atol=1e-15)


@pytest.mark.neuron
def test_off_grid_arrivals_against_cvode(tm_syn, neuron_mechanisms):
    """Arrivals off the grid, so NET_RECEIVE's `t` (the event's own time)
    matters: ours in adaptive steps (CrankNicolson, rtol = atol = 1e-9, which
    land on every arrival) against NEURON's CVODE at 1e-10, at t = 14 ms on a
    passive compartment, to 1e-5 relative."""
    t1 = 14.0
    ctl = dfx.PIDController(rtol=1e-9, atol=1e-9)
    out = so.simulate(
        _model(tm_syn, OFF_GRID, post="pas"),
        t1,
        DT,
        solver=so.CrankNicolson(),
        controller=ctl,
    )
    ours = [float(np.asarray(out.recordings[k])[-1]) for k in ("v", "g0", "g1")]
    theirs = _neuron(neuron_mechanisms, OFF_GRID, t1, cvode=True, post="pas")
    print("ours", ours, "NEURON (CVODE)", theirs)
    assert theirs[1] > 1e-4 and theirs[2] > 1e-5
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)


def test_threshold_sources_equal_spike_lists(tm_syn):
    """NetCons from a presynaptic cell's threshold crossings into the weight-
    vector synapse equal NetCons from those spike times given as a list (the
    crossings recorded in the same run), in fixed and in adaptive steps."""
    pre = so.Cell("pre", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    post = so.Cell("post", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    s_pre, s_post = so.Site("pre", "soma", 0.5), so.Site("post", "soma", 0.5)

    def model(source):
        syn = tm_syn(s_post, **FACIL, name="s")
        pps = [so.IClamp(s_pre, delay=0.5, dur=20.0, amp=0.3), syn]
        thr = dict(threshold=-20.0) if source is s_pre else {}
        nc = so.NetCon(source, syn, delay=1.113, weight=0.02, **thr)
        rec = [so.Recording("post", s_post), so.PointRecording("g", syn, "g")]
        rec.append(so.SpikeRecording("pre.spikes", s_pre, -20.0, 8))
        return so.build([pre, post], point_processes=pps, netcons=[nc], recordings=rec)

    ctl = dfx.PIDController(rtol=1e-8, atol=1e-8)
    # Adaptive steps take other step sequences from the two kinds of source
    # (steps from a cell source are clipped to the shortest delay), so the
    # voltages agree to the tolerance's effect there (measured 3e-4 mV in a
    # spike's upstroke; 1e-5 mV with the built-in ExpSyn) and the
    # conductances, which see the same arrival times, to rounding.
    for kw, atol_v in ((dict(), 1e-12), (dict(solver=so.CrankNicolson(),
                                                controller=ctl), 2e-3)):  # fmt: skip
        cell = so.simulate(model(s_pre), 20.0, DT, **kw)
        spikes = np.asarray(cell.spikes["pre.spikes"])
        spikes = spikes[np.isfinite(spikes)]
        assert spikes.size >= 2, "the presynaptic cell fires repeatedly"
        listed = so.simulate(model(so.SpikeTimes(list(spikes))), 20.0, DT, **kw)
        g = np.asarray(cell.recordings["g"])
        assert g.max() > 1e-3
        np.testing.assert_allclose(
            g, np.asarray(listed.recordings["g"]), rtol=0, atol=1e-13
        )
        np.testing.assert_allclose(
            np.asarray(cell.recordings["post"]),
            np.asarray(listed.recordings["post"]),
            rtol=0,
            atol=atol_v,
        )


def test_gradients_through_weight_vectors(tm_syn):
    """d(sum of v)/d(weight, delay) of a NetCon and d/dU of the facilitating
    synapse against central differences (float64, fixed steps, off-grid
    arrivals); finite in float32."""
    model = _model(tm_syn, OFF_GRID, post="pas")

    def with_params(m, p):
        arr = m.point_processes[0].arrivals
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.weight, m,
                        arr.weight.at[0].set(p[0]))  # fmt: skip
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.delay, m,
                        arr.delay.at[0].set(p[1]))  # fmt: skip
        par = m.point_processes[0].params
        par = par | {"U": par["U"].at[0].set(p[2])}
        return eqx.tree_at(lambda m: m.point_processes[0].params, m, par)

    @jax.jit
    def loss(p, m):
        return jnp.sum(so.simulate(with_params(m, p), 8.0, DT).recordings["v"])

    p0 = jnp.asarray([0.01, 0.37, 0.04])
    grad = np.asarray(jax.grad(loss)(p0, model))
    fd = finite_difference_grad(lambda p: loss(p, model), p0, eps=1e-6)
    print("grad", grad, "fd", fd)
    assert np.all(np.abs(grad) > 1e-6)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)

    model32 = _model(tm_syn, OFF_GRID, dtype=jnp.float32)
    grad32 = jax.grad(loss)(p0.astype(jnp.float32), model32)
    assert grad32.dtype == jnp.float32 and np.all(np.isfinite(grad32))


def _tsodyks_markram(times, t_end, weight, par):
    """tmsyn.mod's `g` at `t_end` (µS) after events at `times` of one NetCon,
    by its equations in plain Python."""
    y = z = 0.0
    u, ts, g = par["u0"], 0.0, 0.0
    t1, tr, tf, big_u = par["tau_1"], par["tau_rec"], par["tau_facil"], par["U"]
    for t in times:
        z = z * np.exp(-(t - ts) / tr)
        z += y * (np.exp(-(t - ts) / t1) - np.exp(-(t - ts) / tr)) / (t1 / tr - 1)
        y *= np.exp(-(t - ts) / t1)
        x = 1 - y - z
        u = u * np.exp(-(t - ts) / tf) + big_u * (1 - u * np.exp(-(t - ts) / tf))
        g += weight * x * u * np.exp(-(t_end - t) / t1)
        y, ts = y + x * u, t
    return g


def test_two_events_of_one_netcon_inside_one_step(tm_syn):
    """Two events of one NetCon inside one fixed step (2.005 and 2.015 ms, dt
    0.025): one window cannot apply them in turn, so the step is made
    non-finite and the safe path retries it in shorter steps; the result is
    the sequential one (to rounding)."""
    model = _model(tm_syn, [(0, [1.005, 1.015], 1.0, 0.01)], post="pas")
    out = so.simulate(model, 2.5, DT)
    g = np.asarray(out.recordings["g0"])
    want = _tsodyks_markram([2.005, 2.015], 2.5, 0.01, FACIL)
    print(f"g(2.5) = {g[-1]!r}, sequential {want!r}")
    assert g[-1] > 5e-4
    np.testing.assert_allclose(g[-1], want, rtol=1e-12)


def test_model_file(tmp_path, tm_syn):
    """A model file (`nmodl`, `point_processes`, `netcons`) with the weight-
    vector synapse runs as the Python model does."""
    import json
    import shutil

    shutil.copy(OWN / "tmsyn.mod", tmp_path / "tmsyn.mod")
    netcons = [(0, [1.0, 3.0, 5.0], 1.0, 0.01), (1, [2.0, 2.5], 0.5, 0.006)]
    model = {
        "format": "stable_ode.model/1",
        "t_stop": 8.0,
        "nmodl": ["tmsyn.mod"],
        "cells": [{"name": "c", "mechanisms": [{"name": "hh"}],
                   "sections": [{"name": "soma", "length": 20.0,
                                 "diameter": 20.0}]}],
        "point_processes": [
            {"name": n, "kind": "TMSyn", "cell": "c", "section": "soma",
             "params": par} for n, par in (("f", FACIL), ("d", DEPRESS))],
        "netcons": [{"source": {"spike_times": t}, "target": "fd"[k],
                     "delay": d, "weight": w} for k, t, d, w in netcons],
        "record": [{"name": "v", "cell": "c", "section": "soma"},
                   {"name": "g0", "point_process": "f", "variable": "g"}],
        "integration": {"solver": "backward_euler", "dt": DT},
    }  # fmt: skip
    path = tmp_path / "model.json"
    path.write_text(json.dumps(model))
    got = so.load_spec(path).simulate().recordings
    want = so.simulate(_model(tm_syn, netcons), 8.0, DT).recordings
    assert np.max(np.asarray(got["g0"])) > 1e-3
    for k in ("v", "g0"):
        np.testing.assert_allclose(
            np.asarray(got[k]), np.asarray(want[k]), rtol=0, atol=1e-12
        )


@pytest.mark.neuron
def test_from_neuron(neuron_mechanisms):
    """`from_neuron` converts a NEURON model whose `TMSyn` (from the `--nmodl`
    file) is driven by a `NetStim`: its PARAMETERs read off the instance, the
    NetCon's weight vector recomputed by NET_RECEIVE's INITIAL (NEURON's
    values after `finitialize` are not 0); the converted model's run equals
    NEURON's (fixed steps, 1e-8 mV)."""
    from stable_ode._neuron_import import from_neuron, FromNeuronError

    h = neuron_mechanisms
    soma = h.Section(name="tm_from_neuron")
    soma.L = soma.diam = 20.0
    soma.insert("hh")
    syn = h.TMSyn(soma(0.5))
    for k, x in (FACIL | dict(u0=0.05)).items():
        setattr(syn, k, x)
    ns = h.NetStim()
    ns.start, ns.number, ns.interval, ns.noise = 1, 5, 2, 0
    nc = h.NetCon(ns, syn)
    nc.weight[0], nc.delay = 0.01, 0.5
    v = h.Vector().record(soma(0.5)._ref_v)
    h.usetable_hh, h.secondorder, h.dt, h.celsius, h.tstop = 0, 0, DT, 6.3, 14.0
    h.CVode().active(0)
    h.v_init = -65.0
    h.finitialize(h.v_init)
    assert nc.weight[3] == 0.05  # u, set by NET_RECEIVE's INITIAL
    h.continuerun(h.tstop)
    model = from_neuron(nmodl=[OWN / "tmsyn.mod"], sections=[soma])
    assert model["point_processes"][0]["kind"] == "TMSyn"
    assert model["point_processes"][0]["params"]["u0"] == 0.05
    ours = np.asarray(so.load_spec(model).simulate().recordings["soma"])
    ref = np.array(v)
    assert ref.max() > 0, "the synapse makes the cell spike"
    err = float(np.max(np.abs(ours - ref)))
    print(f"from_neuron TMSyn vs NEURON: {err:.2g} mV")
    assert err < 1e-8
    nc.weight[1] = 0.5  # y: set by INITIAL, so not a problem
    from_neuron(nmodl=[OWN / "tmsyn.mod"], sections=[soma])
    with pytest.raises(FromNeuronError, match="TMSyn is not supported"):
        from_neuron(sections=[soma])  # without its .mod file: named
    del nc, ns, syn
    h.delete_section(sec=soma)
