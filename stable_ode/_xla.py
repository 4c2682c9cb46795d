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


def _set_xla_flags(caller: str, merged, shell: str) -> None:
    """Set `XLA_FLAGS` to `merged(XLA_FLAGS)`, or, if JAX has started its
    backends (and so read `XLA_FLAGS` already), raise a `RuntimeError` that
    names `caller` and the `shell` setting to use instead."""
    if _backends_initialised():
        raise RuntimeError(
            f"{caller} must be called before JAX runs anything: its backends "
            "are already initialised and XLA has read XLA_FLAGS. Call it right "
            f"after `import stable_ode`, or set XLA_FLAGS='{shell}' in the shell."
        )
    os.environ["XLA_FLAGS"] = merged(os.environ.get("XLA_FLAGS", ""))


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
    _set_xla_flags(
        "set_cpu_small_loop_bytes",
        lambda flags: _with_small_loop_bytes(flags, max_bytes),
        f"{_FLAG}={_KEY}={max_bytes}",
    )


_SCHEDULER = "--xla_cpu_enable_concurrency_optimized_scheduler"


def _with_scheduler(flags: str, concurrent: bool) -> str:
    """`flags` (an `XLA_FLAGS` string) with `_SCHEDULER` set to `concurrent`,
    replacing an earlier value and keeping every other flag."""
    kept = [p for p in flags.split() if p.split("=", 1)[0] != _SCHEDULER]
    return " ".join([*kept, f"{_SCHEDULER}={str(concurrent).lower()}"])


def set_cpu_concurrent_schedule(concurrent: bool = False) -> None:
    """Choose how XLA:CPU orders the kernels of a loop body: for running
    several at once (`True`, XLA's default) or one after the other (`False`,
    this function's default). Call it before JAX runs anything.

    A loop body of more than 8 kernels that touches a buffer over 512 bytes
    (`set_cpu_small_loop_bytes` describes the ways XLA:CPU runs a loop) goes
    through XLA's thunk executor, which hands kernels that are ready at the
    same time to other threads of its pool. XLA's default schedule orders the
    kernels so that many are ready at once. On a machine with few cores, for
    a step of many small kernels (a network's events, a model with many
    mechanism groups), handing them over costs more than running them: the
    events benchmark's network ran faster in a process limited to one core
    than in one allowed two, and with this setting as fast with two. A model
    whose kernels are large (a reconstructed cell of ~900 compartments) ran
    at the same speed either way; on a machine with many cores a large
    model's kernels may gain from running at once, so measure your own
    model both ways (`benchmarks/results.md` compares the benchmarks).

    It sets `XLA_FLAGS=--xla_cpu_enable_concurrency_optimized_scheduler=...`
    for the whole process, keeping any other `XLA_FLAGS`. It changes the
    order in which kernels run, not what they compute. `python -m stable_ode`
    applies it (`False`) unless `XLA_FLAGS` already names the flag; `import
    stable_ode` does not, since it would change every JAX program in your
    process.

    **Arguments:**

    - `concurrent`: `False` to order the kernels for one thread; `True` for
      XLA's default.

    **Returns:** nothing; it sets the `XLA_FLAGS` environment variable.

    **Raises:**

    - `ValueError` if `concurrent` is not a `bool`.
    - `RuntimeError` if JAX has already initialised its backends (it reads
      `XLA_FLAGS` once, so the setting would be silently ignored).
    """
    if not isinstance(concurrent, bool):
        raise ValueError(f"concurrent must be a bool, got {concurrent!r}")
    _set_xla_flags(
        "set_cpu_concurrent_schedule",
        lambda flags: _with_scheduler(flags, concurrent),
        f"{_SCHEDULER}={str(concurrent).lower()}",
    )


def _command_line_default(max_bytes: int = 65536) -> None:
    """What `python -m stable_ode` does before anything else: raise the threshold
    (`set_cpu_small_loop_bytes`) and order loop bodies for one thread
    (`set_cpu_concurrent_schedule`) unless `XLA_FLAGS` already sets them, so a
    user's own values, e.g. XLA's default threshold 1024, win."""
    if _backends_initialised():
        return
    if _KEY not in os.environ.get("XLA_FLAGS", ""):
        set_cpu_small_loop_bytes(max_bytes)
    if _SCHEDULER not in os.environ.get("XLA_FLAGS", ""):
        set_cpu_concurrent_schedule(False)
