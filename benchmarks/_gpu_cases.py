"""The programs that `benchmarks/gpu.py` times: each case's function, arguments
and check, ours (`case_ours`) and Jaxley's (`case_jaxley`). JAX and Jaxley are
imported inside the functions, so that importing this module imports neither."""

import functools

from ._models import (
    build_cable,
    build_cable_jaxley,
    build_compartment,
    build_network,
    build_network_jaxley,
    build_tree,
    build_tree_jaxley,
    with_hh_conductances,
)
from .forward import _dtype


DT = 0.025  # ms
KINDS = ("cable", "tree", "batch", "network", "cable-grad", "network-grad")


def _spikes(v) -> int:
    """The number of spikes in traces `v` (time on the last axis): upward crossings
    of 0 mV, by `stable_ode.spike_times`'s rule, summed over the other axes."""
    import numpy as np

    from stable_ode import spike_times

    v = np.asarray(v, dtype=float)
    t = np.arange(v.shape[-1], dtype=float)  # a count: the spacing does not matter
    return sum(len(spike_times(t, row)) for row in v.reshape(-1, v.shape[-1]))


def _check_forward(out) -> str:
    import numpy as np

    v = np.asarray(out, dtype=float)
    if not np.all(np.isfinite(v)):
        return "NOT FINITE"
    return f"{_spikes(v)} spikes"


def _check_grad(out) -> str:
    import jax
    import numpy as np

    leaves = [np.asarray(x, dtype=float).ravel() for x in jax.tree.leaves(out)]
    g = np.concatenate(leaves)
    if not np.all(np.isfinite(g)):
        return "grad NOT FINITE"
    return f"grad finite, norm {np.linalg.norm(g):.3g}"


def case_ours(spec):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import stable_ode as so

    dtype = _dtype(spec.dtype)
    solver = so.BackwardEuler()
    t_max = spec.t_max

    if spec.kind in ("cable", "cable-grad"):
        model = build_cable(spec.cable, dtype)
        if spec.kind == "cable":

            def run(m):
                sim = so.simulate(m, t_max, DT, solver=solver)
                return jnp.stack([sim.recordings["r0"], sim.recordings["r1"]])

            return run, (model,), _check_forward

        def loss(p, m):
            m = with_hh_conductances(m, p)
            sim = so.simulate(m, t_max, DT, solver=solver, adjoint=so.Checkpointing())
            return jnp.mean(sim.recordings["r1"])

        p = jnp.asarray([0.12, 0.036, 0.0003], dtype=dtype)
        return jax.grad(loss), (p, model), _check_grad

    if spec.kind == "tree":
        model = build_tree(spec.tree, dtype)

        def run(m):
            sim = so.simulate(m, t_max, DT, solver=solver)
            return jnp.stack([sim.recordings["r0"], sim.recordings["r1"]])

        return run, (model,), _check_forward

    if spec.kind == "batch":
        model = build_compartment(dtype)

        def one(amp, m):
            m = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, jnp.full(1, amp))
            return so.simulate(m, t_max, DT, solver=solver).recordings["r0"]

        amps = jnp.linspace(0.0, 0.5, spec.batch, dtype=dtype)
        if spec.shard and jax.device_count() > 1:
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            n_dev = jax.device_count()
            if spec.batch % n_dev:
                raise ValueError(
                    f"--batch {spec.batch} is not a multiple of the "
                    f"{n_dev} devices to shard it over"
                )
            mesh = Mesh(np.array(jax.devices()), ("batch",))
            amps = jax.device_put(amps, NamedSharding(mesh, PartitionSpec("batch")))
        return jax.vmap(one, in_axes=(0, None)), (amps, model), _check_forward

    if spec.kind in ("network", "network-grad"):
        model = build_network(spec.cells, spec.syn_per_cell, dtype)
        if spec.kind == "network":

            def run(m):
                sim = so.simulate(m, t_max, DT, solver=solver)
                return sim.recordings["v"].T  # (cell, time)

            return run, (model,), _check_forward
        n = model.n_compartments

        def loss(p, m):
            gmax, gnabar = p
            m = eqx.tree_at(
                lambda m: (
                    m.synapses[0].synapse.gmax,
                    m.mechanisms[0].mechanism.gnabar,
                ),
                m,
                (gmax, jnp.full(n, gnabar)),
            )
            sim = so.simulate(m, t_max, DT, solver=solver, adjoint=so.Checkpointing())
            return jnp.mean(sim.recordings["v"])

        p = (model.synapses[0].synapse.gmax, jnp.asarray(0.12, dtype=dtype))
        return jax.grad(loss), (p, model), _check_grad

    raise ValueError(f"unknown case kind {spec.kind!r}; expected one of {KINDS}")


def case_jaxley(spec):
    import jax
    import jax.numpy as jnp
    import jaxley as jx

    def integrate(module):  # `run(params)`: Jaxley's backward Euler
        return functools.partial(
            jx.integrate, module, t_max=spec.t_max, delta_t=DT, solver="bwd_euler"
        )

    if spec.kind == "cable":
        module = build_cable_jaxley(spec.cable, spec.t_max)
        return integrate(module), (module.get_parameters(),), _check_forward
    if spec.kind == "cable-grad":
        module = build_cable_jaxley(spec.cable, spec.t_max)
        for name in ("HH_gNa", "HH_gK", "HH_gLeak"):
            module.make_trainable(name, verbose=False)
        run = integrate(module)

        def loss(p):
            return jnp.mean(run(p)[1])

        return jax.grad(loss), (module.get_parameters(),), _check_grad
    if spec.kind == "tree":
        cell = build_tree_jaxley(spec.tree, spec.t_max)
        return integrate(cell), (cell.get_parameters(),), _check_forward
    if spec.kind == "network":
        # Jaxley starts the synapse state at 0.2; set it to ours (the steady state
        # at v_init, the same in a 2-cell network).
        ours = build_network(2, 1, _dtype(spec.dtype))
        s_init = float(ours.init_state().groups[len(ours.mechanisms)]["s"][0])
        net = build_network_jaxley(spec.cells, spec.syn_per_cell, spec.t_max, s_init)
        return integrate(net), (net.get_parameters(),), _check_forward
    raise ValueError(f"no Jaxley version of case kind {spec.kind!r}")
