"""The command line: `python -m stable_ode {run,demo,diagnose}`.

    python -m stable_ode run MODEL.json -o out.npz [--plot out.png]
                             [--progress | --no-progress] [--debug]
    python -m stable_ode demo [-o DIR] [--no-plot] [--progress | --no-progress]
    python -m stable_ode diagnose MODEL.json [--debug]

`_args.py` parses the arguments, `_solve.py` compiles and runs a loaded model,
`_figure.py` draws it, `_output.py` writes files atomically, `_interrupt.py`
honours Ctrl-C, and `_commands.py` holds the commands and `main` (exit codes
there).
"""

from .._plot import SPIKE_THRESHOLD as SPIKE_THRESHOLD, spike_times as spike_times
from ._args import (
    EXIT_FAILED_SOLVE as EXIT_FAILED_SOLVE,
    EXIT_INTERRUPTED as EXIT_INTERRUPTED,
    EXIT_UNEXPECTED as EXIT_UNEXPECTED,
    EXIT_USAGE as EXIT_USAGE,
    PROG as PROG,
    UsageError as UsageError,
)
from ._commands import command_line as command_line, main as main
from ._solve import solve as solve, Solved as Solved
