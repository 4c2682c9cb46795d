"""Process-wide XLA:CPU settings that matter for small models."""

import os


_FLAG = "--xla_backend_extra_options"
_KEY = "xla_cpu_small_while_loop_byte_threshold"
_DEFAULT_BYTES = 1024  # XLA:CPU's own


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


def small_loop_bytes() -> int:
    """XLA:CPU's small-loop threshold in this process, bytes: the value of
    `xla_cpu_small_while_loop_byte_threshold` in `XLA_FLAGS` (which
    `set_cpu_small_loop_bytes` writes), else XLA's default, 1,024. Read when a
    solve is traced, to choose between algorithms whose speed depends on it."""
    value = _DEFAULT_BYTES
    for part in os.environ.get("XLA_FLAGS", "").split():
        if part.startswith(_FLAG + "="):
            for option in part[len(_FLAG) + 1 :].split(","):
                key, _, number = option.partition("=")
                if key == _KEY:
                    try:
                        value = int(number)
                    except ValueError:
                        pass  # XLA refuses it when it starts; nothing to choose by
    return value


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
    over 512 bytes (a saved trajectory is one): a fixed cost per iteration,
    sensitive to the machine's load. For a small model that can be most of the
    time per step. This sets XLA's threshold
    (`XLA_FLAGS=--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=N`)
    for the whole process, keeping any other `XLA_FLAGS`.

    It helps loops that fit under `max_bytes` and were not small before: adaptive
    steps and `simulate(..., optimistic=False)` on one compartment, small
    `jax.vmap` batches, small branched cells. A loop that calls LAPACK (an
    unbranched cable's tridiagonal solve) or accesses more than `max_bytes` per
    step (a large network) is compiled exactly as before. `benchmarks/results.md`
    compares the benchmarks with and without it.

    The setting changes how every JAX loop in the process is run, not what it
    computes; like any change of compilation it may change rounding (the last
    bits of a result, more visibly in float32 and in adaptive runs, where a
    step-size decision can flip).

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
