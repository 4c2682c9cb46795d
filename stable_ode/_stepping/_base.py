"""What both stepping objects share: the abstract interface, the recorder (the
save function), the one `stats` builder, and the grid checks."""

import abc

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._group import uses_ions
from .._ion_table import reads_current
from .._model import MembraneModel, State
from .._recordings import Recordings
from .._results import RESULTS
from ..mechanisms._ions import ion_variable


class Recorder(eqx.Module):
    """The save function: one gather of all recorded compartments, saved as one
    array (a separate saved scalar per recording made compile time grow with their
    number). A module with static fields, so that two `simulate` calls on models
    with the same recordings compare equal and share their compilation.

    **Fields:** `index`, the recorded compartments (`None`: every compartment,
    saved as `"v"`); `names`, the recordings' names in the same order;
    `variables`, what each records (`()`: all `"v"`; else `"v"` or an ion
    variable such as `"cai"`, computed from the model passed as the solve's
    `args`)."""

    index: tuple[int, ...] | None = eqx.field(static=True)
    names: tuple[str, ...] | None = eqx.field(static=True)
    variables: tuple[str, ...] = eqx.field(static=True, default=())
    # point-process and mechanism variables `(group, variable, entry)`, after
    # `index` (events; states, or RANGE variables computed from `args`)
    points: tuple[tuple[int, str, int], ...] = eqx.field(static=True, default=())
    # some point is computed from the model: a RANGE variable, or a point
    # process's value at the voltage (`derived`)
    computed: bool = eqx.field(static=True, default=False)

    @property
    def needs_model(self) -> bool:
        """Whether the solve's `args` must be the model (ion, RANGE or
        `derived` variables)."""
        return bool(self.variables) or self.computed

    @staticmethod
    def of(model: MembraneModel) -> "Recorder":
        recs = model.layout.recordings
        points = model.layout.point_recordings
        if not recs and not points:
            return Recorder(None, None)
        derived = any(var in _derived(model, g) for _, g, var, _ in points)
        return Recorder(
            tuple(int(i) for _, i in recs),
            tuple(str(name) for name, _ in recs) + tuple(p[0] for p in points),
            tuple(model.layout.recording_variables),
            tuple((g, var, entry) for _, g, var, entry in points),
            bool(model.layout.range_recordings) or derived,
        )

    def __call__(self, t, y, args):
        del t
        if self.index is None:
            return y.v
        if not self.variables:
            cols = y.v[np.asarray(self.index, np.int32)]
        else:
            cols = self._variables(args, y)
        if not self.points:
            return cols
        # events: point-process variables after the others
        return jnp.concatenate([cols, _points(y, self.points, args)])

    def _variables(self, model: MembraneModel, y):
        """The recorded variables at state `y` of `model` (the solve's `args`): one
        gather per distinct variable, then one to put them in recording order."""
        if not isinstance(model, MembraneModel):
            raise ValueError(
                "recording ion variables needs the model as the solve's args"
            )
        names = [ion.name for ion in model.ions]
        kinds = {var: ion_variable(var, names) for var in set(self.variables)}
        need_current = any(k is not None and k[0] == "current" for k in kinds.values())
        views = model.ion_views(y.v, y.groups, currents=need_current)

        def values(var):
            if var == "v":
                return y.v
            kind, ion = kinds[var]
            return getattr(views[ion], kind)

        return _gather_by(self.variables, self.index, values)

    def split(self, saved: Float[Array, "nsave nrec"]) -> Recordings:
        """The saved array as a `Recordings` mapping, name → samples (`"v"` →
        `saved` for all compartments): the names are attached outside the
        compiled solve, and a column is sliced only when it is looked up."""
        return Recordings(saved, self.names)

    def zeros(self, n_save: int, n_compartments: int, dtype) -> Array:
        """Zeros shaped like the saved array of `n_save` samples."""
        n = n_compartments if self.names is None else len(self.names)
        return jnp.zeros((n_save, n), dtype)


def _gather_by(keys, index, values):
    """`stack([values(keys[j])[index[j]] for j])`, as one gather per distinct key
    and one permutation (not one gather per entry: the number of operations, and
    so compile time, would grow with the number of recordings)."""
    order = sorted(set(keys), key=keys.index)
    parts, positions = [], []
    for key in order:
        js = [j for j, k in enumerate(keys) if k == key]
        parts.append(values(key)[np.asarray([index[j] for j in js], np.int32)])
        positions.extend(js)
    cols = parts[0] if len(parts) == 1 else jnp.concatenate(parts)
    if positions == list(range(len(keys))):
        return cols
    return cols[np.argsort(np.asarray(positions, np.int32)).astype(np.int32)]


def _derived(model, g: int) -> tuple[str, ...]:
    """The variables point-process group `g` of `model` computes from the
    voltage at each instant (`AbstractPointProcessGroup.derived`); `()` for a
    mechanism."""
    derived = getattr(model.groups[g], "derived", None)
    return derived() if derived is not None else ()


def _points(y, points, model=None):
    """The point-process and mechanism variables `points` (`(group, variable,
    entry)`) of state `y`, in order (events), one gather per group and variable;
    a mechanism's `RANGE` variable (one that is not a state) from `model` (the
    solve's `args`; `None` when no RANGE variable is recorded), its
    `range_variables` evaluated once per group; a point process's value
    computed from the voltage (a clamp's `i`) at `y` from `model`, so that a
    sample between step ends agrees with the sampled voltage."""
    keys = [(g, var) for g, var, _ in points]
    entries = [entry for _, _, entry in points]
    ranges, derived = {}, {}

    def derived_value(g, var):
        if g not in derived:
            group = model.groups[g]
            # the ions as the event stepping gives them (`EventSteps.step`)
            ions = model.ion_views(y.v, y.groups) if uses_ions(group) else None
            derived[g] = group.with_current(y.v, y.groups[g], ions)
        return derived[g][var]

    def range_value(g, var):
        if g not in ranges:
            if not isinstance(model, MembraneModel):
                raise ValueError(
                    "recording RANGE variables needs the model as the solve's args"
                )
            group = model.mechanisms[g]
            ions = None
            if group.uses_ions:
                ions = model.ion_views(y.v, y.groups, currents=reads_current(model))
            ranges[g] = group.range_variables(model, y.v, y.groups[g], ions)
        return ranges[g][var]

    def values(key):
        g, var = key
        states = y.groups[g]
        if isinstance(model, MembraneModel) and var in _derived(model, g):
            return derived_value(g, var)
        if var in states:
            return states[var]
        mechanism = isinstance(model, MembraneModel) and g < len(model.mechanisms)
        if var == "g" and not mechanism:  # Exp2Syn's `g = B - A`
            return states["B"] - states["A"]
        return range_value(g, var)

    return _gather_by(keys, entries, values)


class Outcome(eqx.Module):
    """What a stepping object's `solve` returns; `simulate` makes the `Simulation`
    from it."""

    ts: Float[Array, " nsave"]
    saved: Float[Array, "nsave nrec"]  # `Recorder.split` names its columns
    stats: dict[str, Array]
    result: RESULTS
    final_state: State
    solution: dfx.Solution | None


def solution_stats(sol: dfx.Solution, t_end) -> tuple[dict, RESULTS]:
    """`Simulation.stats` and `result` from a solution whose controller keeps
    `StepStats` (`SaveAt(controller_state=True)`), and the time `t_end` of its last
    saved state: the one `stats` builder."""
    st = sol.stats
    cs = sol.controller_state.stats
    result = RESULTS.promote(sol.result)
    result = RESULTS.where(cs.result == RESULTS.successful, result, cs.result)
    stats = make_stats(
        num_steps=st["num_steps"],
        num_accepted=st["num_accepted_steps"],
        num_rejected=st["num_rejected_steps"],
        num_nonfinite_rejected=cs.num_nonfinite_rejected,
        min_dt=cs.min_dt,
        t_fail=jnp.where(
            result == RESULTS.successful, jnp.asarray(jnp.inf, t_end.dtype), t_end
        ),
    )
    return stats, result


def make_stats(
    *, num_steps, num_accepted, num_rejected, num_nonfinite_rejected, min_dt, t_fail
) -> dict:
    """The `Simulation.stats` dict (its keys in one place)."""
    return {
        "num_steps": num_steps,
        "num_accepted": num_accepted,
        "num_rejected": num_rejected,
        "num_nonfinite_rejected": num_nonfinite_rejected,
        "min_dt": min_dt,
        "t_fail": t_fail,
    }


def fixed_types(stats: dict, dtype) -> dict:
    """Stats with fixed dtypes (counts int32, times `dtype`), so that the two
    branches of a `lax.cond` agree."""
    return {
        k: jnp.asarray(v, dtype if k in ("min_dt", "t_fail") else jnp.int32)
        for k, v in stats.items()
    }


def whole_steps(t0: float, t1: float, dt: float, name: str) -> int:
    """The number of steps of `dt` (ms) from `t0` to `t1`; a `ValueError` naming
    `name` if it is not a whole number."""
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"{name} must be a finite number > 0 ms, got {dt}")
    n = (t1 - t0) / dt
    k = round(n)
    if k < 1 or abs(n - k) > 1e-6 * max(1.0, n):
        raise ValueError(
            f"{name}={dt} must divide t1 - t0 = {t1 - t0} ms into a whole number "
            "of steps"
        )
    return k


def check_resolution(times: np.ndarray, name: str, dt: float) -> None:
    """A `ValueError` if `times` (in the model's dtype) do not strictly increase:
    the step `dt` (ms) is below the dtype's resolution of time there."""
    bad = np.nonzero(np.diff(times) <= 0)[0]
    if bad.size:
        t = float(times[bad[0]])
        spacing = float(np.spacing(np.asarray(abs(t), times.dtype)))
        raise ValueError(
            f"{name}={dt} ms is below the time resolution of {times.dtype} at "
            f"t = {t:.9g} ms (neighbouring {times.dtype} times there are "
            f"{spacing:.3g} ms apart): use float64, a larger {name}, or a t0 "
            "nearer 0"
        )


def traced(tree) -> bool:
    """Whether any leaf of `tree` is a JAX tracer (inside `jit`, `grad`, ...)."""
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree))


class AbstractStepping(eqx.Module):
    """How a `simulate` call steps: fixed steps (`FixedSteps`) or adaptive ones
    (`AdaptiveSteps`). Each owns its pipeline around `diffrax.diffeqsolve`."""

    @abc.abstractmethod
    def save_times(self, t0: float, t1: float, dtype) -> np.ndarray:
        """The times (ms) of the returned samples, in `dtype`."""

    def n_saved(self, t0: float, t1: float) -> int:
        """The number of returned samples per recording (`t0` and `t1` included)."""
        return len(self.save_times(t0, t1, np.float64))

    @abc.abstractmethod
    def max_steps(self, t0: float, t1: float) -> int:
        """The default step budget (accepted + rejected steps) from `t0` to `t1`."""

    @abc.abstractmethod
    def check(self, solver: dfx.AbstractSolver, dtype) -> None:
        """A `ValueError` if `solver` cannot run with these steps in `dtype`."""

    @abc.abstractmethod
    def solve(
        self,
        model: MembraneModel,
        y0: State,
        times,
        solver: dfx.AbstractSolver,
        adjoint: dfx.AbstractAdjoint,
        max_steps: int,
        progress_meter: dfx.AbstractProgressMeter,
        recorder: Recorder,
    ) -> Outcome:
        """Run the solve on the prepared `times` (from `prepare`)."""

    @abc.abstractmethod
    def prepare(self, model: MembraneModel, t0: float, t1: float):
        """The arrays the solve needs that are computed outside the compiled solve
        (grid times, stimulus edges), after checking `t0` and `t1`."""
