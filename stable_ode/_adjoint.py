"""Reverse-mode configuration: recursive checkpointing chosen by what the user knows,
and a check of float32 gradients against a better-conditioned probe."""

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, PyTree

from ._solver.exact_recompute import ExactRecompute


try:  # equinox's loop rewriting (buffers, vmap, step limit), as its bounded loop uses
    from equinox.internal._loop.common import common_rewrite, fixed_asarray
except ImportError:  # a private module: without it, `levels` uses the binomial scheme
    common_rewrite = fixed_asarray = None


def _nbytes(tree) -> int:
    leaves = jax.tree_util.tree_leaves(eqx.filter(tree, eqx.is_array_like))
    return sum(int(np.size(x)) * jnp.asarray(x).dtype.itemsize for x in leaves)


def checkpoint_bytes(init_state) -> int:
    """Bytes one checkpoint of diffrax's solve loop holds: every array of the loop
    state (`y`, solver and controller state, step counters, ...) except the output
    buffers (`save_state`, dense output), which are written once and never
    checkpointed."""
    buffers = (init_state.save_state, init_state.dense_ts, init_state.dense_infos)
    return _nbytes(init_state) - _nbytes(buffers)


DEFAULT_MEMORY_BYTES = 64 * 2**20
"""The memory (bytes) `Checkpointing()` gives a solve's checkpoints by default."""


def _fixed_steps(stepsize_controller) -> int | None:
    """The number of grid steps of a fixed-step controller (`SafeStepTo`,
    `diffrax.StepTo`), else `None`."""
    ts = getattr(stepsize_controller, "ts", None)
    if ts is None:
        return None
    return int(np.shape(ts)[0]) - 1


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
    bounded loop has, made the backward pass ~1.6× slower: its branches are not
    fused with the rest of the step). A discarded step is differentiated with
    zero cotangents, and `NonFiniteGuard` keeps a non-finite one from turning
    them into NaN. The grid needs `prod(levels)` iterations; a solve whose
    non-finite steps were retried in sub-steps needs more, so there are outer
    segments up to `max_steps` iterations, each skipped by one `lax.cond` when
    the solve is done (measured on the HH cable: compile 4.0 s and peak RSS ~650
    MB, against 7.9 s and 1,000 MB with a checkpointed `while_loop` for the
    remaining iterations). With `max_steps=None` the rest runs in a checkpointed
    `while_loop`."""
    del kwargs
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


class Checkpointing(dfx.AbstractAdjoint):
    """Reverse mode through the solve by recursive (binomial, "treeverse")
    checkpointing, configured by what you know: a number of checkpoints, nested
    levels as in Jaxley's `checkpoint_lengths`, or a memory budget. Pass it as
    `simulate(model, t1, dt, adjoint=stable_ode.Checkpointing(...))` (or to
    `diffrax.diffeqsolve`). Give at most one of the three.

    It runs `diffrax.RecursiveCheckpointAdjoint(checkpoints=c)` with `c` chosen as
    follows, except for nested `levels`:

    - `checkpoints=c`: `c` as given.
    - `levels=[l1, l2, ...]` (fixed steps only; the product `l1·l2·...` must equal
      the number of grid steps `(t1 - t0)/dt`): with two or more levels, Jaxley's
      `checkpoint_lengths` scheme. diffrax's step loop runs as nested `lax.scan`s of
      lengths `l1, l2, ...`, every level but the innermost under `jax.checkpoint`:
      the forward pass stores `l1` loop states; the backward pass recomputes one
      segment at a time and differentiates it from its stored residuals, so every
      step is recomputed `len(levels) - 1` times. (For non-finite steps retried
      in sub-steps, which need more than `l1·l2·...` iterations, there are further
      outer segments up to the step budget, each skipped by one `lax.cond` when
      the solve is done: `ceil(max_steps / (l2·...))` outer checkpoints in all,
      60 for `[40, 50]` with `simulate`'s budget of 3,000.) Measured on the
      100-compartment HH cable, 50 ms, 2 recordings, `[40, 50]` (2026-11-30,
      each in its own process): gradient 40.2 ms against Jaxley's 42.7 ms with
      the same levels, peak process RSS 539 MB (Jaxley 772 MB), XLA working
      memory 0.44 MB (Jaxley 2.7 MB; 3.3 MB before `ExactRecompute`, when our
      step kept all its intermediates as residuals). On the 100-neuron network
      1.08× Jaxley's time (80 vs 75 ms) at half its working memory.
      One level `[n]` is `checkpoints=n`. (The scans use equinox's private loop
      helpers; should a release move them, `levels` falls back to `l1 + l2 + ...`
      checkpoints of the binomial scheme: the same gradient, other timings.)
    - `memory_bytes=b`: `c = floor(b / s)`, with `s` the bytes of one checkpoint:
      every array of the solve loop's state (`y` — membrane potential and gates of
      every compartment —, solver and controller state, counters), counted as
      `sum(leaf.size × itemsize)` from the actual state when the solve is traced.
      Raises a `ValueError` if `b < s`.
    - none given (default): as many checkpoints as fit in `DEFAULT_MEMORY_BYTES`
      (64 MiB) of loop states, `c = floor(64 MiB / s)` with `s` as for
      `memory_bytes`, but at least diffrax's choice for a known `max_steps`,
      `floor(-1.5 + sqrt(2·max_steps + 0.25)) + 1` (the smallest `c` with
      `max_steps < (c + 1)(c + 2)/2`, so that no step is recomputed more than
      once). So a solve whose every step fits in 64 MiB stores every step and
      recomputes nothing; a longer or larger one recomputes at most once per step.
      For a 100–1,000 compartment HH model one checkpoint is about 4 states × 8
      bytes × n_compartments plus solver state, 3–40 kB: 50–200 ms at `dt` 0.025 ms
      (`simulate` allows 3,000–9,000 steps) is stored entirely for 100
      compartments (10–30 MB) and takes 1,600–9,000 checkpoints for 1,000
      (64 MiB). Measured on the 100-compartment HH cable, 50 ms: the gradient in
      0.55× the time of diffrax's 77 checkpoints (store every step: 9.5 MB of XLA
      working memory instead of 0.5 MB). The budget is per solve: under `vmap`
      every batch member holds its own, so give `checkpoints=` or
      `memory_bytes=` for large batches.

    `c` is capped at `max_steps` (with `c == max_steps` every step is stored and
    nothing is recomputed).

    **Gradients and the configuration.** Whenever it recomputes (fewer checkpoints
    than steps, or `levels`), the solver runs inside `ExactRecompute`: the backward
    sweep recomputes every state with the forward loop's own step, bit for bit, in
    float32 too (diffrax alone recomputes under `jax.vjp`, compiled differently,
    and XLA:CPU's FMA contraction then moves float32 states by a few ulps), and
    differentiates each step from those states. So the configurations differ only
    in the rounding of their backward computations: in float64 all agree to ~1e-15
    (tested); in float32 every configuration that recomputes one step at a time
    (`checkpoints=`, `memory_bytes=`, the default when it recomputes) gives the
    same gradient bit for bit on the tested cable and network, and `levels` (which
    differentiate whole scans) or store-all (another compiled backward pass)
    differ from them by a few eps. It costs one more evaluation of the step per
    recomputed step of the backward sweep (100-compartment cable, 77 checkpoints:
    63 → 66 ms) and shrinks what `levels` store (XLA working memory 3.3 → 0.44 MB
    for `[40, 50]`). A chaotic spiking trajectory can still amplify float32
    rounding itself: see `docs/adjoint.md` and `gradient_check`.

    **Arguments:**

    - `checkpoints`: number of checkpoints (states held in memory), ≥ 1.
    - `levels`: nested checkpoint levels for fixed-step runs, e.g. `(40, 50)` for
      2,000 steps; each ≥ 1.
    - `memory_bytes`: memory budget for checkpoints, bytes.
    """

    checkpoints: int | None = eqx.field(default=None, static=True)
    levels: tuple[int, ...] | None = eqx.field(default=None, static=True)
    memory_bytes: int | None = eqx.field(default=None, static=True)

    def __check_init__(self):
        given = [
            k
            for k, v in (
                ("checkpoints", self.checkpoints),
                ("levels", self.levels),
                ("memory_bytes", self.memory_bytes),
            )
            if v is not None
        ]
        if len(given) > 1:
            raise ValueError(
                f"Checkpointing takes at most one of checkpoints, levels and "
                f"memory_bytes; got {', '.join(given)}"
            )
        if self.checkpoints is not None and not (
            isinstance(self.checkpoints, int) and self.checkpoints >= 1
        ):
            raise ValueError(f"checkpoints={self.checkpoints!r} must be an int >= 1")
        if self.levels is not None:
            if not isinstance(self.levels, tuple):
                raise ValueError(
                    f"levels={self.levels!r} must be a sequence of ints (converted to "
                    "a tuple)"
                )
            if len(self.levels) == 0 or not all(
                isinstance(x, (int, np.integer)) and x >= 1 for x in self.levels
            ):
                raise ValueError(f"levels={self.levels!r} must be ints >= 1")
        if self.memory_bytes is not None and not self.memory_bytes > 0:
            raise ValueError(f"memory_bytes={self.memory_bytes!r} must be > 0")

    def __init__(
        self,
        checkpoints: int | None = None,
        *,
        levels: Sequence[int] | None = None,
        memory_bytes: int | float | None = None,
    ):
        self.checkpoints = checkpoints
        self.levels = None if levels is None else tuple(int(x) for x in levels)
        self.memory_bytes = None if memory_bytes is None else int(memory_bytes)

    def num_checkpoints(
        self,
        *,
        max_steps: int | None,
        init_state=None,
        num_steps: int | None = None,
    ) -> int | None:
        """The number of checkpoints this configuration gives a solve.

        **Arguments:**

        - `max_steps`: the solve's step budget.
        - `init_state`: diffrax's loop state (needed for `memory_bytes`; without
          it the default is diffrax's binomial count alone).
        - `num_steps`: the number of fixed grid steps (needed for `levels`).

        **Returns:** an int, or `None` (diffrax's default) when no option is given
        and `max_steps` is `None`.
        """
        if self.levels is not None:
            if num_steps is None:
                raise ValueError(
                    f"Checkpointing(levels={list(self.levels)}) needs fixed steps "
                    "(controller=None or a SafeStepTo / diffrax.StepTo); use "
                    "checkpoints= or memory_bytes= with an adaptive controller"
                )
            if math.prod(self.levels) != num_steps:
                raise ValueError(
                    f"Checkpointing(levels={list(self.levels)}): the product of the "
                    f"levels, {math.prod(self.levels)}, must equal the number of "
                    f"steps, {num_steps}"
                )
            c = sum(self.levels)
        elif self.memory_bytes is not None:
            if init_state is None:
                raise ValueError("memory_bytes needs the solve's initial state")
            per = checkpoint_bytes(init_state)
            c = self.memory_bytes // per
            if c < 1:
                raise ValueError(
                    f"Checkpointing(memory_bytes={self.memory_bytes}) is less than "
                    f"one checkpoint of this solve ({per} bytes)"
                )
        elif self.checkpoints is not None:
            c = self.checkpoints
        elif max_steps is None:
            return None
        else:
            c = math.floor(-1.5 + math.sqrt(2 * max_steps + 0.25)) + 1
            if init_state is not None:
                c = max(c, DEFAULT_MEMORY_BYTES // checkpoint_bytes(init_state))
        if max_steps is not None:
            c = min(c, max_steps)
        return c

    def loop(self, *, init_state, max_steps, stepsize_controller, **kwargs):
        c = self.num_checkpoints(
            max_steps=max_steps,
            init_state=init_state,
            num_steps=_fixed_steps(stepsize_controller),
        )
        nested = (
            self.levels is not None
            and len(self.levels) > 1
            and common_rewrite is not None
        )
        if nested or c is None or max_steps is None or c < max_steps:
            # The backward sweep recomputes steps: make them the forward's, bit for
            # bit (see `ExactRecompute`).
            kwargs["solver"] = ExactRecompute(kwargs["solver"])
        if nested:
            kwargs.pop("throw", None)
            kwargs.pop("passed_solver_state", None)
            kwargs.pop("passed_controller_state", None)
            return self._loop(
                init_state=init_state,
                max_steps=max_steps,
                stepsize_controller=stepsize_controller,
                inner_while_loop=functools.partial(
                    eqxi.while_loop, kind="checkpointed"
                ),
                outer_while_loop=functools.partial(
                    _nested_while_loop, levels=self.levels
                ),
                **kwargs,
            )
        return dfx.RecursiveCheckpointAdjoint(checkpoints=c).loop(
            init_state=init_state,
            max_steps=max_steps,
            stepsize_controller=stepsize_controller,
            **kwargs,
        )


class GradientCheck(eqx.Module):
    """The result of `gradient_check`.

    **Fields:**

    - `directions`: the probe directions `u_k` (a PyTree like `params` with a
      leading axis of length `n_probes`; unit norm over all leaves).
    - `ad`: `∇loss(params) · u_k` from `jax.grad` of the checked loss.
    - `reference`: the same directional derivatives from the reference (a float64
      loss's gradient, or central finite differences).
    - `rel_error`: `|ad - reference| / max(|reference|, scale)` per probe, where
      `scale` is the largest `|reference|` times `rtol`-independent `1e-3`.
    - `ok`: all `rel_error <= rtol`, and every `ad` finite.
    """

    directions: PyTree[Array]
    ad: Float[Array, " nprobe"]
    reference: Float[Array, " nprobe"]
    rel_error: Float[Array, " nprobe"]
    ok: Bool[Array, ""]


def _as(dtype, tree):
    return jax.tree_util.tree_map(
        lambda x: (
            jnp.asarray(x, dtype)
            if eqx.is_array_like(x)
            and jnp.issubdtype(jnp.asarray(x).dtype, jnp.floating)
            else x
        ),
        tree,
    )


def gradient_check(
    loss: Callable[[PyTree[Array]], Float[Array, ""]],
    params: PyTree[Array],
    *,
    reference: Callable[[PyTree[Array]], Float[Array, ""]] | None = None,
    n_probes: int = 3,
    eps: float = 1e-4,
    rtol: float = 1e-2,
    key: Any = None,
) -> GradientCheck:
    """Check a (float32) gradient against a better-conditioned probe on a few random
    directions: one reverse pass of `loss`, then per probe either one gradient of a
    float64 `reference` or two evaluations of `loss` (central differences).

    In float32, the gradient of a loss through many spikes can be dominated by
    rounding amplified along the trajectory (see `docs/adjoint.md`); this tells you
    whether it is before you train on it.

    **Arguments:**

    - `loss`: `params -> scalar`, the loss whose `jax.grad` you use.
    - `params`: the point to check (a PyTree of floating arrays).
    - `reference`: optional `params -> scalar` computing the same loss more
      accurately, typically on a float64 model (needs `jax_enable_x64`); it is called
      with `params` cast to float64. Without it, central finite differences of
      `loss` itself with relative step `eps` are the reference (evaluated in the
      precision of `loss`: good to about `sqrt(machine epsilon)` only).
    - `n_probes`: number of random directions.
    - `eps`: finite-difference step, relative to the norm of `params` (at least
      `eps` absolute).
    - `rtol`: tolerance on `rel_error` for `ok`.
    - `key`: a `jax.random` key for the directions (default `PRNGKey(0)`).

    **Returns:** a `GradientCheck`.
    """
    if n_probes < 1:
        raise ValueError(f"n_probes={n_probes} must be >= 1")
    key = jax.random.PRNGKey(0) if key is None else key
    leaves, treedef = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(key, len(leaves))
    raw = [
        jax.random.normal(k, (n_probes,) + jnp.shape(x), jnp.float32)
        for k, x in zip(keys, leaves)
    ]
    norm = jnp.sqrt(sum(jnp.sum(r.reshape(n_probes, -1) ** 2, axis=1) for r in raw))
    raw = [r / norm.reshape((n_probes,) + (1,) * (r.ndim - 1)) for r in raw]
    directions = jax.tree_util.tree_unflatten(treedef, raw)

    def dot(g, k):
        return sum(
            jnp.vdot(
                jnp.asarray(a, jnp.float64 if _x64() else jnp.float32),
                jnp.asarray(d[k], jnp.float64 if _x64() else jnp.float32),
            )
            for a, d in zip(jax.tree_util.tree_leaves(g), raw)
        )

    g = jax.grad(loss)(params)
    ad = jnp.stack([dot(g, k) for k in range(n_probes)])
    if reference is not None:
        if not _x64():
            raise ValueError(
                "gradient_check(reference=...) casts params to float64: enable it "
                "with jax.config.update('jax_enable_x64', True)"
            )
        g64 = jax.grad(reference)(_as(jnp.float64, params))
        ref = jnp.stack([dot(g64, k) for k in range(n_probes)])
    else:
        pnorm = float(
            jnp.sqrt(
                sum(jnp.sum(jnp.square(jnp.asarray(x, jnp.float32))) for x in leaves)
            )
        )
        h = eps * max(1.0, pnorm)
        refs = []
        for k in range(n_probes):
            plus = jax.tree_util.tree_unflatten(
                treedef,
                [
                    x + jnp.asarray(h * d[k], jnp.asarray(x).dtype)
                    for x, d in zip(leaves, raw)
                ],
            )
            minus = jax.tree_util.tree_unflatten(
                treedef,
                [
                    x - jnp.asarray(h * d[k], jnp.asarray(x).dtype)
                    for x, d in zip(leaves, raw)
                ],
            )
            refs.append((loss(plus) - loss(minus)) / (2 * h))
        ref = jnp.stack(refs)
    ad, ref = jnp.asarray(ad), jnp.asarray(ref, ad.dtype)
    scale = 1e-3 * jnp.max(jnp.abs(ref))
    rel = jnp.abs(ad - ref) / jnp.maximum(jnp.abs(ref), scale)
    ok = jnp.all(jnp.isfinite(ad)) & jnp.all(rel <= rtol)
    return GradientCheck(directions, ad, ref, rel, ok)


def _x64() -> bool:
    return bool(jax.config.read("jax_enable_x64"))
