"""The command line's arguments, exit codes and usage errors."""

import argparse

from .._early_interrupt import EXIT_INTERRUPTED as EXIT_INTERRUPTED, PROG


EXIT_FAILED_SOLVE = 1
EXIT_USAGE = 2
EXIT_UNEXPECTED = 3


class UsageError(Exception):
    """An error the user can fix: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def parser() -> argparse.ArgumentParser:
    """The parser of `python -m stable_ode {run,demo,diagnose,from-neuron}`."""
    from .. import __version__

    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show full tracebacks instead of one-line errors",
    )
    progress = argparse.ArgumentParser(add_help=False)
    progress.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on stderr while solving (default: when stderr is "
        "a terminal)",
    )
    p = _Parser(
        prog=PROG,
        description="Simulate neuron membrane models from model files "
        "(stable_ode.model/1, JSON or TOML).",
        parents=[debug],
    )
    p.add_argument("--version", action="version", version=f"stable_ode {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    run = sub.add_parser(
        "run",
        parents=[debug, progress],
        help="simulate a model file and write the recordings",
        description="Simulate MODEL and write t (ms), one array per recording (mV) "
        "and stats (a JSON string) to an .npz file. Files are written under a "
        "temporary name and renamed into place, so an existing OUT is replaced "
        "whole or not at all.",
    )
    run.add_argument("model", metavar="MODEL", help="model file (.json or .toml)")
    run.add_argument(
        "-o", "--output", required=True, metavar="OUT.npz", help="output .npz file"
    )
    run.add_argument(
        "--plot",
        metavar="OUT.png",
        help="also draw the voltage traces (and, for a network, a spike raster); the "
        "suffix picks the format (.png, .pdf, .svg, ...); needs matplotlib",
    )
    run.add_argument(
        "--plot-shape",
        metavar="OUT.png",
        help="also draw the cells from their 3-D points coloured by the voltage at "
        "--shape-time; needs matplotlib",
    )
    run.add_argument(
        "--shape-time",
        type=float,
        metavar="MS",
        help="the time of --plot-shape, ms (default: when the largest voltage "
        "anywhere occurs)",
    )

    demo = sub.add_parser(
        "demo",
        parents=[debug, progress],
        help="run an embedded ball-and-stick HH model and plot it",
        description="Simulate an embedded ball-and-stick neuron (HH soma, passive "
        "dendrite, step current) and write DIR/demo.png.",
    )
    demo.add_argument(
        "-o", "--output-dir", default=".", metavar="DIR", help="where to write demo.png"
    )
    demo.add_argument("--no-plot", action="store_true", help="do not write demo.png")

    diag = sub.add_parser(
        "diagnose",
        parents=[debug],
        help="find the first non-finite value of a model's solve",
        description="Run MODEL in diagnose mode and report the first non-finite "
        "value (time, state, compartment, mechanism, function), or that there is "
        "none.",
    )
    diag.add_argument("model", metavar="MODEL", help="model file (.json or .toml)")

    fn = sub.add_parser(
        "from-neuron",
        parents=[debug],
        help="convert a NEURON model (a .py or .hoc script) into a model file",
        description="Run SCRIPT in a fresh NEURON (after compiling and loading the "
        "--nmodl .mod files) and write every section, density mechanism, ion "
        "setting, IClamp, point process and NetCon it instantiates to a model "
        "file. What cannot be converted is listed on stderr, with exit code 1 and "
        "nothing written.",
    )
    fn.add_argument("script", metavar="SCRIPT", help="NEURON script (.py or .hoc)")
    fn.add_argument(
        "--nmodl",
        action="extend",
        nargs="+",
        metavar="PATH",
        help=".mod files or folders of them that the model's mechanisms come from",
    )
    fn.add_argument(
        "-o", "--output", required=True, metavar="MODEL.json", help="model file"
    )
    return p
