"""Branched cells: the tree operator and solver, junction handling, accuracy, NEURON."""

import pathlib
import sys

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from helpers import spike_times

import stable_ode as so
from stable_ode.morphology import (
    ChainTreeSolver,
    hines_schedule,
    LevelTreeSolver,
    SequentialTreeSolver,
    TreeCoupling,
    TreeLinearOperator,
    TreeSolver,
    TridiagonalCoupling,
)
from stable_ode.morphology._discretise import discretise, half_conductance
from stable_ode.morphology._tree import relabelled, tree_coupling, tree_plan


def random_forest(rng, n, n_roots=1):
    """Parent array of a random forest on `n` nodes in a random (non-Hines) order."""
    parent = np.array([0] + [int(rng.integers(0, i)) for i in range(1, n)])
    for r in rng.choice(np.arange(1, n), size=min(n_roots - 1, n - 1), replace=False):
        parent[r] = r
    perm = rng.permutation(n)  # relabel: parents no longer precede children
    inv = np.argsort(perm)
    return inv[parent[perm]]


def random_operator(rng, parent, dominant=True):
    n = parent.shape[0]
    is_root = parent == np.arange(n)
    off = np.where(is_root, 0.0, rng.normal(size=n))
    if dominant:
        diag = rng.uniform(0.1, 1.0, n) + np.abs(off)
        diag += np.bincount(parent, np.abs(off), minlength=n)
    else:  # nonsingular but not diagonally dominant, random signs
        diag = rng.normal(size=n) * 3
    return jnp.asarray(diag), jnp.asarray(off)


def check_schedule(parent, schedule):
    n = parent.shape[0]
    flat = schedule.reshape(-1)
    real = flat[flat < n]
    assert sorted(real.tolist()) == list(range(n))
    chunk_of = np.empty(n, int)
    for k, chunk in enumerate(schedule):
        chunk_of[chunk[chunk < n]] = k
    non_root = parent != np.arange(n)
    assert np.all(chunk_of[non_root] < chunk_of[parent[non_root]])


@pytest.mark.parametrize(
    "n,n_roots,width", [(1, 1, None), (7, 1, 1), (40, 3, None), (40, 1, 3)]
)
def test_schedule_is_valid(n, n_roots, width):
    rng = np.random.default_rng(n + n_roots)
    parent = random_forest(rng, n, n_roots)
    schedule = hines_schedule(parent, width)
    check_schedule(parent, schedule)
    if width is not None:
        assert schedule.shape[1] == width


def test_schedule_rejects_cycle():
    with pytest.raises(ValueError, match="cycle"):
        hines_schedule(np.array([1, 2, 0]))


# The chooser on two random forests (diagonally dominant or not); every solver
# on the structured cases is `test_tree_plan_solve_matches_dense`.
@pytest.mark.parametrize("seed", range(2))
def test_tree_solve_matches_dense(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    parent = random_forest(rng, n, n_roots=1 + seed % 3)
    schedule = jnp.asarray(hines_schedule(parent))
    parent_j = jnp.asarray(parent)
    diag, off = random_operator(rng, parent, dominant=seed % 2 == 0)
    b = jnp.asarray(rng.normal(size=n))

    def solve(diag, off, b, dense):
        op = TreeLinearOperator(diag, off, parent_j, schedule)
        if dense:
            return jnp.linalg.solve(op.as_matrix(), b)
        return lx.linear_solve(op, b, TreeSolver()).value

    x = solve(diag, off, b, False)
    x_dense = solve(diag, off, b, True)
    assert jnp.allclose(x, x_dense, rtol=1e-10, atol=1e-12)
    op = TreeLinearOperator(diag, off, parent_j, schedule)
    assert jnp.allclose(op.mv(x), b, rtol=1e-10, atol=1e-12)

    w = jnp.asarray(rng.normal(size=n))

    def loss(diag, off, b, dense):
        return jnp.sum(w * jnp.tanh(solve(diag, off, b, dense)))

    grads = jax.grad(loss, argnums=(0, 1, 2))(diag, off, b, False)
    grads_dense = jax.grad(loss, argnums=(0, 1, 2))(diag, off, b, True)
    for g, gd in zip(grads, grads_dense, strict=True):
        assert jnp.allclose(g, gd, rtol=1e-8, atol=1e-10)
    # Forward mode too (lineax's JVP rule, operator and vector tangents).
    tangents = (
        jnp.asarray(rng.normal(size=n)),
        jnp.asarray(np.where(parent == np.arange(n), 0.0, rng.normal(size=n))),
        jnp.asarray(rng.normal(size=n)),
    )
    _, t = jax.jvp(lambda *a: solve(*a, False), (diag, off, b), tangents)
    _, t_dense = jax.jvp(lambda *a: solve(*a, True), (diag, off, b), tangents)
    assert jnp.allclose(t, t_dense, rtol=1e-8, atol=1e-10)


def test_tree_solve_vmap():
    rng = np.random.default_rng(11)
    parent = random_forest(rng, 25, 2)
    schedule = jnp.asarray(hines_schedule(parent))
    diags = jnp.stack([random_operator(rng, parent)[0] for _ in range(3)])
    _, off = random_operator(rng, parent)
    b = jnp.asarray(rng.normal(size=(3, 25)))

    def solve(d, b):
        op = TreeLinearOperator(d, off, jnp.asarray(parent), schedule)
        return lx.linear_solve(op, b, TreeSolver()).value

    x = jax.vmap(solve)(diags, b)
    for k in range(3):
        op = TreeLinearOperator(diags[k], off, jnp.asarray(parent), schedule)
        assert jnp.allclose(x[k], jnp.linalg.solve(op.as_matrix(), b[k]), rtol=1e-10)


def star_of_paths(n_arms, arm):
    """Parent array: node 0 with `n_arms` paths of `arm` nodes hanging from it."""
    parent = [0]
    for _ in range(n_arms):
        parent += [0] + list(range(len(parent), len(parent) + arm - 1))
    return np.asarray(parent)


# (parent array, tree_plan kwargs): random forests (many separators, some
# adjacent), a path (no separator), one node, a star of paths, chains cut short
# (max_chain=1: every other node a separator), and the reduced system solved by
# its scan instead of unrolled (unroll_limit=0).
PLAN_CASES = [
    (random_forest(np.random.default_rng(0), 40, 1), {}),
    (random_forest(np.random.default_rng(1), 57, 3), {}),
    (random_forest(np.random.default_rng(2), 33, 2), dict(unroll_limit=0)),
    (np.concatenate([[0], np.arange(29)]), {}),
    (np.zeros(1, np.int64), {}),
    (star_of_paths(5, 7), {}),
    (star_of_paths(4, 9), dict(max_chain=1)),
    (random_forest(np.random.default_rng(3), 45, 2), dict(max_chain=2)),
]


SOLVERS = dict(
    sequential=SequentialTreeSolver(), chains=ChainTreeSolver(), scan=LevelTreeSolver()
)


@pytest.mark.parametrize("case", range(len(PLAN_CASES)))
def test_tree_plan_solve_matches_dense(case):
    parent, kwargs = PLAN_CASES[case]
    n = parent.shape[0]
    rng = np.random.default_rng(100 + case)
    plan = tree_plan(parent, **kwargs)
    schedule = jnp.asarray(hines_schedule(parent))
    parent_j = jnp.asarray(parent)
    diag, off = random_operator(rng, parent, dominant=case % 2 == 0)
    b = jnp.asarray(rng.normal(size=n))
    w = jnp.asarray(rng.normal(size=n))

    @jax.jit
    def run(diag, off, b):
        def solve(diag, off, b, which):
            op = TreeLinearOperator(
                diag, off, parent_j, schedule, None if which == "scan" else plan
            )
            if which == "dense":
                return jnp.linalg.solve(op.as_matrix(), b)
            return lx.linear_solve(op, b, SOLVERS[which]).value

        def loss(diag, off, b, which):
            return jnp.sum(w * jnp.tanh(solve(diag, off, b, which)))

        out = {}
        for which in ("chains", "sequential", "scan", "dense"):
            out[which] = (
                solve(diag, off, b, which),
                jax.grad(loss, argnums=(0, 1, 2))(diag, off, b, which),
                jax.jvp(lambda *a, k=which: solve(*a, k), (diag, off, b), (w, off, w))[
                    1
                ],
            )
        return out

    out = run(diag, off, b)
    x, grads, tangent = out["chains"]
    op = TreeLinearOperator(diag, off, parent_j, schedule, plan)
    assert jnp.allclose(op.mv(x), b, rtol=1e-10, atol=1e-12)
    for other in ("dense", "scan", "sequential"):
        x_o, grads_o, tangent_o = out[other]
        assert jnp.allclose(x, x_o, rtol=1e-10, atol=1e-12), other
        for g, g_o in zip(grads, grads_o, strict=True):
            assert jnp.allclose(g, g_o, rtol=1e-8, atol=1e-10), other
        assert jnp.allclose(tangent, tangent_o, rtol=1e-8, atol=1e-10), other


@pytest.mark.parametrize("case", [0, 2, 5, 6])
def test_relabelled_plan_solves_the_renamed_system_identically(case):
    # `relabelled(plan, label)` renames the nodes of a plan; a solve with it on
    # the renamed system does the same arithmetic in the same order: the same
    # numbers bit for bit, renamed (what lets `TreeCoupling` keep compartments
    # in the model's order while solving in Hines' order).
    parent, kwargs = PLAN_CASES[case]
    n = parent.shape[0]
    rng = np.random.default_rng(200 + case)
    label = rng.permutation(n)  # old node i is new node label[i]
    new_parent = np.empty(n, np.int64)
    new_parent[label] = label[parent]
    schedule = hines_schedule(parent)
    new_schedule = np.append(label, n)[schedule]
    diag, off = random_operator(rng, parent, dominant=True)
    b = jnp.asarray(rng.normal(size=n))

    def rename(x):
        return jnp.zeros_like(x).at[label].set(x)

    old_op = TreeLinearOperator(
        diag,
        off,
        jnp.asarray(parent),
        jnp.asarray(schedule),
        tree_plan(parent, **kwargs),
    )
    new_op = TreeLinearOperator(
        rename(diag),
        rename(off),
        jnp.asarray(new_parent),
        jnp.asarray(new_schedule),
        relabelled(tree_plan(parent, **kwargs), label),
    )
    for solver in SOLVERS.values():
        x_old = lx.linear_solve(old_op, b, solver).value
        x_new = lx.linear_solve(new_op, rename(b), solver).value
        assert np.array_equal(np.asarray(rename(x_old)), np.asarray(x_new)), solver


def test_tree_coupling_keeps_compartments_in_place():
    # Compartments are the operator's first rows, in the model's order; the
    # junctions follow.
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 20.0, 1),
            *[
                so.Section(f"d{i}", 50.0, 1.0, 2, parent="soma", parent_position=1.0)
                for i in range(3)
            ],
        ],
    )
    c = so.build([cell]).coupling
    assert isinstance(c, TreeCoupling) and c.n_compartments == 7
    assert c.g.shape[0] > 7  # a junction at the soma's 1 end
    v = jnp.arange(7.0)
    u = c.to_operator_order(v)
    assert np.array_equal(np.asarray(u[:7]), np.asarray(v))
    assert np.all(np.asarray(u[7:]) == 0) and np.all(np.asarray(c.is_junction[7:]))
    assert np.array_equal(np.asarray(c.from_operator_order(u)), np.asarray(v))


def test_tree_plan_structure():
    # A star of 5 arms × 7: one separator (the centre) and 5 chains of 7.
    plan = tree_plan(star_of_paths(5, 7))
    assert plan.separators.tolist() == [0]
    assert plan.node.shape == (5, 7)
    # A path needs no separator: one chain, i.e. one tridiagonal solve.
    path = tree_plan(np.concatenate([[0], np.arange(29)]))
    assert path.separators.shape == (0,) and path.node.shape == (1, 30)
    # Long unbranched runs among short ones are cut so that padding stays O(n).
    parent = star_of_paths(20, 2)
    parent = np.concatenate([parent, [3], np.arange(41, 41 + 399)])  # a 400-long arm
    plan = tree_plan(parent)
    assert plan.node.size <= 2 * parent.shape[0] + 64
    with pytest.raises(ValueError, match="cycle"):
        tree_plan(np.array([1, 2, 0]))
    with pytest.raises(ValueError, match="max_chain"):
        tree_plan(np.zeros(3, np.int64), max_chain=0)


def test_tree_plan_solve_vmap_and_float32():
    parent = random_forest(np.random.default_rng(12), 30, 2)
    rng = np.random.default_rng(13)
    plan = tree_plan(parent)
    schedule = jnp.asarray(hines_schedule(parent))
    diags = jnp.stack([random_operator(rng, parent)[0] for _ in range(3)])
    _, off = random_operator(rng, parent)
    b = jnp.asarray(rng.normal(size=(3, 30)))

    for method in ("chains", "sequential"):

        def solve(d, off, b, method=method):
            op = TreeLinearOperator(d, off, jnp.asarray(parent), schedule, plan)
            return lx.linear_solve(op, b, SOLVERS[method]).value

        x = jax.jit(jax.vmap(solve, in_axes=(0, None, 0)))(diags, off, b)
        for k in range(3):
            op = TreeLinearOperator(diags[k], off, jnp.asarray(parent), schedule)
            dense = jnp.linalg.solve(op.as_matrix(), b[k])
            assert jnp.allclose(x[k], dense, rtol=1e-10), method
        f32 = [a.astype(jnp.float32) for a in (diags[0], off, b[0])]
        x32 = jax.jit(solve)(*f32)
        assert x32.dtype == jnp.float32
        assert jnp.allclose(x32.astype(jnp.float64), x[0], rtol=1e-4, atol=1e-5)


def test_tree_solver_rejects_other_operators():
    op = lx.TridiagonalLinearOperator(jnp.ones(3), jnp.zeros(2), jnp.zeros(2))
    with pytest.raises(ValueError, match="TreeLinearOperator"):
        lx.linear_solve(op, jnp.ones(3), TreeSolver())


def test_tree_solver_methods():
    parent = star_of_paths(3, 4)
    n = parent.shape[0]
    schedule = jnp.asarray(hines_schedule(parent))
    diag, off = random_operator(np.random.default_rng(5), parent)
    no_plan = TreeLinearOperator(diag, off, jnp.asarray(parent), schedule)
    for solver in (SequentialTreeSolver(), ChainTreeSolver()):
        with pytest.raises(ValueError, match="needs the operator's plan"):
            lx.linear_solve(no_plan, jnp.ones(n), solver)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="sequential_limit"):
            TreeSolver(sequential_limit=bad)
    # The chooser: sequential on the CPU (up to the limit if one is given: no
    # limit by default, whatever the size), chains above it, levels without a
    # plan; its solve is the chosen solver's, bit for bit.
    with_plan = TreeLinearOperator(
        diag, off, jnp.asarray(parent), schedule, tree_plan(parent)
    )
    assert TreeSolver().select_solver(with_plan) == SequentialTreeSolver()
    big = star_of_paths(3, 2000)  # 6,001 nodes
    big_op = TreeLinearOperator(
        jnp.ones(big.shape[0]), jnp.zeros(big.shape[0]), jnp.asarray(big),
        jnp.asarray(hines_schedule(big)), tree_plan(big),
    )  # fmt: skip
    assert big.shape[0] > 4096
    assert TreeSolver().select_solver(big_op) == SequentialTreeSolver()
    assert TreeSolver(4096).select_solver(big_op) == ChainTreeSolver()
    assert TreeSolver(n - 1).select_solver(with_plan) == ChainTreeSolver()
    assert TreeSolver().select_solver(no_plan) == LevelTreeSolver()
    b = jnp.asarray(np.random.default_rng(6).normal(size=n))
    for op, limit in ((with_plan, n), (with_plan, n - 1), (no_plan, n)):
        auto = TreeSolver(limit)
        x = lx.linear_solve(op, b, auto).value
        chosen = lx.linear_solve(op, b, auto.select_solver(op)).value
        assert jnp.array_equal(x, chosen)
    with pytest.raises(ValueError, match="TreeLinearOperator"):
        TreeSolver().select_solver(lx.DiagonalLinearOperator(jnp.ones(3)))


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


def test_tree_orders_benchmark_runs(capsys):
    """`benchmarks/tree_orders.py --quick`: every solver agrees with the sequential
    one (it raises otherwise) and the table names the chooser's pick."""
    root = str(pathlib.Path(__file__).parents[2])
    sys.path.insert(0, root)
    try:
        from benchmarks import tree_orders
    finally:
        sys.path.remove(root)
    tree_orders.main(["--quick"])
    out = capsys.readouterr().out
    assert out.count("SequentialTreeSolver") == 4  # 2 sizes × 2 dtypes
