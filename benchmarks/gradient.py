"""Gradient time and peak memory against checkpoint configuration, next to Jaxley
(issue 6, "Performance").

    python -m benchmarks.gradient [--quick]

Models (float64, BackwardEuler / Jaxley's `bwd_euler`, dt = 0.025 ms):

- **cable**: the 100-compartment HH cable of `benchmarks/forward.py` (1000 µm,
  2 µm, NEURON's `hh` at 6.3 °C, 0.1 nA step from 5 ms for 40 ms into the 0 end,
  both ends recorded), 50 ms = 2,000 steps. Loss: mean voltage at the far end.
  Gradient w.r.t. the three HH conductances `(gnabar, gkbar, gl)`, one shared
  value each (Jaxley: `make_trainable("HH_gNa")`, ... on the branch).
- **network** (ours only): the 100-neuron, 1,000-synapse network of
  `benchmarks/network.py`, 50 ms. Loss: mean voltage of all neurons. Gradient
  w.r.t. every synapse's `gmax` (1,000 values) and the shared HH `gnabar`.

Every configuration runs in its own Python process (`--worker`), so that its peak
memory is its own: the process builds the model, compiles `jax.jit(jax.grad(loss))`
(`.lower(...).compile()`), calls it once, then times `repeats` further calls
(`jax.block_until_ready`; median and minimum). Reported memory:

- **peak RSS**: `resource.getrusage(RUSAGE_SELF).ru_maxrss` at the end of the
  process: everything, including Python, the imported libraries and XLA's
  compiler (the quantity of the issue's Jaxley numbers);
- **base RSS**: the same just before compiling (imports + model build);
- **XLA temp**: `compiled.memory_analysis().temp_size_in_bytes`, the working
  memory XLA allocates for one gradient evaluation (the checkpoints, the
  residuals of the backward pass, buffers) -- the part that depends on the
  checkpoint configuration.

Configurations: ours with `Checkpointing()` (the default), `Checkpointing(10)`,
`Checkpointing(levels=[40, 50])`, `Checkpointing(memory_bytes=...)`, and "store
all" (`Checkpointing(10**6)`, capped at the step budget: nothing recomputed,
comparable to Jaxley without checkpointing); Jaxley 0.14 `jx.integrate(...)`
without and with `checkpoint_lengths=[40, 50]`. Then our memory at 50, 200 and
1,000 ms with a fixed `Checkpointing(100)` (sub-linear growth expected: the
checkpoints are fixed, only recomputation and the recorded output grow).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time


DT = 0.025
CHECKPOINT_LENGTHS = [40, 50]


def _ours_adjoint(name: str):
    import diffrax as dfx

    import stable_ode as so

    if name == "default":
        return so.Checkpointing()
    if name == "diffrax":
        return dfx.RecursiveCheckpointAdjoint()
    if name == "store-all":
        return so.Checkpointing(10**6)
    key, _, value = name.partition("=")
    if key == "checkpoints":
        return so.Checkpointing(int(value))
    if key == "levels":
        return so.Checkpointing(levels=[int(x) for x in value.split(",")])
    if key == "memory":
        return so.Checkpointing(memory_bytes=int(float(value)))
    raise ValueError(f"unknown adjoint configuration {name!r}")


def _cable_ours(t_max: float, adjoint_name: str):
    import equinox as eqx
    import jax.numpy as jnp

    import stable_ode as so

    from .forward import build_ours, CABLE

    model = build_ours(CABLE, jnp.float64)
    adjoint = _ours_adjoint(adjoint_name)
    n = model.n_compartments

    def loss(p, model):
        model = eqx.tree_at(
            lambda m: (
                m.mechanisms[0].mechanism.gnabar,
                m.mechanisms[0].mechanism.gkbar,
                m.mechanisms[0].mechanism.gl,
            ),
            model,
            (jnp.full(n, p[0]), jnp.full(n, p[1]), jnp.full(n, p[2])),
        )
        sim = so.simulate(model, t_max, DT, solver=so.BackwardEuler(), adjoint=adjoint)
        return jnp.mean(sim.recordings["r1"])

    return loss, (jnp.array([0.12, 0.036, 0.0003]), model)


def _cable_jaxley(t_max: float, adjoint_name: str):
    import dataclasses

    import jax.numpy as jnp
    import jaxley as jx

    from .forward import build_jaxley, CABLE

    module = build_jaxley(dataclasses.replace(CABLE, t_max=t_max))
    for name in ("HH_gNa", "HH_gK", "HH_gLeak"):
        module.make_trainable(name, verbose=False)
    params = module.get_parameters()
    lengths = None if adjoint_name == "none" else CHECKPOINT_LENGTHS

    def loss(params):
        v = jx.integrate(
            module,
            params,
            t_max=t_max,
            delta_t=DT,
            solver="bwd_euler",
            checkpoint_lengths=lengths,
        )
        return jnp.mean(v[1])

    return loss, (params,)


def _network_ours(t_max: float, adjoint_name: str):
    import equinox as eqx
    import jax.numpy as jnp

    import stable_ode as so

    from .network import build_ours, N_CELLS, N_SYN

    model = build_ours(N_CELLS, N_SYN, jnp.float64)
    adjoint = _ours_adjoint(adjoint_name)
    n = model.n_compartments

    def loss(p, model):
        gmax, gnabar = p
        model = eqx.tree_at(
            lambda m: (m.synapses[0].synapse.gmax, m.mechanisms[0].mechanism.gnabar),
            model,
            (gmax, jnp.full(n, gnabar)),
        )
        sim = so.simulate(model, t_max, DT, solver=so.BackwardEuler(), adjoint=adjoint)
        return jnp.mean(jnp.stack(list(sim.recordings.values())))

    gmax = model.synapses[0].synapse.gmax
    return loss, ((gmax, jnp.asarray(0.12)), model)


BUILDERS = {
    ("cable", "ours"): _cable_ours,
    ("cable", "jaxley"): _cable_jaxley,
    ("network", "ours"): _network_ours,
}


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # kB on Linux


def worker(spec: dict) -> dict:
    """Run one configuration in this process; returns the measurements."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import numpy as np

    loss, args = BUILDERS[spec["model"], spec["impl"]](spec["t_max"], spec["adjoint"])
    base = _rss_mb()
    start = time.perf_counter()
    compiled = jax.jit(jax.grad(loss)).lower(*args).compile()
    grad = jax.block_until_ready(compiled(*args))
    compile_s = time.perf_counter() - start
    runs = []
    for _ in range(spec["repeats"]):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - start)
    analysis = compiled.memory_analysis()
    leaves = [np.asarray(x) for x in jax.tree_util.tree_leaves(grad)]
    return dict(
        spec,
        ms=1e3 * float(np.median(runs)),
        min_ms=1e3 * float(np.min(runs)),
        compile_s=compile_s,
        peak_rss_mb=_rss_mb(),
        base_rss_mb=base,
        xla_temp_mb=(None if analysis is None else analysis.temp_size_in_bytes / 2**20),
        finite=bool(all(np.all(np.isfinite(x)) for x in leaves)),
        # A fingerprint of the gradient to compare configurations: its first
        # three entries (cable: d/d(gnabar, gkbar, gl); network: d/dgmax[:3]).
        grad_head=[float(x) for x in np.concatenate([x.ravel() for x in leaves])[:3]],
    )


def interleaved(specs: list[dict], repeats: int) -> list[dict]:
    """Time several cable configurations in this one process, calls alternating
    round robin (`_common.time_interleaved`) so that they share the machine's
    load; on a shared machine the separate processes' times can differ by 2x
    from one minute to the next, the ratios measured here do not."""
    import jax

    jax.config.update("jax_enable_x64", True)

    from ._common import time_interleaved

    fns, args = [], []
    for spec in specs:
        loss, a = BUILDERS[spec["model"], spec["impl"]](spec["t_max"], spec["adjoint"])
        fns.append(jax.jit(jax.grad(loss)))
        args.append(a)
    out = time_interleaved(fns, args, repeats=repeats)
    return [
        dict(spec, ms=1e3 * t.median, min_ms=1e3 * t.min)
        for spec, (t, _) in zip(specs, out, strict=True)
    ]


INTERLEAVED = [
    ("jaxley", "none"),
    ("jaxley", "levels=40,50"),
    ("ours", "default"),
    ("ours", "levels=40,50"),
    ("ours", "store-all"),
]


def run_spec(spec: dict, timeout: float = 1800.0) -> dict:
    """Run `spec` in a fresh process (`python -m benchmarks.gradient --worker`)."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.gradient", "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return dict(spec, error=(proc.stderr.strip().splitlines() or ["?"])[-1])


def plan(quick: bool) -> list[dict]:
    """The configurations, in the order they are run."""
    repeats = 3 if quick else 7
    ours_cable = ["default", "checkpoints=10", "levels=40,50", "store-all"]
    if not quick:
        ours_cable.insert(2, "checkpoints=100")
        ours_cable.insert(4, "memory=2e6")
    specs = [
        dict(model="cable", impl="jaxley", adjoint=a, t_max=50.0, repeats=repeats)
        for a in ("none", "levels=40,50")
    ]
    specs += [
        dict(model="cable", impl="ours", adjoint=a, t_max=50.0, repeats=repeats)
        for a in ours_cable
    ]
    specs += [
        dict(model="network", impl="ours", adjoint=a, t_max=50.0, repeats=repeats)
        for a in (["default", "levels=40,50", "store-all"])
    ]
    specs += [
        dict(
            model="cable",
            impl="ours",
            adjoint="checkpoints=100",
            t_max=t,
            repeats=1 if t > 200 else repeats,
            growth=True,
        )
        for t in (50.0, 200.0, 1000.0)
    ]
    if not quick:
        specs += [
            dict(
                model="cable",
                impl="ours",
                adjoint="store-all",
                t_max=t,
                repeats=1 if t > 200 else repeats,
                growth=True,
            )
            for t in (200.0, 1000.0)
        ]
    return specs


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def print_results(results: list[dict]) -> None:
    from ._common import format_table

    header = [
        "model",
        "impl",
        "configuration",
        "t ms",
        "grad ms (median)",
        "min",
        "peak RSS MB",
        "base RSS MB",
        "XLA temp MB",
        "compile s",
        "finite",
        "grad[:3]",
    ]
    rows = []
    for r in results:
        if "error" in r:
            rows.append(
                [r["model"], r["impl"], r["adjoint"], _fmt(r["t_max"], ".0f")]
                + ["ERROR: " + r["error"][:80]]
                + [""] * 7
            )
            continue
        rows.append(
            [
                r["model"],
                "Jaxley 0.14" if r["impl"] == "jaxley" else "stable_ode",
                r["adjoint"],
                _fmt(r["t_max"], ".0f"),
                _fmt(r["ms"]),
                _fmt(r["min_ms"]),
                _fmt(r["peak_rss_mb"], ".0f"),
                _fmt(r["base_rss_mb"], ".0f"),
                _fmt(r["xla_temp_mb"], ".2f"),
                _fmt(r["compile_s"]),
                str(r["finite"]),
                ", ".join(f"{g:.6g}" for g in r["grad_head"]),
            ]
        )
    print(format_table(header, rows))


def verdict(results: list[dict]) -> str:
    """Whether ours ≤ Jaxley's time and peak RSS at every cable configuration."""
    ok = [r for r in results if "error" not in r]
    jx_rows = [r for r in ok if r["impl"] == "jaxley"]
    ours = [r for r in ok if r["model"] == "cable" and r["impl"] == "ours"]
    ours = [r for r in ours if r["t_max"] == 50.0 and not r.get("growth")]
    if not jx_rows or not ours:
        return "verdict: missing rows"
    worst_jx_ms = min(r["ms"] for r in jx_rows)
    worst_jx_mb = min(r["peak_rss_mb"] for r in jx_rows)
    lines = []
    for r in ours:
        lines.append(
            f"  ours {r['adjoint']:>15}: {r['ms']:.1f} ms (Jaxley best "
            f"{worst_jx_ms:.1f}), {r['peak_rss_mb']:.0f} MB (Jaxley best "
            f"{worst_jx_mb:.0f}): "
            + (
                "met"
                if r["ms"] <= worst_jx_ms and r["peak_rss_mb"] <= worst_jx_mb
                else "NOT met"
            )
        )
    growth = sorted(
        (r for r in ok if r.get("growth") and r["adjoint"] == "checkpoints=100"),
        key=lambda r: r["t_max"],
    )
    if len(growth) >= 2:
        a, b = growth[0], growth[-1]
        ratio_t = b["t_max"] / a["t_max"]
        ratio_m = (b["xla_temp_mb"] or 0) / max(a["xla_temp_mb"] or 1e-9, 1e-9)
        lines.append(
            f"  memory growth at Checkpointing(100), {a['t_max']:.0f} -> "
            f"{b['t_max']:.0f} ms ({ratio_t:.0f}x): XLA temp x{ratio_m:.2f}, peak "
            f"RSS {a['peak_rss_mb']:.0f} -> {b['peak_rss_mb']:.0f} MB"
        )
    return "target (ours <= the better Jaxley configuration, time and memory):\n" + (
        "\n".join(lines)
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer configurations")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--interleaved", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    if args.interleaved:
        specs = [
            dict(model="cable", impl=i, adjoint=a, t_max=50.0) for i, a in INTERLEAVED
        ]
        rows = interleaved(specs, args.interleaved)
        print("RESULT " + json.dumps(rows), flush=True)
        return
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}"
    )
    results = []
    for spec in plan(args.quick):
        r = run_spec(spec)
        results.append(r)
        print(
            "  done:",
            spec["model"],
            spec["impl"],
            spec["adjoint"],
            spec["t_max"],
            "->",
            r.get("error") or f"{r['ms']:.1f} ms, {r['peak_rss_mb']:.0f} MB",
            flush=True,
        )
    print()
    print_results(results)
    print()
    print(verdict(results))
    repeats = 5 if args.quick else 15
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.gradient", "--interleaved", str(repeats)],
        capture_output=True,
        text=True,
        env=dict(os.environ, JAX_PLATFORMS="cpu"),
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    if not lines:
        print("interleaved timing failed:", proc.stderr.strip()[-500:])
        return
    print(
        f"\nCable gradient, 50 ms, timed in one process with calls alternating "
        f"({repeats} rounds), ms:"
    )
    for r in json.loads(lines[-1][len("RESULT ") :]):
        name = "Jaxley 0.14" if r["impl"] == "jaxley" else "stable_ode"
        print(
            f"  {name:>11} {r['adjoint']:>13}: median {r['ms']:.1f}, "
            f"min {r['min_ms']:.1f}"
        )


if __name__ == "__main__":
    main()
