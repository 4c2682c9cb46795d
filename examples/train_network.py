"""Train the synaptic weights of a small HH network to classify two input patterns.

Four HH point neurons: two inputs and two outputs, every input connected to every
output by an excitatory `IonotropicSynapse`. Pattern A is a current step into
input 0, pattern B into input 1; after training, output 0 fires more for A and
output 1 for B. The four `gmax` are trained (optax Adam through a
`transforms.Positive`) on a smooth surrogate of "fires more": the activity of an
output is the time average of `sigmoid((v + 20 mV)/2 mV)` (about the fraction of
time spent in a spike), and the loss is the softmax cross-entropy of the two
outputs' activities. Both patterns are simulated at once with `jax.vmap`.

    python examples/train_network.py [--small] [--out train_network.png]

`--small` (CI) simulates 40 ms per pattern; the default 100 ms.
"""

import argparse
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import stable_ode as so
from stable_ode import transforms as tf


AMPLITUDE = 0.2  # nA, the input step
TEMPERATURE = 0.02  # activity difference (fraction of time) per unit of logit


def build_network(dtype):
    """Cells `in0`, `in1`, `out0`, `out1` (20 µm HH somata); synapses
    `in_i -> out_j` in the order (0→0, 0→1, 1→0, 1→1); a step current into each
    input (amplitudes set per pattern); recordings of all four somata."""
    names = ("in0", "in1", "out0", "out1")
    cells = [
        so.Cell(k, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for k in names
    ]
    site = {k: so.Site(k, "soma") for k in names}
    pre = [site["in0"], site["in0"], site["in1"], site["in1"]]
    post = [site["out0"], site["out1"], site["out0"], site["out1"]]
    return so.build(
        cells,
        [
            so.StepCurrent(site["in0"], 0.0, 2.0, 1e3),
            so.StepCurrent(site["in1"], 0.0, 2.0, 1e3),
        ],
        [so.Recording(k, s) for k, s in site.items()],
        [so.Connections(so.IonotropicSynapse(gmax=2e-3), pre, post, name="syn")],
        dtype=dtype,
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--small", action="store_true", help="short run (CI smoke test)")
    p.add_argument("--out", default="train_network.png")
    p.add_argument("--steps", type=int, default=None, help="Adam iterations")
    args = p.parse_args(argv)
    import optax
    from tqdm import tqdm

    jax.config.update("jax_enable_x64", True)
    t1 = 40.0 if args.small else 100.0
    dt = 0.025
    iterations = args.steps or (40 if args.small else 100)

    model = build_network(jnp.float64)
    spec = so.Trainable().synapses("syn", "gmax", per="synapse")
    transform = tf.Positive(scale=1e-3)  # µS
    # Pattern A drives input 0, pattern B input 1.
    patterns = jnp.asarray([[AMPLITUDE, 0.0], [0.0, AMPLITUDE]])
    labels = jnp.asarray([0, 1])

    def run(gmax, amplitudes):
        m = spec.apply(model, (gmax,))
        m = eqx.tree_at(lambda m: m.stimuli.step_amplitude, m, amplitudes)
        sol = so.simulate(
            m, t1, dt, solver=so.BackwardEuler(), adjoint=so.Checkpointing()
        )
        return jnp.stack([sol.recordings["out0"], sol.recordings["out1"]])

    def activity(v):
        return jnp.mean(jax.nn.sigmoid((v + 20.0) / 2.0), axis=-1)

    def loss(x):
        gmax = tf.forward(transform, x)
        v = jax.vmap(run, in_axes=(None, 0))(gmax, patterns)  # (pattern, output, t)
        logits = activity(v) / TEMPERATURE
        ce = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
        return jnp.mean(ce)

    optimiser = optax.adam(3e-4)  # µS per step (x has gmax's units)

    @jax.jit
    def step(x, opt_state):
        value, grads = jax.value_and_grad(loss)(x)
        updates, opt_state = optimiser.update(grads, opt_state, x)
        return optax.apply_updates(x, updates), opt_state, value

    # Start near-symmetric (every weight 2e-3 µS, slightly perturbed).
    gmax0 = spec.init(model)[0] * (1 + 0.05 * jnp.asarray([1.0, -1.0, 0.5, -0.5]))
    x = tf.inverse(transform, gmax0)
    opt_state = optimiser.init(x)

    traces = jax.jit(jax.vmap(run, in_axes=(None, 0)))

    def report(gmax, when):
        v = traces(gmax, patterns)
        a = activity(v)
        spikes = np.sum(
            (np.asarray(v[..., :-1]) < 0) & (np.asarray(v[..., 1:]) >= 0), -1
        )
        correct = 0
        for k, name in enumerate(("A (input 0)", "B (input 1)")):
            winner = int(jnp.argmax(a[k]))
            correct += winner == int(labels[k])
            print(
                f"  {when}: pattern {name}: activity out0 {float(a[k, 0]):.4f}, "
                f"out1 {float(a[k, 1]):.4f}; spikes out0 {spikes[k, 0]}, "
                f"out1 {spikes[k, 1]} -> output {winner}"
            )
        return v, correct, spikes

    v_start, correct_start, _ = report(gmax0, "before")
    losses = []
    tic = time.perf_counter()
    with tqdm(range(iterations), desc="train_network", unit="it") as bar:
        for _ in bar:
            x, opt_state, value = step(x, opt_state)
            losses.append(float(value))
            bar.set_postfix(loss=f"{losses[-1]:.3g}")
    gmax = tf.forward(transform, x)
    print(
        f"{iterations} Adam steps ({t1} ms per pattern, 2 patterns by vmap) in "
        f"{time.perf_counter() - tic:.1f} s (first one compiles)"
    )
    print(f"loss: {losses[0]:.4g} -> {float(jax.jit(loss)(x)):.4g}")
    print(
        "gmax (µS), in0->out0, in0->out1, in1->out0, in1->out1: "
        f"{np.array2string(np.asarray(gmax0), precision=5)} -> "
        f"{np.array2string(np.asarray(gmax), precision=5)}"
    )
    v_end, correct, spikes = report(gmax, "after")
    # "Spikes more" in spike counts, not only in the surrogate.
    by_count = spikes[0, 0] > spikes[0, 1] and spikes[1, 1] > spikes[1, 0]
    print(
        f"classification: {correct}/2 correct by activity (before training "
        f"{correct_start}/2); by spike count: {'yes' if by_count else 'no'}"
    )

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: pip install 'stable_ode[plot]' for the figure")
    else:
        ts = np.arange(v_end.shape[-1]) * dt
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        axes[0].plot(losses)
        axes[0].set(xlabel="Adam step", ylabel="cross-entropy", title="loss")
        for k, name in enumerate(("A: input 0 driven", "B: input 1 driven")):
            ax = axes[k + 1]
            for j, c in enumerate(("C0", "C1")):
                ax.plot(ts, v_start[k, j], color=c, lw=0.8, ls=":", alpha=0.7)
                ax.plot(ts, v_end[k, j], color=c, lw=1.2, label=f"out{j} (trained)")
            ax.set(xlabel="t (ms)", ylabel="v (mV)", title=f"pattern {name}")
            ax.legend(fontsize=7, loc="upper right")
        axes[1].text(
            0.01,
            0.02,
            "dotted: before training",
            transform=axes[1].transAxes,
            fontsize=7,
        )
        fig.tight_layout()
        fig.savefig(args.out, dpi=100)
        plt.close(fig)
        print("wrote", args.out)


if __name__ == "__main__":
    main()
