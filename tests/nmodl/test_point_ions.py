"""`USEION` in a point process: `mod/casyn.mod` (ours) reads `eca` and writes
`ica` (nA), which joins its compartment's `ica` over the compartment's area
as NEURON adds it, so `mod/capool.mod` (a calcium pool inserted there)
fills and `eca` follows Nernst.

An HH compartment (L = diam = 20 µm, 6.3 °C) with the pool and the synapse,
driven by three events; against NEURON running the same files (fixed steps,
dt 0.025, `BackwardEuler` against `secondorder = 0`): v to 1e-8 mV, `cai`
to 1e-13 mM (measured 1.8e-11 mV, 1.4e-15 mM of a rise to 0.042 mM), and the
synapse's recorded `ica` and `i` to 1e-9 nA under the one-step rule.
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
from stable_ode.nmodl import load_nmodl, NmodlError


DT, T1 = 0.025, 15.0
SPIKES, DELAY, WEIGHT = [1.0, 4.0, 7.0], 1.0, 0.005
PARAMS = dict(tau=5.0, e=0.0, frac=0.2)


@pytest.fixture(scope="module")
def mechs():
    return load_nmodl([OWN / "casyn.mod", OWN / "capool.mod"])


def _model(mechs, dtype=None):
    cell = so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0)],
        [so.Insert(so.HH()), so.Insert(mechs["capool"]())],
    )
    site = so.Site("c", "soma", 0.5)
    syn = mechs["CaSyn"](site, **PARAMS, name="s")
    nc = so.NetCon(so.SpikeTimes(SPIKES), syn, delay=DELAY, weight=WEIGHT)
    rec = [so.Recording("v", site), so.Recording("cai", site, "cai")]
    rec += [so.PointRecording(x, syn, x) for x in ("ica", "i", "g")]
    return so.build([cell], point_processes=[syn], netcons=[nc], recordings=rec,
                    dtype=dtype)  # fmt: skip


@pytest.mark.neuron
def test_against_neuron(mechs, neuron_mechanisms):
    out = so.simulate(_model(mechs), T1, DT, solver=so.BackwardEuler())
    ours = {k: np.asarray(x) for k, x in out.recordings.items()}
    h = neuron_mechanisms
    sec = h.Section(name="casyn_soma")
    sec.L = sec.diam = 20.0
    sec.insert("hh")
    sec.insert("capool")
    syn = h.CaSyn(sec(0.5))
    for k, x in PARAMS.items():
        setattr(syn, k, x)
    nc = h.NetCon(None, syn)
    nc.weight[0] = WEIGHT
    v = h.Vector().record(sec(0.5)._ref_v)
    cai = h.Vector().record(sec(0.5)._ref_cai)
    currents = {x: h.Vector().record(getattr(syn, f"_ref_{x}")) for x in ("ica", "i")}
    h.CVode().active(0)
    h.usetable_hh, h.secondorder, h.dt, h.celsius = 0, 0, DT, 6.3
    h.finitialize(-65.0)
    for t in SPIKES:
        nc.event(t + DELAY)
    for _ in range(round(T1 / DT)):
        h.fadvance()
    v, cai = np.array(v), np.array(cai)
    assert v.max() > 0 and cai.max() > 1e-2, (
        "the synapse fires the cell, fills the pool"
    )
    dv = float(np.max(np.abs(ours["v"] - v)))
    dc = float(np.max(np.abs(ours["cai"] - cai)))
    print(f"CaSyn + capool vs NEURON: {dv:.2g} mV, cai {dc:.2g} mM")
    assert dv < 1e-8 and dc < 1e-13
    # BREAKPOINT's `ica` and `i` (nA): NEURON computes them at the start of a
    # step, so its sample k+1 is ours at k (the step's end), except at the
    # arrivals' samples (NEURON's holds the events delivered at t_k)
    t = np.arange(round(T1 / DT) + 1) * DT
    arrivals = np.asarray(SPIKES) + DELAY
    keep = np.all(np.abs(t[:-1, None] - arrivals) > 1e-9, axis=1)
    for x, theirs in currents.items():
        theirs = np.array(theirs)
        assert np.max(np.abs(theirs)) > 1e-3
        di = float(np.max(np.abs(ours[x][:-1] - theirs[1:])[keep]))
        print(f"CaSyn {x} vs NEURON: {di:.2g} nA")
        assert di < 1e-9
    del nc, syn
    h.delete_section(sec=sec)


def test_adaptive_and_gradient(mechs):
    """Adaptive CrankNicolson (whose kinetics see the ions too) agrees with
    fixed steps to their dt error; d(final cai)/d(weight, frac) against
    central differences (float64)."""
    model = _model(mechs)
    fixed = np.asarray(so.simulate(model, T1, DT).recordings["cai"])
    ctl = dfx.PIDController(rtol=1e-7, atol=1e-9)
    adaptive = so.simulate(model, T1, DT, solver=so.CrankNicolson(), controller=ctl)
    adaptive = np.asarray(adaptive.recordings["cai"])
    assert abs(adaptive[-1] - fixed[-1]) < 0.02 * fixed[-1]

    def with_params(m, p):
        m = eqx.tree_at(lambda m: m.point_processes[0].arrivals.weight, m, p[:1])
        par = m.point_processes[0].params | {"frac": p[1:2]}
        return eqx.tree_at(lambda m: m.point_processes[0].params, m, par)

    def loss(p):  # (the fixed run's t1: one compiled forward solve)
        out = so.simulate(with_params(model, p), T1, DT).recordings["cai"]
        return out[-1] * 1e3

    p0 = jnp.asarray([WEIGHT, 0.2])
    grad = np.asarray(jax.grad(loss)(p0))
    fd = finite_difference_grad(loss, p0, eps=1e-6)
    print("grad", grad, "fd", fd)
    assert np.all(np.abs(grad) > 1e-3)
    np.testing.assert_allclose(grad, fd, rtol=1e-5)


def test_writing_a_concentration_is_an_error(tmp_path):
    text = (OWN / "casyn.mod").read_text()
    path = tmp_path / "p.mod"
    path.write_text(text.replace("WRITE ica", "WRITE ica, cai"))
    with pytest.raises(NmodlError, match="writing the concentration cai") as e:
        load_nmodl(path)
    assert e.value.construct == "USEION" and e.value.line == 8
