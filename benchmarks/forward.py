"""Forward-simulation speed against Jaxley.

    python -m benchmarks.forward [--quick | --smoke] [--dtype float32|float64|both]
                                 [--profile]

Builds the same two models in stable_ode and in Jaxley (a benchmark-only
dependency, `pip install jaxley`):

- **compartment**: one HH compartment (length = diameter = 20 µm), 100 ms;
- **cable**: an unbranched HH cable, 1000 µm long, 2 µm diameter, 100
  compartments, 50 ms;

both with NEURON's `hh` at 6.3 °C (Jaxley's `HH` has no q10, ours is 1 there),
Ra = 100 Ω·cm, cm = 1 µF/cm², v_init = -65 mV with gates at steady state, a
0.1 nA step current from 5 ms for 40 ms (into the middle of the compartment,
into the 0 end of the cable), dt = 0.025 ms, recording the membrane potential
at every step (both ends of the cable). Both simulators are jitted with the
model parameters as arguments, run once to compile, then timed (median of
several calls, `jax.block_until_ready`), alternating calls between the two so
that they share the machine's noise. The voltage traces are compared
(`max |Δv|`) so that the timings compare the same computation.

Solvers: our `BackwardEuler` against Jaxley's default `bwd_euler` (NEURON's
staggered backward Euler in both; for one compartment the two produce the same
numbers to rounding), our `CrankNicolson` against Jaxley's `crank_nicolson`
(different second-order schemes: ours is a Strang splitting with L-stable
start-up steps, Jaxley's is NEURON's `secondorder=2`-like half-step), and our
`ExponentialEuler` against Jaxley's `bwd_euler` (Jaxley 0.14's `exp_euler`
fails on a single compartment; its `bwd_euler` skips the linear solve there,
so it is the same elementwise update). Rows without a suffix are `simulate`'s
default (`optimistic=None`: a plain `diffrax.StepTo` run first, the safe solve
only if that went non-finite; gradients through the safe solve alone). Rows
`BackwardEuler+safe` (and the batch's `vmap of BackwardEuler+safe`) are
`simulate(..., optimistic=False)`: the safe fixed-step loop (`SafeStepTo`, a
finiteness test and retry bookkeeping at every step) alone.

Next to Jaxley, in the same interleaved timing: NEURON 9's fixed step
(`benchmarks/_neuron.py`: `h.finitialize` + `ParallelContext.psolve`, `secondorder=0`
for our `BackwardEuler` and `ExponentialEuler`, the same scheme as ours and
Jaxley's `bwd_euler`, and `secondorder=2` for our `CrankNicolson`), always
float64, recording `v` at every step.

- **batch**: 64 HH compartments with `gnabar` evenly spaced in 0.08–0.16 S/cm²,
  100 ms: ours `jax.vmap` of `simulate` over `gnabar`, Jaxley `jax.vmap` of
  `jx.integrate` over its trainable `HH_gNa`, NEURON the 64 cells in one
  simulation.
- **adaptive**: the compartment (and, in the full run, the cable) with adaptive
  steps at one tolerance: our `CrankNicolson` with `diffrax.PIDController`,
  diffrax's generic `Kvaerno5` and `Tsit5` (compartment only) through `simulate`
  with the same controller, NEURON's CVODE at `atol` = the tolerance; with each
  run's spike-time error against CVODE at atol 1e-8 (equal tolerances are not
  equal accuracy; `benchmarks/work_precision.py` compares at equal accuracy).

Jaxley and NEURON are benchmark-only dependencies: without them their columns
are left out. x64 is a global JAX flag, and Jaxley picks its dtype from it, so
each dtype runs in its own subprocess (`--dtype both`, the default, starts one
per dtype). `--quick`: 3 timed calls, `BackwardEuler` (default and safe)
only, adaptive on the
compartment only; `--smoke`: 10 ms, 4-way batch, 1 call (a test). Each process
appends its rows to `$BENCHMARKS_JSON` if set (`python -m benchmarks` does).
`--profile` adds a breakdown of where our solves spend their time (see
`benchmarks/README.md`, "forward").
"""

import argparse
import dataclasses
import os

from ._models import (
    build_jaxley,
    build_neuron,
    build_ours,
    CABLE,
    Case,
    COMPARTMENT,
    DT,
)
from .forward_batch import run_batch


# NEURON's fixed-step scheme for each of our fixed-step solvers.
NEURON_SCHEME = {"BackwardEuler": 0, "CrankNicolson": 2, "ExponentialEuler": 0}


def compare(
    case_name: str,
    dtype_name: str,
    ours_name: str,
    ours,
    ours_args: tuple,
    jaxley=None,
    neuron=None,
    repeats: int = 11,
) -> dict:
    """Time `ours(*ours_args)` interleaved with its peers; one table row.

    **Arguments:**

    - `case_name`, `dtype_name`, `ours_name`: labels.
    - `ours`: a jitted function returning the recorded voltages (mV).
    - `jaxley`: `None`, or `(label, jitted function, argument tuple)`.
    - `neuron`: `None`, or `(label, function of no arguments)` (a NEURON run).
    - `repeats`: timed calls of each.

    **Returns:** a dict with the times (ms: median, minimum; compile s) of each,
    and `max |Δv|` (mV) of each peer's voltages against ours (`None` where a peer
    is absent).
    """
    from ._common import max_abs_diff, time_interleaved

    fns, args = [ours], [ours_args]
    if jaxley is not None:
        fns.append(jaxley[1])
        args.append(jaxley[2])
    if neuron is not None:
        fns.append(neuron[1])
        args.append(())
    timed = time_interleaved(fns, args, repeats=repeats)
    t_ours, v_ours = timed[0]
    row = dict(
        case=case_name,
        dtype=dtype_name,
        ours=ours_name,
        ours_ms=1e3 * t_ours.median,
        ours_min_ms=1e3 * t_ours.min,
        ours_compile_s=t_ours.compile,
        jaxley=None,
        neuron=None,
    )
    rest = timed[1:]
    for key, peer in (("jaxley", jaxley), ("neuron", neuron)):
        if peer is None:
            continue
        (t, v), rest = rest[0], rest[1:]
        if key == "jaxley":
            assert v.dtype == v_ours.dtype, (v.dtype, v_ours.dtype)
        row |= {
            key: peer[0],
            f"{key}_ms": 1e3 * t.median,
            f"{key}_min_ms": 1e3 * t.min,
            f"{key}_compile_s": t.compile,
            f"{key}_max_dv": max_abs_diff(v_ours, v),
        }
    # the pre-NEURON name of Jaxley's `max |Δv|`
    row["max_dv"] = row.get("jaxley_max_dv")
    return row


def run_case(case: Case, dtype_name: str, repeats: int, solvers=None) -> list[dict]:
    """Time every solver pair of `case` in this process's dtype: ours, Jaxley (if
    installed) and NEURON's fixed step (if installed), calls interleaved.

    **Returns:** one dict per solver pair (`compare`'s).
    """
    import jax
    import jax.numpy as jnp

    import stable_ode as so

    from ._common import have_jaxley

    dtype = _dtype(dtype_name)
    model = build_ours(case, dtype)
    names = [name for name, _ in model.layout.recordings]
    module = build_jaxley(case) if have_jaxley() else None
    nrn = build_neuron(case)
    rows = []
    try:
        for ours_name, jaxley_solver in solvers or case.solvers:
            # "Solver+safe": `simulate(..., optimistic=False)` (the safe loop only)
            solver_name, *options = ours_name.split("+")
            solver = getattr(so, solver_name)()
            optimistic = False if "safe" in options else None

            @jax.jit
            def ours(m, solver=solver, optimistic=optimistic):
                sim = so.simulate(
                    m, case.t_max, DT, solver=solver, optimistic=optimistic
                )
                return jnp.stack([sim.recordings[n] for n in names])

            jaxley = None
            if module is not None:
                import jaxley as jx

                @jax.jit
                def theirs(p, jaxley_solver=jaxley_solver):
                    return jx.integrate(
                        module, p, t_max=case.t_max, delta_t=DT, solver=jaxley_solver
                    )

                jaxley = (jaxley_solver, theirs, (module.get_parameters(),))
            neuron = None
            if nrn is not None:
                scheme = NEURON_SCHEME[solver_name]
                neuron = (
                    f"fixed, secondorder={scheme}",
                    lambda scheme=scheme: nrn.run(secondorder=scheme),
                )
            rows.append(
                compare(
                    case.name,
                    dtype_name,
                    ours_name,
                    ours,
                    (model,),
                    jaxley,
                    neuron,
                    repeats,
                )  # fmt: skip
            )
    finally:
        if nrn is not None:
            nrn.close()
    return rows


def _fmt(x, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def print_rows(rows: list[dict]) -> None:
    """Print fixed-step rows (`compare`'s): ours, Jaxley and NEURON side by side;
    ratios are ours / peer's."""
    from ._common import format_table

    header = [
        "case", "dtype", "ours", "Jaxley", "ours ms", "Jaxley ms", "ratio",
        "ratio (min)", "max |Δv| mV", "compile s (ours/Jaxley)",
        "NEURON", "NEURON ms", "ratio (NEURON)", "max |Δv| NEURON",
    ]  # fmt: skip
    body = []
    for r in rows:
        jx_ms, nrn_ms = r.get("jaxley_ms"), r.get("neuron_ms")
        body.append(
            [
                r["case"],
                r["dtype"],
                r["ours"],
                r["jaxley"] or "—",
                f"{r['ours_ms']:.2f}",
                _fmt(jx_ms, ".2f"),
                _fmt(jx_ms and r["ours_ms"] / jx_ms, ".2f"),
                _fmt(jx_ms and r["ours_min_ms"] / r["jaxley_min_ms"], ".2f"),
                _fmt(r.get("jaxley_max_dv"), ".2g"),
                f"{r['ours_compile_s']:.1f} / "
                + _fmt(r.get("jaxley_compile_s"), ".1f"),
                r["neuron"] or "—",
                _fmt(nrn_ms, ".2f"),
                _fmt(nrn_ms and r["ours_ms"] / nrn_ms, ".2f"),
                _fmt(r.get("neuron_max_dv"), ".2g"),
            ]
        )
    print(format_table(header, body), flush=True)


def plan(mode: str):
    """What `run_dtype` measures in `mode` ("full", "quick", "smoke"): the fixed-step
    cases with their solver pairs, the batch, the adaptive comparison, repeats."""
    if mode == "smoke":
        comp = dataclasses.replace(
            COMPARTMENT, name="HH compartment, 10 ms", t_max=10.0
        )
        return dict(
            cases=[(comp, comp.solvers[:1])],
            batch=(comp, 4),
            adaptive=[(comp, 1e-3, ("ours CrankNicolson", "NEURON CVODE"))],
            repeats=1,
        )
    quick = mode == "quick"
    every = ("ours CrankNicolson", "diffrax Kvaerno5", "diffrax Tsit5", "NEURON CVODE")
    adaptive = [(COMPARTMENT, 1e-4, every)]
    if not quick:
        # Kvaerno5 on the cable: tens of seconds per solve (work_precision.py)
        adaptive.append((CABLE, 1e-3, every[:2] + every[3:]))
    return dict(
        cases=[
            (c, c.solvers[:2] if quick else c.solvers) for c in (COMPARTMENT, CABLE)
        ],
        batch=(COMPARTMENT, 64),
        adaptive=adaptive,
        repeats=3 if quick else 11,
    )


def run_dtype(dtype_name: str, mode: str, profile: bool) -> None:
    import jax

    from ._common import emit, have_jaxley
    from ._neuron import have_neuron

    # Benchmark script, not library code: x64 is chosen per process.
    jax.config.update("jax_enable_x64", dtype_name == "float64")
    p = plan(mode)
    repeats = p["repeats"]
    print(
        f"# {dtype_name}: jax {jax.__version__}, {jax.default_backend()}, "
        f"{os.cpu_count()} CPUs, median of {repeats} calls after compilation"
        + ("" if have_jaxley() else "; Jaxley not installed")
        + ("" if have_neuron() else "; NEURON not installed"),
        flush=True,
    )
    rows = []
    for case, solvers in p["cases"]:
        rows += run_case(case, dtype_name, repeats, solvers)
    rows.append(run_batch(*p["batch"], dtype_name, repeats))
    if mode != "smoke":
        rows.append(run_batch(*p["batch"], dtype_name, repeats, optimistic=False))
    print_rows(rows)
    emit("forward", rows)
    from .forward_adaptive import print_adaptive, run_adaptive

    adaptive = []
    for case, tol, methods in p["adaptive"]:
        adaptive += run_adaptive(case, dtype_name, tol, methods, repeats)
    print("\n# adaptive step size (same tolerance; ratio = time / ours)", flush=True)
    print_adaptive(adaptive)
    emit("forward_adaptive", adaptive)
    if profile:
        from .profile_forward import profile_model

        for case in (COMPARTMENT, CABLE):
            profile_model(build_ours(case, _dtype(dtype_name)), case.t_max, DT, repeats)


def _dtype(name):
    import jax.numpy as jnp

    return jnp.float64 if name == "float64" else jnp.float32


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.forward", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="both"
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 repeats, BackwardEuler only"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="tiny models, 1 repeat (a test)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also break down where our solves spend their time",
    )
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.dtype != "both":
        run_dtype(args.dtype, mode, args.profile)
        return
    from ._common import run_each_dtype

    flags = ["--quick"] * args.quick + ["--smoke"] * args.smoke
    run_each_dtype("forward", flags + ["--profile"] * args.profile)


if __name__ == "__main__":
    main()
