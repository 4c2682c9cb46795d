"""NaN-safety by construction: every imported mechanism under the hostile tests
the built-ins pass (float32, v = -2000 and +500 mV, `jax.grad` finite), and the
removable singularities exact and smooth (no NEURON run needed)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DEMO, MODFILE, OWN
from nmodl_support import FakeEnv, per_compartment

from stable_ode.nmodl import load_nmodl


FILES = [
    MODFILE / "hh.mod",
    MODFILE / "passive.mod",
    DEMO / "khhchan.mod",
    DEMO / "nachan.mod",
    DEMO / "cachan1.mod",
    OWN / "hhns.mod",
    OWN / "traub.mod",
]
HOSTILE = [
    -2000.0,
    -500.0,
    -200.0,
    -55.0,
    -45.0,
    -40.0,
    -30.0,
    -20.0,
    -18.0,
    0.0,
    40.0,
    200.0,
    500.0,
]


@pytest.fixture(scope="module")
def mechs():
    return load_nmodl(FILES)


def _step_and_current(mech, v, env, dt=0.025):
    s0 = mech.init_states(v, env)
    kin = mech.kinetics(v, s0, env)
    s1 = {k: kin[k].update(s0[k], dt) for k in kin}
    return s0, kin, s1, mech.current(v, s1, env)


def _finite(tree):
    return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree_util.tree_leaves(tree))


NAMES = ["hh", "pas", "HHk", "HHna", "cachan1", "hhns", "traub"]


@pytest.mark.parametrize("dtype", [jnp.float32])
def test_hostile(mechs, dtype):
    """Every mechanism at every hostile voltage: initial states, one step (dt
    0.025 and 1000 ms), right-hand sides and currents finite and of the model's
    dtype; the gradient of the summed currents w.r.t. every parameter and `v`
    finite. One jitted function for all mechanisms."""
    v = jnp.asarray(HOSTILE, dtype)
    n = v.shape[0]
    env = FakeEnv(n, dtype)
    all_mechs = {k: per_compartment(mechs[k](), n, dtype) for k in NAMES}

    @jax.jit
    def run(all_mechs, v):
        out = {}
        for name, mech in all_mechs.items():
            s0, kin, s1, cur = _step_and_current(mech, v, env)
            big = {k: kin[k].update(s0[k], 1e3) for k in kin}
            rhs = {k: kin[k].rhs(s0[k]) for k in kin}
            out[name] = (s0, s1, big, rhs, cur)
        return out

    def loss(all_mechs, v):
        total = jnp.zeros((), dtype)
        for mech in all_mechs.values():
            _, _, _, cur = _step_and_current(mech, v, env)
            total = total + sum(jnp.sum(x) for x in jax.tree_util.tree_leaves(cur))
        return total

    out = run(all_mechs, v)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(all_mechs, v)
    for name in NAMES:
        for part in out[name]:
            assert _finite(part), name
            assert all(x.dtype == dtype for x in jax.tree_util.tree_leaves(part))
        assert _finite(grads[0][name]), name
    assert _finite(grads[1])


def test_singularities_exact_and_smooth(mechs):
    """Traub's rates at their removable singularities (v - vt = 13, the fabs
    guard at v - vt = 40, efun at v = -30, 1/(1 - exp) at v = -20): the value is
    the limit (neighbours `eps` away on both sides agree to first order), the
    gradient finite and continuous across the point, in float64 and float32."""
    ns = mechs["traub"].nmodl.functions
    vt = -58.0
    points = np.array([vt + 13.0, vt + 40.0, -30.0, -20.0])
    for dtype, eps, tol in ((jnp.float64, 1e-6, 1e-6), (jnp.float32, 1e-2, 5e-3)):
        v = jnp.asarray((points[:, None] + np.array([-eps, 0.0, eps])).ravel(), dtype)

        def rates(v, dtype=dtype):
            m = _vars(mechs["traub"], v, dtype)
            ns["pr_rates"](m, v)
            return jnp.stack([m.am, m.bm, m.ah, m.bh])

        r = jax.jit(rates)(v).reshape(4, len(points), 3)
        jac = jax.jit(jax.jacfwd(lambda v: jnp.sum(rates(v), axis=0)))(v)
        jac = jnp.diagonal(jac).reshape(len(points), 3)
        assert _finite(r) and _finite(jac)
        np.testing.assert_allclose(r[..., 1], r[..., 0], rtol=tol)
        np.testing.assert_allclose(r[..., 1], r[..., 2], rtol=tol)
        np.testing.assert_allclose(jac[:, 1], jac[:, 0], rtol=10 * tol)
        np.testing.assert_allclose(jac[:, 1], jac[:, 2], rtol=10 * tol)


def _vars(cls, v, dtype):
    from stable_ode.nmodl._runtime import Vars

    return Vars(v=v, vt=jnp.asarray(-58.0, dtype), am=0.0, bm=0.0, ah=0.0, bh=0.0)


def test_vtrap_guard_removed_gradient_at_zero(mechs):
    """hh.mod's `vtrap(x, y)`: at x = 0 exactly `y`, gradient exactly -1/2 (the
    guarded `y*(1 - x/y/2)` has the same value and slope, the raw formula is
    0/0)."""
    vtrap = mechs["hh"].nmodl.functions["fn_vtrap"]
    value_and_grad = jax.jit(jax.value_and_grad(lambda x: vtrap(None, x, 10.0)))
    for dtype in (jnp.float32, jnp.float64):
        value, grad = value_and_grad(jnp.zeros((), dtype))
        assert (float(value), float(grad)) == (10.0, -0.5)
