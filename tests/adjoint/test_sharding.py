"""Batch gradients over stimulus amplitudes: `jax.vmap`, and the same batch sharded
over 4 (fake) CPU devices with `jax.sharding`, equal to unsharded."""

import os
import subprocess
import sys
import textwrap


_SCRIPT = textwrap.dedent(
    """
    import os
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    import jax
    jax.config.update("jax_enable_x64", True)
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    import stable_ode as so

    assert jax.device_count() == 4, jax.devices()
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0, 1)], [so.Insert(so.HH())])
    site = so.Site("c", "soma", 0.5)
    model = so.build([cell], [so.StepCurrent(site, 0.1, 1.0, 5.0)],
                     [so.Recording("soma", site)])

    def loss(gna, amp):
        m = eqx.tree_at(lambda m: (m.mechanisms[0].mechanism.gnabar,
                                   m.stimuli.step_amplitude),
                        model, (jnp.full(1, gna), jnp.full(1, amp)))
        v = so.simulate(m, 8.0, 0.05, adjoint=so.Checkpointing(8)).recordings["soma"]
        return jnp.mean((v + 65.0) ** 2)

    grad = jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(None, 0))
    amps = jnp.linspace(0.05, 0.4, 8)
    ref = jax.jit(grad)(0.12, amps)
    loop = [jax.grad(loss, argnums=(0, 1))(0.12, a) for a in amps]
    mesh = Mesh(np.array(jax.devices()), ("batch",))
    sharded_amps = jax.device_put(amps, NamedSharding(mesh, P("batch")))
    out = jax.jit(grad)(0.12, sharded_amps)
    assert len(out[1].sharding.device_set) == 4, out[1].sharding
    for r, o in zip(ref, out):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-12, atol=0)
    for i, (g0, g1) in enumerate(loop):
        np.testing.assert_allclose(float(ref[0][i]), float(g0), rtol=1e-12)
        np.testing.assert_allclose(float(ref[1][i]), float(g1), rtol=1e-12)
    assert np.all(np.isfinite(np.asarray(ref[0]))) and np.ptp(np.asarray(ref[1])) > 0
    print("OK", np.asarray(ref[1]))
    """
)


def test_sharded_batch_gradient_equals_unsharded():
    # The device count must be fixed before JAX initialises: a fresh process.
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    r = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "OK" in r.stdout
