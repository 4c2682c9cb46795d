"""Jitted and un-jitted runs give the same numbers (to rounding), for every
solver and both dtypes, including the hostile float32 case in a `lax.scan`
(the seed's NaNs appeared only un-jitted inside `lax.scan`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import ALL_SOLVERS, hh_compartment

import stable_ode as so


RTOL = {jnp.float32: 2e-5, jnp.float64: 1e-11}


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("solver", ALL_SOLVERS, ids=lambda s: type(s).__name__)
def test_simulate_jit_matches_no_jit(solver, dtype):
    model = hh_compartment(
        diameter=10.0, amplitude=0.5, delay=0.2, duration=1.0, dtype=dtype
    )
    t1, dt = 1.5, 0.05

    jitted = jax.jit(
        lambda m: so.simulate(m, t1, dt, solver=solver).recordings["soma"]
    )(model)
    with jax.disable_jit():
        eager = so.simulate(model, t1, dt, solver=solver).recordings["soma"]
    assert jitted.dtype == dtype and eager.dtype == dtype
    assert np.all(np.isfinite(jitted)) and np.all(np.isfinite(eager))
    # The stimulus does move the voltage (a test that cannot pass trivially).
    assert float(jnp.max(jitted) - jnp.min(jitted)) > 1.0
    np.testing.assert_allclose(eager, jitted, rtol=RTOL[dtype], atol=RTOL[dtype] * 100)


@pytest.mark.parametrize("solver", ALL_SOLVERS, ids=lambda s: type(s).__name__)
def test_scan_of_steps_jit_matches_no_jit_hostile_float32(solver):
    """-10 nA into a 10 µm compartment, float32: `lax.scan` over solver steps
    gives the same finite numbers with and without jit."""
    model = hh_compartment(
        diameter=10.0, amplitude=-10.0, delay=0.0, duration=10.0, dtype=jnp.float32
    )
    term = so.MembraneTerm(model)
    dt = jnp.float32(0.025)
    n = 40

    def run(model):
        term = so.MembraneTerm(model)
        y0 = model.init_state()
        ss = solver.init(term, jnp.float32(0), dt, y0, None)

        def body(c, k):
            y, ss = c
            t0 = k.astype(jnp.float32) * dt
            y1, _, _, ss, _ = solver.step(
                term, t0, t0 + dt, y, None, ss, jnp.asarray(False)
            )
            return (y1, ss), y1.v

        return jax.lax.scan(body, (y0, ss), jnp.arange(n))[1]

    del term
    jitted = jax.jit(run)(model)
    with jax.disable_jit():
        eager = run(model)
    assert jitted.dtype == jnp.float32
    assert np.all(np.isfinite(jitted)) and np.all(np.isfinite(eager))
    assert float(jitted[-1, 0]) < -1000.0  # strongly hyperpolarised, not clamped
    np.testing.assert_allclose(eager, jitted, rtol=RTOL[jnp.float32])
