"""`Checkpointing`: reverse mode through the solve by recursive checkpointing,
configured by a number of checkpoints, nested levels or a memory budget."""

import functools
import math
from collections.abc import Sequence

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np

from .._compat import common_rewrite
from .._solver.exact_recompute import ExactRecompute
from .nested import _nested_while_loop


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
      60 for `[40, 50]` with `simulate`'s budget of 3,000.) `benchmarks/gradient.py`
      compares it with Jaxley's `checkpoint_lengths` at the same levels.
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
      (64 MiB). Storing every step trades memory for the recomputation diffrax's
      own count would do. The budget is per solve: under `vmap`
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
    recomputed step of the backward sweep, and shrinks what `levels` store (the
    step's intermediates are recomputed instead of kept as residuals). A chaotic
    spiking trajectory can still amplify float32
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
