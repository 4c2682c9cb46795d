"""The model file's top-level `nmodl` key: `.mod` files (or folders of them)
whose mechanisms the cells may insert by their `SUFFIX`, and whose point
processes `point_processes` entries may name by their `POINT_PROCESS` name, as
after NEURON's `nrnivmodl`."""

from pathlib import Path

from ._reader import Reader
from ._registry import MECHANISMS, REGISTRY


def read_nmodl(r: Reader, raw, directory: Path) -> dict[str, type]:
    """The mechanism classes of the files and folders listed in `raw` (paths
    relative to `directory`), by `SUFFIX`.

    One `stable_ode.load_nmodl` call takes them all, so a `SUFFIX` defined in
    two files is one error naming both. A missing path, a file the importer
    cannot take (the message names its line and construct) or a `SUFFIX` that
    is also a built-in mechanism (NEURON refuses that too) is a `SpecError` at
    `nmodl[i]`.
    """
    from ..nmodl import load_nmodl, NmodlError

    items = r.seq(raw, "nmodl")
    paths = []
    for i, item in enumerate(items):
        p = directory / r.string(item, f"nmodl[{i}]")
        if not p.exists():
            r.fail(f"nmodl[{i}]", f"no such file or folder: {str(p)!r}")
        paths.append(p.resolve())
    if not paths:
        return {}
    try:
        classes = load_nmodl(paths)
    except NmodlError as e:
        r.fail(_entry(paths, Path(e.path)), str(e))
    except ImportError as e:
        r.fail("nmodl", str(e))
    for name, cls in classes.items():
        if name in REGISTRY.point_processes:
            r.fail(
                _entry(paths, Path(cls.nmodl.path)),
                f"POINT_PROCESS {name!r} ({cls.nmodl.path}) is also a built-in point "
                "process of stable_ode (as in NEURON, a name is defined once)",
            )
        if name in MECHANISMS:
            r.fail(
                _entry(paths, Path(cls.nmodl.path)),
                f"SUFFIX {name!r} ({cls.nmodl.path}) is also a built-in mechanism "
                f"of stable_ode (as in NEURON, a mechanism name is defined once)",
            )
    return classes


def _entry(paths: list[Path], file: Path) -> str:
    """The key `nmodl[i]` of the entry that `file` comes from."""
    file = file.resolve()
    for i, p in enumerate(paths):
        if file == p or p in file.parents:
            return f"nmodl[{i}]"
    return "nmodl"


def nmodl_parameter_names(cls) -> dict[str, str]:
    """For a class from `load_nmodl`: NMODL parameter name → field name (they
    differ for Python keywords: `lambda` → `lambda_`); `{}` for other classes."""
    info = getattr(cls, "nmodl", None)
    parameters = getattr(info, "parameters", None)
    if not isinstance(parameters, dict):
        return {}
    return {nmodl: field for field, nmodl in parameters.items()}


def split_nmodl(classes: dict) -> tuple[dict, dict]:
    """`(density, point)`: the classes from `read_nmodl` that are density
    mechanisms (`SUFFIX`) and those that are point processes, by name."""
    point = {n: c for n, c in classes.items() if _is_point(c)}
    return {n: c for n, c in classes.items() if n not in point}, point


def _is_point(cls) -> bool:
    return callable(getattr(cls, "make_point_process_group", None))


def point_kinds(point: dict) -> tuple[tuple[str, ...], dict]:
    """For the imported point processes: the kinds NetCons may target (the
    built-in `ExpSyn`, `Exp2Syn` and those with a `NET_RECEIVE`) and each
    imported kind's recordable variables (its states), by class name."""
    receivers = ("ExpSyn", "Exp2Syn") + tuple(
        c.__name__ for c in point.values() if c.receives_events
    )
    return receivers, {c.__name__: c.group_class.recordable for c in point.values()}
