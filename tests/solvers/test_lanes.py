"""Small float64 models step with their compartments padded to whole CPU vectors
(`_stepping/lanes.py`): when, and that the padded run gives the unpadded run's
samples, final state, statistics and gradient bit for bit."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import hh_cable

import stable_ode as so
import stable_ode._stepping.lanes as lanes
from stable_ode._stepping._base import Recorder
from stable_ode._stepping.lanes import padded_compartments


@pytest.mark.parametrize(
    "n, dtype, want",
    [
        (1, jnp.float64, None),
        (2, jnp.float64, 4),
        (4, jnp.float64, None),
        (5, jnp.float64, 8),
        (11, jnp.float64, 12),
        (12, jnp.float64, None),
        (15, jnp.float64, 16),
        (17, jnp.float64, None),
        (11, jnp.float32, None),
    ],
)
def test_which_models_are_padded(n, dtype, want):
    assert padded_compartments(hh_cable(n=n, dtype=dtype)) == want


def test_branched_cells_are_not_padded():
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 10.0, 10.0, 1),
            so.Section("a", 50.0, 1.0, 3, "soma", 1.0),
            so.Section("b", 50.0, 1.0, 3, "soma", 1.0),
        ],
        [so.Insert(so.HH())],
    )
    model = so.build([cell], dtype=jnp.float64)
    assert model.n_compartments == 7
    assert padded_compartments(model) is None


def _points(synapse: bool):
    """Three HH point neurons, a gap junction between the first and the last
    (a cable in the order 0, 2, 1), and a synapse from the first to the
    second if `synapse`."""
    cells = [
        so.Cell(f"n{i}", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for i in range(3)
    ]
    sites = [so.Site(f"n{i}", "soma") for i in range(3)]
    conns = [so.Connections(so.GapJunction(g=1e-3), [sites[0]], [sites[2]])]
    if synapse:
        conns.append(
            so.Connections(so.IonotropicSynapse(gmax=5e-3), sites[:1], sites[1:2])
        )
    stim = so.StepCurrent(sites[0], 0.2, 0.5, 5.0)
    return so.build(cells, [stim], [], conns, dtype=jnp.float64)


def test_models_with_synapses_are_not_padded():
    assert padded_compartments(_points(synapse=False)) == 4
    assert padded_compartments(_points(synapse=True)) is None


def _cell(recorded: bool):
    """A soma with `hh` (a group over one compartment, not padded) and a
    10-compartment dendrite, `pas` everywhere (a group over all 11, padded);
    a step current into the soma."""
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 20.0, 1),
            so.Section("dend", 200.0, 2.0, 10, "soma", 1.0),
        ],
        [
            so.Insert(so.HH(), sections=("soma",)),
            so.Insert(so.Passive(g=0.0003, e=-54.3)),
        ],
    )
    soma = so.Site("c", "soma", 0.5)
    recs = [so.Recording("soma", soma), so.Recording("end", so.Site("c", "dend", 1.0))]
    return so.build(
        [cell],
        [so.StepCurrent(soma, 0.3, 1.0, 1e9)],
        recs if recorded else [],
        dtype=jnp.float64,
    )


def _runs(model, stepping, solver=so.BackwardEuler()):
    """`stepping`'s solve of `model` over 10 ms with `solver`, padded and not
    (the private `_solve` is the unpadded one)."""
    times = stepping.prepare(model, 0.0, 10.0)
    recorder = Recorder.of(model)
    args = (
        times,
        solver,
        so.Checkpointing(),
        stepping.max_steps(0.0, 10.0),
        dfx.NoProgressMeter(),
        recorder,
    )

    def padded(m, y0):
        return stepping.solve(m, y0, *args)

    def unpadded(m, y0):
        return stepping._solve(m, y0, *args)

    return padded, unpadded


@pytest.fixture
def pad_calls(monkeypatch):
    """The sizes `lanes.pad` pads to in this test (so that a comparison of
    `solve` with `_solve` is known to compare a padded run)."""
    calls = []

    def counted(model, y0, to):
        calls.append(to)
        return pad(model, y0, to)

    pad = lanes.pad
    monkeypatch.setattr(lanes, "pad", counted)
    return calls


def _assert_same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


@pytest.mark.parametrize("plain_first", [True, False])
@pytest.mark.parametrize("recorded", [True, False])
def test_padded_run_is_the_unpadded_run_bit_for_bit(plain_first, recorded, pad_calls):
    model = _cell(recorded)
    assert padded_compartments(model) == 12
    stepping = so.FixedSteps(0.025, plain_first=plain_first)
    padded, unpadded = _runs(model, stepping)
    y0 = model.init_state()
    got = eqx.filter_jit(padded)(model, y0)
    want = eqx.filter_jit(unpadded)(model, y0)
    assert pad_calls == [12]
    assert got.saved.shape == want.saved.shape
    assert got.saved.shape[1] == (2 if recorded else 11)
    assert jax.tree.map(jnp.shape, got.final_state) == jax.tree.map(
        jnp.shape, want.final_state
    )
    assert float(jnp.max(got.saved)) > 0.0  # the soma spikes
    _assert_same(
        (got.saved, got.final_state, got.stats, got.result),
        (want.saved, want.final_state, want.stats, want.result),
    )
    if not plain_first:  # the diffrax solution, without the copies
        _assert_same(got.solution.ys, want.solution.ys)


@pytest.mark.parametrize(
    "solver",
    [so.CrankNicolson(), so.ExponentialEuler()],
    ids=lambda s: type(s).__name__,
)
def test_other_solvers_padded_bit_for_bit(solver, pad_calls):
    """CrankNicolson (TR-BDF2 steps at the stimulus edges) and exponential
    Euler (point neurons, no axial coupling)."""
    if isinstance(solver, so.ExponentialEuler):
        cells = [
            so.Cell(f"n{i}", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
            for i in range(3)
        ]
        stim = so.StepCurrent(so.Site("n0", "soma"), 0.2, 0.5, 5.0)
        model = so.build(cells, [stim], dtype=jnp.float64)
    else:
        model = _cell(recorded=True)
    to = padded_compartments(model)
    assert to is not None
    padded, unpadded = _runs(model, so.FixedSteps(0.025), solver)
    y0 = model.init_state()
    got = eqx.filter_jit(padded)(model, y0)
    want = eqx.filter_jit(unpadded)(model, y0)
    assert pad_calls == [to]
    assert float(jnp.max(got.saved)) > 0.0
    _assert_same((got.saved, got.final_state), (want.saved, want.final_state))


def test_padded_gap_junction_network_is_the_unpadded_one_bit_for_bit():
    model = _points(synapse=False)
    assert model.coupling.order is not None
    padded, unpadded = _runs(model, so.FixedSteps(0.025))
    y0 = model.init_state()
    got = eqx.filter_jit(padded)(model, y0)
    want = eqx.filter_jit(unpadded)(model, y0)
    assert float(jnp.max(got.saved)) > 0.0  # the first cell spikes
    _assert_same((got.saved, got.final_state), (want.saved, want.final_state))


def test_padded_batch_of_gradients_is_the_unpadded_one():
    model = _cell(recorded=True)
    padded, unpadded = _runs(model, so.FixedSteps(0.025))

    def loss(g, run):
        m = eqx.tree_at(lambda m: m.mechanisms[1].mechanism.g, model, g)
        return jnp.sum(run(m, m.init_state()).saved[:, 0])

    g = model.mechanisms[1].mechanism.g
    gs = jnp.linspace(0.5, 2.0, 3)[:, None] * g[None, :]
    # one compilation each for the gradient and the batch: a batch of gradients
    batched = jax.jit(
        jax.vmap(jax.value_and_grad(loss), in_axes=(0, None)), static_argnums=1
    )
    got = batched(gs, padded)
    assert np.all(np.asarray(got[1]) != 0.0)
    _assert_same(got, batched(gs, unpadded))


def test_simulate_returns_unpadded_results():
    model = _cell(recorded=False)
    sim = so.simulate(model, 5.0, 0.025)
    assert sim.recordings["v"].shape == (201, 11)
    assert sim.final_state.v.shape == (11,)
    sizes = {x.shape[0] for x in jax.tree.leaves(sim.final_state.groups)}
    assert sizes == {1}  # hh in the soma; pas has no states
