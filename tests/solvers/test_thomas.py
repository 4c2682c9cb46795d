"""The Thomas algorithm as two scans (`stable_ode._linear.thomas`), a short
cable's solve on the CPU under a raised small-loop threshold: equal to LAPACK's
`gtsv` to rounding, in value, under `vmap` and in the reverse mode, and chosen
by the coupling exactly where `use_thomas` says."""

import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from helpers import hh_cable, tridiagonal_system

import stable_ode as so
from stable_ode._linear.thomas import Thomas, thomas, use_thomas
from stable_ode._xla import small_loop_bytes
from stable_ode.morphology._coupling import TridiagonalCoupling


def _solve(solver, diag, lower, upper, rhs):
    op = lx.TridiagonalLinearOperator(diag, lower, upper)
    return lx.linear_solve(op, rhs, solver).value


@pytest.mark.parametrize("n", [1, 2, 3, 11, 64])
@pytest.mark.parametrize("symmetric", [True, False])
def test_thomas_equals_gtsv(n, symmetric):
    diag, lower, upper, rhs = tridiagonal_system(n, n, symmetric)
    ref = _solve(lx.Tridiagonal(), diag, lower, upper, rhs)
    got = jax.jit(_solve, static_argnums=0)(Thomas(), diag, lower, upper, rhs)
    np.testing.assert_allclose(got, ref, rtol=1e-13, atol=1e-13)
    # the solution solves the system (not only agrees with gtsv)
    matrix = jnp.diag(diag) + jnp.diag(lower, -1) + jnp.diag(upper, 1)
    np.testing.assert_allclose(matrix @ got, rhs, rtol=0, atol=1e-13)

    def loss(solver):
        return lambda d, r: jnp.sum(jnp.sin(_solve(solver, d, lower, upper, r)))

    g_ref = jax.grad(loss(lx.Tridiagonal()), argnums=(0, 1))(diag, rhs)
    g = jax.grad(loss(Thomas()), argnums=(0, 1))(diag, rhs)
    for a, b in zip(g, g_ref):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_thomas_float32_and_vmap():
    """float32 agrees with gtsv to float32 rounding; a `vmap` over right-hand
    sides and diagonals gives each member's own solve."""
    diag, lower, upper, rhs = tridiagonal_system(20, 5, True, jnp.float32)
    ref = jax.lax.linalg.tridiagonal_solve(
        jnp.concatenate([jnp.zeros(1, jnp.float32), lower]),
        diag,
        jnp.concatenate([upper, jnp.zeros(1, jnp.float32)]),
        rhs[:, None],
    )[:, 0]
    got = thomas(diag, lower, upper, rhs)
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    scales = jnp.asarray([1.0, 2.0, 0.5], jnp.float32)
    batched = jax.vmap(lambda s: thomas(diag * s, lower, upper, rhs * s))(scales)
    for s, row in zip(scales, batched):
        np.testing.assert_allclose(
            row, thomas(diag * s, lower, upper, rhs * s), rtol=1e-6
        )


@pytest.mark.parametrize(
    "flags, expected",
    [
        ("", 1024),
        ("--xla_cpu_max_isa=AVX", 1024),
        (
            "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=65536",
            65536,
        ),
        (
            "--xla_cpu_max_isa=AVX --xla_backend_extra_options=a=1,"
            "xla_cpu_small_while_loop_byte_threshold=4096,b=2",
            4096,
        ),
    ],
)
def test_small_loop_bytes_reads_xla_flags(monkeypatch, flags, expected):
    monkeypatch.setenv("XLA_FLAGS", flags)
    assert small_loop_bytes() == expected


def test_use_thomas_rule():
    """512 bytes of a vector at the raised threshold (64 rows in float64, 128 in
    float32); none beyond one row at XLA's default."""
    assert use_thomas(64, jnp.float64, 65536)
    assert not use_thomas(65, jnp.float64, 65536)
    assert use_thomas(128, jnp.float32, 65536)
    assert not use_thomas(129, jnp.float32, 65536)
    assert not use_thomas(2, jnp.float64, 1024)
    assert not use_thomas(2, jnp.float32, 1024)


def test_the_coupling_chooses_thomas_on_the_cpu_under_a_raised_threshold(
    monkeypatch,
):
    raised = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=65536"
    short = TridiagonalCoupling(g=jnp.ones(10), order=None, inverse_order=None)
    long = TridiagonalCoupling(g=jnp.ones(99), order=None, inverse_order=None)
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert type(short.default_solver()) is lx.Tridiagonal
    monkeypatch.setenv("XLA_FLAGS", raised)
    assert type(short.default_solver()) is Thomas
    assert type(long.default_solver()) is lx.Tridiagonal  # 100 rows of float64
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert type(short.default_solver()) is lx.Tridiagonal


def test_cable_simulation_with_thomas_matches_gtsv():
    """An HH cable through `linear_solver=Thomas()` equals `gtsv` to rounding,
    spikes included, under BackwardEuler and CrankNicolson (the reverse mode of
    the solve itself: `test_thomas_equals_gtsv`)."""
    model = hh_cable(n=12, length=500.0, amplitude=0.2, delay=1.0, duration=10.0)

    @jax.jit
    def run(m, solver):
        be = so.simulate(m, 8.0, 0.025, solver=so.BackwardEuler(solver))
        cn = so.simulate(m, 8.0, 0.025, solver=so.CrankNicolson(solver))
        return be.recordings["end"], cn.recordings["end"]

    ref = run(model, lx.Tridiagonal())
    got = run(model, Thomas())
    assert float(jnp.max(ref[0])) > 0.0  # it spiked at the far end
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
