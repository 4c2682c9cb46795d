"""Where the time of a `jax.vmap`-ed fixed-step solve goes.

    python -m benchmarks.profile_batch [--dtype float32|float64] [--batch 64]
                                       [--repeats 11] [--smoke]

The batch case of `benchmarks/forward.py` (64 HH compartments, `jax.vmap` over
`gnabar`, `BackwardEuler`, dt = 0.025 ms, 100 ms) is the one where we trail
Jaxley most. This script times the same vmapped model several ways, interleaved
(`time_interleaved`), and prints µs per step with the number of kernels (thunks)
per iteration of each compiled while loop:

- `simulate`, as the benchmark runs it;
- `diffeqsolve` with `StepTo` or `ConstantStepSize`, saving every step
  (`SaveAt(steps=True)`) or only the end (`SaveAt(t1=True)`);
- our `BackwardEuler.step` in a hand-written `lax.scan` (no diffrax), saving `v`
  at every step;
- Jaxley's vmapped `bwd_euler` (if installed).

What it shows (see `benchmarks/README.md`, "Small loops on the CPU"): XLA:CPU
runs a while loop's body through its `ThunkExecutor`, which executes the kernels
one after the other only if the body has at most 8 kernels or every buffer it
touches is at most 512 bytes; otherwise it builds a dataflow schedule at every
iteration, a fixed cost per iteration. A 64-way batch of float64 compartments
has 512-byte states; a saved trajectory (or `StepTo`'s array of times) is a
larger buffer; and a diffrax step loop has 14 or more kernels (time and
step-size bookkeeping besides the step itself). Jaxley's `lax.scan` body has
exactly 8.
"""

import argparse
import dataclasses
import os


def profile_batch(
    dtype_name: str, n_batch: int, repeats: int, t_max: float = 100.0
) -> list[list[str]]:
    """Time the variants listed in the module docstring over `t_max` ms; one table
    row each: `[what, median µs/step, min µs/step, loop kernels]`."""
    import diffrax as dfx
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import stable_ode as so

    from ._common import have_jaxley, loop_kernels, time_interleaved
    from ._models import build_ours, COMPARTMENT, DT
    from .forward_batch import GNA_RANGE, jaxley_batch

    dtype = jnp.float64 if dtype_name == "float64" else jnp.float32
    case = dataclasses.replace(COMPARTMENT, t_max=t_max)
    model = build_ours(case, dtype)
    gna = jnp.asarray(np.linspace(*GNA_RANGE, n_batch), dtype)
    n = model.n_compartments
    n_steps = round(case.t_max / DT)
    solver = so.BackwardEuler()
    grid = DT * jnp.arange(n_steps + 1, dtype=dtype)
    rec = jnp.asarray([i for _, i in model.layout.recordings])

    def with_gna(m, g):
        where = lambda m: m.mechanisms[0].mechanism.gnabar  # noqa: E731
        return eqx.tree_at(where, m, jnp.full(n, g))

    def batched(one):
        return jax.jit(lambda m, g: jax.vmap(lambda gi: one(with_gna(m, gi)))(g))

    def simulate(m):
        return so.simulate(m, case.t_max, DT, solver=solver).recordings

    def solve(saveat, controller):
        def one(m):
            if controller == "stepto":
                kw = dict(dt0=None, stepsize_controller=dfx.StepTo(ts=grid))
            else:
                kw = dict(dt0=DT, stepsize_controller=dfx.ConstantStepSize())
            sol = dfx.diffeqsolve(
                so.MembraneTerm(m), solver, 0.0, case.t_max, y0=m.init_state(),
                saveat=saveat, max_steps=n_steps, **kw,
            )  # fmt: skip
            return sol.ys

        return one

    def scan(m):
        term = so.MembraneTerm(m)

        def body(y, k):
            t0 = DT * k
            y1 = solver.step(term, t0, t0 + DT, y, None, None, False)[0]
            return y1, y1.v[rec]

        return jax.lax.scan(body, m.init_state(), jnp.arange(n_steps, dtype=dtype))[1]

    def v_at(t, y, args):
        del t, args
        return y.v[rec]

    steps, t1 = dfx.SaveAt(steps=True, fn=v_at), dfx.SaveAt(t1=True, fn=v_at)
    cases = {
        "simulate (as benchmarked)": simulate,
        "diffeqsolve StepTo, SaveAt(steps)": solve(steps, "stepto"),
        "diffeqsolve ConstantStepSize, SaveAt(steps)": solve(steps, "constant"),
        "diffeqsolve StepTo, SaveAt(t1)": solve(t1, "stepto"),
        "diffeqsolve ConstantStepSize, SaveAt(t1)": solve(t1, "constant"),
        "lax.scan of BackwardEuler.step, saving v": scan,
    }
    fns = [batched(one) for one in cases.values()]
    args = [(model, gna)] * len(fns)
    names = list(cases)
    if have_jaxley():
        theirs = jaxley_batch(case)
        fns.append(theirs)
        args.append((gna,))
        names.append("Jaxley vmap of bwd_euler (lax.scan)")
    timed = time_interleaved(fns, args, repeats=repeats)
    return [
        [
            name,
            f"{1e6 * t.median / n_steps:.3f}",
            f"{1e6 * t.min / n_steps:.3f}",
            "+".join(str(k) for k in loop_kernels(fn, *a)),
        ]
        for name, fn, a, (t, _) in zip(names, fns, args, timed, strict=True)
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_batch",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument(
        "--smoke", action="store_true", help="4 members, 5 ms, 1 call (a test)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.batch, args.repeats = 4, 1
    import jax

    from ._common import format_table

    # Benchmark script, not library code: x64 is chosen per process.
    jax.config.update("jax_enable_x64", args.dtype == "float64")
    t_max = 5.0 if args.smoke else 100.0
    rows = profile_batch(args.dtype, args.batch, args.repeats, t_max)
    print(
        f"# {args.batch} × HH compartment, vmap over gnabar, {args.dtype}, "
        f"BackwardEuler dt = 0.025 ms, {t_max:g} ms; jax {jax.__version__}, "
        f"{os.cpu_count()} CPUs; µs per step (whole batch), kernels per iteration "
        "of each compiled while loop",
        flush=True,
    )
    print(format_table(["what", "median µs/step", "min µs/step", "loop kernels"], rows))


if __name__ == "__main__":
    main()
