"""An HH cable: a spike travelling along the axon, BackwardEuler vs CrankNicolson.

python examples/cable.py [--small] [--out cable.png]
"""

import argparse

import jax
import numpy as np

import stable_ode as so


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--small", action="store_true", help="small cable (CI smoke test)")
    p.add_argument("--out", default="cable.png")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    n = 20 if args.small else 100
    t1 = 20.0 if args.small else 50.0

    cell = so.Cell(
        "axon",
        [so.Section("axon", 1000.0, 2.0, n)],
        [so.Insert(so.HH())],
        axial_resistivity=100.0,
    )
    sites = {f"x={x}": so.Site("axon", "axon", x) for x in (0.0, 0.5, 1.0)}
    model = so.build(
        [cell],
        [so.StepCurrent(sites["x=0.0"], 0.5, 1.0, 2.0)],
        [so.Recording(k, s) for k, s in sites.items()],
    )
    sols = {
        type(s).__name__: so.simulate(model, t1, 0.025, solver=s)
        for s in (so.BackwardEuler(), so.CrankNicolson())
    }
    for name, sol in sols.items():
        t = np.asarray(sol.ts)
        peaks = {
            k: float(t[np.argmax(np.asarray(v))]) for k, v in sol.recordings.items()
        }
        print(f"{name}: peak times (ms) {peaks}")
        x0, x1 = peaks["x=0.0"], peaks["x=1.0"]
        if x1 > x0:
            print(f"  conduction velocity ≈ {1.0 / (x1 - x0):.3f} m/s")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: pip install 'stable_ode[plot]' for the figure")
        return
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for name, sol in sols.items():
        for k, v in sol.recordings.items():
            ax.plot(
                sol.ts,
                v,
                ls="-" if name == "BackwardEuler" else "--",
                label=f"{name} {k}",
            )
    ax.set(xlabel="t (ms)", ylabel="v (mV)", title=f"HH cable, {n} compartments")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
