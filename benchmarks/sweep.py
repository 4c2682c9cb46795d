"""A parameter sweep in which some members go non-finite.

    python -m benchmarks.sweep [--batch 1024] [--dtype float32|float64]
                               [--repeats 5] [--t-max 100] [--smoke]

The batch case of `benchmarks/forward.py` (one HH compartment, `jax.vmap` over
`gnabar`, `BackwardEuler`, dt = 0.025 ms), with a current trace whose one sample,
at half the run, is NaN for the failing members and 0 for the others. Timed
interleaved (`time_interleaved`), each row against the clean batch:

- the clean batch (`simulate`'s default: a plain run, the safe loop only for
  members that went non-finite);
- one failing member, and 1/16 of the members failing, with the default;
- the same with `optimistic=False` (the safe loop for every member: what the
  whole batch cost once one member failed, before the safe solve was restricted
  to the failing members), and the clean batch that way.

Printed as a table and emitted as rows (`benchmark="sweep"`), with each variant's
time over the clean batch's.
"""

import argparse
import dataclasses
import os


def sweep_rows(dtype_name: str, n_batch: int, repeats: int, t_max: float) -> list:
    """Time the variants of the module docstring; one row (dict) each."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import stable_ode as so

    from ._common import time_interleaved
    from ._models import COMPARTMENT, describe, DT, V_INIT
    from .forward_batch import GNA_RANGE

    dtype = jnp.float64 if dtype_name == "float64" else jnp.float32
    case = dataclasses.replace(COMPARTMENT, t_max=t_max)
    cells, stims, recs = describe(case)
    site = recs[0].site
    trace = so.TraceCurrent(site, [0.0], DT, t_max / 2)
    model = so.build(
        cells, stims + [trace], recs, celsius=6.3, v_init=V_INIT, dtype=dtype
    )
    gna = jnp.asarray(np.linspace(*GNA_RANGE, n_batch), dtype)

    def member(m, g, bad):
        return eqx.tree_at(
            lambda m: (m.mechanisms[0].mechanism.gnabar, m.stimuli.trace_values),
            m,
            (
                jnp.full(1, g, dtype),
                jnp.where(bad, jnp.nan, 0.0).astype(dtype)[None, None],
            ),
        )

    def batched(optimistic):
        def one(m, g, bad):
            sim = so.simulate(
                member(m, g, bad), t_max, DT, throw=False, optimistic=optimistic
            )
            return sim.recordings.saved, sim.stats["t_fail"]

        return jax.jit(jax.vmap(one, in_axes=(None, 0, 0)))

    clean = jnp.zeros(n_batch, bool)
    one_bad = clean.at[n_batch // 2].set(True)
    some_bad = clean.at[:: max(1, 16)].set(True)
    default, safe = batched(None), batched(False)
    cases = [
        ("clean, default", default, clean),
        ("1 failing, default", default, one_bad),
        (f"{int(some_bad.sum())} failing, default", default, some_bad),
        ("clean, optimistic=False", safe, clean),
        ("1 failing, optimistic=False", safe, one_bad),
    ]
    timed = time_interleaved(
        [c[1] for c in cases], [(model, gna, c[2]) for c in cases], repeats=repeats
    )
    base = timed[0][0].median
    rows = []
    for (name, _, bad), (t, (_, t_fail)) in zip(cases, timed, strict=True):
        failed = int(np.sum(np.isfinite(np.asarray(t_fail))))
        assert failed == int(bad.sum()), (name, failed)
        rows.append(
            dict(case=name, batch=n_batch, dtype=dtype_name, t_max=t_max,
                 ms=1e3 * t.median, min_ms=1e3 * t.min, compile_s=t.compile,
                 ratio=t.median / base, failing=failed)
        )  # fmt: skip
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.sweep", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float64")
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--t-max", type=float, default=100.0)
    parser.add_argument(
        "--smoke", action="store_true", help="32 members, 5 ms, 1 call (a test)"
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.batch, args.repeats, args.t_max = 32, 1, 5.0
    import jax

    from ._common import emit

    jax.config.update("jax_enable_x64", args.dtype == "float64")
    print(
        f"# {args.dtype}, {args.batch} members, {args.t_max:g} ms, jax "
        f"{jax.__version__}, {jax.default_backend()}, {os.cpu_count()} CPUs, median "
        f"of {args.repeats} interleaved calls",
        flush=True,
    )
    rows = sweep_rows(args.dtype, args.batch, args.repeats, args.t_max)
    print("| case | ms | min ms | / clean |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['ms']:.1f} | {r['min_ms']:.1f} | {r['ratio']:.2f} |")
    emit("sweep", rows)


if __name__ == "__main__":
    main()
