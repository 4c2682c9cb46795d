"""Compiling and running a loaded model file, and what `run` prints about it."""

import contextlib
import dataclasses
import importlib
import importlib.util
import sys
import time
from typing import Any, NamedTuple

import numpy as np

from .._plot import spike_times
from ._args import PROG
from ._interrupt import interruptible


PROGRESS_UPDATES = 100
"""About this many progress-bar updates over a fixed-step run."""
ADAPTIVE_REFRESH_STEPS = 1000
"""Steps between progress-bar updates of an adaptive run (the number of steps is
not known in advance)."""


def step_counts(loaded) -> tuple[int | None, int]:
    """`(steps, samples)`: the number of fixed steps (`None` for adaptive steps) and
    how many samples the solve may save, as `loaded.stepping` answers them (fixed
    steps save every step, with room for retries up to the step budget; adaptive
    ones every `save_dt`, plus the final state)."""
    from .._stepping import FixedSteps

    stepping = loaded.stepping
    if isinstance(stepping, FixedSteps):
        steps = stepping.n_steps(0.0, loaded.t_stop)
        return steps, stepping.max_steps(0.0, loaded.t_stop) + 1
    return None, stepping.n_saved(0.0, loaded.t_stop) + 1


class Solved(NamedTuple):
    """What `solve` returns.

    - `t`: sample times, ms.
    - `recordings`: name → membrane potential (mV), in the file's order.
    - `stats`: `num_steps`, `num_accepted`, `num_rejected`,
      `num_nonfinite_rejected`, `min_dt`, `t_fail` (`None` when successful),
      `result`, `wall_s` (the solve alone) and `compile_s`.
    - `failure`: `None`, or the message of an unsuccessful solve.
    - `voltages`: every compartment's potential (samples × compartments, mV) if
      asked for, else `None`.
    - `spikes`: name → spike times (ms) of the file's `spikes` (events).
    """

    t: np.ndarray
    recordings: dict[str, np.ndarray]
    stats: dict[str, Any]
    failure: str | None
    voltages: np.ndarray | None = None
    spikes: dict[str, np.ndarray] | None = None


def progress_meter(loaded, enabled: bool):
    """The diffrax progress meter of a CLI run: none, a tqdm bar (about
    `PROGRESS_UPDATES` updates for fixed steps, one per `ADAPTIVE_REFRESH_STEPS`
    steps for adaptive ones), or diffrax's text meter (every 5%) where tqdm is not
    installed."""
    import diffrax as dfx

    if not enabled:
        return dfx.NoProgressMeter()
    if importlib.util.find_spec("tqdm") is None:
        return dfx.TextProgressMeter(minimum_increase=0.05)
    n_steps, _ = step_counts(loaded)
    if n_steps is not None:
        refresh = max(1, n_steps // PROGRESS_UPDATES)
    else:
        refresh = ADAPTIVE_REFRESH_STEPS
    return dfx.TqdmProgressMeter(refresh_steps=refresh)


def solve(loaded, *, progress: bool = False, voltages: bool = False) -> Solved:
    """Compile, then run `loaded` (a `LoadedModel`), timing the run alone.

    **Arguments:**

    - `loaded`: the model file's `LoadedModel`.
    - `progress`: show a progress meter on stderr during the run.
    - `voltages`: also return every compartment's potential (the solve then saves
      all of them and takes the recordings from them: the same values).

    **Returns:** a `Solved`.
    """
    import equinox as eqx
    import jax

    meter = progress_meter(loaded, progress)
    layout = loaded.model.layout
    if voltages:
        # A model without recordings saves every compartment's voltage as "v".
        model = dataclasses.replace(
            loaded.model, layout=dataclasses.replace(layout, recordings=())
        )
        loaded = eqx.tree_at(lambda m: m.model, loaded, model)
    dynamic, static = eqx.partition(loaded, eqx.is_array)

    def run(dynamic):
        sim = eqx.combine(dynamic, static).simulate(throw=False, progress_meter=meter)
        return sim.ts, sim.recordings, sim.stats, sim.result, sim.spikes

    if progress:
        print(
            f"compiling {loaded.spec.file} ({loaded.model.n_compartments} "
            f"compartments)...",
            file=sys.stderr,
            flush=True,
        )
    start = time.perf_counter()
    compiled = interruptible(lambda: jax.jit(run).lower(dynamic).compile())
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    try:
        # diffrax's text meter prints to stdout; stdout is for the summary.
        with contextlib.redirect_stdout(sys.stderr):
            out = interruptible(lambda: jax.block_until_ready(compiled(dynamic)))
    except BaseException:
        if progress:  # end a half-drawn bar before the message
            print(file=sys.stderr)
        raise
    wall_s = time.perf_counter() - start
    ts, recordings, stats, result, spikes = out
    spikes = {k: np.asarray(x)[np.isfinite(x)] for k, x in spikes.items()}  # events
    stats = {k: json_number(v) for k, v in stats.items()}
    stats["wall_s"] = wall_s
    stats["compile_s"] = compile_s
    # `result` is a member of diffrax's RESULTS or of an enumeration extending it.
    results = result._enumeration
    failure = None
    if not bool(result == results.successful):
        failure = results[result] or "the solve did not succeed"
    stats["result"] = "successful" if failure is None else failure
    if voltages:
        v = np.asarray(recordings["v"])
        named = {name: v[:, i] for name, i in layout.recordings} or {"v": v}
        return Solved(np.asarray(ts), named, stats, failure, v, spikes)
    order = [name for name, _ in layout.recordings] or list(recordings)
    order += [p[0] for p in layout.point_recordings if p[0] not in order]  # events
    named = {k: np.asarray(recordings[k]) for k in order}
    return Solved(np.asarray(ts), named, stats, failure, spikes=spikes)


def json_number(x) -> int | float | None:
    """A scalar statistic for JSON: integers stay integers, non-finite → `None`."""
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.integer) or x.dtype == bool:
        return int(x)
    x = float(x)
    return x if np.isfinite(x) else None


def describe_model(loaded) -> str:
    spec = loaded.spec
    integ = spec.integration
    steps = (
        f"fixed dt {integ.dt:g} ms"
        if integ.controller is None
        else f"adaptive ({dict(integ.controller)['kind']}), dt0 {integ.dt:g} ms"
    )
    n_cells = len(spec.cells)
    return (
        f"{loaded.model.n_compartments} compartments, {n_cells} "
        f"cell{'s' if n_cells != 1 else ''}"
        + (f", {len(spec.synapses)} synapses" if spec.synapses else "")
        + f", solver {integ.solver}, {steps}, t_stop {spec.t_stop:g} ms, "
        f"{integ.dtype}"
    )


_POINT_UNITS = {"i": "nA", "vc": "mV", "g": "uS", "A": "uS", "B": "uS"}


def _unit(rec) -> str | None:
    """The unit the run summary prints for a record entry; `None` for a
    membrane potential (mV, whose spikes it counts). An ion's concentration is
    mM, its current mA/cm2, its reversal potential mV; a point process's
    current nA, conductance uS, clamp level mV; "" where the unit is a
    mechanism's own (its states and RANGE variables, NAME_SUFFIX)."""
    var = getattr(rec, "variable", "v")
    if hasattr(rec, "point_process"):
        return _POINT_UNITS.get(var, "")
    if var == "v":
        return None
    if "_" in var:
        return ""
    if var[-1] in "io" and len(var) > 1 and var[0] not in "ie":
        return "mM"
    return {"i": "mA/cm2", "e": "mV"}.get(var[0], "")


def summary(loaded, solved: Solved) -> list[str]:
    t, recordings, stats = solved.t, solved.recordings, solved.stats
    lines = [
        f"{loaded.spec.file}: {describe_model(loaded)}",
        f"solved in {stats['wall_s']:.3f} s (compiled in {stats['compile_s']:.2f} s): "
        f"{stats['num_steps']} steps, {stats['num_accepted']} accepted, "
        f"{stats['num_rejected']} rejected, {stats['num_nonfinite_rejected']} "
        f"non-finite rejected",
    ]
    units = {rec.name: _unit(rec) for rec in loaded.spec.record}
    for name, v in recordings.items():
        if v.ndim != 1:
            lines.append(f"  {name}: {v.shape[1]} compartments, {v.shape[0]} samples")
            continue
        finite = v[np.isfinite(v)]
        unit = units.get(name)
        if unit is not None:  # not a membrane potential: its range, no spikes
            rng = f"{finite.min():.4g} .. {finite.max():.4g}" if finite.size else ""
            lines.append(f"  {name}: {rng or 'no finite'}{' ' + unit if unit else ''}")
            continue
        rng = (
            f"{finite.min():.1f} .. {finite.max():.1f} mV"
            if finite.size
            else "no finite"
        )
        sp = spike_times(t, v)
        shown = ", ".join(f"{x:.2f}" for x in sp[:8]) + (", ..." if sp.size > 8 else "")
        spikes = f", {sp.size} spike(s)" + (f" at {shown} ms" if sp.size else "")
        lines.append(f"  {name}: {rng}{spikes}")
    return lines


def report_failure(solved: Solved) -> None:
    """The one line on stderr of an unsuccessful solve."""
    t_fail = solved.stats.get("t_fail")
    at = "" if t_fail is None else f" at t = {t_fail:.6g} ms"
    message = " ".join(solved.failure.split())
    print(f"{PROG}: the solve stopped{at}: {message}", file=sys.stderr)
