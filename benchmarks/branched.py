"""Branched-cell speed against Jaxley.

    python -m benchmarks.branched [--quick] [--dtype float32|float64|both] [--profile]

The cell: a binary tree of 15 branches (Jaxley's `parents=[-1, 0, 0, 1, 1, ...]`),
each 80 µm long, 2 µm in diameter, 8 compartments (120 compartments), HH
everywhere (NEURON's `hh` at 6.3 °C), Ra = 100 Ω·cm, cm = 1 µF/cm²,
v_init = -65 mV with gates at steady state, a 0.5 nA step from 5 ms for 40 ms
into the first compartment of the root branch; 100 ms at dt = 0.025 ms,
recording the voltage at that compartment and at the far end of the last
branch at every step. Branch children attach at their parent's 1 end, so every
branch point is a membrane-less junction node (NEURON's discretisation; Jaxley
0.14 uses the same).

Ours: `simulate(..., solver=BackwardEuler())` (the tree solve: chains by one
batched `gtsv` + the reduced junction tree, `TreeSolver` with a `TreePlan`)
against Jaxley's `bwd_euler` (DHS solver, `jaxley.dhs.cpu`) and NEURON's fixed
step with `secondorder=0` (`benchmarks/_neuron.py`; the same scheme), each where
installed. Conventions as in
`benchmarks/forward.py`: jitted, parameters as arguments, one compiling call,
then the median of interleaved calls; `max |Δv|` checks that both computed
the same thing. Each dtype runs in its own subprocess (x64 is global).
`--profile` adds where our time goes (µs per step and loop kernels).
"""

import argparse
import os

from ._models import build_tree_jaxley, describe_tree, DT, V_INIT
from .forward import _dtype


N_BRANCHES = 15  # a binary tree: Jaxley's parents [-1, 0, 0, 1, 1, ...]
N_COMP = 8  # compartments per branch (80 µm × 2 µm, `_models.TREE_BRANCH`)
CELSIUS = 6.3  # °C
AMPLITUDE = 0.5  # nA, from 5 ms for 40 ms (3 spikes)
T_MAX = 100.0  # ms


def describe():
    """The stable_ode description of the cell: `(cells, stimuli, recordings)` (also
    what the NEURON model is made from)."""
    return describe_tree(N_BRANCHES, N_COMP, AMPLITUDE)


def build_ours(dtype):
    """The stable_ode `MembraneModel` of the benchmark cell."""
    import stable_ode as so

    return so.build(*describe(), celsius=CELSIUS, v_init=V_INIT, dtype=dtype)


def build_jaxley(t_max: float = T_MAX):
    """The Jaxley cell (dtype follows JAX's x64 flag)."""
    return build_tree_jaxley(N_BRANCHES, t_max, N_COMP, AMPLITUDE)


def run(dtype_name: str, repeats: int, t_max: float = T_MAX) -> dict:
    """Time ours against Jaxley and NEURON (fixed step, `secondorder=0`), where
    installed, in this process's dtype (ms, mV; `forward.compare`'s row)."""
    import jax
    import jax.numpy as jnp

    import stable_ode as so

    from ._common import have_jaxley
    from ._neuron import have_neuron, NeuronModel
    from .forward import compare

    dtype = _dtype(dtype_name)
    model = build_ours(dtype)
    names = [name for name, _ in model.layout.recordings]

    @jax.jit
    def ours(m):
        sim = so.simulate(m, t_max, DT, solver=so.BackwardEuler())
        return jnp.stack([sim.recordings[n] for n in names])

    jaxley = None
    if have_jaxley():
        import jaxley as jx

        cell = build_jaxley(t_max)

        @jax.jit
        def theirs(p):
            return jx.integrate(cell, p, t_max=t_max, delta_t=DT, solver="bwd_euler")

        jaxley = ("bwd_euler", theirs, (cell.get_parameters(),))
    nrn, neuron = None, None
    if have_neuron():
        nrn = NeuronModel(
            *describe(), t_stop=t_max, dt=DT, celsius=CELSIUS, v_init=V_INIT
        )
        neuron = ("fixed, secondorder=0", lambda: nrn.run(0))
    try:
        row = compare(
            f"branched HH cell, {N_BRANCHES}×{N_COMP} comp., {t_max:g} ms",
            dtype_name, "BackwardEuler", ours, (model,), jaxley, neuron, repeats,
        )  # fmt: skip
    finally:
        if nrn is not None:
            nrn.close()
    row["v_peak"] = float(jnp.max(ours(model)))
    return row


def profile(dtype_name: str, repeats: int) -> None:
    """µs per step of our solve and its pieces, with the loop kernel counts.

    - `simulate` as in the benchmark, and with the tree solve's plan removed
      (the chunked `lax.scan` Hines solve it replaced);
    - `BackwardEuler.step` in a bare `lax.scan` (no diffrax loop);
    - the tree solve alone in a `lax.scan`, with and without the plan, and a
      division in its place (the floor of any loop).
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import lineax as lx

    import stable_ode as so

    from ._common import format_table, loop_kernels, time_interleaved

    model = build_ours(_dtype(dtype_name))
    no_plan = eqx.tree_at(
        lambda m: m.coupling.plan, model, None, is_leaf=lambda x: x is None
    )
    n = round(T_MAX / DT)
    dtype = model.dtype
    solver = so.BackwardEuler()

    def sim(m):
        return so.simulate(m, T_MAX, DT, solver=solver).recordings

    def scan_step(m):
        term = so.MembraneTerm(m)

        def body(y, k):
            t0 = DT * k
            y1 = solver.step(term, t0, t0 + DT, y, None, None, False)[0]
            return y1, y1.v[0]

        return jax.lax.scan(body, m.init_state(), jnp.arange(n, dtype=dtype))[1]

    def scan_solve(m, divide=False):
        c = m.coupling
        d0 = m.area * (1 / (1000 * DT) + 0.1)

        def body(v, k):
            d = d0 * (1 + 1e-6 * k)
            # Right-hand side d·v keeps the iterates bounded (a smoothing of v).
            if divide:
                return d * v / (d + c.self_conductance()), None
            op = c.operator(d, 1.0)
            sol = lx.linear_solve(op, c.to_operator_order(d * v), c.default_solver())
            return c.from_operator_order(sol.value), None

        return jax.lax.scan(body, m.v_init, jnp.arange(n, dtype=dtype))[0]

    cases = {
        "simulate(BackwardEuler), tree solve with plan": (sim, model),
        "simulate(BackwardEuler), chunked-scan tree solve": (sim, no_plan),
        "lax.scan of BackwardEuler.step (plan)": (scan_step, model),
        "piece: tree solve with plan (gtsv chains + reduced tree)": (
            scan_solve,
            model,
        ),
        "piece: tree solve, chunked lax.scan (no plan)": (scan_solve, no_plan),
        "piece: a division instead of the solve": (
            lambda m: scan_solve(m, True),
            model,
        ),
    }
    fns = [jax.jit(f) for f, _ in cases.values()]
    args = [(m,) for _, m in cases.values()]
    timed = time_interleaved(fns, args, repeats=repeats)
    rows = [
        [
            name,
            f"{1e6 * t.median / n:.2f}",
            f"{1e6 * t.min / n:.2f}",
            "+".join(str(k) for k in loop_kernels(fn, *a)),
        ]
        for name, fn, a, (t, _) in zip(cases, fns, args, timed, strict=True)
    ]
    print(f"\n# profile ({dtype_name}, {n} steps): µs per step, loop kernels")
    print(format_table(["what", "median µs/step", "min µs/step", "loop kernels"], rows))


def run_dtype(dtype_name: str, mode: str, with_profile: bool) -> None:
    import jax

    from ._common import emit
    from .forward import print_rows

    jax.config.update("jax_enable_x64", dtype_name == "float64")
    repeats = {"full": 11, "quick": 3, "smoke": 1}[mode]
    t_max = 10.0 if mode == "smoke" else T_MAX
    print(
        f"# {dtype_name}: jax {jax.__version__}, {jax.default_backend()}, "
        f"{os.cpu_count()} CPUs, median of {repeats} calls after compilation",
        flush=True,
    )
    row = run(dtype_name, repeats, t_max)
    print_rows([row])
    print(f"(peak v of ours: {row['v_peak']:.1f} mV)", flush=True)
    emit("branched", [row])
    if with_profile:
        profile(dtype_name, repeats)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.branched", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="both"
    )
    parser.add_argument("--quick", action="store_true", help="3 timed calls")
    parser.add_argument("--smoke", action="store_true", help="10 ms, 1 call (a test)")
    parser.add_argument(
        "--profile", action="store_true", help="also where our time goes"
    )
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.dtype != "both":
        run_dtype(args.dtype, mode, args.profile)
        return
    from ._common import run_each_dtype

    flags = ["--quick"] * args.quick + ["--smoke"] * args.smoke
    run_each_dtype("branched", flags + ["--profile"] * args.profile)


if __name__ == "__main__":
    main()
