"""Reading a parsed model file into library objects: `validate` → `ModelSpec`.

Every check raises one `SpecError` naming the file and the key path. Cells are read
by `_cells.py`; sites, synapses, stimuli and recordings by `_sites.py`; the
integration settings and the bounds on what a file may ask for here. The objects
are the library's own (`Cell`, `StepCurrent`, `Recording`, ...), which check their
values; `ModelSpec` adds only what is the file's: its name, the integration
settings by name, the synapses as compartment indices and the SWC sources.
"""

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import diffrax as dfx
import numpy as np

from .._model import Recording
from .._stimulus import StepCurrent, TraceCurrent
from ..morphology import Cell
from ._cells import CellReader, SwcSource
from ._events import (
    read_netcons,
    read_point_processes,
    read_point_record,
    read_spikes,
)
from ._ions import check_variables, read_ions
from ._nmodl import point_kinds, read_nmodl, split_nmodl
from ._reader import describe, key, LIMITS, Limits, Reader, suggest
from ._registry import (
    check_solver,
    CONTROLLER_KINDS,
    CONTROLLER_OPTIONAL,
    resolve_solver,
)
from ._sites import read_record, read_stimulus, read_synapses, Sites, SynapseSpec


FORMAT = "stable_ode.model/1"
"""The format string a model file must declare."""

DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class IntegrationSpec:
    """Solver name, `dt` and `save_dt` (ms), dtype name, controller config."""

    solver: str
    dt: float
    save_dt: float
    dtype: str
    controller: tuple[tuple[str, Any], ...] | None

    def controller_dict(self) -> dict[str, Any] | None:
        return None if self.controller is None else dict(self.controller)


@dataclass(frozen=True)
class ModelSpec:
    """A model file read into library objects (`stable_ode.model/1`).

    **Fields:** `file` (as given), `temperature` (°C), `v_init` (mV), `t_stop` (ms),
    `cells` (`Cell`s), `synapses` (`SynapseSpec`s), `stimuli` (`StepCurrent`s and
    `TraceCurrent`s), `record` (`Recording`s), `integration` (`IntegrationSpec`),
    `swc` (per cell, its `SwcSource` or `None`), `ions` (`{name: IonSpecies}`,
    the top-level `ions`), `point_processes` and `netcons` (`stable_ode.events`
    objects; `record` also holds `PointRecording`s).
    """

    file: str
    temperature: float
    v_init: float
    t_stop: float
    cells: tuple[Cell, ...]
    synapses: tuple[SynapseSpec, ...]
    stimuli: tuple[StepCurrent | TraceCurrent, ...]
    record: tuple[Recording, ...]
    integration: IntegrationSpec
    swc: tuple[SwcSource | None, ...] = ()
    ions: dict = field(default_factory=dict)
    point_processes: tuple = ()  # events: point-process objects, named
    netcons: tuple = ()  # events: `NetCon`s, targets by name
    spikes: tuple = ()  # events: `SpikeRecording`s

    @property
    def directory(self) -> Path:
        """The folder of the model file: relative paths in it resolve from here."""
        return Path(self.file).resolve().parent


def _whole(n: float) -> bool:
    return (
        math.isfinite(n) and round(n) >= 1 and abs(n - round(n)) <= 1e-6 * max(1.0, n)
    )


def _integration(
    r: Reader, raw, where: str, t_stop: float, limits: Limits
) -> IntegrationSpec:
    raw = r.table(
        raw,
        where,
        required=("dt",),
        optional=("solver", "save_dt", "dtype", "controller"),
    )
    solver = r.string(raw.get("solver", "backward_euler"), key(where, "solver"))
    dt = r.number(raw["dt"], key(where, "dt"), gt=0)
    save_dt = r.number(raw.get("save_dt", dt), key(where, "save_dt"), gt=0)
    dtype = r.string(raw.get("dtype", "float64"), key(where, "dtype"))
    if dtype not in DTYPES:
        r.fail(key(where, "dtype"), f"must be 'float32' or 'float64', got {dtype!r}")

    sw = key(where, "solver")
    with r.at(sw):
        factory = resolve_solver(solver)
    cw = key(where, "controller")
    controller = raw.get("controller")
    adaptive = controller is not None
    if adaptive:
        controller = _controller(r, controller, cw)
    with r.at(sw):
        solver_object = factory()
        check_solver(solver_object, solver, adaptive)
    if adaptive and not isinstance(solver_object, dfx.AbstractAdaptiveSolver):
        r.fail(
            cw,
            f"solver {solver!r} has no error estimate, so it cannot be used with "
            f"an adaptive controller; use fixed steps (null) or another solver",
        )
    if not adaptive and t_stop / dt > limits.steps:
        r.fail(
            key(where, "dt"),
            f"t_stop / dt = {t_stop / dt:.3g} fixed steps, more than the limit of "
            f"{limits.steps:,}; use a larger dt or a shorter t_stop",
        )
    if t_stop / save_dt > limits.saved_values:
        r.fail(
            key(where, "save_dt"),
            f"t_stop / save_dt = {t_stop / save_dt:.3g} samples, more than the "
            f"limit of {limits.saved_values:,} saved values; use a larger save_dt",
        )
    if not adaptive:
        if not _whole(t_stop / dt):
            r.fail(
                key(where, "dt"),
                f"{dt} ms must divide t_stop = {t_stop} ms into a whole number of "
                f"steps (fixed steps)",
            )
        if not _whole(save_dt / dt):
            r.fail(
                key(where, "save_dt"),
                f"{save_dt} ms must be a whole multiple of dt = {dt} ms (fixed steps)",
            )
    if not _whole(t_stop / save_dt):
        r.fail(
            key(where, "save_dt"),
            f"{save_dt} ms must divide t_stop = {t_stop} ms into a whole number "
            f"of samples",
        )
    return IntegrationSpec(
        solver=solver, dt=dt, save_dt=save_dt, dtype=dtype, controller=controller
    )


def _controller(r: Reader, raw, where: str) -> tuple[tuple[str, Any], ...]:
    controller = r.mapping(raw, where)
    if "kind" not in controller:
        r.fail(key(where, "kind"), "required key is missing (e.g. 'pid')")
    kind = r.string(controller["kind"], key(where, "kind"))
    if kind not in CONTROLLER_KINDS:
        r.fail(
            key(where, "kind"),
            f"unknown controller kind {kind!r}{suggest(kind, CONTROLLER_KINDS)}: use "
            f"one of {sorted(CONTROLLER_KINDS)}, or null (omit it) for fixed steps",
        )
    r.table(
        controller,
        where,
        required=("kind", *sorted(CONTROLLER_KINDS[kind])),
        optional=sorted(CONTROLLER_OPTIONAL),
    )
    values = {}
    for k, v in controller.items():
        if k != "kind":
            positive = k in ("rtol", "atol", "dtmin", "dtmax")
            values[k] = r.number(
                v, key(where, k), **({"gt": 0} if positive else {"ge": 0})
            )
    if "dtmin" in values and "dtmax" in values and values["dtmin"] > values["dtmax"]:
        r.fail(key(where, "dtmin"), "must be <= dtmax")
    return (("kind", kind), *values.items())


def _check_budget(
    r: Reader, spec_integ: IntegrationSpec, t_stop, n_comp, n_rec, limits
):
    """The values the run would save, against `limits`, before building."""
    samples = t_stop / spec_integ.save_dt + 1
    per_sample = n_rec or n_comp
    values = samples * per_sample
    if values > limits.saved_values:
        itemsize = 4 if spec_integ.dtype == "float32" else 8
        what = f"{n_rec} recordings" if n_rec else f"{n_comp:,} compartments"
        r.fail(
            "integration.save_dt",
            f"saving {samples:.3g} samples × {what} = {values:.3g} values "
            f"({values * itemsize / 2**30:.3g} GiB) is more than the limit of "
            f"{limits.saved_values:,} values; use a larger save_dt, a shorter t_stop "
            f"or fewer recordings",
        )


def validate(raw: Any, file: str, limits: Limits = LIMITS) -> ModelSpec:
    """Check a parsed model file and read it into library objects.

    **Arguments:**

    - `raw`: the parsed JSON/TOML document.
    - `file`: the file name, used in messages and to resolve relative paths.
    - `limits`: what the file may ask for (`Limits`).

    **Returns:** a `ModelSpec`.

    **Raises:** `SpecError` at the first problem.
    """
    r = Reader(file)
    if not isinstance(raw, dict):
        r.fail("", f"the top level must be a table (JSON object), got {describe(raw)}")
    if "format" not in raw:
        r.fail("format", f"required key is missing (must be {FORMAT!r})")
    if raw["format"] != FORMAT:
        r.fail("format", f"must be {FORMAT!r}, got {describe(raw['format'])}")
    raw = r.table(
        raw,
        "",
        required=("format", "t_stop", "cells", "integration"),
        optional=(
            "temperature",
            "v_init",
            "synapses",
            "stimuli",
            "record",
            "ions",
            "nmodl",
            "point_processes",
            "netcons",
            "spikes",
        ),
    )
    directory = Path(file).resolve().parent
    t_stop = r.number(raw["t_stop"], "t_stop", gt=0)
    integration = _integration(r, raw["integration"], "integration", t_stop, limits)
    if integration.dtype == "float32":
        finfo = np.finfo(np.float32)
        r = Reader(file, float(finfo.max), "float32")
    tiny = float(np.finfo(integration.dtype).tiny)

    items = r.seq(raw["cells"], "cells")
    if not items:
        r.fail("cells", "a model needs at least one cell")
    nmodl = read_nmodl(r, raw["nmodl"], directory) if "nmodl" in raw else {}
    nmodl, imported = split_nmodl(nmodl)  # density mechanisms, point processes
    reader = CellReader(r, directory, limits.compartments, tiny, nmodl)
    read = [reader.cell(c, f"cells[{i}]") for i, c in enumerate(items)]
    cells = [c for c, _ in read]
    r.unique([c.name for c in cells], "cells", "cell")
    sites = Sites(r, cells)

    synapses = read_synapses(r, raw.get("synapses", []), "synapses", sites, directory)
    stimuli = tuple(
        read_stimulus(r, s, f"stimuli[{i}]", sites)
        for i, s in enumerate(r.seq(raw.get("stimuli", []), "stimuli"))
    )
    # events: point processes, NetCons, spikes
    pps = read_point_processes(
        r, raw.get("point_processes", []), "point_processes", sites, imported
    )
    kinds = {p.name: type(p).__name__ for p in pps}
    receivers, recordable = point_kinds(imported)
    netcons = read_netcons(
        r, raw.get("netcons", []), "netcons", kinds, sites, receivers
    )
    spikes = read_spikes(r, raw.get("spikes", []), "spikes", sites)
    record = tuple(
        read_point_record(r, s, f"record[{i}]", kinds, recordable)
        if isinstance(s, dict) and "point_process" in s
        else read_record(r, s, f"record[{i}]", sites)
        for i, s in enumerate(r.seq(raw.get("record", []), "record"))
    )
    r.unique([x.name for x in record + spikes], "record", "recording")
    ions = read_ions(r, raw["ions"]) if "ions" in raw else {}
    check_variables(r, record, cells, ions)
    _check_budget(r, integration, t_stop, sites.n_compartments, len(record), limits)
    return ModelSpec(
        file=file,
        temperature=r.number(raw.get("temperature", 6.3), "temperature", gt=-273.15),
        v_init=r.number(raw.get("v_init", -65.0), "v_init"),
        t_stop=t_stop,
        cells=tuple(cells),
        synapses=synapses,
        stimuli=stimuli,
        record=record,
        integration=integration,
        swc=tuple(s for _, s in read),
        ions=ions,
        point_processes=pps,
        netcons=netcons,
        spikes=spikes,
    )
