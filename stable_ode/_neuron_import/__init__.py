"""Bringing a NEURON model over: `from_neuron` and `python -m stable_ode
from-neuron` (the format's "Bringing a NEURON model over")."""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path


class FromNeuronError(ValueError):
    """What `from_neuron` could not convert: `problems`, one line each (a
    mechanism without a `.mod` file, `extracellular`, a point process or NetCon
    source stable_ode does not have, ...), all of them in the message."""

    def __init__(self, problems: list[str], what: str = "the NEURON model"):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"cannot convert {what}: {len(self.problems)} problem(s):\n{lines}"
        )


def _neuron():
    try:
        from neuron import h
    except ImportError as e:
        raise ImportError(
            "from_neuron needs NEURON (`pip install neuron`); it is not installed "
            f"({e})"
        ) from None
    return h


def from_neuron(
    script: str | os.PathLike | None = None,
    *,
    nmodl: Iterable[str | os.PathLike] = (),
    sections: Iterable | None = None,
    record: dict | None = None,
) -> dict:
    """A NEURON model as a model-file mapping (`stable_ode.model/1`), ready for
    `stable_ode.load_spec` or `json.dump`.

    Every section becomes a model-file section: its 3-D points (`points`,
    NEURON's `x3d`/`y3d`/`z3d`/`diam3d`, µm) where it has them, else `length`
    and `diameter` (µm); `nseg`, `cm` (µF/cm²), `Ra` (Ω·cm), its parent and
    attachment point. Each tree of sections is a cell. Every inserted density
    mechanism (`hh`, `pas` and the `nmodl` files' mechanisms) is written with
    its per-compartment parameter values; the ions those mechanisms use with
    their concentrations and fixed reversal potentials; `IClamp`s as step
    stimuli; `ExpSyn`, `Exp2Syn`, `AlphaSynapse`, `SEClamp` and the `nmodl`
    files' point processes as point processes, and NetCons into them from
    `NetStim`s and from a voltage in the converted cells (threshold, delay,
    weight); NetCons without a target that watch such a voltage (NEURON's
    `NetCon.record`) as `spikes`, named `NetCon[i]`; `h.celsius`, `h.v_init`,
    `h.tstop`, `h.dt` (backward Euler, or Crank–Nicolson for
    `h.secondorder = 2`), and one record, `soma`, the voltage at the centre of
    the first section whose name starts with `soma` (else the first section),
    and one for each of `record`.

    **Arguments:**

    - `script`: a `.py` or `.hoc` file to run in a fresh NEURON (a subprocess,
      as `python -m stable_ode from-neuron`), after compiling and loading the
      `nmodl` files; `None` (default): read the model already instantiated in
      this process's NEURON (whose `.mod` files the caller has loaded).
    - `nmodl`: `.mod` files or folders of them, imported with
      `stable_ode.load_nmodl` and written (as absolute paths) to the `nmodl` key.
    - `sections`: with `script=None`, NEURON sections whose cells (trees) to
      convert; `None`: every section NEURON has.
    - `record`: with `script=None`, what to record under each name besides
      `soma` (a name `soma` replaces it): a segment (NEURON's `sec(x)`, its
      voltage); `(segment, variable)`, an ion's or a mechanism's variable there
      as NEURON names it (`(sec(0.5), "cai")`, `(sec(0.5), "m_hh")`: what
      `Vector.record(sec(0.5)._ref_m_hh)` records); or `(point process,
      variable)` of a converted point process (`(clamp, "i")`, `(syn, "g")`).
      A segment outside the converted cells or a point process that is not
      converted is a problem reported; a variable the model does not have is
      `load_spec`'s error naming the record.

    **Returns:** the model-file mapping. A parameter that differs between
    compartments is `{"values": [...]}`, one value per compartment of the
    entry's sections in order.

    **Raises:** `FromNeuronError` (a `ValueError`) listing everything that
    cannot be converted (nothing is dropped silently); `ImportError` without
    NEURON; `FileNotFoundError` for a missing script or `.mod` path.
    """
    from ._runner import mod_files

    paths = [Path(p).resolve() for p in nmodl]
    files = mod_files(paths)
    if script is not None:
        if sections is not None or record is not None:
            raise TypeError(
                "from_neuron: give `sections` and `record` only with script=None"
            )
        return run_in_subprocess(Path(script), paths)
    h = _neuron()
    from ._read import read_model
    from ._runner import nmodl_classes

    problems: list[str] = []
    classes = nmodl_classes(files, problems)
    model, more = read_model(
        h,
        classes,
        [str(p) for p in paths],
        None if sections is None else list(sections),
        record,
    )
    problems += more
    if problems:
        raise FromNeuronError(problems)
    return model


_HERE = Path(__file__).resolve().parent
_RUNNER = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location(
    "stable_ode_from_neuron", {str(_HERE / "__init__.py")!r},
    submodule_search_locations=[{str(_HERE)!r}])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
from stable_ode_from_neuron._runner import main
sys.exit(main(sys.argv[1:]))
"""
"""The runner, loaded as a package of its own so that a script without `.mod`
files does not import JAX (`stable_ode` itself is imported only for
`load_nmodl`)."""


def run_in_subprocess(script: Path, nmodl: list[Path]) -> dict:
    """Run `script` in a fresh NEURON process (`_runner`) and return its model;
    `FromNeuronError` for what it cannot convert or a script that fails."""
    script = script.resolve()
    if not script.is_file():
        raise FileNotFoundError(f"no such script: {script}")
    if importlib.util.find_spec("neuron") is None:
        raise ImportError(
            "from_neuron needs NEURON (`pip install neuron`); it is not installed"
        )
    package_parent = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [package_parent] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    with tempfile.TemporaryDirectory(prefix="stable_ode-from-neuron-") as tmp:
        out = Path(tmp) / "result.json"
        proc = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(script), str(out)]
            + [str(p) for p in nmodl],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if not out.is_file():
            tail = (proc.stdout + proc.stderr)[-3000:]
            raise FromNeuronError(
                [f"NEURON's process ended (exit code {proc.returncode}):\n{tail}"],
                str(script),
            )
        result = json.loads(out.read_text())
    if result["error"] is not None:
        said = [
            line
            for line in (proc.stdout + proc.stderr).splitlines()
            if line.strip() and "DISPLAY" not in line and "No graphics" not in line
        ][-12:]
        message = f"running {script}: {result['error']}"
        if said:
            message += "\n    NEURON said:\n" + "\n".join(f"    {x}" for x in said)
        raise FromNeuronError([message], str(script))
    if result["problems"]:
        raise FromNeuronError(result["problems"], str(script))
    return result["model"]
