import os as _os
import pathlib as _pathlib
import shutil as _shutil
import subprocess as _subprocess

import jax
import pytest as _pytest


# As diffrax's test-suite: 64-bit by default, strict promotion so that no silent
# float64 upcast hides in float32 code paths. float32 tests build float32 models.
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
jax.config.update("jax_numpy_rank_promotion", "raise")


# ---------------------------------------------------------------- test order
# The files whose tests take longest (mostly compilation; from a `--durations`
# run of the whole suite), longest first. They are collected first, so that
# `pytest-xdist`, which hands out whole files in collection order
# (`--dist loadfile --no-loadscope-reorder`), ends the run with short files on
# every worker rather than one long file on one of them.
_LONGEST_FIRST = (
    "nmodl/test_self_events.py",
    "adjoint/test_adjoint.py",
    "adjoint/test_gradient_rejections.py",
    "repo/test_examples.py",
    "solvers/test_jit.py",
    "solvers/test_adaptive.py",
    "solvers/test_adaptive_stops.py",
    "morphology/test_tree.py",
    "morphology/test_tree_solvers.py",
    "repo/test_benchmarks.py",
    "test_reference.py",
    "network/test_network.py",
    "adjoint/test_adjoint_network.py",
    "solvers/test_stepping.py",
    "solvers/test_edges.py",
)


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(_LONGEST_FIRST)}

    def key(item):
        try:
            name = _pathlib.Path(item.path).relative_to(_TESTS).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(name, len(rank))

    items.sort(key=key)  # stable: within a file, and for the rest, as collected


# ---------------------------------------------------------------- NEURON + .mod
# One nrnivmodl per test session: every .mod file a NEURON comparison needs,
# compiled together (NEURON cannot load two libraries that define the same
# mechanism into one process, so the test modules share one). NEURON's files
# are read from its installed wheel, never copied into the repository.


_TESTS = _pathlib.Path(__file__).parent
_DEMO_FILES = (
    "khhchan.mod",
    "nachan.mod",
    "cachan1.mod",
    "camchan.mod",
    "capump.mod",
    "nacaex.mod",
    "release.mod",
    "capmpr.mod",
    "cabpump.mod",
    "invlfire.mod",
)
_OWN_FILES = (
    _TESTS / "nmodl" / "mod" / "hhns.mod",
    _TESTS / "nmodl" / "mod" / "traub.mod",
    _TESTS / "nmodl" / "mod" / "capool.mod",
    _TESTS / "nmodl" / "mod" / "cabind.mod",
    _TESTS / "nmodl" / "mod" / "canapool.mod",
    _TESTS / "nmodl" / "mod" / "napool.mod",
    _TESTS / "nmodl" / "mod" / "cabuf.mod",
    _TESTS / "nmodl" / "mod" / "cacopy.mod",
    _TESTS / "nmodl" / "mod" / "kinchan.mod",
    _TESTS / "nmodl" / "mod" / "tmsyn.mod",
    _TESTS / "nmodl" / "mod" / "pulsesyn.mod",
    _TESTS / "nmodl" / "mod" / "pulsetrain.mod",
    _TESTS / "nmodl" / "mod" / "casyn.mod",
    _TESTS / "data" / "mod" / "capool_ions.mod",
    _TESTS / "data" / "mod" / "kmarkov.mod",
    _TESTS / "data" / "mod" / "kcascheme.mod",
    _TESTS / "data" / "mod" / "cakin.mod",
)


# From the cerebellar collection `dbbs-mod-collection` (a test extra), read from
# its installed package: the files tests/nmodl/test_dbbs.py runs in NEURON.
DBBS_COMPILED = (
    "Nav1_6__0",
    "Kv3_4__0",
    "Kca1_1__0",
    "Cav3_1__0",
    "Kca3_1__0",
    "Nav1_1__0",
    "GABA__biexp",
    "Cav2_3__0",
)


def dbbs_folder():
    """The installed `dbbs_mod_collection`'s `.mod` folder, or `None`."""
    import importlib.util

    spec = importlib.util.find_spec("dbbs_mod_collection")
    return None if spec is None else _pathlib.Path(spec.origin).parent / "mod"


def _dbbs():
    folder = dbbs_folder()
    if folder is None:
        return []
    return [folder / f"glia__dbbs_mod_collection__{n}.mod" for n in DBBS_COMPILED]


def _shared_temp(tmp_path_factory) -> _pathlib.Path:
    """The session's temporary root that every `pytest-xdist` worker shares (each
    worker's own folder is below it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if _os.environ.get("PYTEST_XDIST_WORKER") else base


def _compiled(files, root: _pathlib.Path):
    """`files` compiled by one `nrnivmodl` into `root`, in a folder named by their
    contents and NEURON's version, under a lock: the first worker to get there
    compiles, the others load its library. The library's path, or the compiler's
    output (a string) if it failed."""
    import fcntl
    import hashlib

    import neuron

    digest = hashlib.sha256(neuron.__version__.encode())
    for f in sorted(files, key=lambda f: f.name):
        digest.update(f.name.encode() + f.read_bytes())
    folder = root / f"neuron_mod_{digest.hexdigest()[:16]}"
    lib = folder / "x86_64" / "libnrnmech.so"
    with open(root / "neuron_mod.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not lib.is_file():
            folder.mkdir(exist_ok=True)
            for f in files:
                _shutil.copy(f, folder / f.name)
            proc = _subprocess.run(
                ["nrnivmodl", "."], cwd=folder, capture_output=True, text=True
            )
            if proc.returncode != 0 or not lib.is_file():
                return proc.stdout[-3000:] + "\n" + proc.stderr[-3000:]
    return lib


@_pytest.fixture(scope="session")
def neuron_mechanisms(tmp_path_factory):
    """NEURON's `h`, with `stdrun.hoc` and every test `.mod` file (NEURON's demo
    channels from its wheel and the tests' own files) compiled once by
    `nrnivmodl` into a temporary folder (once for all `pytest-xdist` workers)
    and loaded; skipped, saying why, without NEURON or a C compiler."""
    _pytest.importorskip("neuron")
    cc = _shutil.which(_os.environ.get("CC", "cc")) or _shutil.which("gcc")
    if cc is None or _shutil.which("nrnivmodl") is None:
        _pytest.skip("no C compiler (or nrnivmodl) to compile .mod files for NEURON")
    import importlib.util

    from neuron import h

    share = _pathlib.Path(importlib.util.find_spec("neuron").origin).parent
    demo = share / ".data" / "share" / "nrn" / "demo" / "release"
    files = [demo / name for name in _DEMO_FILES] + list(_OWN_FILES) + _dbbs()
    lib = _compiled(files, _shared_temp(tmp_path_factory))
    if isinstance(lib, str):
        _pytest.fail(f"nrnivmodl failed:\n{lib}")
    h.nrn_load_dll(str(lib))
    h.load_file("stdrun.hoc")
    return h


@_pytest.fixture(autouse=True, scope="module")
def _release_compiled():
    """JAX's caches (traced functions, compiled executables) emptied after each
    test module: a `pytest-xdist` worker runs dozens of modules in one process,
    and the compiled solves of every module it ran would otherwise stay in
    memory to the end of the run (several GB per worker on this suite; a CI
    runner may have less). Modules share few compiled functions, so this
    costs no measurable time."""
    yield
    jax.clear_caches()


_NEURON_GLOBALS = ("celsius", "dt", "secondorder", "usetable_hh", "v_init", "tstop")


@_pytest.fixture(autouse=True)
def _neuron_globals():
    """NEURON's globals (`celsius`, `dt`, ...) as they were before each test,
    restored after it: a `pytest-xdist` worker runs many NEURON comparisons in
    one process, and one that sets `celsius` must not change the next one's
    reference (a dbbs run at 32 °C once left a 6.3 °C HH comparison at 32)."""
    import sys

    neuron = sys.modules.get("neuron")
    if neuron is None:
        yield
        return
    h = neuron.h
    old = {k: getattr(h, k) for k in _NEURON_GLOBALS if hasattr(h, k)}
    active = h.CVode().active()
    yield
    for k, v in old.items():
        setattr(h, k, v)
    h.CVode().active(active)
