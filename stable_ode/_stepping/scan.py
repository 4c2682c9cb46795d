"""The plain fixed-step run as a `jax.lax.scan`: what `diffrax.diffeqsolve` with a
`diffrax.StepTo(grid)` computes, without its per-step bookkeeping."""

import math

import diffrax as dfx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp


def grid_scan(terms, solver, grid, y0, args, recorder):
    """The steps of `solver` over `grid` (ms) from `y0`, as `diffeqsolve(terms,
    solver, grid[0], grid[-1], None, y0, args, stepsize_controller=StepTo(grid),
    saveat=SaveAt(t0=True, steps=True, fn=recorder))` takes them: the same
    steps from the same states (its promotion of `y0` to the time dtype, its step
    times, which end a step within 100 ulp of `grid[-1]` at `grid[-1]`, and the
    recorder at `grid[0]` and after every step), without its step control,
    output buffers and event handling, which a run with nothing to reject does not
    need: it compiles faster and does less work per step. For a value only: a
    scan differentiated in reverse mode would store every step.

    **Returns:** `(saved, final, result)`: the recorder's outputs stacked over the
    `len(grid)` times, the final state, and the first unsuccessful step's
    `diffrax.RESULTS` (`successful` if none)."""
    with jax.numpy_dtype_promotion("standard"):
        y0 = jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, jnp.result_type(x, grid.dtype)), y0
        )
    # diffeqsolve's first step ends at `ts[1]`; every later end is clipped.
    t1 = grid[-1]
    clipped = jnp.where(grid[2:] > clip_floor(t1), t1, grid[2:])
    ends = jnp.concatenate([grid[1:2], clipped])
    starts = jnp.concatenate([grid[:1], ends[:-1]])
    state = solver.init(terms, grid[0], ends[0], y0, args)

    def step(carry, t):
        y, state, result = carry
        y, _, _, state, step_result = solver.step(
            terms, t[0], t[1], y, args, state, False
        )
        ok = result == dfx.RESULTS.successful
        result = dfx.RESULTS.where(ok, step_result, result)
        return (y, state, result), recorder(t[1], y, args)

    init = (y0, state, dfx.RESULTS.successful)
    first = recorder(grid[0], y0, args)  # (also the size of a saved row)
    row = max(_largest(first), grid.dtype.itemsize)
    size = chunk_size(starts.shape[0], row, _total(init))
    if size is None:
        (final, _, result), saved = jax.lax.scan(step, init, (starts, ends))
    else:
        (final, _, result), saved = _chunked_scan(step, init, (starts, ends), size)
    saved = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a[None], b]), first, saved
    )
    return saved, final, result


CHUNK_BYTES = 512
"""The largest buffer (bytes) under which XLA:CPU runs a loop body's kernels one
after another rather than through a dataflow schedule built at every iteration
(its thunk executor's `execute_sequential_buffer_threshold`)."""

SMALL_CARRY_BYTES = 256
"""A loop whose carry takes at most this many bytes is not chunked: XLA:CPU
compiles the step loop of so small a model (one HH compartment) into one
function, to which chunks only add an outer loop."""


def chunk_size(n: int, row_bytes: int, carry_bytes: int) -> int | None:
    """The steps per chunk of `_chunked_scan` for `n` steps whose largest
    scanned input or saved output takes `row_bytes` bytes a step, and whose
    carry (state and solver state) takes `carry_bytes`: the largest divisor of
    `n` whose chunk of each takes at most `CHUNK_BYTES`, or `None` (one flat
    scan) where that is under 4 steps or `n` itself, or the carry is small
    (`SMALL_CARRY_BYTES`)."""
    if carry_bytes <= SMALL_CARRY_BYTES:
        return None
    most = CHUNK_BYTES // max(row_bytes, 1)
    size = max((k for k in range(1, min(most, n) + 1) if n % k == 0), default=1)
    return None if size < 4 or size == n else size


def _sizes(tree) -> list[int]:
    """The bytes of each leaf of `tree` (arrays, tracers or Python scalars)."""
    return [
        math.prod(jnp.shape(x)) * jnp.result_type(x).itemsize
        for x in jax.tree_util.tree_leaves(tree)
    ]


def _largest(tree) -> int:
    """The bytes of the largest leaf of `tree`."""
    return max(_sizes(tree), default=0)


def _total(tree) -> int:
    """The bytes of all leaves of `tree`."""
    return sum(_sizes(tree))


def _chunked_scan(step, init, xs, size: int):
    """`jax.lax.scan(step, init, xs)` as a scan over chunks of `size` steps,
    each a scan of its own: the same steps in the same order, the outputs
    stacked as one scan would. The inner loop's scanned inputs and outputs
    (`size` rows) stay under `CHUNK_BYTES`, so that on the CPU, for a small
    model, XLA runs its body kernel after kernel rather than through a
    dataflow schedule built at every step (`docs/performance.md`); the
    trajectory is written once per chunk."""

    def chunk(carry, x):
        return jax.lax.scan(step, carry, x)

    def split(x):
        return x.reshape((x.shape[0] // size, size) + x.shape[1:])

    def merge(x):
        return x.reshape((x.shape[0] * size,) + x.shape[2:])

    carry, ys = jax.lax.scan(chunk, init, jax.tree_util.tree_map(split, xs))
    return carry, jax.tree_util.tree_map(merge, ys)


def clip_floor(t1):
    """`t1` less 100 ulp, as diffrax's loop computes it to clip step ends (100
    chained `equinox.internal.prevbefore`: ~2,000 XLA operations to compile): in
    closed form where `t1` is a positive normal number at least 99 ulp above the
    smallest one, else by that chain in a loop. Bit for bit the chain's value.
    The bits are unsigned and the `cond` passes only them: XLA:TPU's compiler
    aborted on a float64 bitcast to int64 and on a `cond` over float64
    scalars."""
    t1 = jnp.asarray(t1)
    uint = {4: jnp.uint32, 8: jnp.uint64}[t1.dtype.itemsize]
    bits = jax.lax.bitcast_convert_type(t1, uint)
    tiny = jnp.asarray(jnp.finfo(t1.dtype).tiny, t1.dtype)
    tiny_bits = jax.lax.bitcast_convert_type(tiny, uint)
    closed = (t1 > 0) & (bits >= tiny_bits + 99)

    def chain(b):
        t = jax.lax.bitcast_convert_type(b, t1.dtype)
        t = jax.lax.fori_loop(0, 100, lambda _, t: eqxi.prevbefore(t), t)
        return jax.lax.bitcast_convert_type(t, uint)

    out = jax.lax.cond(closed, lambda b: b - 100, chain, bits)
    return jax.lax.bitcast_convert_type(out, t1.dtype)
