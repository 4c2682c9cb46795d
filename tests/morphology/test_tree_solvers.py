"""The tree operator and its solvers: elimination schedules, the chain plan, every
solver against a dense solve, `vmap`, float32, and the orders benchmark (branched
cells built on them are `test_tree.py`)."""

import pathlib
import sys

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest

import stable_ode as so
from stable_ode.morphology import (
    ChainTreeSolver,
    hines_schedule,
    LevelTreeSolver,
    SequentialTreeSolver,
    TreeCoupling,
    TreeLinearOperator,
    TreeSolver,
)
from stable_ode.morphology._tree import relabelled, tree_plan


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
