"""Import NEURON's NMODL (`.mod`) files as mechanism classes.

`load_nmodl(paths)` parses each file with NEURON's own NMODL framework
(`neuron.nmodl`, an optional dependency: `pip install stable_ode[nmodl]`),
translates it to NaN-safe JAX code, and returns one `AbstractMechanism`
subclass per `SUFFIX`. See `docs/nmodl.md`.
"""

import pathlib
from collections.abc import Iterable

from ._errors import NmodlError as NmodlError


def _files(paths) -> list[pathlib.Path]:
    if isinstance(paths, (str, pathlib.Path)):
        paths = [paths]
    out = []
    for p in paths:
        p = pathlib.Path(p)
        if p.is_dir():
            found = sorted(p.glob("*.mod"))
            if not found:
                raise NmodlError(p, None, "path", "folder has no .mod files")
            out += found
        elif p.is_file():
            out.append(p)
        else:
            raise NmodlError(p, None, "path", "no such file or folder")
    return out


def load_nmodl(
    paths: str | pathlib.Path | Iterable[str | pathlib.Path],
    *,
    neuron_schemes: bool = True,
) -> dict:
    """Mechanism classes from NMODL files.

    **Arguments:**

    - `paths`: a `.mod` file, a folder (all its `.mod` files), or a list of them.
    - `neuron_schemes`: `True` (default): states of a `SOLVE ... METHOD
      derivimplicit` block take NEURON's implicit Euler step (so that
      `BackwardEuler` runs agree with NEURON's `secondorder = 0`); `False`: the
      exact relaxation step (affine equations) or the exponential
      Rosenbrock–Euler step of `RateEquation`, more accurate at a given dt.
      `cnexp` states always take the exact step, which is NEURON's.

    **Returns:** a dict from each file's `SUFFIX`, `POINT_PROCESS` or
    `ARTIFICIAL_CELL` name to its class. A density mechanism (`SUFFIX`) is an
    `AbstractMechanism` subclass used like `HH`: `so.Insert(mechs["hh"](gnabar=0.1))`;
    a point process is used like `stable_ode.events.ExpSyn`:
    `mechs["ExpSyn"](site, tau=2.0, name="s")`, given to
    `build(..., point_processes=[...])` and targeted by NetCons; an artificial
    cell likewise, without a site, and it may be a NetCon's `source` (its
    `net_event`s). Their fields are the file's `PARAMETER`s (NEURON's names and
    units; a Python keyword gets a trailing `_`); `cls.nmodl` holds the file,
    the generated source and each state's equation line.

    **Raises:** `NmodlError` (a `ValueError`) naming the file, the line and the
    construct for a file that is missing, does not parse, uses a construct
    that is not supported (VERBATIM, POINTER, arrays indexed at run time,
    random numbers, `WATCH`, `FOR_NETCONS`, ...), or defines a name that
    another file already
    defines; `ImportError` if NEURON is not installed.
    """
    from ._declarations import read_mod
    from ._factory import make_class

    files = _files(paths)
    modules, where = {}, {}
    for f in files:
        module = read_mod(f)
        if module.suffix in modules:
            kind = "POINT_PROCESS" if module.point_process else "SUFFIX"
            raise NmodlError(
                f,
                module.lines.get("SUFFIX"),
                "ARTIFICIAL_CELL" if module.artificial else kind,
                f"{module.suffix} is also defined in {where[module.suffix]}",
            )
        modules[module.suffix] = module
        where[module.suffix] = str(f)
    return {name: make_class(m, neuron_schemes) for name, m in modules.items()}
