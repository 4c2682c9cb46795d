"""The fixed-step grid solves: `diffeqsolve` over the grid (`SafeStepTo` or a
plain `StepTo`), and the safe solve's samples at the grid times."""

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._misc import search_sorted
from .._term import MembraneTerm
from ._base import fixed_types, Recorder, solution_stats


class GridConfig(eqx.Module):
    """Everything but the model and initial state that a fixed-step solve uses."""

    solver: dfx.AbstractSolver
    controller: dfx.AbstractStepSizeController  # SafeStepTo, or GridClip around one
    grid: Float[Array, " n"]
    every: int = eqx.field(static=True)
    adjoint: dfx.AbstractAdjoint
    max_steps: int = eqx.field(static=True)
    progress_meter: dfx.AbstractProgressMeter
    recorder: Recorder


def grid_solve(model, y0, cfg: GridConfig, solver, controller, max_steps):
    """`diffeqsolve` over `cfg.grid`, saving the recorder at `t0` and every step,
    and the final state. The controller's state is saved only where it keeps
    `StepStats` (`SafeStepTo`, `GridClip`; not `diffrax.StepTo`), for the
    statistics."""
    grid = cfg.grid
    return dfx.diffeqsolve(
        MembraneTerm(model),
        solver,
        grid[0],  # times in the model's dtype, as the grid (float32 models)
        grid[-1],
        None,
        y0,
        args=model if cfg.recorder.needs_model else None,  # ion, RANGE recordings
        saveat=dfx.SaveAt(
            subs=[
                dfx.SubSaveAt(t0=True, steps=True, fn=cfg.recorder),
                dfx.SubSaveAt(t1=True),
            ],
            controller_state=not isinstance(controller, dfx.StepTo),
        ),
        stepsize_controller=controller,
        adjoint=cfg.adjoint,
        max_steps=max_steps,
        throw=False,
        progress_meter=cfg.progress_meter,
    )


def safe_solve(model_y0, cfg: GridConfig):
    """The safe fixed-step solve (`SafeStepTo`): `(solution, saved, final state,
    t_end)`, `saved` the recorder's samples at the save times."""
    model, y0 = model_y0
    grid, every = cfg.grid, cfg.every
    n = grid.shape[0] - 1
    sol = grid_solve(model, y0, cfg, cfg.solver, cfg.controller, cfg.max_steps)
    ts, _ = sol.ts
    saved, final = sol.ys
    # Saved steps include any sub-steps of non-finite retries; keep the grid
    # times. After a failure, the last saved step (the last good state) is held.
    # Without retries the saved steps are the grid: a strided slice, not a search
    # (which, batched under `vmap`, costs more than the solve).
    n_saved = ts.shape[-1]
    plain = jnp.arange(0, n + 1, every, dtype=jnp.int32)
    plain = jnp.minimum(plain, n_saved - 1)

    def search():
        return search_sorted(ts, grid[::every], "right") - 1

    retried = (sol.stats["num_rejected_steps"] > 0) | (
        sol.stats["num_accepted_steps"] != n
    )
    idx = jax.lax.cond(eqxi.unvmap_any(retried), search, lambda: plain)
    t_end = ts[jnp.sum(jnp.isfinite(ts)) - 1]
    final = jax.tree_util.tree_map(lambda x: x[0], final)
    return sol, saved[idx], final, t_end


def safe(model_y0, cfg: GridConfig):
    """`safe_solve` as `(saved, final, stats, result)`, fixed stats dtypes."""
    sol, saved, final, t_end = safe_solve(model_y0, cfg)
    stats, result = solution_stats(sol, t_end)
    return saved, final, fixed_types(stats, cfg.grid.dtype), result
