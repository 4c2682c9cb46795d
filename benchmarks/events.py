"""Spike-triggered synapses against NEURON: a network of HH cells whose `Exp2Syn`s
are driven by threshold `NetCon`s with delays.

    python -m benchmarks.events [--quick | --smoke]
    python -m benchmarks.events --scale CELLS NETCONS   # one build + compile, JSON

The network: 100 HH point neurons (one compartment each, length = diameter =
20 µm, NEURON's `hh` at 6.3 °C, v_init = -65 mV), one `Exp2Syn` per cell (tau1
0.5 ms, tau2 3 ms, e 0 mV) and 1,000 `NetCon`s from random presynaptic cells'
voltage (threshold -20 mV) onto random other cells' synapses, delays uniform in
1–5 ms, weight 0.5 nS (seed 0); a constant 0.2 nA `IClamp` into the first 10
cells from 5 ms on keeps the network firing. 1 s at dt = 0.025 ms (`--quick`:
200 ms), recording every cell's spike times and nothing else.

Ours: `simulate(..., solver=BackwardEuler())`, jitted; NEURON: its fixed step
(`secondorder = 0`, `usetable_hh = 0`), `ParallelContext.psolve`, spikes recorded
with `NetCon.record`. Timed interleaved, ours then NEURON, median of the timed
calls. The two fixed steps differ by rule in when a spike is detected and
delivered (`tests/events/test_network_neuron.py`), so the spike counts are
printed side by side, not asserted equal.

`--scale`: the Python build, the trace and XLA's compile of 1,000 cells and
100,000 NetCons (`--quick`: 10,000), each size in its own process for its peak
RSS, against 10 cells and 100 NetCons (`--smoke`: the small one only).
"""

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


N_CELLS, N_NETCONS, N_DRIVEN = 100, 1000, 10
TAU1, TAU2, E_SYN, WEIGHT = 0.5, 3.0, 0.0, 5e-4  # ms, ms, mV, µS
DELAY_RANGE, THRESHOLD = (1.0, 5.0), -20.0  # ms, mV
AMP, START = 0.2, 5.0  # nA, ms
DT, V_INIT, CELSIUS, SIZE = 0.025, -65.0, 6.3, 20.0  # ms, mV, °C, µm


def connections(n_cells: int, n_netcons: int, seed: int = 0):
    """Random `(pre, post, delay)`: pre != post, delays uniform in `DELAY_RANGE`."""
    rng = np.random.default_rng(seed)
    pre = rng.integers(0, n_cells, n_netcons)
    post = (pre + rng.integers(1, n_cells, n_netcons)) % n_cells
    return pre, post, rng.uniform(*DELAY_RANGE, n_netcons)


def build_ours(n_cells: int, n_netcons: int, t_max: float):
    """The stable_ode model and the names of its spike recordings."""
    import stable_ode as so

    def site(k):
        return so.Site(f"n{k}", "soma", 0.5)

    cells = [
        so.Cell(f"n{k}", [so.Section("soma", SIZE, SIZE, 1)], [so.Insert(so.HH())])
        for k in range(n_cells)
    ]
    syns = [
        so.Exp2Syn(site(k), tau1=TAU1, tau2=TAU2, e=E_SYN, name=f"syn{k}")
        for k in range(n_cells)
    ]
    drive = [
        so.IClamp(site(k), delay=START, dur=t_max, amp=AMP, name=f"drive{k}")
        for k in range(min(N_DRIVEN, n_cells))
    ]
    pre, post, delay = connections(n_cells, n_netcons)
    netcons = [
        so.NetCon(site(int(i)), syns[int(j)], float(d), WEIGHT, threshold=THRESHOLD)
        for i, j, d in zip(pre, post, delay)
    ]
    spikes = [
        so.SpikeRecording(f"n{k}", site(k), threshold=THRESHOLD, max_spikes=int(t_max))
        for k in range(n_cells)
    ]
    model = so.build(
        cells,
        recordings=spikes,
        point_processes=syns + drive,
        netcons=netcons,
        celsius=CELSIUS,
        v_init=V_INIT,
    )
    return model, [s.name for s in spikes]


class NeuronNetwork:
    """The same network in NEURON; `run()` returns every cell's spike times."""

    def __init__(self, n_cells: int, n_netcons: int, t_max: float):
        from neuron import h

        h.load_file("stdrun.hoc")
        self.h, self.t_max = h, t_max
        self.secs = []
        for k in range(n_cells):
            s = h.Section(name=f"n{k}")
            s.L = s.diam = SIZE
            s.insert("hh")
            self.secs.append(s)
        self.syns = []
        for s in self.secs:
            syn = h.Exp2Syn(s(0.5))
            syn.tau1, syn.tau2, syn.e = TAU1, TAU2, E_SYN
            self.syns.append(syn)
        self.drive = []
        for s in self.secs[:N_DRIVEN]:
            ic = h.IClamp(s(0.5))
            ic.delay, ic.dur, ic.amp = START, t_max, AMP
            self.drive.append(ic)
        pre, post, delay = connections(n_cells, n_netcons)
        self.netcons = []
        for i, j, d in zip(pre, post, delay):
            src = self.secs[int(i)]
            nc = h.NetCon(src(0.5)._ref_v, self.syns[int(j)], sec=src)
            nc.threshold, nc.delay, nc.weight[0] = THRESHOLD, float(d), WEIGHT
            self.netcons.append(nc)
        self.spikes = []
        for s in self.secs:
            nc = h.NetCon(s(0.5)._ref_v, None, sec=s)
            nc.threshold = THRESHOLD
            vec = h.Vector()
            nc.record(vec)
            self.netcons.append(nc)
            self.spikes.append(vec)
        self.pc = h.ParallelContext()

    def run(self) -> list[np.ndarray]:
        h = self.h
        h.CVode().active(0)
        h.dt, h.secondorder, h.usetable_hh, h.celsius = DT, 0, 0, CELSIUS
        self.pc.set_maxstep(10)  # ms; psolve then steps to the least NetCon delay
        h.finitialize(V_INIT)
        self.pc.psolve(self.t_max)
        return [np.array(v) for v in self.spikes]


def run(t_max: float, repeats: int) -> dict:
    """Ours against NEURON (if installed), float64: one row."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import stable_ode as so

    from ._common import time_interleaved
    from ._neuron import have_neuron

    model, names = build_ours(N_CELLS, N_NETCONS, t_max)

    @jax.jit
    def ours(m):
        return so.simulate(m, t_max, DT, solver=so.BackwardEuler()).spikes

    fns, args = [ours], [(model,)]
    nrn = None
    if have_neuron():
        nrn = NeuronNetwork(N_CELLS, N_NETCONS, t_max)
        fns.append(lambda: nrn.run())
        args.append(())
    timed = time_interleaved(fns, args, repeats=repeats)
    spikes = timed[0][1]
    n_ours = int(sum(np.isfinite(np.asarray(spikes[k])).sum() for k in names))
    row = dict(
        case=f"{N_CELLS} HH cells, {N_NETCONS} Exp2Syn NetCons, {t_max:g} ms",
        dtype="float64", ours="BackwardEuler", ours_ms=timed[0][0].median * 1e3,
        ours_min_ms=timed[0][0].min * 1e3, ours_compile_s=timed[0][0].compile,
        ours_spikes=n_ours,
    )  # fmt: skip
    if nrn is not None:
        n_nrn = int(sum(len(v) for v in timed[1][1]))
        row |= dict(
            neuron="fixed, secondorder=0", neuron_ms=timed[1][0].median * 1e3,
            neuron_min_ms=timed[1][0].min * 1e3, neuron_spikes=n_nrn,
        )  # fmt: skip
    return row


def scale(n_cells: int, n_netcons: int, t_max: float = 20.0) -> dict:
    """Build, trace and compile (no run) `n_cells` cells with `n_netcons` NetCons,
    in this process: seconds and this process's peak RSS (MB)."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import stable_ode as so

    start = time.perf_counter()
    model, _ = build_ours(n_cells, n_netcons, t_max)
    built = time.perf_counter()

    def ours(m):
        return so.simulate(m, t_max, DT, solver=so.BackwardEuler()).spikes

    lowered = jax.jit(ours).lower(model)
    traced = time.perf_counter()
    lowered.compile()
    done = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return dict(
        cells=n_cells, netcons=n_netcons, t_max=t_max, build_s=built - start,
        trace_s=traced - built, compile_s=done - traced, peak_rss_mb=rss,
    )  # fmt: skip


def scale_rows(sizes) -> list[dict]:
    """`scale` of each `(cells, netcons)` in its own process."""
    rows = []
    for n, m in sizes:
        cmd = [sys.executable, "-m", "benchmarks.events", "--scale", str(n), str(m)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true")
    mode.add_argument("--smoke", action="store_true")
    mode.add_argument("--scale", nargs=2, type=int, metavar=("CELLS", "NETCONS"))
    a = parser.parse_args()
    if a.scale:
        print(json.dumps(scale(*a.scale)))
        return
    from ._common import emit, format_table

    global N_CELLS, N_NETCONS
    if a.smoke:
        N_CELLS, N_NETCONS = 10, 30
    t_max = 20.0 if a.smoke else 200.0 if a.quick else 1000.0
    row = run(t_max, repeats=1 if a.smoke else 3 if a.quick else 7)
    ratio = row["ours_ms"] / row["neuron_ms"] if "neuron_ms" in row else None
    print(
        format_table(
            ["case", "ours ms", "NEURON ms", "ours / NEURON", "spikes ours / NEURON"],
            [
                [
                    row["case"],
                    f"{row['ours_ms']:.1f}",
                    f"{row.get('neuron_ms', float('nan')):.1f}",
                    "—" if ratio is None else f"{ratio:.2f}",
                    f"{row['ours_spikes']} / {row.get('neuron_spikes', '—')}",
                ]
            ],
        ),  # fmt: skip
        flush=True,
    )
    emit("events", [row])
    large = (1000, 10_000) if a.quick else (1000, 100_000)
    rows = scale_rows([(10, 100)] if a.smoke else [(10, 100), large])
    for r in rows:
        print(
            f"{r['cells']} cells, {r['netcons']} NetCons: build {r['build_s']:.2f} s, "
            f"trace {r['trace_s']:.2f} s, compile {r['compile_s']:.2f} s, peak RSS "
            f"{r['peak_rss_mb']:.0f} MB",
            flush=True,
        )
    emit("events_scale", rows)


if __name__ == "__main__":
    main()
