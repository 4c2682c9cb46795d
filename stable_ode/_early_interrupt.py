"""Ctrl-C while the command line imports JAX: exit 130 with one line, at once.

`python -m stable_ode` (and the `stable-ode` script) import this package, and with
it JAX, before any of the command line's own code runs. A `KeyboardInterrupt`
raised during those imports was a traceback, an abort (raised inside jaxlib's
native initialisation) or lost (raised inside JAX's garbage-collector callback,
which Python prints and drops) after which the run went on and exited 0. So when
the process is the command line, the package's first import installs a handler
that ends the process at once: nothing has been written yet, and nothing else is
running. `stable_ode._cli._interrupt.install` replaces it when the command starts.
Imported as a library, nothing changes. Standard library only: it runs first.
"""

import os
import signal
import sys


PROG = "python -m stable_ode"
"""The command line's name in its messages."""

EXIT_INTERRUPTED = 130
"""The exit status after Ctrl-C (128 + SIGINT, the shell's convention)."""

_SCRIPTS = ("stable-ode", "stable-ode.exe", "stable-ode-script.py")


def _module_target(argv: list[str]) -> str | None:
    """The module of `python [options] -m MODULE ...` in `argv` (`sys.orig_argv`),
    with Python's short options clustered or not (`-Im mod`, `-X dev -m mod`)."""
    i = 1
    while i < len(argv):
        arg = argv[i]
        if arg == "-" or not arg.startswith("-") or arg.startswith("--"):
            return None  # stdin, a script or a long option (-m comes first)
        for j, flag in enumerate(arg[1:], start=2):
            if flag == "m":
                rest = arg[j:]
                return rest or (argv[i + 1] if i + 1 < len(argv) else None)
            if flag == "c":
                return None
            if flag in "WX":  # their value: the rest of this one, or the next
                i += 0 if arg[j:] else 1
                break
        i += 1
    return None


def is_command_line() -> bool:
    """Whether this process is `python -m stable_ode` or the `stable-ode` script
    (while it imports the package)."""
    if sys.argv[:1] == ["-m"]:  # Python is still locating the -m module
        target = _module_target(list(getattr(sys, "orig_argv", [])))
        return target in ("stable_ode", "stable_ode.__main__")
    return bool(sys.argv) and os.path.basename(sys.argv[0]) in _SCRIPTS


def _exit_now(signum, frame) -> None:
    del signum, frame
    try:
        os.write(2, f"{PROG}: interrupted\n".encode())
    except OSError:
        pass
    os._exit(EXIT_INTERRUPTED)


def install_if_command_line() -> None:
    """Install the exit-at-once Ctrl-C handler if this process is the command line
    and SIGINT has Python's default handler (an ignored SIGINT stays ignored)."""
    if not is_command_line():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _exit_now)


install_if_command_line()
