"""Network speed against Jaxley.

    python -m benchmarks.network [--quick] [--dtype float32|float64|both]

The network: 100 HH point neurons (one compartment each, length = diameter =
20 µm, NEURON's `hh` at 6.3 °C, cm = 1 µF/cm², v_init = -65 mV with gates at
steady state) and 1,000 graded `IonotropicSynapse`s (Abbott & Marder; Jaxley's
defaults except gmax = 5e-4 µS) between random pairs of distinct neurons (seed
0); a 0.1 nA step from 5 ms for 40 ms into the first 10 neurons; 100 ms at
dt = 0.025 ms, recording every neuron's voltage at every step.

Ours: `simulate(..., solver=BackwardEuler())`, synapse states by exponential
Euler, against Jaxley's `bwd_euler` (`jx.connect` per synapse). Jaxley starts
the synapse state at 0.2; it is set to ours, the steady state at v_init. The
traces are compared (`max |Δv|`): the two schemes update the synapse state
at slightly different points of the step, so they agree closely, not to
rounding. Conventions as `benchmarks/forward.py`. No NEURON column: NEURON has
no built-in graded (Abbott–Marder) synapse, and an NMODL one would need
compiling with `nrnivmodl`. Also printed: our Python
build time (`stable_ode.build`) for 1,000 neurons and 10,000 synapses.
"""

import argparse
import os
import time

import numpy as np

from .forward import _dtype


N_CELLS, N_SYN, N_STIM = 100, 1000, 10
GMAX = 5e-4  # µS
AMPLITUDE, DELAY, DURATION = 0.1, 5.0, 40.0  # nA, ms, ms
T_MAX, DT, V_INIT, CELSIUS = 100.0, 0.025, -65.0, 6.3
SIZE = 20.0  # µm


def pairs(n_cells: int, n_syn: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random (pre, post) neuron indices, pre != post."""
    rng = np.random.default_rng(seed)
    pre = rng.integers(0, n_cells, n_syn)
    post = (pre + rng.integers(1, n_cells, n_syn)) % n_cells
    return pre, post


def build_ours(
    n_cells: int,
    n_syn: int,
    dtype,
    connections: tuple[np.ndarray, np.ndarray] | None = None,
    record: bool = True,
):
    """The stable_ode network (cell `k` is compartment `k`): synapses between
    `connections = (pre, post)` cell indices (default `pairs(n_cells, n_syn)`); a
    recording `n{k}` of every cell, or none with `record=False` (`simulate` then
    returns every compartment's voltage as `"v"`)."""
    import stable_ode as so

    cells = [
        so.Cell(f"n{k}", [so.Section("soma", SIZE, SIZE, 1)], [so.Insert(so.HH())])
        for k in range(n_cells)
    ]
    pre, post = pairs(n_cells, n_syn) if connections is None else connections
    conn = so.Connections(so.IonotropicSynapse(gmax=GMAX), pre, post)
    stims = [
        so.StepCurrent(so.Site(f"n{k}", "soma", 0.5), AMPLITUDE, DELAY, DURATION)
        for k in range(min(N_STIM, n_cells))
    ]
    recs = [
        so.Recording(f"n{k}", so.Site(f"n{k}", "soma", 0.5))
        for k in range(n_cells if record else 0)
    ]
    return so.build(
        cells, stims, recs, [conn], celsius=CELSIUS, v_init=V_INIT, dtype=dtype
    )


def build_jaxley(
    s_init: float,
    n_cells: int = N_CELLS,
    n_syn: int = N_SYN,
    t_max: float = T_MAX,
    connections: tuple[np.ndarray, np.ndarray] | None = None,
):
    """The Jaxley network of `build_ours` (dtype follows JAX's x64 flag), every
    cell recorded."""
    import jaxley as jx
    from jaxley.channels import HH
    from jaxley.synapses import IonotropicSynapse

    comp = jx.Compartment()
    cell = jx.Cell(jx.Branch(comp, 1), parents=[-1])
    net = jx.Network([cell for _ in range(n_cells)])
    pre, post = pairs(n_cells, n_syn) if connections is None else connections
    # One compartment per cell: node index = cell index. One `connect` for all
    # synapses (pairwise, in order): a `connect` per synapse took ~50 s of pandas
    # work for 1,000 synapses.
    jx.connect(
        net.select(nodes=[int(i) for i in pre]),
        net.select(nodes=[int(j) for j in post]),
        IonotropicSynapse(),
    )
    edges = net.edges[["pre_index", "post_index"]].to_numpy()
    assert np.array_equal(edges, np.stack([pre, post], axis=1)), "Jaxley edges"
    net.set("length", SIZE)
    net.set("radius", SIZE / 2)
    net.set("capacitance", 1.0)
    net.insert(HH())
    net.set("v", V_INIT)
    net.init_states()
    net.IonotropicSynapse.set("IonotropicSynapse_gS", GMAX)
    net.IonotropicSynapse.set("IonotropicSynapse_s", s_init)
    current = jx.step_current(DELAY, DURATION, AMPLITUDE, DT, t_max)
    net.select(nodes=list(range(min(N_STIM, n_cells)))).stimulate(
        current, verbose=False
    )
    net.select(nodes=list(range(n_cells))).record("v", verbose=False)
    return net


def run(
    dtype_name: str,
    repeats: int,
    n_cells: int = N_CELLS,
    n_syn: int = N_SYN,
    t_max: float = T_MAX,
) -> dict:
    """Time ours against Jaxley (if installed) in this process's dtype (ms, mV;
    `forward.compare`'s row). No NEURON: it has no built-in graded synapse."""
    import jax
    import jax.numpy as jnp

    import stable_ode as so

    from ._common import have_jaxley
    from .forward import compare

    dtype = _dtype(dtype_name)
    model = build_ours(n_cells, n_syn, dtype)
    names = [name for name, _ in model.layout.recordings]

    @jax.jit
    def ours(m):
        sim = so.simulate(m, t_max, DT, solver=so.BackwardEuler())
        # one saved array, recordings × samples (slicing each named recording
        # out inside the jit would add one kernel per recording)
        assert sim.recordings.names == tuple(names)
        return sim.recordings.saved.T

    jaxley = None
    if have_jaxley():
        import jaxley as jx

        s_init = float(model.init_state().groups[len(model.mechanisms)]["s"][0])
        net = build_jaxley(s_init, n_cells, n_syn, t_max)

        @jax.jit
        def theirs(p):
            return jx.integrate(net, p, t_max=t_max, delta_t=DT, solver="bwd_euler")

        jaxley = ("bwd_euler", theirs, (net.get_parameters(),))
    row = compare(
        f"{n_cells} HH point neurons, {n_syn} synapses, {t_max:g} ms",
        dtype_name, "BackwardEuler", ours, (model,), jaxley, None, repeats,
    )  # fmt: skip
    v_ours = ours(model)
    row["spikes"] = int(jnp.sum((v_ours[:, 1:] > 0) & (v_ours[:, :-1] <= 0)))
    return row


def build_time(n_cells: int = 1000, n_syn: int = 10000, repeats: int = 3) -> float:
    """Median wall time (s) of `stable_ode.build` for `n_cells` point neurons and
    `n_syn` synapses given as index arrays (cells constructed before timing)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        build_ours(n_cells, n_syn, None)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def compile_time(n_cells: int, n_syn: int, dtype_name: str, t_max: float) -> dict:
    """Build and compile (no run) `simulate` of `n_cells` point neurons with
    `n_syn` synapses and a named recording of every cell, `t_max` ms: seconds for
    the Python build, the trace (`jax.jit(...).lower`) and XLA's compile."""
    import jax

    import stable_ode as so

    start = time.perf_counter()
    model = build_ours(n_cells, n_syn, _dtype(dtype_name))
    built = time.perf_counter()

    def ours(m):
        return so.simulate(m, t_max, DT, solver=so.BackwardEuler()).recordings

    lowered = jax.jit(ours).lower(model)
    traced = time.perf_counter()
    lowered.compile()
    done = time.perf_counter()
    return dict(
        cells=n_cells, synapses=n_syn, recordings=n_cells, t_max=t_max,
        dtype=dtype_name, build_s=built - start, trace_s=traced - built,
        compile_s=done - traced,
    )  # fmt: skip


def compile_rows(dtype_name: str, small: int = 10, large: int = 1000) -> list[dict]:
    """`compile_time` of the `small`- and `large`-cell networks (10 synapses per
    cell, 20 ms), each with the large one's times over the small one's: compile
    time should not grow with the number of cells, synapses or recordings."""
    rows = [compile_time(n, 10 * n, dtype_name, 20.0) for n in (small, large)]
    for row in rows:
        for key in ("build_s", "trace_s", "compile_s"):
            row[key.replace("_s", "_ratio")] = row[key] / rows[0][key]
    return rows


def print_compile(rows: list[dict]) -> None:
    print("| cells | synapses | recordings | dtype | build / trace / compile "
          "(× the smallest) |")  # fmt: skip
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['cells']} | {r['synapses']} | {r['recordings']} | {r['dtype']} | "
            f"{r['build_ratio']:.2f} / {r['trace_ratio']:.2f} / "
            f"{r['compile_ratio']:.2f} |",
            flush=True,
        )


def run_dtype(dtype_name: str, mode: str) -> None:
    import jax

    from ._common import emit
    from .forward import print_rows

    jax.config.update("jax_enable_x64", dtype_name == "float64")
    repeats = {"full": 11, "quick": 3, "smoke": 1}[mode]
    print(
        f"# {dtype_name}: jax {jax.__version__}, {jax.default_backend()}, "
        f"{os.cpu_count()} CPUs, median of {repeats} calls after compilation",
        flush=True,
    )
    if mode == "smoke":
        row = run(dtype_name, repeats, n_cells=10, n_syn=30, t_max=10.0)
    else:
        row = run(dtype_name, repeats)
    print_rows([row])
    print(f"(spikes in our run: {row['spikes']})", flush=True)
    emit("network", [row])
    # build + compile of 10 and 1,000 cells, every cell recorded (also in the
    # smoke run: the guard against compile time growing with the model)
    compiled = compile_rows(dtype_name)
    print_compile(compiled)
    emit("network_compile", compiled)
    if mode == "smoke":
        return
    print(
        f"build (Python, cells + connections + stimuli + recordings): "
        f"1000 neurons × 10000 synapses: {build_time():.3f} s",
        flush=True,
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.network", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="both"
    )
    parser.add_argument("--quick", action="store_true", help="3 timed calls")
    parser.add_argument(
        "--smoke", action="store_true", help="10 neurons, 10 ms, 1 call (a test)"
    )
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.dtype != "both":
        run_dtype(args.dtype, mode)
        return
    from ._common import run_each_dtype

    run_each_dtype("network", ["--quick"] * args.quick + ["--smoke"] * args.smoke)


if __name__ == "__main__":
    main()
