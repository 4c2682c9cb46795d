"""`simulate`: a thin convenience over `diffrax.diffeqsolve` with good defaults."""

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._model import MembraneModel, State
from ._solver import BackwardEuler
from ._term import MembraneTerm


class Simulation(eqx.Module):
    """The result of `simulate`.

    **Fields:**

    - `ts`: save times, ms.
    - `recordings`: dict from recording name to membrane potential (mV) at `ts`;
      `{"v": all compartments}` if the model names no recordings.
    - `stats`: dict with `num_steps`, `num_accepted`, `num_rejected`,
      `num_nonfinite_rejected` (integer arrays).
    - `result`: the `diffrax.RESULTS` of the solve.
    - `solution`: the underlying `diffrax.Solution`.
    """

    ts: Float[Array, " nsave"]
    recordings: dict[str, Float[Array, "nsave ..."]]
    stats: dict[str, Array]
    result: dfx.RESULTS
    solution: dfx.Solution


def _recorder(model: MembraneModel):
    recs = model.layout.recordings

    def fn(t, y: State, args):
        del t, args
        if not recs:
            return {"v": y.v}
        return {name: y.v[i] for name, i in recs}

    return fn


def _grid(t0: float, t1: float, dt: float, name: str) -> int:
    n = (t1 - t0) / dt
    k = round(n)
    if k < 1 or abs(n - k) > 1e-6 * max(1.0, n):
        raise ValueError(
            f"{name}={dt} must divide t1 - t0 = {t1 - t0} ms into a whole number of steps"
        )
    return k


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
    adjoint: dfx.AbstractAdjoint = dfx.RecursiveCheckpointAdjoint(),
    max_steps: int | None = None,
    throw: bool = True,
) -> Simulation:
    """Simulate `model` from `t0` to `t1` (ms).

    **Arguments:**

    - `model`: a `MembraneModel` (from `stable_ode.build` or `load_spec`).
    - `t1`: end time, ms. `t0`: start time, ms (default 0).
    - `dt`: the step, ms; with a `controller`, the initial step.
    - `solver`: any diffrax solver (default `BackwardEuler()`); generic ones such as
      `diffrax.Kvaerno5()` need an adaptive `controller`.
    - `controller`: `None` for fixed steps of exactly `dt` on the grid
      `t0 + k·dt`; or an adaptive diffrax step-size controller, which is wrapped
      in a `diffrax.ClipStepSizeController` whose `jump_ts` are the stimulus
      edges, so that no step straddles one.
    - `save_dt`: spacing of the returned samples, ms (default `dt`; with fixed steps
      a whole multiple of `dt`).
    - `y0`: initial `State` (default `model.init_state()`: `v_init`, gates at
      steady state).
    - `adjoint`: the diffrax adjoint for reverse mode.
    - `max_steps`: step budget for adaptive solves (default 100,000).
    - `throw`: raise if the solve fails (else see `Simulation.result`).

    Time arguments are Python floats (they fix array shapes); `model` and `y0` may
    be traced, so `simulate` works under `jax.jit`, `jax.vmap` and `jax.grad`.
    """
    t0, t1, dt = float(t0), float(t1), float(dt)
    if not dt > 0:
        raise ValueError(f"dt must be > 0 ms, got {dt}")
    if not t1 > t0:
        raise ValueError(f"t1 ({t1}) must be > t0 ({t0})")
    save_dt = dt if save_dt is None else float(save_dt)
    term = MembraneTerm(model)
    y0 = model.init_state() if y0 is None else y0
    fn = _recorder(model)
    dtype = model.dtype
    if controller is None:
        n = _grid(t0, t1, dt, "dt")
        every = save_dt / dt
        if abs(every - round(every)) > 1e-6 or round(every) < 1:
            raise ValueError(f"save_dt={save_dt} must be a whole multiple of dt={dt}")
        every = round(every)
        grid = t0 + dt * jnp.arange(n + 1, dtype=dtype)
        sol = dfx.diffeqsolve(
            term,
            solver,
            t0,
            t1,
            None,
            y0,
            saveat=dfx.SaveAt(t0=True, steps=True, fn=fn),
            stepsize_controller=dfx.StepTo(ts=grid),
            adjoint=adjoint,
            max_steps=n,
            throw=throw,
        )
        ts = sol.ts[::every]
        recordings = {k: v[::every] for k, v in sol.ys.items()}
    else:
        n_save = _grid(t0, t1, save_dt, "save_dt")
        ts_save = t0 + save_dt * jnp.arange(n_save + 1, dtype=dtype)
        jumps = model.stimuli.jump_times()
        jumps = jumps[(jumps > t0) & (jumps < t1)]
        if jumps.size and isinstance(controller, dfx.AbstractAdaptiveStepSizeController):
            controller = dfx.ClipStepSizeController(
                controller, jump_ts=jnp.asarray(jumps, dtype)
            )
        sol = dfx.diffeqsolve(
            term,
            solver,
            t0,
            t1,
            dt,
            y0,
            saveat=dfx.SaveAt(ts=ts_save, fn=fn),
            stepsize_controller=controller,
            adjoint=adjoint,
            max_steps=100_000 if max_steps is None else max_steps,
            throw=throw,
        )
        ts = sol.ts
        recordings = sol.ys
    st = sol.stats
    stats = {
        "num_steps": st["num_steps"],
        "num_accepted": st["num_accepted_steps"],
        "num_rejected": st["num_rejected_steps"],
        "num_nonfinite_rejected": jnp.zeros_like(st["num_steps"]),
    }
    return Simulation(
        ts=ts, recordings=recordings, stats=stats, result=sol.result, solution=sol
    )

