"""Fixtures of the NMODL importer's tests: NEURON's own `.mod` files (from the
installed wheel, never copied here), this folder's own small `.mod` files, and
NEURON compiling them once per session."""

import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest


def neuron_share() -> pathlib.Path:
    import importlib.util

    spec = importlib.util.find_spec("neuron")
    return pathlib.Path(spec.origin).parent / ".data" / "share"


MODFILE = neuron_share() / "modfile"
DEMO = neuron_share() / "nrn" / "demo" / "release"
OWN = pathlib.Path(__file__).parent / "mod"

# Compiled together, once per session: NEURON's demo channels and our own files.
COMPILED = [
    DEMO / f
    for f in (
        "khhchan.mod",
        "nachan.mod",
        "cachan1.mod",
        "camchan.mod",
        "capump.mod",
        "nacaex.mod",
    )
] + [OWN / f for f in ("hhns.mod", "traub.mod", "capool.mod")]


@pytest.fixture(scope="session")
def nrn_compiled():
    """NEURON with `COMPILED` loaded (nrnivmodl into a temporary folder)."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None or shutil.which("nrnivmodl") is None:
        pytest.skip("no C compiler (or nrnivmodl) to compile .mod files for NEURON")
    from neuron import h

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="nmodl_nrn_"))
    for f in COMPILED:
        shutil.copy(f, tmp / f.name)
    proc = subprocess.run(["nrnivmodl", "."], cwd=tmp, capture_output=True, text=True)
    lib = tmp / "x86_64" / "libnrnmech.so"
    if proc.returncode != 0 or not lib.is_file():
        pytest.fail(f"nrnivmodl failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    h.nrn_load_dll(str(lib))
    yield h
    shutil.rmtree(tmp, ignore_errors=True)
