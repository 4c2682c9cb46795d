"""The command line at Ctrl-C: during a blocking call, during a solve, and five
short subprocesses interrupted at start-up."""

import _thread
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import TINY

import stable_ode
import stable_ode._cli as cli
import stable_ode._cli._interrupt as cli_interrupt
import stable_ode._cli._solve as cli_solve


def test_ctrl_c_interrupts_a_blocking_call_at_once():
    # A stand-in for a long XLA call: blocks its thread, does not return to Python.
    release = threading.Event()
    threading.Timer(0.2, _thread.interrupt_main).start()
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        cli_interrupt.interruptible(lambda: release.wait(30.0))
    assert time.perf_counter() - start < 5.0
    done = cli_interrupt.ABANDONED.pop()
    assert not done.is_set()  # still running: main() would end the process
    release.set()
    assert done.wait(5.0)
    # Results and exceptions of the worker come back to the caller.
    assert cli_interrupt.interruptible(lambda: 42) == 42
    with pytest.raises(ZeroDivisionError):
        cli_interrupt.interruptible(lambda: 1 / 0)


def test_ctrl_c_during_solve_ends_the_process(tmp_path, capsys, monkeypatch):
    exits = []
    release = threading.Event()

    def solve(loaded, **kwargs):
        threading.Timer(0.2, _thread.interrupt_main).start()
        cli_interrupt.interruptible(lambda: release.wait(30.0))

    monkeypatch.setattr(cli_solve, "solve", solve)
    monkeypatch.setattr(cli_interrupt, "hard_exit", exits.append)
    try:
        assert cli.main(["run", str(TINY), "-o", str(tmp_path / "o.npz")]) == 130
    finally:
        release.set()
    assert exits == [130]
    assert capsys.readouterr().err == f"{cli.PROG}: interrupted\n"
    cli_interrupt.ABANDONED.clear()


# A `sitecustomize` for the subprocesses below: it sends the process SIGINT at one
# moment, named by STABLE_ODE_TEST_SIGINT ("import:MODULE": as MODULE starts to be
# imported, in whichever thread; "gc": inside a garbage-collector callback, at the
# first import after JAX registered its own), and writes a marker file first so the
# test knows the moment came. No sleeps: the moment is the process's own.
_SIGINT_HOOK = """
import gc, os, signal, sys
_KIND, _, _NAME = os.environ["STABLE_ODE_TEST_SIGINT"].partition(":")

def _fire():
    open(os.environ["STABLE_ODE_TEST_MARKER"], "w").close()
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):  # Python runs the handler here, at a loop's jump
        pass

def _in_gc_callback(phase, info):
    gc.callbacks.remove(_in_gc_callback)
    _fire()

class _Hook:
    def find_spec(self, name, path=None, target=None):
        if _KIND == "import" and name == _NAME:
            sys.meta_path.remove(self)
            _fire()
        elif _KIND == "gc" and any(
            getattr(cb, "__name__", "") == "_xla_gc_callback" for cb in gc.callbacks
        ):
            sys.meta_path.remove(self)
            gc.callbacks.append(_in_gc_callback)
            gc.collect()
        return None

sys.meta_path.insert(0, _Hook())
"""


@pytest.mark.parametrize(
    "moment",
    [
        "import:jax",  # the package's first heavy import
        "import:jaxlib.mlir",  # jaxlib's native initialisation (it aborted)
        "gc",  # lost in JAX's gc callback: the run went on and exited 0
        "import:stable_ode.__main__",  # the package imported, the command not begun
        "import:jaxlib.mlir.dialects.mhlo",  # compiling, in the solve's thread
    ],
)
def test_ctrl_c_at_start_up_exits_130_writing_nothing(tmp_path, moment):
    # Ctrl-C while `python -m stable_ode` imports JAX (before any of the command
    # line's code runs) and later: exit 130, one line, nothing written.
    hook, work = tmp_path / "hook", tmp_path / "work"
    hook.mkdir()
    work.mkdir()
    (hook / "sitecustomize.py").write_text(_SIGINT_HOOK)
    marker = tmp_path / "fired"
    package = Path(stable_ode.__file__).parents[1]
    env = {
        **os.environ,
        "PYTHONPATH": f"{hook}:{package}",
        "STABLE_ODE_TEST_SIGINT": moment,
        "STABLE_ODE_TEST_MARKER": str(marker),
    }
    done = subprocess.run(
        [sys.executable, "-m", "stable_ode", "run", TINY, "-o", work / "o.npz"],
        capture_output=True,
        text=True,
        cwd=work,
        env=env,
        timeout=300,
    )
    assert marker.exists(), f"the moment {moment} never came (JAX changed?)"
    assert (done.returncode, done.stderr) == (130, f"{cli.PROG}: interrupted\n")
    assert done.stdout == "" or "wrote" not in done.stdout
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    ("argv0", "orig_argv", "expected"),
    [
        ("-m", ["py", "-m", "stable_ode", "run"], True),
        ("-m", ["py", "-X", "importtime", "-Im", "stable_ode.__main__"], True),
        ("-m", ["py", "-mstable_ode"], True),
        ("-m", ["py", "-m", "mytool"], False),  # a tool whose package imports us
        ("/usr/bin/stable-ode", ["py", "/usr/bin/stable-ode", "run"], True),
        ("script.py", ["py", "script.py", "-m", "stable_ode"], False),
        ("-c", ["py", "-c", "import stable_ode"], False),
    ],
)
def test_only_the_command_line_exits_at_ctrl_c_during_import(
    monkeypatch, argv0, orig_argv, expected
):
    from stable_ode import _early_interrupt

    monkeypatch.setattr(sys, "argv", [argv0])
    monkeypatch.setattr(sys, "orig_argv", orig_argv)
    assert _early_interrupt.is_command_line() is expected
