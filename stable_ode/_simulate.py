"""`simulate`: a thin convenience over `diffrax.diffeqsolve` with good defaults."""

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
from diffrax._root_finder import use_stepsize_tol
from jaxtyping import Array, Bool, Float

from ._adjoint import Checkpointing
from ._controller import NonFiniteRejecting, SafeStepTo
from ._misc import tree_all_finite
from ._model import MembraneModel, State
from ._results import RESULTS
from ._solver import BackwardEuler
from ._solver.nonfinite_guard import NonFiniteGuard
from ._term import MembraneTerm


class Simulation(eqx.Module):
    """The result of `simulate`.

    **Fields:**

    - `ts`: save times, ms.
    - `recordings`: dict from recording name to membrane potential (mV) at `ts`;
      `{"v": all compartments}` if the model names no recordings.
    - `stats`: dict of arrays: `num_steps`, `num_accepted`, `num_rejected` (all
      reasons), `num_nonfinite_rejected` (steps rejected because their state or
      error estimate held a NaN or ±inf; integers); `min_dt`, the smallest
      accepted step (ms; steps shortened to land on a stimulus edge or `t1`
      count); `t_fail`, the last good time (ms) if the solve failed, else `inf`.
    - `result`: a `stable_ode.RESULTS` member (which extends `diffrax.RESULTS`):
      `successful`, a diffrax code, or `nonfinite_max_rejections` /
      `nonfinite_dt_min` when the step controller gave up on a non-finite step.
    - `solution`: the underlying `diffrax.Solution` (its `controller_state` holds
      the controller's `StepStats`); `None` for fixed steps unless
      `simulate(..., optimistic=False)`.

    After a failure (`throw=False`), the samples at `ts > stats["t_fail"]` hold
    the last good value; `valid` masks them out.
    """

    ts: Float[Array, " nsave"]
    recordings: dict[str, Float[Array, "nsave ..."]]
    stats: dict[str, Array]
    result: RESULTS
    solution: dfx.Solution | None

    @property
    def valid(self) -> Bool[Array, " nsave"]:
        """Which samples were reached by the solve (`ts <= stats["t_fail"]`)."""
        return self.ts <= self.stats["t_fail"][..., None]


def _recorder(model: MembraneModel):
    """The save function (one gather of all recorded compartments, saved as one
    array: a separate saved scalar per recording made compile time grow with their
    number, minutes for 1,000) and the names of its columns (`None`: every
    compartment, saved as `"v"`)."""
    recs = model.layout.recordings
    if not recs:
        return (lambda t, y, args: y.v), None
    idx = np.asarray([i for _, i in recs])
    return (lambda t, y, args: y.v[idx]), [name for name, _ in recs]


def _split(saved: Float[Array, "nsave nrec"], names: list[str] | None) -> dict:
    if names is None:
        return {"v": saved}
    return {name: saved[:, j] for j, name in enumerate(names)}


def _grid(t0: float, t1: float, dt: float, name: str) -> int:
    n = (t1 - t0) / dt
    k = round(n)
    if k < 1 or abs(n - k) > 1e-6 * max(1.0, n):
        raise ValueError(
            f"{name}={dt} must divide t1 - t0 = {t1 - t0} ms into a whole number "
            "of steps"
        )
    return k


def _safe_controller(
    controller: dfx.AbstractStepSizeController,
    jumps: Float[Array, " njump"],
) -> NonFiniteRejecting | SafeStepTo:
    """The controller `simulate` runs with a user's `controller`.

    An adaptive controller `c` becomes `NonFiniteRejecting(ClipStepSizeController(c,
    jump_ts=jumps))` (the clip inside: it keeps steps off stimulus edges, and a
    non-finite retry, which only shrinks a clipped step, stays off them too); a
    `NonFiniteRejecting(c)` keeps its settings and gets the clip put around its `c`.
    A `SafeStepTo` is used as is.
    """
    if isinstance(controller, SafeStepTo):
        return controller
    if not isinstance(controller, NonFiniteRejecting):
        if not isinstance(controller, dfx.AbstractAdaptiveStepSizeController):
            raise ValueError(
                f"controller={type(controller).__name__}(...) cannot reject non-finite "
                "steps; pass controller=None for fixed steps (stable_ode.SafeStepTo on "
                "the grid t0 + k*dt), a stable_ode.SafeStepTo, or an adaptive "
                "controller such as diffrax.PIDController(rtol=..., atol=...)"
            )
        controller = NonFiniteRejecting(controller)
    if jumps.size:
        controller = eqx.tree_at(
            lambda c: c.controller,
            controller,
            dfx.ClipStepSizeController(controller.controller, jump_ts=jumps),
        )
    return controller


def _with_controller_tols(solver, controller):
    """`solver` with the root-finder tolerances it leaves to the step-size
    controller (diffrax's `use_stepsize_tol`) filled in from `controller`, as
    `diffrax.diffeqsolve` does; needed before wrapping it in `NonFiniteGuard`,
    which diffrax no longer recognises as implicit."""
    names = [
        a
        for a in ("rtol", "atol", "norm")
        if getattr(solver.root_finder, a) is use_stepsize_tol
    ]
    if not names:
        return solver
    return eqx.tree_at(
        lambda s: tuple(getattr(s.root_finder, a) for a in names),
        solver,
        tuple(getattr(controller, a) for a in names),
    )


def _raise_if_failed(x, result: RESULTS, t_fail):
    """As `result.error_if(x, result != successful)`, with the failure time (ms) in
    the message: the failure time is only known at run time, so the message is made
    in the host callback. Works under `jit` and `vmap` (raises if any batch member
    failed) and with sharded batches; transparent to autodiff."""

    def check(code, t):
        code, t = np.asarray(code), np.asarray(t)
        bad = code != 0
        if np.any(bad):
            i = np.argmax(bad.reshape(-1))
            msg = RESULTS._index_to_message[int(code.reshape(-1)[i])]
            where = np.broadcast_to(t, code.shape).reshape(-1)[i]
            batch = f" (batch member {i} of {code.size})" if code.ndim else ""
            raise RuntimeError(
                f"stable_ode.simulate stopped at t = {float(where):.9g} ms{batch}: "
                f"{msg}"
            )
        return np.zeros(code.shape, np.int32)

    @jax.custom_jvp
    def checked(x, code, t):
        # Only the codes and times go to the host, and only when some solve failed:
        # `unvmap_any` keeps the `cond` a real branch under `vmap` (a batched
        # predicate would make it a select that calls back on every run). The
        # callback's (zero) result is added to `x` so that `x` is not returned
        # before the check has run.
        def fail():
            zero = jax.pure_callback(
                check,
                jax.ShapeDtypeStruct((), jnp.int32),
                code,
                t,
                vmap_method="broadcast_all",
            )
            return jax.tree_util.tree_map(lambda a: a + zero.astype(a.dtype), x)

        return jax.lax.cond(eqxi.unvmap_any(code != 0), fail, lambda: x)

    @checked.defjvp
    def _(primals, tangents):
        x, code, t = primals
        tx, _, _ = tangents
        return checked(x, code, t), tx

    code = jax.lax.stop_gradient(result._value).astype(jnp.int32)
    return checked(x, code, jax.lax.stop_gradient(t_fail))


def simulate(
    model: MembraneModel,
    t1: float,
    dt: float,
    *,
    solver: dfx.AbstractSolver = BackwardEuler(),
    controller: dfx.AbstractStepSizeController | None = None,
    save_dt: float | None = None,
    t0: float = 0.0,
    y0: State | None = None,
    adjoint: dfx.AbstractAdjoint = Checkpointing(),
    max_steps: int | None = None,
    throw: bool = True,
    progress_meter: dfx.AbstractProgressMeter = dfx.NoProgressMeter(),
    optimistic: bool | None = None,
) -> Simulation:
    """Simulate `model` from `t0` to `t1` (ms). Non-finite steps are never accepted.

    **Arguments:**

    - `model`: a `MembraneModel` (from `stable_ode.build` or `load_spec`).
    - `t1`: end time, ms. `t0`: start time, ms (default 0).
    - `dt`: the step, ms; with an adaptive `controller`, the initial step.
    - `solver`: any diffrax solver (default `BackwardEuler()`); generic ones such as
      `diffrax.Kvaerno5()` need an adaptive `controller`. It runs inside a
      `stable_ode.NonFiniteGuard` (gradients through rejected non-finite steps are
      zero, not NaN; with fixed steps it looks at the error estimate only if the
      `SafeStepTo` does); diffrax's implicit solvers first get the controller's
      `rtol`/`atol`/`norm` for their root finder wherever they leave them to the
      controller, as `diffeqsolve` would do.
    - `controller`: `None` (default) for steps of exactly `dt` on the grid
      `t0 + k·dt` through `stable_ode.SafeStepTo`: a step whose new state is not
      finite is retried in halves (then quarters, ...) and the grid resumes after
      it. Or a `SafeStepTo` of your own. Or an adaptive diffrax controller (e.g.
      `diffrax.PIDController(rtol=..., atol=...)`), or a
      `stable_ode.NonFiniteRejecting` around one: it runs as
      `NonFiniteRejecting(ClipStepSizeController(controller, jump_ts=stimulus
      edges))`, so no step is accepted with a non-finite state or error and no step
      straddles a stimulus edge. Other (fixed) diffrax controllers raise a
      `ValueError`: they cannot reject a non-finite step. For spike trains,
      `stable_ode.TimingTolerance(diffrax.PIDController(rtol=0, atol=tol))` gives
      about half the spike-time error of a plain PID in the same number of steps
      (see `docs/solvers.md`, "Fixed or adaptive steps").
    - `save_dt`: spacing of the returned samples, ms (default `dt`; with fixed steps
      a whole multiple of `dt`).
    - `y0`: initial `State` (default `model.init_state()`: `v_init`, gates at
      steady state).
    - `adjoint`: the diffrax adjoint for reverse mode (default
      `stable_ode.Checkpointing()`: every step stored when the solve's loop states
      fit in 64 MiB, else recursive checkpointing that recomputes each step at most
      once).
    - `max_steps`: step budget (accepted + rejected steps). Default: 100,000 for
      adaptive solves; for fixed steps the number of grid steps plus
      `max(1000, n // 10)` for non-finite retries.
    - `throw`: raise a `RuntimeError` if the solve fails, naming the result code
      and the time of failure (ms); else see `Simulation.result`.
    - `progress_meter`: a diffrax progress meter, passed to `diffeqsolve` (default
      `diffrax.NoProgressMeter()`). E.g. `diffrax.TqdmProgressMeter(refresh_steps=
      n)` updates a bar every `n` steps; each update is a host callback (~0.5 ms),
      so choose `n` for about a hundred updates per run. It does not change the
      results.
    - `optimistic`: fixed steps only (ignored with an adaptive `controller`).
      `True`: run the grid first with a plain `diffrax.StepTo`, which keeps no
      per-step finiteness test or retry bookkeeping, and only if anything in that
      run came out non-finite, run the safe solve (`SafeStepTo`) instead; the
      result is the safe solve's either way (the same steps when nothing is
      non-finite). Pays where the per-step overhead dominates: small models
      (measured: one HH compartment ~6× faster on the CPU) and `vmap`ped batches
      (the loop's control is no longer batched: ~2.5×). Costs: both loops are
      compiled (forward compile time ~1.3×), a failing run is solved twice, and
      `Simulation.solution` is `None`. `False`: the safe solve only.
      `None` (default): `True` for the result, while reverse-mode autodiff
      (`jax.grad`, `jax.vjp`) goes through the safe solve alone (a
      `custom_vjp`: the forward pass of a gradient is the safe solve, so a
      gradient compiles one loop, as with `False`); with an adjoint that supports
      forward mode (`diffrax.ForwardMode`, `diffrax.DirectAdjoint`, ...),
      `False`, since a `custom_vjp` would block `jax.jvp`.

    **Returns:** a `Simulation`. When the solve cannot continue (`throw=False`),
    `result` says why (a `stable_ode.RESULTS` member), `stats["t_fail"]` is the
    last good time (ms), and the samples at `ts > t_fail` hold the last good state's
    value (not NaN); `Simulation.valid` marks the samples at `ts <= t_fail`.

    Time arguments are Python floats (they fix array shapes); `model` and `y0` may
    be traced, so `simulate` works under `jax.jit`, `jax.vmap` and `jax.grad`.
    """
    t0, t1, dt = float(t0), float(t1), float(dt)
    if not dt > 0:
        raise ValueError(f"dt must be > 0 ms, got {dt}")
    if not t1 > t0:
        raise ValueError(f"t1 ({t1}) must be > t0 ({t0})")
    save_dt = dt if save_dt is None else float(save_dt)
    if not isinstance(solver, (NonFiniteGuard, dfx.AbstractImplicitSolver)):
        solver = NonFiniteGuard(solver)
    y0 = model.init_state() if y0 is None else y0
    fn, names = _recorder(model)
    dtype = model.dtype
    if controller is None or isinstance(controller, SafeStepTo):
        n = _grid(t0, t1, dt, "dt")
        every = save_dt / dt
        if abs(every - round(every)) > 1e-6 or round(every) < 1:
            raise ValueError(f"save_dt={save_dt} must be a whole multiple of dt={dt}")
        every = round(every)
        # A NumPy constant, not a traced computation: XLA then folds the grid's
        # checks (`SafeStepTo` and `StepTo` test that it increases) at compile
        # time instead of running them on every call (one HH compartment: 35 ->
        # 24 operations outside the loop; no time difference was measurable).
        grid = np.asarray(t0, dtype) + np.asarray(dt, dtype) * np.arange(
            n + 1, dtype=dtype
        )
        grid[-1] = t1
        grid = jnp.asarray(grid)
        if controller is None:
            controller = SafeStepTo(grid)
        elif controller.ts.shape != grid.shape:
            raise ValueError(
                f"controller=SafeStepTo(ts) needs the grid t0 + k*dt: {n + 1} times "
                f"from {t0} to {t1} ms, got {controller.ts.shape[0]}"
            )

        if isinstance(solver, NonFiniteGuard) and not controller.check_error:
            # The controller keeps a step whatever its error estimate: so does the
            # guard (and the estimate is not computed in the backward pass).
            solver = NonFiniteGuard(solver.solver, check_error=False)
        cfg = _Fixed(
            solver=solver,
            controller=controller,
            grid=grid,
            every=every,
            adjoint=adjoint,
            max_steps=n + max(1000, n // 10) if max_steps is None else max_steps,
            progress_meter=progress_meter,
            fn=fn,
            names=None if names is None else tuple(names),
        )
        ts = grid[::every]
        if optimistic is None:
            run = _optimistic_or_safe_vjp if _reverse_only(adjoint) else None
        else:
            run = _optimistic if optimistic else None
        if run is None:
            sol, recordings, t_end = _safe_solve((model, y0), cfg)
            stats, result = _stats(sol, t_end)
        else:
            sol = None
            recordings, stats, result = run((model, y0), cfg)
    else:
        n_save = _grid(t0, t1, save_dt, "save_dt")
        ts = t0 + save_dt * jnp.arange(n_save + 1, dtype=dtype)
        ts = ts.at[-1].set(t1)
        # Jumps outside (t0, t1) are harmless to the clip; not filtering them
        # keeps this working on a traced model.
        jumps = model.stimuli.jump_times().astype(dtype)
        controller = _safe_controller(controller, jumps)
        if isinstance(solver, dfx.AbstractImplicitSolver):
            solver = NonFiniteGuard(_with_controller_tols(solver, controller))
        sol = dfx.diffeqsolve(
            MembraneTerm(model),
            solver,
            t0,
            t1,
            dt,
            y0,
            saveat=dfx.SaveAt(ts=ts, t1=True, fn=fn, controller_state=True),
            stepsize_controller=controller,
            adjoint=adjoint,
            max_steps=100_000 if max_steps is None else max_steps,
            throw=False,
            progress_meter=progress_meter,
        )
        # With `t1=True` the final state is saved after the last `ts` reached: on
        # failure, the last good one (at `t_end`); the unsaved samples (`inf`)
        # after it hold its value.
        i_end = jnp.sum(jnp.isfinite(sol.ts)) - 1
        t_end = sol.ts[i_end]
        valid = ts <= t_end
        v = sol.ys
        recordings = _split(
            jnp.where(_bcast(valid, v[:-1]), v[:-1], v[i_end][None]), names
        )
        stats, result = _stats(sol, t_end)
    if throw:
        recordings = _raise_if_failed(recordings, result, stats["t_fail"])
    return Simulation(
        ts=ts, recordings=recordings, stats=stats, result=result, solution=sol
    )


def _stats(sol: dfx.Solution, t_end) -> tuple[dict, RESULTS]:
    """`Simulation.stats` and `result` from a solution whose controller keeps
    `StepStats`, and the time `t_end` of its last saved state."""
    st = sol.stats
    cs = sol.controller_state.stats
    result = RESULTS.promote(sol.result)
    result = RESULTS.where(cs.result == RESULTS.successful, result, cs.result)
    stats = {
        "num_steps": st["num_steps"],
        "num_accepted": st["num_accepted_steps"],
        "num_rejected": st["num_rejected_steps"],
        "num_nonfinite_rejected": cs.num_nonfinite_rejected,
        "min_dt": cs.min_dt,
        "t_fail": jnp.where(
            result == RESULTS.successful, jnp.asarray(jnp.inf, t_end.dtype), t_end
        ),
    }
    return stats, result


def _fixed_types(stats: dict, dtype) -> dict:
    """Stats with fixed dtypes (counts int32, times `dtype`), so that the two
    branches of `_optimistic` agree."""
    return {
        k: jnp.asarray(v, dtype if k in ("min_dt", "t_fail") else jnp.int32)
        for k, v in stats.items()
    }


class _Fixed(eqx.Module):
    """Everything but the model and initial state that a fixed-step solve uses."""

    solver: dfx.AbstractSolver
    controller: SafeStepTo
    grid: Float[Array, " n"]
    every: int = eqx.field(static=True)
    adjoint: dfx.AbstractAdjoint
    max_steps: int = eqx.field(static=True)
    progress_meter: dfx.AbstractProgressMeter
    fn: object = eqx.field(static=True)
    names: tuple[str, ...] | None = eqx.field(static=True)


def _reverse_only(adjoint: dfx.AbstractAdjoint) -> bool:
    """Whether `adjoint` supports reverse mode only (so that a `custom_vjp` around
    the solve takes nothing away)."""
    return isinstance(adjoint, (dfx.RecursiveCheckpointAdjoint, Checkpointing))


def _safe_solve(model_y0, cfg: _Fixed):
    """The safe fixed-step solve (`SafeStepTo`): `(solution, recordings, t_end)`."""
    model, y0 = model_y0
    grid, every = cfg.grid, cfg.every
    n = grid.shape[0] - 1
    sol = dfx.diffeqsolve(
        MembraneTerm(model),
        cfg.solver,
        grid[0],  # times in the model's dtype, as the grid (float32 models)
        grid[-1],
        None,
        y0,
        saveat=dfx.SaveAt(t0=True, steps=True, fn=cfg.fn, controller_state=True),
        stepsize_controller=cfg.controller,
        adjoint=cfg.adjoint,
        max_steps=cfg.max_steps,
        throw=False,
        progress_meter=cfg.progress_meter,
    )
    # Saved steps include any sub-steps of non-finite retries; keep the grid
    # times. After a failure, the last saved step (the last good state) is held.
    # Without retries the saved steps are the grid: a strided slice, not a search
    # (which, batched under `vmap`, costs more than the solve).
    n_saved = sol.ts.shape[-1]
    plain = jnp.arange(0, n + 1, every, dtype=jnp.int32)
    plain = jnp.minimum(plain, n_saved - 1)

    def search():
        idx = jnp.searchsorted(sol.ts, grid[::every], side="right") - 1
        return idx.astype(jnp.int32)

    retried = (sol.stats["num_rejected_steps"] > 0) | (
        sol.stats["num_accepted_steps"] != n
    )
    idx = jax.lax.cond(eqxi.unvmap_any(retried), search, lambda: plain)
    t_end = sol.ts[jnp.sum(jnp.isfinite(sol.ts)) - 1]
    return sol, _split(sol.ys[idx], cfg.names), t_end


def _safe(model_y0, cfg: _Fixed):
    """`_safe_solve` as `(recordings, stats, result)` with fixed stats dtypes."""
    sol, recordings, t_end = _safe_solve(model_y0, cfg)
    stats, result = _stats(sol, t_end)
    return recordings, _fixed_types(stats, cfg.grid.dtype), result


def _optimistic(model_y0, cfg: _Fixed, differentiated: bool = True):
    """Fixed steps run first with `diffrax.StepTo` (no per-step finiteness test or
    retry bookkeeping); if anything in that run is non-finite, the safe solve
    instead. Returns `(recordings, stats, result)`.

    `differentiated=False` (the value of `_optimistic_or_safe_vjp`, which no
    derivative goes through) runs the first solve without the `NonFiniteGuard`: the
    guard only matters to derivatives, and costs a kernel per step (measured: 7 of
    ~115 ns per step on one HH compartment in float64)."""
    model, y0 = model_y0
    grid = cfg.grid
    n = grid.shape[0] - 1
    solver = cfg.solver
    if not differentiated and isinstance(solver, NonFiniteGuard):
        solver = solver.solver
    fast = dfx.diffeqsolve(
        MembraneTerm(model),
        solver,
        grid[0],
        grid[-1],
        None,
        y0,
        saveat=dfx.SaveAt(
            subs=[
                dfx.SubSaveAt(t0=True, steps=True, fn=cfg.fn),
                dfx.SubSaveAt(t1=True),
            ]
        ),
        stepsize_controller=dfx.StepTo(grid),
        adjoint=cfg.adjoint,
        max_steps=n,
        throw=False,
        progress_meter=cfg.progress_meter,
    )
    saved, final = fast.ys
    # A NaN or inf stays in the state once it appears: every state is updated
    # from its previous value (`v1 = v0 + Δv`, `x1 = x0 + (inf - x0)·(...)`), and
    # a non-finite gate or synapse state reaches `v` through the current on the
    # next step. So the final state shows any non-finite step, and the recordings
    # (values of `v`) need no check of their own. (Reading the saved buffer again
    # after the loop made the call's time bimodal on this 2-core machine: 100
    # point neurons, float32, 20 or 27-50 ms per call; the final state alone, a
    # steady 20 ms.)
    ok = tree_all_finite(final) & (fast.result == dfx.RESULTS.successful)
    dtype = grid.dtype

    def take_fast():
        stats = {
            "num_steps": fast.stats["num_steps"],
            "num_accepted": fast.stats["num_accepted_steps"],
            "num_rejected": fast.stats["num_rejected_steps"],
            "num_nonfinite_rejected": 0,
            "min_dt": jnp.min(grid[1:] - grid[:-1]),
            "t_fail": jnp.inf,
        }
        recordings = _split(saved[:: cfg.every], cfg.names)
        return recordings, _fixed_types(stats, dtype), RESULTS.promote(fast.result)

    # `unvmap_all`: under `vmap` a real branch; one non-finite member sends the
    # whole batch down the safe path (each member's result is its own either way).
    return jax.lax.cond(eqxi.unvmap_all(ok), take_fast, lambda: _safe(model_y0, cfg))


def _safe_parts(dynamic, static, cfg):
    """`_safe` as `(recordings, (stats, result))`, for `jax.vjp(..., has_aux=True)`:
    only the recordings carry a gradient. The statistics are step control (grid
    times, counts; `min_dt` under `stop_gradient`), constant in the parameters."""
    recordings, stats, result = _safe(eqx.combine(dynamic, static), cfg)
    return recordings, (stats, result)


@eqx.filter_custom_vjp
def _optimistic_or_safe_vjp(model_y0, cfg: _Fixed):
    """`_optimistic` for the value; reverse mode differentiates `_safe` alone (so
    a gradient compiles and runs the safe loop only, as without `optimistic`)."""
    return _optimistic(model_y0, cfg, differentiated=False)


@_optimistic_or_safe_vjp.def_fwd
def _(perturbed, model_y0, cfg: _Fixed):
    del perturbed
    dynamic, static = eqx.partition(model_y0, eqx.is_inexact_array)
    recordings, vjp_fn, (stats, result) = jax.vjp(
        lambda d: _safe_parts(d, static, cfg), dynamic, has_aux=True
    )
    return (recordings, stats, result), vjp_fn


@_optimistic_or_safe_vjp.def_bwd
def _(vjp_fn, grad_obj, perturbed, model_y0, cfg: _Fixed):
    del perturbed
    g_recordings = grad_obj[0]
    # Recordings that were not differentiated come as `None`: zero cotangents,
    # made from the known output shapes (not kept from the forward pass).
    model, _ = model_y0
    dtype = cfg.grid.dtype
    n_save = cfg.grid[:: cfg.every].shape[0]
    if cfg.names is None:
        zeros = {"v": jnp.zeros((n_save, model.n_compartments), dtype)}
    else:
        zeros = {k: jnp.zeros((n_save,), dtype) for k in cfg.names}
    cotangent = jax.tree_util.tree_map(
        lambda g, zero: zero if g is None else g,
        g_recordings,
        zeros,
        is_leaf=lambda g: g is None,
    )
    (g_dynamic,) = vjp_fn(cotangent)
    return g_dynamic


def _bcast(mask, like):
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))
