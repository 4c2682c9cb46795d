"""`load_spec`: a model file (JSON or TOML) → a `MembraneModel` and its run settings."""

import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._build import build
from .._misc import gc_paused
from .._model import MembraneModel
from .._network import Connections
from .._simulate import simulate, Simulation, steps_from
from .._stepping import AbstractStepping
from ._errors import SpecError
from ._reader import one_line
from ._registry import make_controller, resolve_solver, resolve_synapse
from ._schema import ModelSpec, validate
from ._sites import SynapseSpec


class LoadedModel(eqx.Module):
    """A model file turned into objects: the model and how to integrate it.

    **Fields:**

    - `model`: the `MembraneModel` (`stable_ode.build` of the file's cells, stimuli
      and recordings).
    - `solver`: the diffrax solver `integration.solver` names.
    - `controller`: `None` (fixed steps) or the step-size controller.
    - `t_stop`: end time, ms.
    - `dt`: fixed or initial step, ms.
    - `save_dt`: spacing of the returned samples, ms.
    - `spec`: the validated file (`ModelSpec`), for reports.

    `loaded.simulate()` runs it; every field is an ordinary PyTree leaf or static,
    so `eqx.filter_jit(lambda m: m.simulate())(loaded)` compiles it.
    """

    model: MembraneModel
    solver: dfx.AbstractSolver
    controller: dfx.AbstractStepSizeController | None
    t_stop: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    save_dt: float = eqx.field(static=True)
    spec: ModelSpec = eqx.field(static=True)

    @property
    def file(self) -> str:
        """The model file, as given to `load_spec`."""
        return self.spec.file

    @property
    def stepping(self) -> AbstractStepping:
        """The file's step control as a stepping object (`stable_ode.FixedSteps`
        or `stable_ode.AdaptiveSteps`), as `simulate` runs it: ask it for step
        counts, the step budget and the save times."""
        return steps_from(self.dt, self.controller, self.save_dt)

    def simulate(self, **kwargs) -> Simulation:
        """Run the model with the file's settings: `stable_ode.simulate(model,
        t_stop, dt, solver=, controller=, save_dt=)`.

        **Arguments:** keyword arguments of `stable_ode.simulate` (e.g. `throw`,
        `adjoint`, `max_steps`, `y0`), passed on; they may override the file's.

        **Returns:** a `stable_ode.Simulation`.
        """
        options: dict[str, Any] = dict(
            solver=self.solver, controller=self.controller, save_dt=self.save_dt
        )
        options.update(kwargs)
        return simulate(self.model, self.t_stop, self.dt, **options)


def _parse(path: Path, file: str) -> Any:
    suffix = path.suffix.lower()
    if suffix not in (".json", ".toml"):
        raise SpecError(
            file, "", f"unknown model file type {path.suffix!r}: use .json or .toml"
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SpecError(file, "", "no such file") from None
    except OSError as e:
        raise SpecError(file, "", f"cannot read the file: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(file, "", f"not UTF-8 text ({e})") from None
    if suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise SpecError(file, "", f"invalid TOML: {e}") from None
        except RecursionError:
            raise SpecError(file, "", "invalid TOML: nested too deeply") from None

    def no_duplicates(pairs):
        out = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"duplicate key {k!r} in one object")
            out[k] = v
        return out

    try:
        return json.loads(text, object_pairs_hook=no_duplicates)
    except json.JSONDecodeError as e:
        raise SpecError(file, "", f"invalid JSON: {e}") from None
    except ValueError as e:
        raise SpecError(file, "", f"invalid JSON: {e}") from None
    except RecursionError:
        raise SpecError(file, "", "invalid JSON: nested too deeply") from None


def connections_spec(spec: ModelSpec) -> list[Connections]:
    """The `Connections` of a read `ModelSpec`'s synapses.

    Synapses of the same `kind` whose `params` name the same parameters form one
    `Connections` (named by the kind, in order of first appearance), with each
    parameter an array of one value per synapse (file order) and `pre`/`post` as
    arrays of compartment indices, so that no Python object is made per synapse.

    **Raises:** `SpecError` (key `synapses`) if a synapse class rejects its params.
    """
    directory = spec.directory
    groups: dict[tuple[str, tuple[str, ...]], list[SynapseSpec]] = {}
    for syn in spec.synapses:
        key = (syn.kind, tuple(sorted(k for k, _ in syn.params)))
        groups.setdefault(key, []).append(syn)
    out = []
    for (kind, names), items in groups.items():
        cls = resolve_synapse(kind, directory)
        values = {k: np.empty(len(items)) for k in names}
        for j, syn in enumerate(items):
            for k, v in syn.params:
                values[k][j] = v
        pre = np.fromiter((s.pre for s in items), np.int32, len(items))
        post = np.fromiter((s.post for s in items), np.int32, len(items))
        try:
            synapse = cls(**values)
        except Exception as e:  # noqa: BLE001 - a user class's own error
            raise SpecError(
                spec.file, "synapses", f"synapse kind {kind!r}: {one_line(e)}"
            ) from e
        out.append(Connections(synapse, pre, post, name=kind))
    return out


def build_spec(spec: ModelSpec) -> MembraneModel:
    """`stable_ode.build` of a read `ModelSpec`.

    Errors that only `build` detects become a `SpecError` naming the file.
    """
    connections = connections_spec(spec)
    dtype = jnp.float64 if spec.integration.dtype == "float64" else jnp.float32
    try:
        return build(
            spec.cells,
            spec.stimuli,
            spec.record + spec.spikes,  # events: spike recordings
            connections,
            celsius=spec.temperature,
            v_init=spec.v_init,
            dtype=dtype,
            ions=spec.ions,
            point_processes=spec.point_processes,  # events
            netcons=spec.netcons,
        )
    except (ValueError, TypeError, LookupError) as e:
        raise SpecError(spec.file, _key_of(spec, str(e)), one_line(e)) from e


def _key_of(spec: ModelSpec, message: str) -> str:
    """The key path of a `build` error: `record[i].variable` for one that names
    record `i`'s recording (`"recording 'm': ..."`, an unknown mechanism
    variable), else `cells`."""
    for i, rec in enumerate(spec.record):
        if message.startswith(f"recording {rec.name!r}:"):
            return f"record[{i}].variable"
    return "cells"


def load_spec(
    source: str | Path | Mapping[str, Any],
    *,
    enable_x64: bool = True,
    name: str | None = None,
) -> LoadedModel:
    """Load a model file (`stable_ode.model/1`, see the format's README).

    Everything is validated before anything is built: unknown keys, missing keys,
    wrong types, non-positive geometry, unknown parents, cycles, unknown mechanisms,
    synapse kinds and parameters, sections, sites, solvers and dtypes, and malformed
    SWC files (`"swc"`, read with `stable_ode.load_swc`) are reported as one
    `SpecError` naming the file and the key path (and the SWC file and line).
    Synapses become one vectorised `stable_ode.Connections` per kind and set of
    parameter names (see `connections_spec`).

    **Arguments:**

    - `source`: path to a `.json` or `.toml` file, or an already parsed mapping
      (named `"<dict>"` in messages; relative paths resolve from the working
      directory).
    - `enable_x64`: a file asking for `"dtype": "float64"` needs JAX's 64-bit mode;
      if it is off, turn it on (`jax.config.update("jax_enable_x64", True)`, a
      process-wide setting) — or, with `False`, raise a `SpecError` instead.
    - `name`: what messages call a mapping `source` (default `"<dict>"`).

    **Returns:** a `LoadedModel` (model, solver, controller, `t_stop`, `dt`,
    `save_dt`); `loaded.simulate()` runs it.
    """
    if isinstance(source, Mapping):
        file = name or "<dict>"
    else:
        file = str(source)
    try:
        return _load(source, file, enable_x64)
    except SpecError:
        raise
    except RecursionError:
        raise SpecError(file, "", "nested too deeply to read") from None
    except MemoryError:
        raise SpecError(file, "", "out of memory while reading the file") from None
    except Exception as e:  # noqa: BLE001 - a bug of ours, but still this file's
        raise SpecError(
            file, "", f"cannot read the file: {type(e).__name__}: {one_line(e)}"
        ) from e


def _load(source, file: str, enable_x64: bool) -> LoadedModel:
    with gc_paused():
        raw = (
            dict(source) if isinstance(source, Mapping) else _parse(Path(source), file)
        )
        spec = validate(raw, file)
    integ = spec.integration
    if integ.dtype == "float64" and not jax.config.jax_enable_x64:
        if not enable_x64:
            raise SpecError(
                file,
                "integration.dtype",
                "float64 needs JAX's 64-bit mode: call "
                "jax.config.update('jax_enable_x64', True) first, or use float32",
            )
        jax.config.update("jax_enable_x64", True)
    with gc_paused():
        model = build_spec(spec)
    return LoadedModel(
        model=model,
        solver=resolve_solver(integ.solver)(),
        controller=make_controller(integ.controller_dict()),
        t_stop=spec.t_stop,
        dt=integ.dt,
        save_dt=integ.save_dt,
        spec=spec,
    )
