"""Networks: chemical synapses and gap junctions between cells."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import finite_difference_grad, spike_times

import stable_ode as so


def point_net(n=3, gap_pairs=((0, 2),), gmax=5e-3, dtype=jnp.float64, gap_g=1e-3):
    cells = [
        so.Cell(f"n{i}", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for i in range(n)
    ]
    sites = [so.Site(f"n{i}", "soma") for i in range(n)]
    conns = [
        so.Connections(so.IonotropicSynapse(gmax=gmax), sites[:-1], sites[1:]),
    ]
    if gap_pairs:
        conns.append(
            so.Connections(
                so.GapJunction(g=gap_g),
                [sites[a] for a, _ in gap_pairs],
                [sites[b] for _, b in gap_pairs],
            )
        )
    return so.build(
        cells,
        [so.StepCurrent(sites[0], 0.2, 1.0, 50.0)],
        [so.Recording(f"v{i}", s) for i, s in enumerate(sites)],
        conns,
        dtype=dtype,
    )


def test_vectorised_groups():
    model = point_net(n=5, gap_pairs=((0, 4), (1, 3)))
    # One mechanism group for all cells, one synapse group, gap junctions in the
    # coupling (here a forest of two pairs: tridiagonal after reordering).
    assert len(model.mechanisms) == 1 and model.mechanisms[0].index.shape == (5,)
    assert len(model.synapses) == 1 and model.synapses[0].pre.shape == (4,)
    assert isinstance(model.coupling, so.morphology.TridiagonalCoupling)
    state = model.init_state()
    np.testing.assert_allclose(
        state.groups[len(model.mechanisms)]["s"], jax.nn.sigmoid((-65.0 + 35.0) / 10.0)
    )


@pytest.mark.parametrize(
    "gap_pairs", [((0, 2),), ((0, 1), (1, 2), (2, 0))], ids=["tree", "cycle"]
)
def test_network_against_kvaerno5(gap_pairs):
    model = point_net(gap_pairs=gap_pairs)
    if len(gap_pairs) == 3:
        assert isinstance(model.coupling, so.morphology.DenseCoupling)
    ref = so.simulate(
        model,
        30.0,
        0.05,
        solver=dfx.Kvaerno5(),
        controller=dfx.PIDController(rtol=1e-9, atol=1e-9),
    )
    cn = so.simulate(model, 30.0, 0.0025, solver=so.CrankNicolson(), save_dt=0.05)
    n_spikes = 0
    for k in ref.recordings:
        sr = spike_times(ref.ts, ref.recordings[k])
        sc = spike_times(cn.ts, cn.recordings[k])
        assert len(sr) == len(sc)
        np.testing.assert_allclose(sc, sr, atol=2e-3)
        n_spikes += len(sr)
    assert n_spikes >= 3  # the synapses carry activity downstream


def test_gap_junctions_conserve_current():
    model = point_net(n=4, gap_pairs=((0, 1), (1, 2), (2, 3), (3, 0)))
    v = jnp.asarray(np.random.default_rng(0).uniform(-80, 40, 4))
    i = model.coupling.current(v)  # mA into each compartment
    assert abs(float(jnp.sum(i))) < 1e-12 * float(jnp.sum(jnp.abs(i)))
    # Two passive cells joined by a gap junction: charge is conserved, and they
    # relax to a common voltage.
    cells = [
        so.Cell(
            f"p{i}", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.Passive(g=0.0))]
        )
        for i in range(2)
    ]
    sites = [so.Site(f"p{i}", "soma") for i in range(2)]
    m = so.build(
        cells,
        [],
        [so.Recording(f"v{i}", s) for i, s in enumerate(sites)],
        [so.Connections(so.GapJunction(g=1e-2), sites[:1], sites[1:])],
    )
    y0 = eqx.tree_at(lambda y: y.v, m.init_state(), jnp.asarray([-80.0, -40.0]))
    sol = so.simulate(m, 5.0, 0.1, y0=y0)
    v0, v1 = sol.recordings["v0"], sol.recordings["v1"]
    np.testing.assert_allclose(v0 + v1, -120.0, atol=1e-9)
    # The difference decays as backward Euler's (1 + dt/tau)^-k, tau = C/(2g).
    cap = float(m.area[0] * m.capacitance[0]) * 1e-6  # F
    tau = cap / (2 * 1e-2 * 1e-6) * 1e3  # ms
    k = np.arange(v0.shape[0])
    np.testing.assert_allclose(v0 - v1, -40.0 * (1 + 0.1 / tau) ** -k, rtol=1e-10)


def test_synapse_parameters_are_trainable():
    model = point_net(gap_pairs=(), gmax=3e-3)

    def loss(gmax):
        m = eqx.tree_at(lambda m: m.synapses[0].synapse.gmax, model, gmax)
        v = so.simulate(m, 10.0, 0.05).recordings["v2"]
        return jnp.mean(v)

    x = jnp.asarray([3e-3, 4e-3])
    g = jax.jit(jax.grad(loss))(x)
    fd = finite_difference_grad(jax.jit(loss), x, eps=1e-9)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, fd, rtol=1e-4)


def test_connection_errors():
    cells = [so.Cell("a", [so.Section("soma", 10.0, 10.0)])]
    site = so.Site("a", "soma")
    with pytest.raises(ValueError, match="presynaptic"):
        so.Connections(so.IonotropicSynapse(), [site], [])
    with pytest.raises(ValueError, match="itself"):
        so.build(cells, connections=[so.Connections(so.GapJunction(), [site], [site])])
    with pytest.raises(ValueError, match="does not match"):
        so.build(
            cells,
            connections=[
                so.Connections(so.IonotropicSynapse(gmax=np.ones(3)), [site], [site])
            ],
        )
    with pytest.raises(ValueError, match="out of range"):
        so.build(
            cells,
            connections=[
                so.Connections(so.IonotropicSynapse(), np.asarray([0]), np.asarray([5]))
            ],
        )
