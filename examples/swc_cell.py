"""A reconstructed morphology from an SWC file: a spike in the soma and its
passive spread into the dendrites.

The cell is `examples/data/pyramidal.swc` (a small hand-drawn pyramidal-like
neuron: three-point soma, apical trunk with an oblique branch and a two-branch
tuft, two basal stems that each bifurcate, a 200 µm axon stub). `so.load_swc`
turns it into sections (`soma`, `axon_0`, `dend_k`, `apic_k`, compartments by
NEURON's d_lambda rule). NEURON's `hh` is inserted in the soma and the axon, a
passive leak (`pas`, 1e-4 S/cm², -65 mV) in the dendrites; Ra 100 Ω·cm,
cm 1 µF/cm². A current step (nA) into the soma makes it spike; the spike
spreads passively, attenuated and delayed, into the dendrites.

The model is simulated twice: `CrankNicolson` on a fixed 0.025 ms grid, and
`CrankNicolson` with an adaptive step (`diffrax.PIDController`, rtol = atol =
1e-5, inside `so.NonFiniteRejecting`). It prints the compartment count, the spike
times at the soma, the peak voltage (mV) at the soma and at the tip of the apical
tuft for both runs, and the adaptive run's step count. Figure: soma and
distal-dendrite voltages (mV vs ms), and the morphology (x/y from the SWC, µm)
coloured by each compartment's peak voltage.

    python examples/swc_cell.py [--small] [--out swc_cell.png] [--swc FILE]

`--small` (CI): 20 ms, d_lambda 0.1 (49 compartments); default: 60 ms,
d_lambda 0.02 (185 compartments).
"""

import argparse
import pathlib

import diffrax as dfx
import jax
import numpy as np

import stable_ode as so


SWC = pathlib.Path(__file__).parent / "data" / "pyramidal.swc"
DISTAL = ("apic_3", 1.0)  # the tip of one tuft branch
AMPLITUDE = 0.4  # nA, into the soma
DELAY = 2.0  # ms


def swc_segments(path, cell):
    """The SWC file's segments, each as `(xy_start, xy_end, section, position)`
    with `position` the segment midpoint's fractional position along `section`.

    Sections are re-derived with `so.load_swc`'s rule (unbranched runs of one
    type, named by type in breadth-first order from the soma, `soma="single"`)
    and checked against `cell`'s section lengths, so the colouring cannot
    silently attach to the wrong section. `load_swc` does not return this
    point-to-section map itself.
    """
    data = np.loadtxt(path, comments="#", ndmin=2)
    ids = data[:, 0].astype(int)
    types = dict(zip(ids, data[:, 1].astype(int)))
    xyz = dict(zip(ids, data[:, 2:5]))
    parent = dict(zip(ids, data[:, 6].astype(int)))
    children = {i: [] for i in ids}
    for i in ids:
        if parent[i] != -1:
            children[parent[i]].append(i)
    names = {1: "soma", 2: "axon", 3: "dend", 4: "apic"}
    soma_ids = [i for i in ids if types[i] == 1]
    queue = [(c, True) for p in soma_ids for c in children[p] if types[c] != 1]
    counts: dict[str, int] = {}
    segments = []
    lengths = {s.name: s.length for s in cell.sections}
    while queue:
        first, from_soma = queue.pop(0)
        run = [first]
        while (
            len(children[run[-1]]) == 1 and types[children[run[-1]][0]] == types[first]
        ):
            run.append(children[run[-1]][0])
        base = names.get(types[first], f"type{types[first]}")
        name = f"{base}_{counts.get(base, 0)}"
        counts[base] = counts.get(base, 0) + 1
        pts = [parent[first]] + run
        seg = [np.linalg.norm(xyz[b] - xyz[a]) for a, b in zip(pts[:-1], pts[1:])]
        # A neurite leaving the soma starts at its own first point (the piece
        # from the soma point lies inside the soma), unless it has only one.
        skip = 1 if from_soma and len(run) > 1 else 0
        total = float(np.sum(seg[skip:]))
        if not np.isclose(total, lengths.get(name, np.nan), rtol=1e-9):
            raise RuntimeError(
                f"section {name!r}: length {total} µm from the SWC walk, "
                f"{lengths.get(name)} µm from load_swc; the section rule changed"
            )
        s = -seg[0] if skip else 0.0
        for a, b, length in zip(pts[:-1], pts[1:], seg):
            mid = min(max((s + length / 2) / total, 0.0), 1.0)
            segments.append((xyz[a][:2], xyz[b][:2], name, mid))
            s += length
        queue.extend((c, False) for c in children[run[-1]])
    if counts and sum(counts.values()) != len(cell.sections) - 1:
        raise RuntimeError("the SWC walk and load_swc disagree on the sections")
    return segments


SPIKE_THRESHOLD = -20.0
"""mV. The soma's later spikes peak near -10 mV (the soma is loaded by the
dendrites), so a spike is an upward crossing of -20 mV rather than 0."""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--small", action="store_true", help="short run (CI smoke test)")
    p.add_argument("--out", default="swc_cell.png")
    p.add_argument("--swc", default=str(SWC), help="SWC file (default: %(default)s)")
    args = p.parse_args(argv)
    jax.config.update("jax_enable_x64", True)
    t1 = 20.0 if args.small else 60.0
    d_lambda = 0.1 if args.small else 0.02

    shape = so.load_swc(args.swc, name="cell", d_lambda=d_lambda)
    excitable = [s.name for s in shape.sections if s.name.startswith(("soma", "axon"))]
    passive = [s.name for s in shape.sections if s.name not in excitable]
    cell = so.load_swc(
        args.swc,
        name="cell",
        d_lambda=d_lambda,
        axial_resistivity=100.0,
        mechanisms=[
            so.Insert(so.HH(), excitable),
            so.Insert(so.Passive(g=1e-4, e=-65.0), passive),
        ],
    )
    distal = DISTAL if args.swc == str(SWC) else (shape.sections[-1].name, 1.0)
    # No named recordings: `recordings["v"]` holds every compartment.
    model = so.build(
        [cell], [so.StepCurrent(so.Site("cell", "soma"), AMPLITUDE, DELAY, t1)]
    )
    i_soma = model.index("cell", "soma")
    i_distal = model.index("cell", *distal)
    print(
        f"{args.swc}: {len(cell.sections)} sections, "
        f"{len(model.layout.compartments)} compartments "
        f"(d_lambda {d_lambda}); hh in {excitable}, pas in {len(passive)} sections"
    )

    # Under `jax.jit` the model is closed over, not an argument: an adaptive
    # solve reads the stimulus edges (its jump times) as concrete numbers.
    runs = {
        "fixed dt 0.025 ms": jax.jit(
            lambda: so.simulate(model, t1, 0.025, solver=so.CrankNicolson())
        )(),
        "adaptive (rtol=atol=1e-5)": jax.jit(
            lambda: so.simulate(
                model,
                t1,
                0.025,
                solver=so.CrankNicolson(),
                controller=dfx.PIDController(rtol=1e-5, atol=1e-5),
                save_dt=0.025,
            )
        )(),
    }
    for label, sol in runs.items():
        t = np.asarray(sol.ts)
        v = np.asarray(sol.recordings["v"])
        spikes = so.spike_times(t, v[:, i_soma], SPIKE_THRESHOLD)
        print(
            f"CrankNicolson, {label}: {int(sol.stats['num_steps'])} steps "
            f"({int(sol.stats['num_rejected'])} rejected); soma spikes at "
            f"{np.round(spikes, 3).tolist()} ms; peak v soma "
            f"{v[:, i_soma].max():.1f} mV, {distal[0]}({distal[1]}) "
            f"{v[:, i_distal].max():.1f} mV"
        )
    fixed, adaptive = (np.asarray(s.recordings["v"]) for s in runs.values())
    t = np.asarray(runs["fixed dt 0.025 ms"].ts)
    s_fixed, s_adaptive = (
        so.spike_times(t, v[:, i_soma], SPIKE_THRESHOLD) for v in (fixed, adaptive)
    )
    if len(s_fixed) == len(s_adaptive):
        shift = f"{np.abs(s_fixed - s_adaptive).max():.4f} ms"
    else:
        shift = f"different spike counts ({len(s_fixed)} vs {len(s_adaptive)})"
    print(
        f"fixed vs adaptive: soma spike times differ by at most {shift}; largest "
        "voltage difference (any compartment, any time) "
        f"{np.abs(fixed - adaptive).max():.2f} mV"
    )

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.collections import LineCollection
    except ImportError:
        print("matplotlib missing: pip install 'stable_ode[plot]' for the figure")
        return
    peak = fixed.max(axis=0)
    fig, (a0, a1) = plt.subplots(
        1, 2, figsize=(11, 4.5), gridspec_kw=dict(width_ratios=(1.3, 1))
    )
    for i, label, c in ((i_soma, "soma", "C0"), (i_distal, "{}({})", "C1")):
        label = label.format(*distal)
        a0.plot(t, fixed[:, i], color=c, label=f"{label}, fixed dt")
        a0.plot(t, adaptive[:, i], color=c, ls="--", lw=1, label=f"{label}, adaptive")
    a0.set(xlabel="t (ms)", ylabel="v (mV)", title="CrankNicolson")
    a0.legend(fontsize=7)

    segments = swc_segments(args.swc, shape)
    lines = [np.stack([a, b]) for a, b, _, _ in segments]
    colour = [peak[model.index("cell", sec, x)] for _, _, sec, x in segments]
    norm = plt.Normalize(peak.min(), peak.max())
    lc = LineCollection(lines, cmap="plasma", norm=norm, linewidths=2)
    lc.set_array(np.asarray(colour))
    a1.add_collection(lc)
    soma_r = shape.section("soma").diameter / 2
    centre = np.loadtxt(args.swc, comments="#", ndmin=2)[0, 2:4]
    a1.add_patch(
        plt.Circle(centre, soma_r, color=plt.get_cmap("plasma")(norm(peak[i_soma])))
    )
    a1.autoscale()
    a1.set_aspect("equal")
    a1.set(xlabel="x (µm)", ylabel="y (µm)", title="peak voltage")
    fig.colorbar(lc, ax=a1, label="peak v (mV)")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    plt.close(fig)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
