"""Delivery from many threshold NetCons into one synapse group.

A window with up to `FEW` arrivals takes them from the NetCons first
(`lax.top_k`) and evaluates the jumps on those alone; with more, on every
NetCon; with none, not at all (`CellArrivals._add`). All three must give what
the evaluation on every NetCon gives, bit for bit, forward and in reverse mode.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so
from stable_ode.events import _arrivals
from stable_ode.events._arrivals import ARRIVAL, CellArrivals, NEVER, NEXT, NONE
from stable_ode.events._sources import ThresholdSources
from stable_ode.events._synapses import Exp2SynGroup


N_CELLS, DT, T_STOP = 8, 0.025, 30.0


def _jump(entry, w, age):
    tau = jnp.asarray([2.0, 3.0, 5.0])[entry]
    return {"g": w * jnp.exp(-age / tau), "h": w * age}


@pytest.mark.parametrize("arrivals", [0, 3, 8, 12])
def test_few_arrivals_equal_every_netcon(arrivals):
    """`_add` with 0, 3, `FEW` and more arrivals among 40 NetCons (each from
    its own source) equals the evaluation on every NetCon: the increments, the
    NetCons' delivered spikes and next arrivals, and the NaN of a NetCon whose
    following arrival lies in the window too."""
    m, t_hi = 40, 1.0
    assert m > 4 * _arrivals.FEW  # (so that the few are taken first)
    rng = np.random.default_rng(arrivals)
    delay = rng.uniform(0.5, 1.0, m)
    cell = CellArrivals(
        source=jnp.arange(m, dtype=jnp.int32),
        entry=jnp.asarray(rng.integers(0, 3, m), jnp.int32),
        delay=jnp.asarray(delay),
        weight=jnp.asarray(rng.uniform(0.1, 1.0, m)),
    )
    hit = np.zeros(m, bool)
    hit[rng.choice(m, arrivals, replace=False)] = True
    arrival = np.where(hit, rng.uniform(0.0, t_hi, m), rng.uniform(2.0, 3.0, m))
    # each source's first spike, and a second one: in the window for the last
    # NetCon that receives (twice), later for the others
    twice = np.arange(m) == (np.flatnonzero(hit)[-1] if arrivals else -1)
    arrival[twice] = 0.5
    first = arrival - delay
    second = first + np.where(twice, 1e-3, 4.0)
    count = jnp.full(m, 2.0) if arrivals else jnp.ones(m)
    spikes = (jnp.asarray(first), jnp.asarray(second))
    states = {"g": jnp.zeros(3), "h": jnp.ones(3), NEXT: jnp.zeros(m)}
    states[ARRIVAL] = jnp.asarray(arrival)
    due = (t_hi, True, spikes, count)
    args = ([(t_hi, _jump)], jnp.asarray(arrival), jnp.asarray(hit), due, False)
    every = cell._add_at(None, dict(states), states, *args)
    taken = cell._add(states, dict(states), *args)
    for k in states:
        np.testing.assert_array_equal(taken[k], every[k])
    np.testing.assert_array_equal(taken[NEXT], hit)
    assert np.isnan(np.asarray(taken["g"])).any() == (arrivals > 0)
    if arrivals:
        assert np.all(np.asarray(taken[ARRIVAL])[hit] == (second + delay)[hit])


def _model():
    """8 HH point cells with an Exp2Syn each, 40 random threshold NetCons
    (delays 1–3 ms) and 10 from cell 0 with one delay (10 arrivals in one
    window: more than `FEW`), 0.3 nA into cells 0 and 1."""
    rng = np.random.default_rng(0)
    pre = list(rng.integers(0, N_CELLS, 40)) + [0] * 10
    post = [(p + 1 + rng.integers(0, N_CELLS - 1)) % N_CELLS for p in pre]
    delay = list(rng.uniform(1.0, 3.0, 40)) + [1.5] * 10

    def site(k):
        return so.Site(f"n{k}", "soma", 0.5)

    cells = [
        so.Cell(f"n{k}", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for k in range(N_CELLS)
    ]
    syns = [so.Exp2Syn(site(k), 0.5, 3.0, 0.0, name=f"s{k}") for k in range(N_CELLS)]
    drive = [so.IClamp(site(k), delay=1.0, dur=T_STOP, amp=0.3) for k in (0, 1)]
    ncs = [
        so.NetCon(site(int(i)), syns[int(j)], float(d), 0.002, threshold=-20.0)
        for i, j, d in zip(pre, post, delay)
    ]
    rec = [so.SpikeRecording(f"n{k}", site(k), -20.0, 20) for k in range(N_CELLS)]
    model = so.build(
        cells, recordings=rec, point_processes=syns + drive, netcons=ncs,
        celsius=6.3, v_init=-65.0,
    )  # fmt: skip
    assert _position(model, Exp2SynGroup) is not None
    return model


def _position(model, kind) -> int:
    """The position of the group of `kind` in `model.groups`."""
    (k,) = [k for k, g in enumerate(model.groups) if isinstance(g, kind)]
    return k


def _weights(model):
    """A function from a model like `model` to its Exp2Syns' NetCon weights."""
    k = [isinstance(g, Exp2SynGroup) for g in model.point_processes].index(True)
    return lambda m: m.point_processes[k].cell.weight


def _run(model, scale):
    """Spike times, final voltages, and the summed final voltages (mV) with
    their derivative with respect to a `scale` of every NetCon's weight."""

    weights = _weights(model)

    def loss(s):
        m = eqx.tree_at(weights, model, weights(model) * s)
        out = so.simulate(m, T_STOP, DT, solver=so.BackwardEuler())
        return jnp.sum(out.final_state.v), out

    (value, out), grad = jax.value_and_grad(loss, has_aux=True)(scale)
    spikes = np.stack([np.asarray(x) for x in out.spikes.values()])
    values = spikes, np.asarray(out.final_state.v), float(value), float(grad)
    return values, out.final_state


def test_network_few_equals_every_netcon(monkeypatch):
    """The network run (spike times, final voltages, and the gradient of the
    summed final voltages with respect to a scale of every weight) equals
    bit for bit the run that evaluates every window on every NetCon; after
    it, each NetCon has delivered every spike of its source whose arrival was
    due (`NEXT`) and waits for the next one (`ARRIVAL`: `NEVER`, or the
    arrival of a spike due after the end)."""
    model = _model()
    assert _weights(model)(model).shape[0] == 50 > 4 * _arrivals.FEW
    taken, final = _run(model, jnp.asarray(1.0))
    assert np.isfinite(taken[0]).sum() >= 10, "the network fires"
    jax.clear_caches()
    monkeypatch.setattr(_arrivals, "FEW", 1000)  # every window on every NetCon
    every, _ = _run(model, jnp.asarray(1.0))
    jax.clear_caches()
    np.testing.assert_array_equal(taken[0], every[0])
    np.testing.assert_array_equal(taken[1], every[1])
    assert taken[2] == every[2] and taken[3] == every[3]
    assert np.isfinite(taken[3]) and taken[3] != 0.0

    k, s = _position(model, Exp2SynGroup), _position(model, ThresholdSources)
    states, cell = final.groups[k], model.groups[k].cell
    ring = np.asarray(model.groups[s].ring(final.groups[s]))
    spikes = ring[np.asarray(cell.source)]  # (NetCon, slot)
    arrivals = spikes + np.asarray(cell.delay)[:, None]
    fired = spikes > 0.5 * NONE
    due = np.sum(fired & (arrivals < T_STOP), axis=1)
    np.testing.assert_array_equal(np.asarray(states[NEXT]), due)
    later = np.where(fired & (arrivals >= T_STOP), arrivals, NEVER).min(axis=1)
    np.testing.assert_array_equal(np.asarray(states[ARRIVAL]), later)
