"""The plain fixed-step run as a `jax.lax.scan`: what `diffrax.diffeqsolve` with a
`diffrax.StepTo(grid)` computes, without its per-step bookkeeping."""

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
    (final, _, result), saved = jax.lax.scan(step, init, (starts, ends))
    first = recorder(grid[0], y0, args)
    saved = jax.tree_util.tree_map(
        lambda a, b: jnp.concatenate([a[None], b]), first, saved
    )
    return saved, final, result


def clip_floor(t1):
    """`t1` less 100 ulp, as diffrax's loop computes it to clip step ends (100
    chained `equinox.internal.prevbefore`: ~2,000 XLA operations to compile): in
    closed form where `t1` is a positive normal number at least 99 ulp above the
    smallest one, else by that chain in a loop. Bit for bit the chain's value."""
    t1 = jnp.asarray(t1)
    int_type = {4: jnp.int32, 8: jnp.int64}[t1.dtype.itemsize]
    bits = jax.lax.bitcast_convert_type(t1, int_type)
    tiny = jnp.asarray(jnp.finfo(t1.dtype).tiny, t1.dtype)
    tiny_bits = jax.lax.bitcast_convert_type(tiny, int_type)
    closed = (t1 > 0) & (bits - tiny_bits >= 99)
    return jax.lax.cond(
        closed,
        lambda: jax.lax.bitcast_convert_type(bits - 100, t1.dtype),
        lambda: jax.lax.fori_loop(0, 100, lambda _, t: eqxi.prevbefore(t), t1),
    )
