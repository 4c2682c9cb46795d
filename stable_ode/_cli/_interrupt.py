"""Ctrl-C: honoured at once, wherever it arrives.

Python runs signal handlers only in the main thread between bytecodes, never while
it blocks in XLA, and an interrupt raised inside a garbage-collector callback (JAX
registers one) is printed and dropped. So the command line installs a handler that
also *records* the interrupt (`requested`), checks the record at each stage
(`checkpoint`), and runs long calls in a worker thread (`interruptible`).
"""

import os
import signal
import sys
import threading


ABANDONED: list[threading.Event] = []
"""The "done" events of solves left running after Ctrl-C."""

_REQUESTED = threading.Event()


def _handler(signum, frame):
    del signum, frame
    _REQUESTED.set()
    raise KeyboardInterrupt


def install():
    """Record every Ctrl-C (and raise `KeyboardInterrupt` as Python's default
    handler does). Only from the main thread; elsewhere a no-op. Returns the
    handler it replaced (for `restore`; `None` where it installed none)."""
    if threading.current_thread() is threading.main_thread():
        return signal.signal(signal.SIGINT, _handler)
    return None


def restore(previous) -> None:
    """Put back the SIGINT handler `install` returned (`None`: nothing to do)."""
    if previous is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, previous)


def requested() -> bool:
    """Whether a Ctrl-C arrived since `install` (even if its exception was lost)."""
    return _REQUESTED.is_set()


def clear() -> None:
    """Forget a recorded Ctrl-C (at the start of a command)."""
    _REQUESTED.clear()


def checkpoint() -> None:
    """Raise `KeyboardInterrupt` if a Ctrl-C was recorded."""
    if _REQUESTED.is_set():
        raise KeyboardInterrupt


def interruptible(fn, poll_s: float = 0.05):
    """`fn()`, run in a worker thread while the main thread waits in short waits,
    so that Ctrl-C interrupts a long compilation or solve at once: Python runs
    signal handlers only in the main thread between bytecodes, never while it
    blocks in XLA (and JAX runs a CPU solve synchronously). On Ctrl-C the worker, a
    daemon thread, is left running (its event in `ABANDONED`); `main` then ends
    the process without waiting for it."""
    out: list = []
    done = threading.Event()

    def work():
        try:
            out.append((True, fn()))
        except BaseException as e:  # handed to the main thread
            out.append((False, e))
        finally:
            done.set()

    # Not `Thread.join(timeout)`: interrupted by Ctrl-C, Python 3.11's join marks
    # a running thread as stopped (bpo-45274).
    threading.Thread(target=work, name="stable_ode solve", daemon=True).start()
    try:
        while not done.wait(poll_s):
            pass
    except KeyboardInterrupt:
        ABANDONED.append(done)
        raise
    ok, value = out[0]
    if not ok:
        raise value
    return value


def interrupted(e: BaseException) -> bool:
    """Ctrl-C: a `KeyboardInterrupt`, also one re-raised as the cause of another
    error."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def hard_exit(code: int) -> None:
    """End the process now (without waiting for abandoned solves)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
