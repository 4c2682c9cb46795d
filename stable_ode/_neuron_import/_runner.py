"""Running a NEURON script in a fresh process and reading the model it builds.

`main([SCRIPT, OUT.json, MOD_PATH, ...])`, in a process of its own, compiles and
loads the `.mod` files (unless NEURON already knows their mechanisms), runs
SCRIPT (`.py` or `.hoc`) in its own folder and writes `{"model": ...,
"problems": [...], "error": null}` to OUT.json.
"""

import hashlib
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path


_DECLARES = re.compile(
    r"^\s*(SUFFIX|POINT_PROCESS|ARTIFICIAL_CELL)\s+(\w+)", re.MULTILINE
)


def mod_files(paths) -> list[Path]:
    """The `.mod` files of `paths` (files, or folders whose `.mod` files are all
    taken), in order; a missing path is a `FileNotFoundError`."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(p.glob("*.mod"))
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"--nmodl {p}: no such file or folder")
    return out


def _declared(files) -> set[str]:
    names = set()
    for f in files:
        names |= {m.group(2) for m in _DECLARES.finditer(f.read_text(errors="replace"))}
    return names


def _known(h) -> set[str]:
    names = set()
    for kind in (0, 1):
        mt = h.MechanismType(kind)
        ref = h.ref("")
        for i in range(int(mt.count())):
            mt.select(i)
            mt.selected(ref)
            names.add(ref[0])
    return names


def compile_and_load(h, files) -> None:
    """`nrnivmodl` the `files` into a cache folder keyed by their contents (so a
    second run reuses it) and load the library, unless NEURON already knows
    every mechanism they declare."""
    if not files or _declared(files) <= _known(h):
        return
    digest = hashlib.sha256()
    for f in files:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    cache = Path(
        os.environ.get("STABLE_ODE_NRNIVMODL_CACHE")
        or Path(tempfile.gettempdir()) / f"stable_ode-nrnivmodl-{os.getuid()}"
    )
    folder = cache / digest.hexdigest()[:16]
    libs = sorted(folder.glob("*/libnrnmech.*")) + sorted(
        folder.glob("*/.libs/libnrnmech.so")
    )
    if not libs:
        if shutil.which("nrnivmodl") is None:
            raise RuntimeError("nrnivmodl (NEURON's .mod compiler) is not on PATH")
        work = Path(tempfile.mkdtemp(prefix="build-", dir=_mkdir(cache)))
        for f in files:
            shutil.copy(f, work / f.name)
        proc = subprocess.run(
            ["nrnivmodl", "."], cwd=work, capture_output=True, text=True, check=False
        )
        built = sorted(work.glob("*/libnrnmech.*")) + sorted(
            work.glob("*/.libs/libnrnmech.so")
        )
        if proc.returncode != 0 or not built:
            raise RuntimeError(
                "nrnivmodl failed:\n" + (proc.stdout + proc.stderr)[-3000:]
            )
        try:
            work.rename(folder)
        except OSError:  # another run built it meanwhile
            shutil.rmtree(work, ignore_errors=True)
        libs = sorted(folder.glob("*/libnrnmech.*")) + sorted(
            folder.glob("*/.libs/libnrnmech.so")
        )
    h.nrn_load_dll(str(libs[0]))


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def nmodl_classes(files, problems: list) -> dict:
    """`stable_ode.load_nmodl`'s classes of each file, by SUFFIX; a file the
    importer cannot take is a problem (each is listed)."""
    from stable_ode.nmodl import load_nmodl  # (the runner is its own package)

    classes: dict = {}
    where: dict = {}
    for f in files:
        try:
            got = load_nmodl(f)
        except (ValueError, ImportError) as e:
            problems.append(f"{f}: {e}")
            continue
        for name, cls in got.items():
            if name in classes:
                problems.append(f"{f}: SUFFIX {name} is also defined in {where[name]}")
            classes[name], where[name] = cls, f
    return classes


_SCRIPT_GLOBALS: list = []


def run_script(h, script: Path) -> None:
    """Run a `.py` (as `__main__`) or `.hoc` script in its own folder."""
    os.chdir(script.parent)
    if script.suffix == ".hoc" or script.suffix == ".nrn":
        if not h.load_file(1, str(script)):
            raise RuntimeError(f"{script}: NEURON could not run it (see above)")
    else:
        sys.argv = [str(script)]
        # the globals keep the script's sections alive
        _SCRIPT_GLOBALS.append(runpy.run_path(str(script), run_name="__main__"))


def main(argv) -> int:
    script, out, nmodl = Path(argv[0]).resolve(), Path(argv[1]), argv[2:]
    result: dict = {"model": None, "problems": [], "error": None}
    try:
        from neuron import h

        from ._read import read_model

        files = mod_files(nmodl)
        compile_and_load(h, files)
        h.load_file("stdrun.hoc")
        classes = nmodl_classes(files, result["problems"])
        run_script(h, script)
        paths = [str(Path(p).resolve()) for p in nmodl]
        model, problems = read_model(h, classes, paths)
        result["model"] = model
        result["problems"] += problems
    except BaseException as e:  # a script's error, SystemExit included
        if isinstance(e, SystemExit) and e.code in (0, None):
            result["error"] = f"{script} called sys.exit() before its model was read"
        else:
            result["error"] = "".join(traceback.format_exception_only(e)).strip()
            result["traceback"] = traceback.format_exc()
    out.write_text(json.dumps(result))
    return 0
