"""diffrax's step loop as nested checkpointed scans, for `Checkpointing(levels=...)`
(Jaxley's `checkpoint_lengths`)."""

import math

import equinox.internal as eqxi
import jax

from .._compat import common_rewrite, fixed_asarray


def _nested_while_loop(
    cond_fun, body_fun, init_val, *, max_steps, buffers=None, levels, **kwargs
):
    """diffrax's step loop as nested `lax.scan`s of lengths `levels` (outermost
    first), every level but the innermost under `jax.checkpoint`: Jaxley's
    `checkpoint_lengths`. Reverse mode stores one loop state per outer segment,
    recomputes each segment once and differentiates it with its residuals
    stored: every step recomputed `len(levels) - 1` times.

    Every iteration inside a segment runs the step; once `cond_fun` fails (the
    solve is done) equinox's loop rewriting discards its results with a select
    (`makes_false_steps=True`; a `lax.cond` around each step, as equinox's
    bounded loop has, would keep its branches from fusing with the rest of the
    step and slow the backward pass). A discarded step is differentiated with
    zero cotangents, and `NonFiniteGuard` keeps a non-finite one from turning
    them into NaN. The grid needs `prod(levels)` iterations; a solve whose
    non-finite steps were retried in sub-steps needs more, so there are outer
    segments up to `max_steps` iterations, each skipped by one `lax.cond` when
    the solve is done (cheaper to compile, and smaller, than a checkpointed
    `while_loop` for the remaining iterations). With `max_steps=None` the rest
    runs in a checkpointed `while_loop`.

    Needs equinox's private loop helpers (`stable_ode._compat`); the caller
    checks that they exist."""
    del kwargs
    assert common_rewrite is not None and fixed_asarray is not None
    inner = math.prod(levels[1:])
    # Outer segments to cover `max_steps` iterations: the grid needs
    # `prod(levels)` unless a non-finite step was retried in sub-steps; a segment
    # the solve no longer needs is skipped by a `lax.cond` (one per segment).
    if max_steps is None:
        outer = levels[0]
    else:
        outer = max(levels[0], -(-max_steps // inner))
    bound = outer * inner if max_steps is None else max_steps
    init_val = jax.tree_util.tree_map(fixed_asarray, init_val)
    cond_, body_, val, _ = common_rewrite(
        cond_fun, body_fun, init_val, bound, buffers, makes_false_steps=True
    )

    def run(val, lengths):
        if not lengths:
            return body_(val)

        def scan_fn(v, _):
            return run(v, lengths[1:]), None

        if len(lengths) > 1:
            scan_fn = jax.checkpoint(scan_fn, prevent_cse=False)
        return jax.lax.scan(scan_fn, val, xs=None, length=lengths[0])[0]

    def segment(v, _):
        return jax.lax.cond(
            cond_(v), lambda v: run(v, tuple(levels[1:])), lambda v: v, v
        ), None

    if len(levels) > 1:
        segment = jax.checkpoint(segment, prevent_cse=False)
    _, _, _, val = jax.lax.scan(segment, val, xs=None, length=outer)[0]
    if max_steps is None:
        val = eqxi.while_loop(
            cond_fun, body_fun, val, buffers=buffers, kind="checkpointed"
        )
    return val
