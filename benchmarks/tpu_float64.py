"""What JAX's default backend compiles, and how exactly it computes, in float64:
small programs, each in its own process (a compiler crash ends only its own).

    python -m benchmarks.tpu_float64 [--cases NAME ...] [--timeout S]

Written for XLA:TPU, where our float64 solves stopped in the compiler; it runs
on any backend (on the CPU every case passes and the errors are rounding's).
The cases:

- `nextafter_f32`, `nextafter_f64`: `jnp.nextafter(x, -inf)`, which diffrax's
  `diffeqsolve` calls in every solve (`t1` less 100 ULPs; `ConstantStepSize`
  nudges `dt0`).
- `arithmetic_f64`: the largest relative error of `exp`, `log`, `1/x`, `x*x` and
  `x + 0.1` over six values against numpy's (float64 on the CPU), and whether
  `1e300 * 10` stays finite and `1e-300 / 10` non-zero (float64's exponent range;
  float32's ends near 3.4e38).
- `diffrax_f64`: `diffeqsolve` of `dy/dt = -y` (Euler, 10 steps).
- `simulate_f64`: `stable_ode.simulate` of one HH compartment (5 ms, dt 0.025,
  the membrane potential's maximum), as shipped: on a backend that rejects
  `nextafter` in float64 it raises `check_backend`'s error.
- `simulate_f64_workaround`, `gradient_f64_workaround`: the same run, and the
  gradient of the mean potential with respect to `gnabar` through a
  checkpointed solve, with three things changed in that process only:
  equinox's `prevbefore`/`nextafter` (which diffrax calls) computed as `x * (1 ∓
  2**-53 or 2**-52)` (the neighbouring float for positive normal `x` on a
  correctly rounding machine: enough for a probe, not a replacement),
  `check_backend` skipped, and XLA's `conditional-code-motion` pass disabled
  (`XLA_FLAGS=--xla_disable_hlo_passes=conditional-code-motion`; on a TPU the
  pass crashed on our fixed-step program). Compare their values with a CPU run.

Not part of `python -m benchmarks` (no peer runs); the output from a TPU v5e is
kept in `benchmarks/gpu_tpu_v5e/float64_probe.md`.
"""

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time

from ._common import format_table  # no JAX import at module level


CASES = [
    "nextafter_f32",
    "nextafter_f64",
    "arithmetic_f64",
    "diffrax_f64",
    "simulate_f64",
    "simulate_f64_workaround",
    "gradient_f64_workaround",
]
_NO_CODE_MOTION = "--xla_disable_hlo_passes=conditional-code-motion"


def _patch_neighbours() -> None:
    """equinox's `prevbefore`/`nextafter` as multiplications (see the module)."""
    import equinox.internal as eqxi
    import jax.numpy as jnp

    eqxi.prevbefore = lambda x: jnp.asarray(x) * (1.0 - 2.0**-53)
    eqxi.nextafter = lambda x: jnp.asarray(x) * (1.0 + 2.0**-52)


def _hh(workaround: bool, gradient: bool):
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    import stable_ode as so
    import stable_ode._simulate as simulate_module

    if workaround:
        _patch_neighbours()
        simulate_module.check_backend = lambda dtype: None
    site = so.Site("c", "soma", 0.5)
    model = so.build(
        [so.Cell("c", [so.Section("soma", 20.0, 20.0, 1)], [so.Insert(so.HH())])],
        [so.StepCurrent(site, 0.1, 1.0, 3.0)],  # nA, from 1 ms for 3 ms
        [so.Recording("soma", site)],
        dtype=jnp.float64,
    )
    if not gradient:
        run = jax.jit(lambda m: so.simulate(m, 5.0, 0.025).recordings["soma"].max())
        return float(run(model))
    gnabar = lambda m: m.mechanisms[0].mechanism.gnabar  # noqa: E731

    def loss(g, m):
        m = eqx.tree_at(gnabar, m, jnp.full_like(gnabar(m), g))
        sim = so.simulate(m, 5.0, 0.025, adjoint=so.Checkpointing())
        return jnp.mean(sim.recordings["soma"])

    return float(jax.jit(jax.grad(loss))(0.12, model))


def _arithmetic():
    import jax
    import jax.numpy as jnp
    import numpy as np

    xs = np.array([0.1, 1 / 3, 2 / 3, 0.025, 1.2345678901234567, 7.0])
    pairs = {
        "exp": (jnp.exp, np.exp),
        "log": (jnp.log, np.log),
        "1/x": (lambda x: 1 / x, lambda x: 1 / x),
        "x*x": (lambda x: x * x, lambda x: x * x),
        "x+0.1": (lambda x: x + 0.1, lambda x: x + 0.1),
    }
    errors = []
    for name, (ours, ref) in pairs.items():
        got = np.asarray(jax.jit(ours)(jnp.asarray(xs)))
        errors.append(f"{name} {np.max(np.abs(got - ref(xs)) / np.abs(ref(xs))):.1e}")
    big = float(jax.jit(lambda x: x * 10.0)(jnp.float64(1e300)))
    small = float(jax.jit(lambda x: x / 10.0)(jnp.float64(1e-300)))
    return f"{', '.join(errors)}; 1e300*10 = {big:.3g}, 1e-300/10 = {small:.3g}"


def worker(case: str) -> str:
    """Run `case` in this process; returns its value as text."""
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
    if case == "header":  # the device, from a process of its own like the cases
        devices = jax.devices()
        return (
            f"{devices[0].device_kind} ({jax.default_backend()}), "
            f"{len(devices)} device(s), jax {jax.__version__}"
        )
    if case.startswith("nextafter"):
        dtype = jnp.float64 if case.endswith("f64") else jnp.float32
        x = jnp.asarray(1.0, dtype)
        return repr(float(jax.jit(lambda t: jnp.nextafter(t, -jnp.inf))(x)))
    if case == "arithmetic_f64":
        return _arithmetic()
    if case == "diffrax_f64":
        import diffrax as dfx

        term = dfx.ODETerm(lambda t, y, args: -y)
        solve = jax.jit(lambda y0: dfx.diffeqsolve(term, dfx.Euler(), 0, 1, 0.1, y0))
        return repr(float(solve(jnp.float64(1.0)).ys[-1]))
    if case.startswith(("simulate", "gradient")):
        value = _hh(case.endswith("workaround"), case.startswith("gradient"))
        return repr(value)
    raise ValueError(f"unknown case {case!r}; the cases: {', '.join(CASES)}")


def _error_line(stderr: str) -> str:
    """The line of a failed case's output that says what failed."""
    keys = ("Error:", "Error(", "Check failed", "SIGILL", "SIGABRT", "PC: @")
    lines = [
        line.strip()
        for line in stderr.splitlines()
        if any(k in line for k in keys) and "RAW:" not in line
    ]
    return (lines or stderr.strip().splitlines()[-1:] or ["(no output)"])[-1][:240]


def run(cases: list[str], timeout: float) -> list[list[str]]:
    rows = []
    for case in cases:
        env = dict(os.environ)
        if case.endswith("workaround"):
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {_NO_CODE_MOTION}".strip()
        start = time.perf_counter()
        cmd = [sys.executable, "-m", "benchmarks.tpu_float64", "--worker", case]
        try:
            p = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, env=env
            )
            lines = [x for x in p.stdout.splitlines() if x.startswith("VALUE ")]
            if p.returncode == 0 and lines:
                outcome, value = "ran", lines[-1][len("VALUE ") :]
            else:
                outcome, value = f"failed (exit {p.returncode})", _error_line(p.stderr)
        except subprocess.TimeoutExpired:
            outcome, value = "timed out", f"after {timeout:.0f} s"
        rows.append([case, outcome, value, f"{time.perf_counter() - start:.0f}"])
        print(" | ".join(rows[-1]), file=sys.stderr, flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=CASES)
    parser.add_argument("--timeout", type=float, default=200.0)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print("VALUE", worker(args.worker), flush=True)
        return
    # This process never starts a backend: a TPU admits one process at a time.
    (_, outcome, device, _), *rows = run(["header", *args.cases], args.timeout)
    print(f"# benchmarks/tpu_float64.py on {device if outcome == 'ran' else '?'}")
    print()
    today = datetime.date.today().isoformat()
    print(f"{today}, Python {platform.python_version()}, one process per case.")
    print()
    print(format_table(["case", "outcome", "value or error", "s"], rows))


if __name__ == "__main__":
    main()
