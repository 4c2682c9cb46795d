"""Batch gradients over stimulus amplitudes: `jax.vmap`, and the same batch sharded
over 4 (fake) CPU devices with `jax.sharding`, equal to unsharded; a batch on a
`jax.make_mesh` mesh, whose step loops hold no collective; the meshes lineax
cannot take yet (explicit axes, `shard_map`) refused with one clear error."""

import os
import subprocess
import sys
import textwrap


_PRELUDE = textwrap.dedent(
    """
    import re
    import jax
    jax.config.update("jax_enable_x64", True)
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec as P
    import stable_ode as so

    assert jax.device_count() == 4, jax.devices()
    cell = so.Cell("c", [so.Section("soma", 20.0, 20.0, 1)], [so.Insert(so.HH())])
    site = so.Site("c", "soma", 0.5)
    model = so.build([cell], [so.StepCurrent(site, 0.1, 1.0, 5.0)],
                     [so.Recording("soma", site)])
    """
)
"""A one-compartment HH model in a process with 4 fake CPU devices."""


def _run_on_4_devices(script: str) -> None:
    # The device count must be fixed before JAX initialises: a fresh process.
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4")
    r = subprocess.run(
        [sys.executable, "-c", _PRELUDE + script],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "OK" in r.stdout


_SCRIPT = textwrap.dedent(
    """

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
    _run_on_4_devices(_SCRIPT)


_MESH_SCRIPT = textwrap.dedent(
    """

    def run(gna):
        m = eqx.tree_at(lambda m: m.mechanisms[0].mechanism.gnabar, model,
                        jnp.full(1, gna))
        return so.simulate(m, 6.0, 0.025).recordings["soma"]

    gnas = jnp.linspace(0.08, 0.16, 16)
    batch = jax.jit(jax.vmap(run))
    ref = batch(gnas)
    mesh = jax.make_mesh((4,), ("batch",), axis_types=(AxisType.Auto,))
    xs = jax.device_put(gnas, NamedSharding(mesh, P("batch")))
    out = batch(xs)
    assert len(out.sharding.device_set) == 4, out.sharding
    # each device's 4 members vectorise differently from the 16: rounding only
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-12, atol=0)

    # The step loops (the innermost while loops: the plain run's scan and the safe
    # solve's steps) hold no collective, whatever calls they make; the loop over
    # groups of failing members around the safe solve gathers them, once a group.
    text = batch.lower(xs).compile().as_text()
    comps, name = {}, None
    for line in text.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\\w.\\-]+) .*[{]$", line)
        if head:
            name = head.group(1)
            comps[name] = []
        elif name:
            comps[name].append(line)

    CALL = r"(?:to_apply|body|condition|calls)=%?([\\w.\\-]+)"

    def called(c):
        out, stack = set(), [c]
        while stack:
            k = stack.pop()
            if k in out or k not in comps:
                continue
            out.add(k)
            for line in comps[k]:
                stack += re.findall(CALL, line)
                for group in re.findall(r"branch_computations=[{]([^}]*)[}]", line):
                    stack += [b.strip().lstrip("%") for b in group.split(",")]
        return out

    bodies = {b for line in text.splitlines()
              for b in re.findall(r" while[(].*body=%?([\\w.\\-]+)", line)}
    innermost = [b for b in bodies if not (called(b) - {b}) & bodies]
    collective = re.compile(r"(all-reduce|all-gather|collective-permute|all-to-all"
                            r"|reduce-scatter)(-start)?[(]")
    assert any("known_trip_count" in line and '"240"' in line
               for line in text.splitlines() if " while(" in line)
    assert collective.search(text)  # the group loop's gather: the pattern matches
    for b in innermost:
        hits = [line for c in called(b) for line in comps[c] if collective.search(line)]
        assert not hits, (b, hits[:3])
    assert innermost

    for kind in ("explicit", "shard_map"):
        try:
            if kind == "explicit":
                emesh = jax.make_mesh((4,), ("batch",), axis_types=(AxisType.Explicit,))
                batch(jax.device_put(gnas, NamedSharding(emesh, P("batch"))))
            else:
                jax.jit(jax.shard_map(jax.vmap(run), mesh=mesh, in_specs=P("batch"),
                                      out_specs=P("batch")))(xs)
        except NotImplementedError as e:
            assert "lineax#185" in str(e) and "AxisType.Auto" in str(e), e
        else:
            raise AssertionError(kind + " ran")
    print("OK", len(innermost))
    """
)


def test_make_mesh_batch_step_loops_hold_no_collective():
    _run_on_4_devices(_MESH_SCRIPT)
