"""A single HH compartment: spikes, an f-I curve by `jax.vmap`, and a gradient.

python examples/single_neuron.py [--small] [--out single_neuron.png]
"""

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp

import stable_ode as so


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--small", action="store_true", help="short run (CI smoke test)")
    p.add_argument("--out", default="single_neuron.png")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    t1 = 30.0 if args.small else 200.0

    cell = so.Cell("cell", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
    site = so.Site("cell", "soma")
    model = so.build(
        [cell],
        [so.StepCurrent(site, 0.1, 5.0, t1)],
        [so.Recording("soma", site)],
    )

    @jax.jit
    def run(amplitude):
        m = eqx.tree_at(lambda m: m.stimuli.step_amplitude, model, amplitude[None])
        return so.simulate(m, t1, 0.025, solver=so.CrankNicolson())

    sol = run(jnp.asarray(0.1))
    v = sol.recordings["soma"]
    n_spikes = int(jnp.sum((v[:-1] < 0) & (v[1:] >= 0)))
    print(f"0.1 nA: {n_spikes} spikes in {t1} ms, {int(sol.stats['num_steps'])} steps")

    amps = jnp.linspace(0.0, 0.4, 5 if args.small else 17)
    counts = jax.vmap(
        lambda a: jnp.sum(
            (run(a).recordings["soma"][:-1] < 0) & (run(a).recordings["soma"][1:] >= 0)
        )
    )(amps)
    rates = counts / (t1 - 5.0) * 1000
    print(
        "f-I curve (nA -> Hz):",
        [(round(float(a), 3), float(r)) for a, r in zip(amps, rates)],
    )

    grad = jax.grad(lambda a: jnp.mean(run(a).recordings["soma"]))(jnp.asarray(0.1))
    print(f"d mean(v) / d amplitude = {float(grad):.3f} mV/nA")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: pip install 'stable_ode[plot]' for the figure")
        return
    fig, (a0, a1) = plt.subplots(1, 2, figsize=(10, 3.5))
    a0.plot(sol.ts, v)
    a0.set(xlabel="t (ms)", ylabel="v (mV)", title="HH compartment, 0.1 nA")
    a1.plot(amps, rates, "o-")
    a1.set(xlabel="I (nA)", ylabel="rate (Hz)", title="f-I curve (vmap)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
