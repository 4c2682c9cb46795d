"""A network of HH point neurons: a wave of spikes around an excitatory ring,
held in check by gap-coupled inhibitory cells.

Cells are 20 µm HH somata (NEURON's `hh`, 6.3 °C). `n_exc` excitatory cells form
a ring: E_i excites E_{i+1} and E_{i+2} (`IonotropicSynapse`, e_syn 0 mV,
gmax 4e-3 and 2e-3 µS). Each of `n_inh` inhibitory cells is excited by 4
randomly chosen excitatory cells (gmax 2e-3 µS); each excitatory cell is
inhibited by one randomly chosen inhibitory cell (e_syn -80 mV, gmax 3e-3 µS,
slower decay k_minus 0.01 /ms). Neighbouring inhibitory cells are joined by gap
junctions (1e-3 µS). A 0.3 nA step into E_0 for 3 ms starts the wave. The
connectivity is random with a fixed seed. Each kind of synapse is one vectorised
group; the gap junctions are solved implicitly with the axial coupling.

Forward simulation only (training synaptic weights is `train_network.py`),
float64, `BackwardEuler`, dt 0.025 ms. It prints the network size, each cell's
spike count, the wave's time to go once around the ring, and the excitatory
spike count of the same network with the inhibitory weights set to 0 (by
`eqx.tree_at` on the built model, reusing the compiled simulation). Figure: spike raster
(ms) and the voltages (mV) of a few cells.

    python examples/network.py [--small] [--out network.png]

`--small` (CI): 8 excitatory + 2 inhibitory cells, 60 ms; default: 40 + 10
cells, 300 ms.
"""

import argparse

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import stable_ode as so


def build_network(n_exc: int, n_inh: int, seed: int = 0):
    """The network described above; recordings `E0`.. and `I0`.. of every soma.
    Returns `(model, names)` with `names` the cells in raster order."""
    rng = np.random.default_rng(seed)
    exc = [f"E{i}" for i in range(n_exc)]
    inh = [f"I{i}" for i in range(n_inh)]
    names = exc + inh
    cells = [
        so.Cell(k, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for k in names
    ]
    site = {k: so.Site(k, "soma") for k in names}
    # Excitatory ring: i -> i+1 (strong) and i -> i+2 (weaker).
    ring_pre = [site[exc[i]] for i in range(n_exc)] * 2
    ring_post = [site[exc[(i + 1) % n_exc]] for i in range(n_exc)] + [
        site[exc[(i + 2) % n_exc]] for i in range(n_exc)
    ]
    ring_gmax = np.r_[np.full(n_exc, 4e-3), np.full(n_exc, 2e-3)]  # µS
    # Fixed in-degrees (so the resting synaptic drive does not grow with size):
    # each inhibitory cell hears 4 excitatory cells, each excitatory cell 1
    # inhibitory cell, chosen at random.
    e_to_i = [(a, b) for b in range(n_inh) for a in rng.choice(n_exc, 4, False)]
    i_to_e = [(rng.integers(n_inh), b) for b in range(n_exc)]
    connections = [
        so.Connections(
            so.IonotropicSynapse(gmax=ring_gmax, e_syn=0.0),
            ring_pre,
            ring_post,
            name="ring",
        ),
        so.Connections(
            so.IonotropicSynapse(gmax=2e-3, e_syn=0.0),
            [site[exc[a]] for a, _ in e_to_i],
            [site[inh[b]] for _, b in e_to_i],
            name="E->I",
        ),
        so.Connections(
            so.IonotropicSynapse(gmax=3e-3, e_syn=-80.0, k_minus=0.01),
            [site[inh[a]] for a, _ in i_to_e],
            [site[exc[b]] for _, b in i_to_e],
            name="I->E",
        ),
    ]
    if n_inh > 1:
        connections.append(
            so.Connections(
                so.GapJunction(g=1e-3),
                [site[inh[i]] for i in range(n_inh - 1)],
                [site[inh[i + 1]] for i in range(n_inh - 1)],
                name="gap",
            )
        )
    model = so.build(
        cells,
        [so.StepCurrent(site["E0"], 0.3, 2.0, 3.0)],
        [so.Recording(k, s) for k, s in site.items()],
        connections,
    )
    n_syn = len(ring_pre) + len(e_to_i) + len(i_to_e)
    return model, names, n_syn, max(n_inh - 1, 0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--small", action="store_true", help="small network (CI smoke test)")
    p.add_argument("--out", default="network.png")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    n_exc, n_inh = (8, 2) if args.small else (40, 10)
    t1 = 60.0 if args.small else 300.0

    model, names, n_syn, n_gap = build_network(n_exc, n_inh)
    print(
        f"{n_exc} excitatory + {n_inh} inhibitory HH cells, {n_syn} synapses, "
        f"{n_gap} gap junctions; {t1} ms"
    )
    run = jax.jit(lambda m: so.simulate(m, t1, 0.025, solver=so.BackwardEuler()))
    sol = run(model)
    t = np.asarray(sol.ts)
    spikes = {k: so.spike_times(t, np.asarray(sol.recordings[k])) for k in names}
    counts = {k: len(s) for k, s in spikes.items()}
    print("spike counts:", " ".join(f"{k}:{n}" for k, n in counts.items()))
    total_exc = sum(counts[k] for k in names[:n_exc])
    total_inh = sum(counts[k] for k in names[n_exc:])
    print(
        f"excitatory: {total_exc} spikes ({total_exc / n_exc / t1 * 1e3:.1f} Hz per "
        f"cell); inhibitory: {total_inh} ({total_inh / n_inh / t1 * 1e3:.1f} Hz)"
    )
    # The same network without inhibition: set the I->E weights to 0 (same
    # shapes, so the jitted function is reused without recompiling).
    k_inh = [g.name for g in model.synapses].index("I->E")
    no_inh = eqx.tree_at(
        lambda m: m.synapses[k_inh].synapse.gmax,
        model,
        jnp.zeros_like(model.synapses[k_inh].synapse.gmax),
    )
    sol_no_inh = run(no_inh)
    exc_no_inh = sum(
        len(so.spike_times(t, np.asarray(sol_no_inh.recordings[k])))
        for k in names[:n_exc]
    )
    print(
        f"without I->E inhibition: {exc_no_inh} excitatory spikes "
        f"({exc_no_inh / n_exc / t1 * 1e3:.1f} Hz per cell)"
    )
    first = [s[0] if len(s) else np.nan for s in (spikes[k] for k in names[:n_exc])]
    if len(spikes["E0"]) > 1 and np.all(np.isfinite(first)):
        lap = spikes["E0"][1] - spikes["E0"][0]
        print(
            f"wave: E{n_exc - 1} first fires {first[-1] - first[0]:.2f} ms after E0; "
            f"E0 fires again {lap:.2f} ms later (once around the ring)"
        )
    else:
        print("wave: did not go once around the ring")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: pip install 'stable_ode[plot]' for the figure")
        return
    fig, (a0, a1) = plt.subplots(
        2, 1, figsize=(9, 6), sharex=True, gridspec_kw=dict(height_ratios=(1.3, 1))
    )
    for row, k in enumerate(names):
        a0.plot(
            spikes[k],
            np.full(len(spikes[k]), row),
            "|",
            color="C3" if k.startswith("E") else "C0",
            ms=6,
        )
    a0.set(ylabel="cell", title="spike raster (red: excitatory, blue: inhibitory)")
    rows = [i for i, k in enumerate(names) if len(names) <= 12 or int(k[1:]) % 10 == 0]
    a0.set_yticks(rows, [names[i] for i in rows], fontsize=7)
    a0.invert_yaxis()
    shown = ["E0", f"E{n_exc // 2}", "I0"] + (["I1"] if n_inh > 1 else [])
    for k in shown:
        a1.plot(t, sol.recordings[k], lw=1, label=k)
    a1.set(xlabel="t (ms)", ylabel="v (mV)")
    a1.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    plt.close(fig)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
