"""Parallel cyclic reduction (`stable_ode._linear.cyclic`), the cable's solve on
TPUs: equal to LAPACK's `gtsv` to rounding, in value and in the reverse mode,
and chosen by the coupling on a TPU backend only."""

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from helpers import tridiagonal_system

import stable_ode as so
from stable_ode._linear import cyclic
from stable_ode._linear.cyclic import cyclic_reduction, CyclicReduction
from stable_ode.morphology._coupling import TridiagonalCoupling


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 257])
@pytest.mark.parametrize("symmetric", [True, False])
def test_cyclic_reduction_equals_gtsv(n, symmetric):
    with jax.enable_x64(True):
        diag, lower, upper, rhs = tridiagonal_system(n, n, symmetric)

        def solve(solver, d, r):
            op = lx.TridiagonalLinearOperator(d, lower, upper)
            return lx.linear_solve(op, r, solver).value

        ref = solve(lx.Tridiagonal(), diag, rhs)
        got = jax.jit(solve, static_argnums=0)(CyclicReduction(), diag, rhs)
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)

        def loss(solver):
            return lambda d, r: jnp.sum(jnp.sin(solve(solver, d, r)))

        g_ref = jax.grad(loss(lx.Tridiagonal()), argnums=(0, 1))(diag, rhs)
        g = jax.grad(loss(CyclicReduction()), argnums=(0, 1))(diag, rhs)
        for a, b in zip(g, g_ref):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_cable_solver_is_cyclic_reduction_on_tpu_only(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)  # the CPU's: gtsv, not Thomas
    coupling = TridiagonalCoupling(g=jnp.ones(3), order=None, inverse_order=None)
    assert type(coupling.default_solver()) is lx.Tridiagonal
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    assert type(coupling.default_solver()) is CyclicReduction


def test_cable_simulation_with_cyclic_reduction_matches_gtsv():
    """An HH cable through `linear_solver=CyclicReduction()` equals the default
    (`gtsv`) to rounding, spikes included."""
    with jax.enable_x64(True):
        cable = so.Cell(
            "c",
            [so.Section("s", length=500.0, diameter=2.0, n_compartments=40)],
            mechanisms=[so.Insert(so.HH())],
        )
        site = so.Site("c", "s", 0.0)
        model = so.build(
            [cable],
            [so.StepCurrent(site, 0.2, 1.0, 10.0)],
            [so.Recording("v", site)],
            dtype=jnp.float64,
        )

        @jax.jit
        def run(m, solver):
            sim = so.simulate(m, 8.0, 0.025, solver=so.BackwardEuler(solver))
            return sim.recordings["v"]

        ref = run(model, lx.Tridiagonal())
        got = run(model, CyclicReduction())
        assert float(jnp.max(ref)) > 0.0  # it spiked
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9)


def test_batched_cyclic_reduction_equals_lax():
    """Batched systems with several right-hand sides (as `ChainTreeSolver`'s
    chains), rows padded as identity rows at the ends."""
    with jax.enable_x64(True):
        rng = np.random.default_rng(3)
        batch, n, r = 5, 13, 3
        du = -rng.uniform(0.0, 1.0, (batch, n))
        dl = -rng.uniform(0.0, 1.0, (batch, n))
        du[:, -1] = 0.0
        dl[:, 0] = 0.0
        d = rng.uniform(0.1, 1.0, (batch, n)) - dl - du
        b = rng.normal(size=(batch, n, r))
        args = [jnp.asarray(x) for x in (dl, d, du, b)]
        ref = jax.lax.linalg.tridiagonal_solve(*args)
        got = cyclic_reduction(*args)
        np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)


def test_tree_as_on_a_tpu_matches_the_cpu_solve(monkeypatch):
    """A branched HH cell solved as on a TPU (`TreeSolver` picks
    `ChainTreeSolver`, whose chains go through `cyclic_reduction`) equals the
    CPU's default solve to rounding."""
    with jax.enable_x64(True):
        sections = [
            so.Section("soma", length=20.0, diameter=20.0, n_compartments=1),
            so.Section(
                "d1", length=300.0, diameter=2.0, n_compartments=15, parent="soma"
            ),
            so.Section(
                "d2", length=200.0, diameter=1.5, n_compartments=9, parent="soma"
            ),
            so.Section("d3", length=150.0, diameter=1.0, n_compartments=7, parent="d1"),
            so.Section("d4", length=100.0, diameter=1.0, n_compartments=5, parent="d1"),
        ]
        cell = so.Cell("c", sections, mechanisms=[so.Insert(so.HH())])
        site = so.Site("c", "soma", 0.5)
        model = so.build(
            [cell],
            [so.StepCurrent(site, 0.5, 1.0, 10.0)],
            [so.Recording("v", so.Site("c", "d3", 1.0))],
            dtype=jnp.float64,
        )

        def run(m):
            return so.simulate(m, 8.0, 0.025).recordings["v"]

        ref = jax.jit(run)(model)
        monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
        calls = []

        def counted(*args):
            calls.append(1)
            return cyclic_reduction(*args)

        monkeypatch.setattr(cyclic, "cyclic_reduction", counted)
        # simulate's own jitted functions were traced for the CPU; and what is
        # traced here must not serve the tests after this one
        jax.clear_caches()
        try:
            got = jax.jit(lambda m: run(m))(model)
        finally:
            jax.clear_caches()
        assert calls  # the chains went through cyclic reduction
        assert float(jnp.max(ref)) > 0.0  # it spiked
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9)
