"""Fit gNa, gK and gl of an HH cable to a target voltage trace, in float32.

The target is simulated from NEURON's default `hh` conductances; the fit starts
from perturbed values and recovers them by gradient descent through the solve
(optax Adam on unconstrained parameters, `transforms.Bounded` keeping each
conductance in a physiological range, recursive checkpointing for the backward
pass). The loss is the mean squared voltage error at a few recording sites along
the cable.

    python examples/fit_cable.py [--small] [--out fit_cable.png]

`--small` (CI) fits a 15-compartment cable over 20 ms; the default is 100
compartments over 50 ms.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import stable_ode as so
from stable_ode import transforms as tf


TRUE = {"gnabar": 0.12, "gkbar": 0.036, "gl": 0.0003}  # S/cm², NEURON's defaults
START = {"gnabar": 0.15, "gkbar": 0.028, "gl": 0.0004}  # +25 %, -22 %, +33 %
BOUNDS = {  # S/cm²
    "gnabar": tf.Bounded(0.05, 0.25),
    "gkbar": tf.Bounded(0.01, 0.08),
    "gl": tf.Bounded(5e-5, 1e-3),
}
SITES = (0.1, 0.3, 0.5, 0.7, 0.9)  # recording positions along the cable


def build_cable(n_compartments: int):
    """A 1 mm, 2 µm axon with `hh` everywhere, a 0.25 nA step into its left end
    from 2 ms to the end (a spike train), and recordings at `SITES`; float32."""
    cell = so.Cell(
        "axon",
        [so.Section("axon", 1000.0, 2.0, n_compartments)],
        [so.Insert(so.HH())],
        axial_resistivity=100.0,
    )
    return so.build(
        [cell],
        [so.StepCurrent(so.Site("axon", "axon", 0.0), 0.25, 2.0, 1e3)],
        [so.Recording(f"x={x}", so.Site("axon", "axon", x)) for x in SITES],
        dtype=jnp.float32,
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--small", action="store_true", help="small cable (CI smoke test)")
    p.add_argument("--out", default="fit_cable.png")
    p.add_argument("--steps", type=int, default=None, help="Adam iterations")
    args = p.parse_args(argv)
    import optax
    from tqdm import tqdm

    n = 15 if args.small else 100
    t1 = 20.0 if args.small else 50.0
    dt = 0.025
    n_steps = round(t1 / dt)
    # Nested levels as in Jaxley's `checkpoint_lengths`: 800 = 20·40, 2000 = 40·50.
    levels = (20, 40) if args.small else (40, 50)
    iterations = args.steps or (150 if args.small else 300)

    model = build_cable(n)
    names = tuple(TRUE)
    spec = so.Trainable()
    for name in names:
        spec = spec.mechanism(so.HH, name)  # one value for the whole cable
    transforms = tuple(BOUNDS[k] for k in names)

    def simulate(params):
        sol = so.simulate(
            spec.apply(model, params),
            t1,
            dt,
            solver=so.BackwardEuler(),
            adjoint=so.Checkpointing(levels=levels),
        )
        return jnp.stack([sol.recordings[f"x={x}"] for x in SITES])

    def as_params(values):
        return tuple(jnp.asarray([values[k]], jnp.float32) for k in names)

    target = jax.jit(simulate)(as_params(TRUE))

    def loss(x):
        v = simulate(tf.forward(transforms, x))
        return jnp.mean((v - target) ** 2) / 100.0  # (10 mV)² units

    # Adam with a cosine-decaying step: large steps first, then settle.
    # Constant-step Adam. Gradients in float32 carry rounding noise of ~1e-3 (in
    # x); near the optimum the loss has a shallow valley (gNa and gK raised
    # together; Hessian condition number ~5e3 at --small) along which the true
    # gradient 1 % away from the optimum is of that size, so the fit stalls about
    # 1 % from the true gNa and gK (gl ~0.01 %). Decaying the step, other Adam
    # variants or a hyperpolarising pre-pulse did not get closer at --small.
    optimiser = optax.adam(0.02)

    @jax.jit
    def step(x, opt_state):
        value, grads = jax.value_and_grad(loss)(x)
        updates, opt_state = optimiser.update(grads, opt_state, x)
        return optax.apply_updates(x, updates), opt_state, value

    x = tf.inverse(transforms, as_params(START))
    opt_state = optimiser.init(x)
    losses = []
    tic = time.perf_counter()
    with tqdm(range(iterations), desc="fit_cable", unit="it") as bar:
        for _ in bar:
            x, opt_state, value = step(x, opt_state)
            losses.append(float(value))
            bar.set_postfix(loss=f"{losses[-1]:.3g}")
    print(
        f"{n} compartments, {t1} ms, float32, Checkpointing(levels={list(levels)}): "
        f"{iterations} Adam steps in {time.perf_counter() - tic:.1f} s "
        "(first one compiles)"
    )
    final_loss = float(jax.jit(loss)(x))
    fitted = {k: float(v[0]) for k, v in zip(names, tf.forward(transforms, x))}
    print(f"loss: {losses[0]:.4g} -> {final_loss:.4g} ((10 mV)²)")
    rel = {}
    for k in names:
        rel[k] = abs(fitted[k] - TRUE[k]) / TRUE[k]
        print(
            f"  {k:7s} start {START[k]:.5g}  fitted {fitted[k]:.5g}  "
            f"true {TRUE[k]:.5g}  relative error {rel[k]:.2e} "
            f"(start {abs(START[k] - TRUE[k]) / TRUE[k]:.2e})"
        )
    tol = 0.02
    recovered = all(r < tol for r in rel.values())
    print(f"recovered all three to within {tol:.0%}: {recovered}")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: pip install 'stable_ode[plot]' for the figure")
    else:
        v_fit = jax.jit(simulate)(tf.forward(transforms, x))
        v_start = jax.jit(simulate)(as_params(START))
        ts = np.arange(n_steps + 1) * dt
        fig, (a0, a1) = plt.subplots(1, 2, figsize=(11, 3.8))
        a0.semilogy(losses)
        a0.set(xlabel="Adam step", ylabel="loss ((10 mV)²)", title="loss")
        for i, (xs, c) in enumerate(zip(SITES, plt.cm.viridis(np.linspace(0, 0.9, 5)))):
            lab = dict(label=f"x={xs}") if i in (0, len(SITES) - 1) else {}
            a1.plot(ts, target[i], color=c, lw=3, alpha=0.35)
            a1.plot(ts, v_fit[i], color=c, lw=1, **lab)
            if i == len(SITES) - 1:
                a1.plot(ts, v_start[i], "k:", lw=1, label=f"start, x={xs}")
        a1.set(
            xlabel="t (ms)",
            ylabel="v (mV)",
            title=f"target (thick) vs fitted (thin), {n} compartments",
        )
        a1.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.out, dpi=100)
        plt.close(fig)
        print("wrote", args.out)
    if not recovered:
        raise SystemExit(
            "fit_cable: parameters not recovered to within "
            f"{tol:.0%}: relative errors {rel}"
        )


if __name__ == "__main__":
    main()
