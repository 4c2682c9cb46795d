"""Gradient time and peak memory against checkpoint configuration, next to Jaxley.

    python -m benchmarks.gradient [--quick | --smoke]

Models (float64, BackwardEuler / Jaxley's `bwd_euler`, dt = 0.025 ms):

- **cable**: the 100-compartment HH cable of `benchmarks/forward.py` (1000 µm,
  2 µm, NEURON's `hh` at 6.3 °C, 0.1 nA step from 5 ms for 40 ms into the 0 end,
  both ends recorded), 50 ms = 2,000 steps. Loss: mean voltage at the far end.
  Gradient w.r.t. the three HH conductances `(gnabar, gkbar, gl)`, one shared
  value each (Jaxley: `make_trainable("HH_gNa")`, ... on the branch).
- **network**: the 100-neuron, 1,000-synapse network of `benchmarks/network.py`,
  50 ms. Loss: mean voltage of all neurons. Gradient w.r.t. every synapse's
  `gmax` (1,000 values) and the shared HH `gnabar` (Jaxley:
  `IonotropicSynapse.make_trainable("IonotropicSynapse_gS")` and
  `make_trainable("HH_gNa")`, one shared value each: its d/dgS is the sum of our
  1,000 d/dgmax, equal to ~1e-12).

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

Configurations: ours with `Checkpointing()` (the default: every step stored when
the loop states fit in 64 MiB, as here), `Checkpointing(10)`, `Checkpointing(100)`,
`Checkpointing(levels=[40, 50])`, `Checkpointing(memory_bytes=...)`, and "store
all" (`Checkpointing(10**6)`, capped at the step budget: nothing recomputed,
comparable to Jaxley without checkpointing); Jaxley 0.14 `jx.integrate(...)`
without and with `checkpoint_lengths=[40, 50]`. Then our memory at 50, 200 and
1,000 ms with a fixed `Checkpointing(100)` (sub-linear growth expected: the
checkpoints are fixed, only recomputation and the recorded output grow).

Separate processes run one after the other, so their times move with the
machine's load (on this shared 2-core machine by up to 2x between minutes).
The ratios to hold a configuration to are those of the **interleaved** timing at
the end: one process per model, its configurations' calls alternating round
robin (`_common.time_interleaved`), with each time's ratio to the better Jaxley
configuration's (`INTERLEAVED`: the cable's and, in the full and quick runs, the
network's).
"""

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time

from .gradient_report import print_results, verdict


DT = 0.025
CHECKPOINT_LENGTHS = [40, 50]
PLAIN = "ours, plain solves"
"""Ours with lineax's plain solves in place of the sanitised ones
(`solve_variant`)."""


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
    import jax.numpy as jnp

    import stable_ode as so

    from ._models import build_ours, CABLE, with_hh_conductances

    model = build_ours(CABLE, jnp.float64)
    adjoint = _ours_adjoint(adjoint_name)

    def loss(p, model):
        model = with_hh_conductances(model, p)
        sim = so.simulate(model, t_max, DT, solver=so.BackwardEuler(), adjoint=adjoint)
        return jnp.mean(sim.recordings["r1"])

    return loss, (jnp.array([0.12, 0.036, 0.0003]), model)


def _cable_jaxley(t_max: float, adjoint_name: str):
    import dataclasses

    import jax.numpy as jnp

    from ._models import build_jaxley, CABLE

    module = build_jaxley(dataclasses.replace(CABLE, t_max=t_max))
    for name in ("HH_gNa", "HH_gK", "HH_gLeak"):
        module.make_trainable(name, verbose=False)
    return _jaxley_loss(module, t_max, adjoint_name, lambda v: jnp.mean(v[1]))


def _jaxley_loss(module, t_max: float, adjoint_name: str, reduce):
    """`(loss, (params,))` for `jx.integrate(module, params)` followed by `reduce`
    of the recorded voltages, without (`adjoint_name="none"`) or with
    `checkpoint_lengths=CHECKPOINT_LENGTHS`."""
    import jaxley as jx

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
        return reduce(v)

    return loss, (module.get_parameters(),)


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


def _network_jaxley(t_max: float, adjoint_name: str):
    """Jaxley's network of `benchmarks/network.py`, the loss of `_network_ours`:
    gradient w.r.t. `gS` (our `gmax`) and `HH_gNa`, each one value shared by all
    synapses / cells (`make_trainable` on the whole view). The backward pass
    computes every synapse's contribution either way; Jaxley's d/dgS is the sum of
    our 1,000 d/dgmax (and d/dgNa the same; they agree to rounding)."""
    import jax.numpy as jnp

    from .network import build_jaxley, build_ours, N_CELLS, N_SYN

    model = build_ours(N_CELLS, N_SYN, jnp.float64)
    s_init = float(model.init_state().groups[len(model.mechanisms)]["s"][0])
    net = build_jaxley(s_init, N_CELLS, N_SYN, t_max)
    net.IonotropicSynapse.make_trainable("IonotropicSynapse_gS", verbose=False)
    net.make_trainable("HH_gNa", verbose=False)
    return _jaxley_loss(net, t_max, adjoint_name, jnp.mean)


BUILDERS = {
    ("cable", "ours"): _cable_ours,
    ("cable", PLAIN): _cable_ours,
    ("cable", "jaxley"): _cable_jaxley,
    ("network", "ours"): _network_ours,
    ("network", PLAIN): _network_ours,
    ("network", "jaxley"): _network_jaxley,
}


@contextlib.contextmanager
def solve_variant(impl: str):
    """While tracing `impl`'s gradient: for `PLAIN`, the staggered solvers' voltage
    solves are lineax's plain `linear_solve` instead of
    `stable_ode._misc.finite_linear_solve` (whose derivative is sanitised
    against non-finite steps: its inputs, its tangent and transposed solves); the
    time of `ours` over `PLAIN` is what the sanitising costs (issue 20). Only
    for a solve whose steps are all finite, as here: the plain one raises in
    the backward pass after a rejected non-finite step."""
    if impl != PLAIN:
        yield
        return
    from stable_ode import _misc
    from stable_ode._solver import _staggered

    saved = _staggered.finite_linear_solve
    _staggered.finite_linear_solve = _misc._plain_solve
    try:
        yield
    finally:
        _staggered.finite_linear_solve = saved


def sanitised_ratio(rows: list[dict]) -> float | None:
    """The interleaved median time of our default configuration over the same
    with plain solves (`PLAIN`), or `None` without both."""
    ms = {r["impl"]: r["ms"] for r in rows if r["adjoint"] == "default"}
    if "ours" not in ms or PLAIN not in ms:
        return None
    return ms["ours"] / ms[PLAIN]


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


def plan(mode: str) -> list[dict]:
    """The configurations run in separate processes, in order ("full", "quick",
    "smoke"); without Jaxley, ours only.

    `--quick` keeps one process per implementation for the peak-RSS comparison
    (Jaxley `[40, 50]`, our default) and the network's default; the other cable
    configurations' times and XLA temp come from the interleaved process, and the
    growth with simulated time is left to the full run.
    """
    from ._common import have_jaxley

    if mode == "smoke":
        # Jaxley's gradient runs in the interleaved process
        specs = [dict(model="cable", impl="ours", adjoint="default", t_max=5.0,
                      repeats=1)]  # fmt: skip
    elif mode == "quick":
        specs = [
            dict(model=m, impl=i, adjoint=a, t_max=50.0, repeats=3)
            for m, i, a in (
                ("cable", "jaxley", "levels=40,50"),
                ("cable", "ours", "default"),
                ("network", "jaxley", "levels=40,50"),
                ("network", "ours", "default"),
            )
        ]
    else:
        specs = _full_plan()
    if not have_jaxley():
        specs = [s for s in specs if s["impl"] != "jaxley"]
    return specs


def _full_plan() -> list[dict]:
    repeats = 7
    ours_cable = [
        "default",
        "checkpoints=10",
        "checkpoints=100",
        "levels=40,50",
        "memory=2e6",
        "store-all",
    ]
    specs = [
        dict(model="cable", impl="jaxley", adjoint=a, t_max=50.0, repeats=repeats)
        for a in ("none", "levels=40,50")
    ]
    specs += [
        dict(model="cable", impl="ours", adjoint=a, t_max=50.0, repeats=repeats)
        for a in ours_cable
    ]
    specs += [
        dict(model="network", impl="jaxley", adjoint=a, t_max=50.0, repeats=repeats)
        for a in ("none", "levels=40,50")
    ]
    specs += [
        dict(model="network", impl="ours", adjoint=a, t_max=50.0, repeats=repeats)
        for a in (["default", "levels=40,50", "store-all"])
    ]
    for adjoint, ts in (
        ("checkpoints=100", (50.0, 200.0, 1000.0)),
        ("store-all", (200.0, 1000.0)),
    ):
        specs += [
            dict(
                model="cable",
                impl="ours",
                adjoint=adjoint,
                t_max=t,
                repeats=1 if t > 200 else repeats,
                growth=True,
            )
            for t in ts
        ]
    return specs


def main(argv=None) -> None:
    from ._common import emit

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer configurations")
    parser.add_argument(
        "--smoke", action="store_true", help="5 ms cable, 2 configurations (a test)"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--interleaved", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.worker:
        print("RESULT " + json.dumps(worker(json.loads(args.worker))), flush=True)
        return
    from .gradient_interleaved import (
        INTERLEAVED,
        interleaved,
        interleaved_plan,
        print_interleaved,
        run_interleaved,
    )

    if args.interleaved:
        specs, repeats = interleaved_plan(*args.interleaved)
        rows = interleaved(specs, repeats)
        print("RESULT " + json.dumps(rows), flush=True)
        return
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"python {platform.python_version()}"
    )
    results = []
    for spec in plan(mode):
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
    emit("gradient", [dict(r, kind="process") for r in results])
    interleaved_rows = []
    for model in INTERLEAVED:
        specs, repeats = interleaved_plan(mode, model)
        if specs:
            rows = run_interleaved(mode, model)
            print_interleaved(rows, repeats)
            interleaved_rows += rows
    print()
    print(verdict(results, interleaved_rows))


if __name__ == "__main__":
    main()
