"""Branched cells: the tree coupling and its junction nodes, accuracy against
Kvaerno5, gradients, and NEURON (the operator and solvers are
`test_tree_solvers.py`)."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from helpers import spike_times

import stable_ode as so
from stable_ode.morphology import TreeCoupling, TridiagonalCoupling
from stable_ode.morphology._discretise import discretise, half_conductance
from stable_ode.morphology._tree import tree_coupling


# A small branched cell: soma with three dendrites; d1 has two children, one of them
# attached at d1(0.5); d3 hangs from soma(0); d4 from d2(0), which is d2's own
# attachment node (soma(1)).
SECTIONS = [
    so.Section("soma", 20.0, 20.0, 1),
    so.Section("d1", 200.0, 2.0, 5, "soma", 1.0),
    so.Section("d2", 150.0, 1.5, 4, "soma", 1.0),
    so.Section("d3", 100.0, 1.0, 3, "soma", 0.0),
    so.Section("d1a", 100.0, 1.0, 3, "d1", 1.0),
    so.Section("d1b", 80.0, 0.8, 3, "d1", 0.5),
]


def branched_cell(sections=SECTIONS, name="cell"):
    return so.Cell(
        name,
        sections,
        [
            so.Insert(so.HH(), ["soma", "d1", "d1a"]),
            so.Insert(so.Passive(g=2e-4, e=-65.0), ["d2", "d3", "d1b"]),
        ],
        axial_resistivity=100.0,
    )


def branched_model(amplitude=0.4, delay=1.0, duration=20.0, sections=SECTIONS):
    cell = branched_cell(sections)
    return so.build(
        [cell],
        [so.StepCurrent(so.Site("cell", "soma", 0.5), amplitude, delay, duration)],
        [
            so.Recording("soma", so.Site("cell", "soma", 0.5)),
            so.Recording("d1a", so.Site("cell", "d1a", 0.9)),
            so.Recording("d1b", so.Site("cell", "d1b", 0.9)),
            so.Recording("d3", so.Site("cell", "d3", 0.9)),
        ],
    )


def dense_laplacian(cells):
    """The Laplacian of the compartments, junction nodes eliminated by Schur
    complement, built directly from the spec (independently of `TreeCoupling`)."""
    infos, _, _, _, edges, junctions = discretise(cells)
    n, nj = len(infos), len(junctions)
    big = np.zeros((n + nj, n + nj))

    def connect(i, j, g):
        big[i, j] += g
        big[j, i] += g
        big[i, i] -= g
        big[j, j] -= g

    for i, j, g in edges:
        connect(i, j, g)
    for k, members in enumerate(junctions):
        for i, g in members:
            connect(n + k, i, g)
    a, b, c = big[:n, :n], big[:n, n:], big[n:, n:]
    return a - b @ np.linalg.solve(c, b.T) if nj else a


def test_junctions_follow_neuron_nodes():
    cell = branched_cell()
    _, _, _, offsets, _, junctions = discretise([cell])
    off = offsets["cell"]
    members = sorted(sorted(i for i, _ in j) for j in junctions)
    # soma(1) joins soma, d1[0] and d2[0]; d1(1) joins d1[4] and d1a[0] and
    # soma(0) joins soma and d3[0] (two members each: eliminated into one edge);
    # d1b hangs from d1(0.5), straight onto d1[2].
    assert members == [sorted([off["soma"], off["d1"], off["d2"]])]
    # A child at d2(0) joins the soma(1) junction (NEURON: d2(0) *is* that node).
    cell4 = branched_cell([*SECTIONS, so.Section("d4", 50.0, 1.0, 2, "d2", 0.0)])
    _, _, _, offsets4, _, junctions4 = discretise([cell4])
    o = offsets4["cell"]
    members4 = sorted(sorted(i for i, _ in j) for j in junctions4)
    assert members4 == [sorted([o["soma"], o["d1"], o["d2"], o["d4"]])]
    g = dict(junctions4[0])
    assert g[o["d4"]] == pytest.approx(half_conductance(cell4.section("d4"), 100.0))


def test_coupling_matches_dense_laplacian_and_conserves_current():
    cell = branched_cell([*SECTIONS, so.Section("d4", 50.0, 1.0, 2, "d2", 0.0)])
    model = so.build([cell])
    c = model.coupling
    assert isinstance(c, TreeCoupling)
    lap = dense_laplacian([cell])
    rng = np.random.default_rng(0)
    v = jnp.asarray(rng.normal(size=model.n_compartments) * 20 - 65)
    i_axial = c.current(v)
    assert jnp.allclose(i_axial, lap @ np.asarray(v), rtol=1e-10, atol=1e-16)
    # Current conservation: the axial currents into all compartments sum to 0.
    scale = jnp.sum(jnp.abs(i_axial))
    assert jnp.abs(jnp.sum(i_axial)) <= 1e-13 * scale
    assert jnp.allclose(c.self_conductance(), -np.diag(lap), rtol=1e-12)
    # The implicit step: the augmented (compartments + junctions) tree solve equals
    # the dense solve of the eliminated system.
    d = jnp.asarray(rng.uniform(1e-7, 1e-6, model.n_compartments))
    rhs = jnp.asarray(rng.normal(size=model.n_compartments) * 1e-6)
    for theta in (1.0, 0.5):
        sol = lx.linear_solve(
            c.operator(d, theta), c.to_operator_order(rhs), c.default_solver()
        )
        x = c.from_operator_order(sol.value)
        x_dense = np.linalg.solve(np.diag(np.asarray(d)) - theta * lap, np.asarray(rhs))
        assert jnp.allclose(x, x_dense, rtol=1e-9)


def test_coupling_of_a_wide_branch_point():
    # Six dendrites at soma(1): a junction with more than four children, whose
    # sums over children are written as gathers (`more_rows`), in child order.
    dendrites = [
        so.Section(f"d{k}", 50.0 + 10 * k, 1.0, 2, "soma", 1.0) for k in range(6)
    ]
    cell = so.Cell("w", [so.Section("soma", 20.0, 20.0, 1), *dendrites])
    c = so.build([cell]).coupling
    assert isinstance(c, TreeCoupling) and c.more_rows.shape[0] >= 1
    lap = dense_laplacian([cell])
    rng = np.random.default_rng(1)
    v = jnp.asarray(rng.normal(size=lap.shape[0]) * 20 - 65)
    assert jnp.allclose(c.current(v), lap @ np.asarray(v), rtol=1e-10, atol=1e-16)
    assert jnp.allclose(c.self_conductance(), -np.diag(lap), rtol=1e-12)
    x = rng.normal(size=c.parent.shape[0])
    parent = np.asarray(c.parent)
    want = np.zeros_like(x)
    for k in range(x.shape[0]):  # children in increasing row order, added in turn
        kids = np.flatnonzero((parent == k) & (np.arange(x.shape[0]) != k))
        if kids.size:
            want[k] = x[kids[0]]
            for j in kids[1:]:
                want[k] = want[k] + x[j]
    np.testing.assert_array_equal(np.asarray(c._child_sum(jnp.asarray(x))), want)


def test_build_picks_coupling():
    cable = so.Cell("c", [so.Section("a", 100.0, 1.0, 5)])
    assert isinstance(so.build([cable]).coupling, TridiagonalCoupling)
    # A child at an interior point gives the parent's compartment there three
    # neighbours: a tree, although there is no junction node.
    side = so.Cell(
        "s",
        [so.Section("a", 100.0, 1.0, 5), so.Section("b", 50.0, 1.0, 2, "a", 0.5)],
    )
    assert isinstance(so.build([side]).coupling, TreeCoupling)
    assert isinstance(so.build([branched_cell()]).coupling, TreeCoupling)
    # Two cells, one branched: one forest.
    m = so.build([cable, branched_cell()])
    assert isinstance(m.coupling, TreeCoupling)
    assert m.coupling.current(m.v_init).shape == (m.n_compartments,)


def test_tree_coupling_rejects_cycles():
    with pytest.raises(ValueError, match="not a forest"):
        tree_coupling(3, [(0, 1, 1.0), (1, 2, 1.0), (2, 0, 1.0)], [], jnp.float64)


def test_tree_coupling_on_a_cable_equals_tridiagonal():
    cell = so.Cell("c", [so.Section("a", 300.0, 1.0, 9)], [so.Insert(so.HH())])
    model = so.build(
        [cell],
        [so.StepCurrent(so.Site("c", "a", 0.0), 0.3, 0.5, 5.0)],
        [so.Recording("end", so.Site("c", "a", 1.0))],
    )
    infos, _, _, _, edges, junctions = discretise([cell])
    tree = tree_coupling(len(infos), edges, junctions, jnp.float64)
    tree_model = eqx.tree_at(lambda m: m.coupling, model, tree)
    run = jax.jit(lambda m: so.simulate(m, 5.0, 0.025, solver=so.BackwardEuler()))
    a = run(model).recordings["end"]
    b = run(tree_model).recordings["end"]
    assert jnp.allclose(a, b, rtol=1e-11, atol=1e-11)


@pytest.fixture(scope="module")
def reference():
    """Kvaerno5 at tight tolerance on the same term."""
    model = branched_model(duration=20.0)
    sim = so.simulate(
        model,
        10.0,
        0.025,
        solver=dfx.Kvaerno5(),
        controller=dfx.PIDController(rtol=1e-10, atol=1e-10),
    )
    return model, sim


def test_branched_cell_converges_to_kvaerno5(reference):
    model, ref = reference
    ref_v = np.stack([np.asarray(ref.recordings[k]) for k in ref.recordings])
    assert ref_v.max() > 0  # it spikes
    run = jax.jit(
        lambda m, solver, dt: so.simulate(m, 10.0, dt, solver=solver, save_dt=0.025),
        static_argnums=(1, 2),
    )
    # CrankNicolson: a first-order error in the tree coupling would show in its
    # second order (BackwardEuler's order is checked on the cable, test_core).
    for solver, order in [(so.CrankNicolson(), 2)]:
        vs = []
        for dt in (0.0125, 0.00625):
            sim = run(model, solver, dt)
            vs.append(np.stack([np.asarray(sim.recordings[k]) for k in ref.recordings]))
        errors = [np.abs(v - ref_v).max() for v in vs]
        ratio = errors[0] / errors[1]
        assert 2**order * 0.75 < ratio < 2**order * 1.35, (type(solver), errors)
        # The limit is the reference: Richardson extrapolation of the two runs
        # removes the leading error term and lands far closer to Kvaerno5.
        extrapolated = (2**order * vs[1] - vs[0]) / (2**order - 1)
        assert np.abs(extrapolated - ref_v).max() < 0.1 * errors[1], type(solver)


def test_branched_gradient_matches_finite_differences():
    model = branched_model(amplitude=0.1, duration=3.0)

    def loss(scale):
        m = eqx.tree_at(
            lambda m: m.mechanisms[0].mechanism.gnabar,
            model,
            model.mechanisms[0].mechanism.gnabar * scale,
        )
        sim = so.simulate(m, 3.0, 0.05, solver=so.BackwardEuler())
        return jnp.mean(sim.recordings["d1a"])

    loss_jit = jax.jit(loss)
    g = jax.jit(jax.grad(loss))(jnp.asarray(1.0))
    eps = 1e-5
    fd = (loss_jit(jnp.asarray(1 + eps)) - loss_jit(jnp.asarray(1 - eps))) / (2 * eps)
    assert jnp.isfinite(g) and abs(g) > 0
    assert jnp.allclose(g, fd, rtol=1e-5)


@pytest.mark.neuron
def test_branched_cell_against_neuron():
    from neuron_reference import run_neuron

    cell = branched_cell()
    stimuli = [so.StepCurrent(so.Site("cell", "soma", 0.5), 0.4, 1.0, 20.0)]
    recordings = [
        so.Recording("soma", so.Site("cell", "soma", 0.5)),
        so.Recording("d1a", so.Site("cell", "d1a", 0.9)),
        so.Recording("d1b", so.Site("cell", "d1b", 0.9)),
        so.Recording("d3", so.Site("cell", "d3", 0.9)),
    ]
    model = so.build([cell], stimuli, recordings)
    t_stop = 25.0
    run = jax.jit(
        lambda m, solver, dt: so.simulate(m, t_stop, dt, solver=solver),
        static_argnums=(1, 2),
    )
    # Same scheme (NEURON's secondorder=0 is our BackwardEuler), same dt: rounding.
    dt = 0.025
    nrn = run_neuron([cell], stimuli, recordings, t_stop=t_stop, dt=dt)
    ours = run(model, so.BackwardEuler(), dt)
    for name in nrn["v"]:
        v_nrn, v = nrn["v"][name], np.asarray(ours.recordings[name])
        assert v.shape == v_nrn.shape
        assert np.abs(v - v_nrn).max() < 1e-8, name
    # Converged spike times agree: NEURON's CVODE at a tight tolerance, sampled
    # every 1 µs, against our Crank-Nicolson at dt = 0.005 and 0.0025 ms (whose
    # spike times must also converge towards NEURON's, at second order).
    ref = run_neuron(
        [cell], stimuli, recordings, t_stop=t_stop, dt=0.001, cvode_atol=1e-10
    )
    errors = []
    for dt in (0.005, 0.0025):
        sim = run(model, so.CrankNicolson(), dt)
        err = 0.0
        for name in ("soma", "d1a", "d1b"):
            ts = spike_times(sim.ts, sim.recordings[name])
            ts_nrn = spike_times(ref["t"], ref["v"][name])
            assert len(ts) == len(ts_nrn) >= 2, name
            err = max(err, float(np.abs(ts - ts_nrn).max()))
        errors.append(err)
    assert errors[1] < 2e-4, errors  # measured: 4e-5 ms
    assert errors[1] < errors[0] / 2.5, errors
