"""Names in model files → objects: the one place where strings become configuration.

Mechanisms, synapse kinds, stimulus kinds, solvers and step-size controllers are
named in a model file; everything inside the library is configured by objects.
`REGISTRY` holds every table of names; adding a mechanism, a synapse or stimulus
kind, a solver or a controller kind to the file format means adding an entry to
it. Its empty tables (`point_processes`, `ions`, `variables`, `netcon_sources`) are
the places the format's planned additions will fill.
"""

import contextlib
import dataclasses
import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import diffrax as dfx

from .._solver import BackwardEuler, CrankNicolson, ExponentialEuler
from .._stimulus import Site, STIMULUS_KINDS
from ..events import NetStim, POINT_PROCESS_KINDS, SpikeTimes
from ..mechanisms import AbstractMechanism, HH, Passive
from ..mechanisms.synapses import AbstractSynapse, GapJunction, IonotropicSynapse
from ._reader import suggest as _suggest


MECHANISMS: dict[str, type[AbstractMechanism]] = {"hh": HH, "pas": Passive}
"""Registered mechanism names (NEURON's) and their classes."""

SYNAPSES: dict[str, type[AbstractSynapse] | type[GapJunction]] = {
    "ionotropic": IonotropicSynapse,
    "gap_junction": GapJunction,
}
"""Registered synapse kinds and their classes."""

SYNAPSE_BOUNDS: dict[str, dict[str, tuple[str, float]]] = {
    "ionotropic": {"gmax": ("ge", 0.0), "k_minus": ("gt", 0.0), "delta": ("ne", 0.0)},
    "gap_junction": {"g": ("ge", 0.0)},
}
"""Checks of registered kinds' params: `(op, bound)` with op `ge`, `gt` or `ne`.
(The synapse classes do not check their parameters yet; these move into them.)"""

SOLVERS: dict[str, Callable[[], dfx.AbstractSolver]] = {
    "exponential_euler": ExponentialEuler,
    "backward_euler": BackwardEuler,
    "crank_nicolson": CrankNicolson,
}
"""Registered solver names; any other name is looked up as a diffrax solver class."""

CONTROLLER_KINDS = {"pid": {"rtol", "atol"}}
"""Controller kinds and their required keys."""

CONTROLLER_OPTIONAL = {"dtmin", "dtmax", "pcoeff", "icoeff", "dcoeff"}
"""Optional numeric keys of every controller kind."""


@contextlib.contextmanager
def _importable_from(directory: Path | None):
    """Temporarily put `directory` (the model file's folder) first on `sys.path`."""
    if directory is None:
        yield
        return
    entry = str(directory)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _import(module_name: str, model_dir: Path | None):
    """`importlib.import_module`, from `model_dir` too if given; a module that
    calls `sys.exit` (or raises another `BaseException` but Ctrl-C) while
    importing is an error, not the end of the program."""
    try:
        with _importable_from(model_dir):
            return importlib.import_module(module_name)
    except (Exception, KeyboardInterrupt):
        raise
    except BaseException as e:  # SystemExit, GeneratorExit, ...
        raise ImportError(
            f"module {module_name!r} raised {type(e).__name__}"
            f"{'(' + repr(e.args[0]) + ')' if e.args else ''} while being imported"
        ) from None


def _import_class(name: str, model_dir: Path | None, what: str):
    """The object `"module.path:ClassName"` names, importing the module as usual or
    else from `model_dir`. `what` ("mechanism", "synapse") is used in messages."""
    module_name, _, class_name = name.partition(":")
    if not module_name or not class_name or ":" in class_name:
        raise LookupError(f"{what} {name!r} is not of the form 'module.path:ClassName'")
    try:
        module = _import(module_name, None)
    except ModuleNotFoundError as e:
        if e.name is None or module_name.split(".")[0] != e.name.split(".")[0]:
            raise LookupError(f"importing {module_name!r} failed: {e}") from None
        try:
            module = _import(module_name, model_dir)
        except Exception as e2:  # noqa: BLE001 - any import failure is the user's
            raise LookupError(
                f"cannot import module {module_name!r} for {what} {name!r}: {e2}"
            ) from None
    except Exception as e:  # noqa: BLE001
        raise LookupError(
            f"importing module {module_name!r} for {what} {name!r} failed: "
            f"{type(e).__name__}: {e}"
        ) from None
    cls = getattr(module, class_name, None)
    if cls is None:
        raise LookupError(f"module {module_name!r} has no attribute {class_name!r}")
    return cls


def resolve_mechanism(
    name: str, model_dir: Path | None = None
) -> type[AbstractMechanism]:
    """The mechanism class named `name`.

    **Arguments:**

    - `name`: a registered name (`"hh"`, `"pas"`) or `"module.path:ClassName"`
      naming a user's subclass of `stable_ode.AbstractMechanism`. The module is
      imported as usual, or else from `model_dir` (the model file's folder), so
      that a mechanism module can sit next to the model file.
    - `model_dir`: folder to import user modules from, if not importable.

    **Returns:** the class.

    **Raises:** `LookupError` with a message saying what is wrong.
    """
    if name in MECHANISMS:
        return MECHANISMS[name]
    if ":" not in name:
        raise LookupError(
            f"unknown mechanism {name!r}{_suggest(name, MECHANISMS)}: registered "
            f"mechanisms are {sorted(MECHANISMS)}, or name your own class as "
            f"'module.path:ClassName'"
        )
    cls = _import_class(name, model_dir, "mechanism")
    if not (inspect.isclass(cls) and issubclass(cls, AbstractMechanism)):
        raise LookupError(
            f"{name!r} is not a subclass of stable_ode.AbstractMechanism, got {cls!r}"
        )
    if inspect.isabstract(cls):
        raise LookupError(f"{name!r} is abstract (it does not implement every method)")
    return cls


def resolve_synapse(
    kind: str, model_dir: Path | None = None
) -> type[AbstractSynapse] | type[GapJunction]:
    """The synapse class a model file's `synapses[].kind` names.

    **Arguments:**

    - `kind`: a registered kind (`"ionotropic"`: `stable_ode.IonotropicSynapse`,
      `"gap_junction"`: `stable_ode.GapJunction`) or `"module.path:ClassName"`
      naming a user's subclass of `stable_ode.AbstractSynapse` (imported as for
      mechanisms, or else from `model_dir`).
    - `model_dir`: folder to import user modules from, if not importable.

    **Returns:** the class.

    **Raises:** `LookupError` with a message saying what is wrong.
    """
    if kind in SYNAPSES:
        return SYNAPSES[kind]
    if ":" not in kind:
        raise LookupError(
            f"unknown synapse kind {kind!r}{_suggest(kind, SYNAPSES)}: registered "
            f"kinds are {sorted(SYNAPSES)}, or name your own class as "
            f"'module.path:ClassName'"
        )
    cls = _import_class(kind, model_dir, "synapse")
    if not (inspect.isclass(cls) and issubclass(cls, AbstractSynapse)):
        raise LookupError(
            f"{kind!r} is not a subclass of stable_ode.AbstractSynapse, got {cls!r}"
        )
    if inspect.isabstract(cls):
        raise LookupError(f"{kind!r} is abstract (it does not implement every method)")
    return cls


def mechanism_parameters(cls: type) -> tuple[set[str], set[str]]:
    """The keyword arguments of mechanism (or synapse) class `cls`: `(all,
    required)`."""
    names, required = set(), set()
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        names.add(f.name)
        if (
            f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING
        ):
            required.add(f.name)
    return names, required


def resolve_solver(name: str) -> Callable[[], dfx.AbstractSolver]:
    """A zero-argument factory for the solver named `name`.

    Registered names map to our solvers; any other name must be a concrete diffrax
    solver class constructible without arguments (e.g. `"Kvaerno5"`, `"Tsit5"`).

    **Raises:** `LookupError` with a message saying what is wrong.
    """
    if name in SOLVERS:
        return SOLVERS[name]
    cls = getattr(dfx, name, None)
    if not (inspect.isclass(cls) and issubclass(cls, dfx.AbstractSolver)):
        diffrax_names = [
            n
            for n in dir(dfx)
            if inspect.isclass(getattr(dfx, n))
            and issubclass(getattr(dfx, n), dfx.AbstractSolver)
            and not n.startswith("Abstract")
        ]
        raise LookupError(
            f"unknown solver {name!r}{_suggest(name, [*SOLVERS, *diffrax_names])}: "
            f"use one of {sorted(SOLVERS)} or a diffrax solver class name such as "
            f"'Kvaerno5'"
        )
    if inspect.isabstract(cls) or name.startswith("Abstract"):
        raise LookupError(f"solver {name!r} is an abstract diffrax class")
    try:
        cls()
    except TypeError as e:
        raise LookupError(
            f"diffrax solver {name!r} cannot be built without arguments ({e}); "
            f"use it from Python instead"
        ) from None
    return cls


def make_controller(
    config: Mapping[str, Any] | None,
) -> dfx.AbstractStepSizeController | None:
    """The step-size controller a model file's `integration.controller` describes.

    **Arguments:**

    - `config`: `None` for fixed steps, or a mapping with `kind` (`"pid"`) and that
      kind's keys: `rtol`, `atol` and optionally `dtmin`, `dtmax` (ms), `pcoeff`,
      `icoeff`, `dcoeff`. The loader validates it first; here an unknown kind or
      key raises `ValueError`.

    **Returns:** `None` (fixed steps of exactly `dt`, see `stable_ode.simulate`) or a
    `diffrax.PIDController`.
    """
    if config is None:
        return None
    config = dict(config)
    kind = config.pop("kind", None)
    if kind not in CONTROLLER_KINDS:
        raise ValueError(
            f"unknown controller kind {kind!r}: use one of {sorted(CONTROLLER_KINDS)} "
            f"or null for fixed steps"
        )
    unknown = set(config) - CONTROLLER_KINDS[kind] - CONTROLLER_OPTIONAL
    if unknown:
        raise ValueError(f"unknown {kind} controller keys {sorted(unknown)}")
    missing = CONTROLLER_KINDS[kind] - set(config)
    if missing:
        raise ValueError(f"{kind} controller needs keys {sorted(missing)}")
    # kind == "pid"
    return dfx.PIDController(**config)


def check_solver(solver: dfx.AbstractSolver, name: str, adaptive: bool) -> None:
    """Whether `solver` can integrate a model (one term) with fixed steps
    (`adaptive=False`) or under a step-size controller.

    **Raises:** `LookupError` saying why not: a solver for several terms (e.g.
    `SemiImplicitEuler`, `KenCarp4`, `ItoMilstein`), a diffrax implicit solver with
    fixed steps (its root finder takes its tolerances from the controller), or a
    solver without an error estimate under a controller.
    """
    structure = solver.term_structure
    if not (inspect.isclass(structure) and issubclass(structure, dfx.AbstractTerm)):
        raise LookupError(
            f"solver {name!r} integrates terms of the structure {structure}, but a "
            f"model is one term; use one of {sorted(SOLVERS)} or a single-term "
            f"diffrax solver such as 'Tsit5' or 'Kvaerno5'"
        )
    if issubclass(structure, dfx.MultiTerm):
        raise LookupError(f"solver {name!r} needs several terms; a model is one")
    if not adaptive and isinstance(solver, dfx.AbstractImplicitSolver):
        raise LookupError(
            f"diffrax's implicit solver {name!r} needs an adaptive controller (its "
            f"root finder takes its tolerances from it): give integration.controller,"
            f" or use {sorted(SOLVERS)} for fixed steps"
        )


@dataclasses.dataclass(frozen=True)
class Registry:
    """Every table of names a model file may use.

    **Fields:**

    - `mechanisms`: density mechanisms (`cells[].mechanisms[].name`).
    - `synapses`: synapse kinds (`synapses[].kind`).
    - `stimuli`: stimulus kinds (`stimuli[].kind`).
    - `solvers`: solver names (`integration.solver`; other names are looked up
      as diffrax solver classes).
    - `controllers`: controller kinds (`integration.controller.kind`) and the
      class each makes.
    - `ions`: the keys of an `ions` entry and their kinds (`ION_KEYS`).
    - `variables`: what a record's `variable` may name (`RECORD_VARIABLES`).
    - `point_processes`: NEURON's point processes (`point_processes[].kind`).
    - `netcon_sources`: the NetCon sources implemented
      (`netcons[].source`'s key; `"cell"`: a compartment's voltage).
    """

    mechanisms: Mapping[str, type]
    synapses: Mapping[str, type]
    stimuli: Mapping[str, type]
    solvers: Mapping[str, Callable[[], dfx.AbstractSolver]]
    controllers: Mapping[str, type]
    point_processes: Mapping[str, type] = dataclasses.field(default_factory=dict)
    ions: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    variables: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    netcon_sources: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def mechanism(self, name: str, model_dir: Path | None = None) -> type:
        """See `resolve_mechanism`."""
        return resolve_mechanism(name, model_dir)

    def synapse(self, kind: str, model_dir: Path | None = None) -> type:
        """See `resolve_synapse`."""
        return resolve_synapse(kind, model_dir)

    def stimulus(self, kind: str) -> type:
        """The stimulus class of `kind`; `LookupError` if there is none."""
        if kind not in self.stimuli:
            names = " or ".join(repr(k) for k in self.stimuli)
            raise LookupError(
                f"unknown stimulus kind {kind!r}{_suggest(kind, self.stimuli)}: use "
                f"{names}"
            )
        return self.stimuli[kind]

    def solver(self, name: str, adaptive: bool) -> dfx.AbstractSolver:
        """The solver `name` names, checked by `check_solver`."""
        solver = resolve_solver(name)()
        check_solver(solver, name, adaptive)
        return solver


ION_KEYS = {
    "inside": "concentration",
    "outside": "concentration",
    "reversal": "potential",
    "valence": "valence",
}
"""The keys of an `ions` entry (top level, and a cell's but `valence`) and
their kinds: concentrations mM (> 0), a fixed reversal potential mV, an
integer valence."""

RECORD_VARIABLES = {
    "v": "membrane potential (mV)",
    "<ion>i": "inside concentration (mM)",
    "<ion>o": "outside concentration (mM)",
    "e<ion>": "reversal potential (mV)",
    "i<ion>": "the ion's total membrane current density (mA/cm²)",
}
"""What a record's `variable` may name (`<ion>`: any ion of the model)."""


REGISTRY = Registry(
    mechanisms=MECHANISMS,
    synapses=SYNAPSES,
    stimuli=STIMULUS_KINDS,
    solvers=SOLVERS,
    controllers={"pid": dfx.PIDController},
    ions=ION_KEYS,
    variables=RECORD_VARIABLES,
    point_processes=POINT_PROCESS_KINDS,
    netcon_sources={"spike_times": SpikeTimes, "netstim": NetStim, "cell": Site},
)
"""The names model files may use (see `Registry`)."""
