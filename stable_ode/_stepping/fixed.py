"""Fixed steps: `FixedSteps` and its pipeline (the plain-first run, with the
safe grid solve of `grid.py` as its fallback, and the custom derivative that
makes both one computation)."""

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._adjoint import Checkpointing
from .._controller import SafeStepTo
from .._misc import tree_all_finite
from .._results import RESULTS
from .._term import MembraneTerm
from ..events._clip import grid_clip
from ..events._stepping import deliver_at_start, fixed_span, has_sequential, with_events
from ._base import (
    AbstractStepping,
    check_resolution,
    fixed_types,
    make_stats,
    Outcome,
    solution_stats,
    whole_steps,
)
from .check import check_terms
from .fallback import where_failed
from .grid import grid_solve, GridConfig, safe, safe_solve
from .guard import guard, missing_tolerances, NonFiniteGuard
from .lanes import on_lanes
from .scan import grid_scan


class FixedSteps(AbstractStepping):
    r"""Steps of exactly `dt` on the grid `t0 + k·dt`, through
    `stable_ode.SafeStepTo`: a step whose new state is not finite is retried in
    halves (then quarters, ...) and the grid resumes after it, so no non-finite
    state is ever accepted and the saved samples are the grid's.

    **The plain-first policy** (`plain_first=True`, the default): the grid is first
    run plainly, with no per-step finiteness test or retry bookkeeping (where
    nothing differentiates that run, as a `jax.lax.scan` of the solver's steps
    over the grid, without `diffeqsolve`'s step control and output buffers; else
    `diffeqsolve` with a `diffrax.StepTo`), and only if anything in that run came
    out non-finite (or the step budget is short of the grid) is the safe solve run
    instead. Both give the
    same steps, bit for bit, when nothing is non-finite, so the result is always
    the safe solve's. It pays where per-step overhead dominates (small models,
    `vmap`ped batches); it costs a second compiled loop (a call outside `jit`,
    `grad` and `vmap` compiles the safe loop only when its plain run fails), a
    failing run solved twice, and `Simulation.solution` is `None`.
    `plain_first=False`: the safe solve only.

    **Derivatives** (`safe_gradient=True`, the default) come from the safe solve
    alone: with an adjoint for reverse mode only (`stable_ode.Checkpointing`,
    `diffrax.RecursiveCheckpointAdjoint`) through a `custom_vjp` around the
    plain-first value, so a gradient compiles one loop; with an adjoint that
    supports forward mode (where a `custom_vjp` would block `jax.jvp`) by running
    the safe solve only. `safe_gradient=False` differentiates the plain-first
    choice as it stands (both loops).

    **Small float64 models** on the CPU (2–15 compartments, not a multiple of
    4, mechanisms only, a cable or point neurons) are stepped with decoupled
    copies of their last compartment appended up to a multiple of 4, so that
    XLA vectorises their rate functions (`lanes.py`, `docs/performance.md`);
    `solve` returns the unpadded model's samples and states.
    """

    dt: float = eqx.field(static=True, converter=float)
    save_every: int = eqx.field(static=True, default=1)
    plain_first: bool = eqx.field(static=True, default=True)
    safe_gradient: bool = eqx.field(static=True, default=True)
    controller: SafeStepTo | None = None

    def __check_init__(self):
        if not (np.isfinite(self.dt) and self.dt > 0):
            raise ValueError(f"dt must be a finite number > 0 ms, got {self.dt}")
        if not (isinstance(self.save_every, int) and self.save_every >= 1):
            raise ValueError(
                f"save_every must be a whole number >= 1, got {self.save_every!r}"
            )
        if self.controller is not None and not isinstance(self.controller, SafeStepTo):
            raise ValueError(
                "controller must be a stable_ode.SafeStepTo or None, got "
                f"{type(self.controller).__name__}"
            )

    def n_steps(self, t0: float, t1: float) -> int:
        """The number of grid steps of `dt` from `t0` to `t1` (ms)."""
        return whole_steps(float(t0), float(t1), float(self.dt), "dt")

    def max_steps(self, t0: float, t1: float) -> int:
        n = self.n_steps(t0, t1)
        return n + max(1000, n // 10)

    def grid(self, t0: float, t1: float, dtype) -> np.ndarray:
        """The grid times `t0 + k·dt` (ms) in `dtype`, the last one exactly `t1`."""
        n = self.n_steps(t0, t1)
        dtype = np.dtype(dtype)
        # A NumPy constant, not a traced computation: XLA then folds the grid's
        # checks (`SafeStepTo` and `StepTo` test that it increases) at compile time.
        grid = np.asarray(t0, dtype) + np.asarray(self.dt, dtype) * np.arange(
            n + 1, dtype=dtype
        )
        grid[-1] = t1
        check_resolution(grid, "dt", self.dt)
        return grid

    def save_times(self, t0: float, t1: float, dtype) -> np.ndarray:
        n = self.n_steps(t0, t1)
        if n % self.save_every:
            raise ValueError(
                f"save_dt = {self.save_every} * dt = {self.save_every * self.dt} ms "
                f"must divide t1 - t0 = {t1 - t0} ms (else the last samples would "
                "be dropped)"
            )
        return self.grid(t0, t1, dtype)[:: self.save_every]

    def check(self, solver: dfx.AbstractSolver, dtype) -> None:
        del dtype
        check_terms(solver)
        names = missing_tolerances(solver)
        if names:
            raise ValueError(
                f"solver={type(solver).__name__}(...) takes its root finder's "
                f"{'/'.join(names)} from an adaptive step-size controller, which "
                "fixed steps do not have: use adaptive steps (e.g. controller="
                "diffrax.PIDController(rtol=..., atol=...)) or give the root finder "
                "its own tolerances"
            )

    def prepare(self, model, t0: float, t1: float):
        self.save_times(t0, t1, model.dtype)  # the checks
        grid = self.grid(t0, t1, model.dtype)
        if self.controller is not None and self.controller.ts.shape != grid.shape:
            raise ValueError(
                f"controller=SafeStepTo(ts) needs the grid t0 + k*dt: {len(grid)} "
                f"times from {t0} to {t1} ms, got {self.controller.ts.shape[0]}"
            )
        return jnp.asarray(grid)

    def solve(
        self, model, y0, times, solver, adjoint, max_steps, progress_meter, recorder
    ) -> Outcome:
        return on_lanes(
            self._solve,
            model, y0, times, solver, adjoint, max_steps, progress_meter, recorder,
        )  # fmt: skip

    def _solve(
        self, model, y0, times, solver, adjoint, max_steps, progress_meter, recorder
    ) -> Outcome:
        cfg = self._config(
            model, times, solver, adjoint, max_steps, progress_meter, recorder
        )
        n = times.shape[0] - 1
        if not self.runs_plain_first(adjoint, max_steps, n, model):
            # events due at t0 of point processes whose NET_RECEIVE runs in turn
            y0 = deliver_at_start(model, times[0], y0, fixed_span(self.dt))
            sol, saved, final, t_end = safe_solve((model, y0), cfg)
            stats, result = solution_stats(sol, t_end)
            return Outcome(times[:: self.save_every], saved, stats, result, final, sol)
        run = _plain_first_safe_vjp if self.safe_gradient else _plain_first
        saved, final, stats, result = run((model, y0), cfg)
        return Outcome(times[:: self.save_every], saved, stats, result, final, None)

    def solve_plain(
        self, model, y0, times, solver, adjoint, max_steps, progress_meter, recorder
    ) -> tuple[Outcome, Array]:
        """The plain run of the plain-first policy alone, for a call that nothing
        differentiates or batches (`simulate` called outside `jit`, `grad` and
        `vmap`): `(outcome, ok)`, where the outcome is `solve`'s whenever `ok` (no
        non-finite value, the grid reached); else the caller runs the safe solve
        (`FixedSteps(plain_first=False)`), which is what `solve` returns then. So
        an eager call compiles the safe loop only if it needs it. Only where
        `runs_plain_first`."""
        return on_lanes(
            self._solve_plain,
            model, y0, times, solver, adjoint, max_steps, progress_meter, recorder,
        )  # fmt: skip

    def _solve_plain(
        self, model, y0, times, solver, adjoint, max_steps, progress_meter, recorder
    ) -> tuple[Outcome, Array]:
        cfg = self._config(
            model, times, solver, adjoint, max_steps, progress_meter, recorder
        )
        fast, ok = _plain_run((model, y0), cfg, differentiated=not self.safe_gradient)
        saved, final, stats, result = fast()
        outcome = Outcome(times[:: self.save_every], saved, stats, result, final, None)
        return outcome, ok

    def runs_plain_first(
        self, adjoint: dfx.AbstractAdjoint, max_steps: int, n_steps: int, model=None
    ) -> bool:
        """Whether `solve` runs plain first with this adjoint, step budget, number
        of grid steps and `model`: `plain_first`, and, with `safe_gradient`, an
        adjoint for reverse mode only; a budget short of the grid fails either
        way, and the safe solve says where. A model with point processes whose
        NET_RECEIVE runs in turn at each event runs the safe solve only (its
        steps are cut at those events: `stable_ode.events._clip.GridClip`)."""
        safe_only = not self.plain_first or (
            self.safe_gradient and not _reverse_only(adjoint)
        )
        if model is not None and has_sequential(model):
            safe_only = True
        return not (safe_only or max_steps < n_steps)

    def _config(
        self, model, times, solver, adjoint, max_steps, progress_meter, recorder
    ):
        if isinstance(adjoint, Checkpointing) and adjoint.levels is not None:
            # its check of the levels against the grid, which its loop makes, for
            # the plain run too (a scan, which no adjoint runs)
            adjoint.num_checkpoints(max_steps=max_steps, num_steps=times.shape[0] - 1)
        controller = SafeStepTo(times) if self.controller is None else self.controller
        check_error = controller.check_error
        # events: steps also land on the events of point processes whose
        # NET_RECEIVE runs in turn (no-op without them), and the point-process
        # hooks run around each step (no-op without point processes)
        controller = grid_clip(controller, model)
        solver = with_events(solver, model, fixed_span(self.dt))
        return GridConfig(
            solver=guard(solver, controller, check_error=check_error),
            controller=controller,
            grid=times,
            every=self.save_every,
            adjoint=adjoint,
            max_steps=max_steps,
            progress_meter=progress_meter,
            recorder=recorder,
        )


def _reverse_only(adjoint: dfx.AbstractAdjoint) -> bool:
    """Whether `adjoint` supports reverse mode only (so that a `custom_vjp` around
    the solve takes nothing away)."""
    return isinstance(adjoint, (dfx.RecursiveCheckpointAdjoint, Checkpointing))


def _plain_run(model_y0, cfg: GridConfig, differentiated: bool):
    """The grid run with `diffrax.StepTo` (no per-step finiteness test or retry
    bookkeeping): `(take, ok)`, where `take()` gives its `(saved, final, stats,
    result)` and `ok` says whether they stand (nothing non-finite, the grid
    reached). `differentiated=False` runs it without the `NonFiniteGuard`: the
    guard only matters to derivatives."""
    model, y0 = model_y0
    grid = cfg.grid
    n = grid.shape[0] - 1
    solver = cfg.solver
    if not differentiated and isinstance(solver, NonFiniteGuard):
        solver = solver.solver
    if differentiated or not isinstance(cfg.progress_meter, dfx.NoProgressMeter):
        fast = grid_solve(model, y0, cfg, solver, dfx.StepTo(grid), n)
        saved, final = fast.ys
        final = jax.tree_util.tree_map(lambda x: x[0], final)
        counts = tuple(
            fast.stats[k]
            for k in ("num_steps", "num_accepted_steps", "num_rejected_steps")
        )
        fast_result = fast.result
    else:
        args = model if cfg.recorder.needs_model else None
        saved, final, fast_result = grid_scan(
            MembraneTerm(model), solver, grid, y0, args, cfg.recorder
        )
        counts = (n, n, 0)
    ok = tree_all_finite(final) & (fast_result == dfx.RESULTS.successful)
    dtype = grid.dtype

    def take():
        stats = make_stats(
            num_steps=counts[0],
            num_accepted=counts[1],
            num_rejected=counts[2],
            num_nonfinite_rejected=0,
            min_dt=jnp.min(grid[1:] - grid[:-1]),
            t_fail=jnp.inf,
        )
        return (
            saved[:: cfg.every],
            final,
            fixed_types(stats, dtype),
            RESULTS.promote(fast_result),
        )

    return take, ok


def _plain_first(model_y0, cfg: GridConfig, differentiated: bool = True):
    """`_plain_run`, and if its result does not stand, the safe solve instead.
    Returns `(saved, final, stats, result)`."""
    take_fast, ok = _plain_run(model_y0, cfg, differentiated)
    if not differentiated:
        # Under `vmap`, the safe solve for the failing members only (no
        # derivative goes through this value).
        return where_failed(lambda a: safe(*a), (model_y0, cfg), take_fast(), ok)
    # `unvmap_all`: under `vmap` a real branch; one non-finite member sends the
    # whole batch down the safe path (each member's result is its own either way).
    return jax.lax.cond(eqxi.unvmap_all(ok), take_fast, lambda: safe(model_y0, cfg))


def _safe_parts(dynamic, static, cfg):
    """`safe` as `((saved, final), (stats, result))`, for `jax.vjp(...,
    has_aux=True)`: only the saved samples and the final state carry a gradient. The
    statistics are step control (grid times, counts; `min_dt` under
    `stop_gradient`), constant in the parameters."""
    saved, final, stats, result = safe(eqx.combine(dynamic, static), cfg)
    return (saved, final), (stats, result)


@eqx.filter_custom_vjp
def _plain_first_safe_vjp(model_y0, cfg: GridConfig):
    """`_plain_first` for the value; reverse mode differentiates `safe` alone (so a
    gradient compiles and runs the safe loop only)."""
    return _plain_first(model_y0, cfg, differentiated=False)


@_plain_first_safe_vjp.def_fwd
def _(perturbed, model_y0, cfg: GridConfig):
    del perturbed
    dynamic, static = eqx.partition(model_y0, eqx.is_inexact_array)
    (saved, final), vjp_fn, (stats, result) = jax.vjp(
        lambda d: _safe_parts(d, static, cfg), dynamic, has_aux=True
    )
    return (saved, final, stats, result), vjp_fn


@_plain_first_safe_vjp.def_bwd
def _(vjp_fn, grad_obj, perturbed, model_y0, cfg: GridConfig):
    del perturbed
    g_saved, g_final = grad_obj[0], grad_obj[1]
    # Outputs that were not differentiated come as `None`: zero cotangents, made
    # from the known output shapes (not kept from the forward pass).
    model, y0 = model_y0
    dtype = cfg.grid.dtype
    n_save = cfg.grid[:: cfg.every].shape[0]
    zeros = cfg.recorder.zeros(n_save, model.n_compartments, dtype)
    zero_final = jax.tree_util.tree_map(jnp.zeros_like, y0)

    def fill(g, zero):
        if g is None:
            return zero
        return jax.tree_util.tree_map(
            lambda g, z: z if g is None else g, g, zero, is_leaf=lambda g: g is None
        )

    (g_dynamic,) = vjp_fn((fill(g_saved, zeros), fill(g_final, zero_final)))
    return g_dynamic


FixedSteps.__init__.__doc__ = """**Arguments:**

- `dt`: the step, ms; it must divide `t1 - t0` into a whole number of steps.
- `save_every`: return every `save_every`-th grid sample (default 1: all); it must
    divide the number of steps.
- `plain_first`: the plain-first policy above (default `True`).
- `safe_gradient`: derivatives from the safe solve alone (default `True`).
- `controller`: a `stable_ode.SafeStepTo` of your own on the grid `t0 + k·dt` (its
    `shrink`, `max_nonfinite`, `dtmin`, `check_error`); `None` (default) for
    `SafeStepTo(grid)`.
"""
