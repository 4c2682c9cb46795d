"""Process-wide XLA:CPU settings that matter for small models."""

import os


_FLAG = "--xla_backend_extra_options"
_KEY = "xla_cpu_small_while_loop_byte_threshold"


def _with_small_loop_bytes(flags: str, max_bytes: int) -> str:
    """`flags` (an `XLA_FLAGS` string) with `_KEY` set to `max_bytes` inside
    `--xla_backend_extra_options` (a comma-separated `key=value` list), replacing an
    earlier value of the key and keeping every other flag and option."""
    out, found = [], False
    for part in flags.split():
        if part.startswith(_FLAG + "="):
            options = [
                o
                for o in part[len(_FLAG) + 1 :].split(",")
                if o and o.split("=", 1)[0] != _KEY
            ]
            part = f"{_FLAG}={','.join([*options, f'{_KEY}={max_bytes}'])}"
            found = True
        out.append(part)
    if not found:
        out.append(f"{_FLAG}={_KEY}={max_bytes}")
    return " ".join(out)


def _backends_initialised() -> bool:
    """Whether JAX has started its backends (and so read `XLA_FLAGS`). JAX has no
    public query; if its private one moves, assume not (setting the variable is
    then at worst ignored) rather than break `python -m stable_ode`."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):
        return False


def set_cpu_small_loop_bytes(max_bytes: int = 65536) -> None:
    """Let XLA:CPU compile every loop that accesses fewer than `max_bytes` bytes per
    iteration into one function. Call it before JAX runs anything.

    XLA:CPU runs the body of a `while` loop (diffrax's step loop, a `lax.scan`)
    one kernel at a time, except for loops it judges small: those whose body
    accesses fewer than 1,024 bytes per iteration (by its cost analysis) become
    one compiled function. For a loop that is not small, each iteration goes
    through XLA's thunk executor, which builds a dataflow schedule at every
    iteration whenever the body has more than 8 kernels and touches a buffer
    over 512 bytes (a saved trajectory is one): a fixed ~0.4–0.7 µs per
    iteration on a 2-core machine, and sensitive to the machine's load. For a
    small model that is most of the time per step. This sets XLA's threshold
    (`XLA_FLAGS=--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=N`)
    for the whole process, keeping any other `XLA_FLAGS`.

    Measured on a 2-core machine with 65,536 (`benchmarks/README.md`, "Small
    loops on the CPU"): one HH compartment for 100 ms with adaptive
    `CrankNicolson` + `TimingTolerance` 12.6 → 1.5 ms, adaptive `Tsit5` +
    `TimingTolerance` 2.3 → 0.39 ms, `simulate(..., optimistic=False)` 4.0 →
    0.6 ms; a 64-way `jax.vmap` of compartments 8.1 → 5.3 ms (float64) and
    4.9 → 2.1 ms (float32); a 120-compartment branched cell 20.4 → 16.9 ms. The
    100-compartment cable's loop calls LAPACK and the 100-cell network's loop
    accesses more than that per step: XLA compiles them exactly as before.

    The setting changes how every JAX loop in the process is run, not what it
    computes; like any change of compilation it may change rounding. Measured
    on one HH compartment, 50 ms: fixed steps (both `optimistic` modes) and
    adaptive `Tsit5` bit-identical; adaptive `CrankNicolson` 2e-14 mV apart in
    float64, 0.004 mV in float32.

    `python -m stable_ode` applies 65,536 unless `XLA_FLAGS` already names
    the threshold. `import stable_ode` does not: it would change every JAX
    program in your process. XLA reads `XLA_FLAGS` once, when JAX starts its
    backends, so call this before anything runs, or set `XLA_FLAGS` in the
    shell.

    **Arguments:**

    - `max_bytes`: bytes accessed per loop iteration below which a loop is
      compiled into one function; a positive `int` (XLA's default is 1,024).

    **Returns:** nothing; it sets the `XLA_FLAGS` environment variable.

    **Raises:**

    - `ValueError` if `max_bytes` is not a positive integer.
    - `RuntimeError` if JAX has already initialised its backends (it reads
      `XLA_FLAGS` once, so the setting would be silently ignored): call this
      first thing, or set `XLA_FLAGS` in the shell.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError(
            f"max_bytes must be a positive int (bytes per loop iteration), got "
            f"{max_bytes!r}"
        )
    if _backends_initialised():
        raise RuntimeError(
            "set_cpu_small_loop_bytes must be called before JAX runs anything: "
            "its backends are already initialised and XLA has read XLA_FLAGS. "
            "Call it right after `import stable_ode`, or set "
            f"XLA_FLAGS='{_FLAG}={_KEY}={max_bytes}' in the shell."
        )
    os.environ["XLA_FLAGS"] = _with_small_loop_bytes(
        os.environ.get("XLA_FLAGS", ""), max_bytes
    )


def _command_line_default(max_bytes: int = 65536) -> None:
    """What `python -m stable_ode` does before anything else: raise the threshold
    (`set_cpu_small_loop_bytes`) unless `XLA_FLAGS` already sets it, so a user's
    own value, e.g. XLA's default 1024, wins."""
    if _KEY not in os.environ.get("XLA_FLAGS", "") and not _backends_initialised():
        set_cpu_small_loop_bytes(max_bytes)
