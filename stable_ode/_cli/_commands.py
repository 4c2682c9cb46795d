"""The commands `run`, `demo`, `diagnose` and `from-neuron`, and `main`, which runs
one of them.

Exit codes: 0 success; 1 the solve did not succeed (the output is still written,
with the message on stderr), or `diagnose` found a bad value; 2 a usage, model-file
or output error; 3 an unexpected error (a bug, here or in a user's mechanism); 130
interrupted (Ctrl-C; nothing is written after it).
Every error is one line on stderr; `--debug` shows the traceback instead.
"""

import sys
from pathlib import Path

from .. import _plot
from .._xla import _command_line_default
from . import _args, _figure, _interrupt, _output, _solve
from ._args import (
    EXIT_FAILED_SOLVE,
    EXIT_INTERRUPTED,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
    PROG,
    UsageError,
)


def _load(model):
    from .._spec import load_spec

    return load_spec(model)


def _show_progress(args) -> bool:
    return sys.stderr.isatty() if args.progress is None else args.progress


def _cmd_run(args) -> int:
    out = Path(args.output)
    _output.check_output(out, "-o", args.model)
    if args.plot is not None:
        plot_path = Path(args.plot)
        _output.check_plot_path(plot_path, args.model)
        if plot_path.resolve() == out.resolve():
            raise UsageError(f"--plot {plot_path}: the same file as -o")
    shape = getattr(args, "plot_shape", None)
    if shape is not None:
        _output.check_plot_path(Path(shape), args.model)
    loaded = _load(args.model)
    _interrupt.checkpoint()
    raster = args.plot is not None and _figure.is_network(loaded.spec)
    if shape is not None and not _figure.raster_fits(loaded):
        raise UsageError(
            f"--plot-shape {shape}: every compartment's voltage at every saved "
            "step would not fit in memory; use a larger save_dt"
        )
    solved = _solve.solve(
        loaded,
        progress=_show_progress(args),
        voltages=shape is not None or (raster and _figure.raster_fits(loaded)),
    )
    _interrupt.checkpoint()
    for line in _solve.summary(loaded, solved):
        print(line)
    arrays = {**solved.recordings, **(solved.spikes or {})}  # events: spike times
    _output.save_npz(out, solved.t, solved.stats, arrays)
    print(f"wrote {out}")
    if args.plot:
        _figure.plot(args.plot, loaded, solved, title=Path(args.model).name)
        print(f"wrote {args.plot}")
    if shape is not None:
        from .. import _shape_plot

        shown = _shape_plot.save_shape_figure(
            shape,
            loaded.model,
            solved.t,
            solved.voltages,
            args.shape_time,
            Path(args.model).name,
        )
        print(f"wrote {shape} (v at t = {shown:g} ms)")
    _interrupt.checkpoint()
    if solved.failure is not None:
        _solve.report_failure(solved)
        return EXIT_FAILED_SOLVE
    return 0


def _cmd_demo(args) -> int:
    from .._spec import DEMO_MODEL, load_spec

    folder = Path(args.output_dir)
    plotting = not args.no_plot and _plot.have_matplotlib()
    if plotting:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"-o {folder}: cannot create it: {e.strerror or e}") from e
        _output.check_output(folder / "demo.png", "-o")
    loaded = load_spec(DEMO_MODEL, name="demo (ball and stick)")
    print(
        "demo: ball-and-stick neuron, HH soma + passive 400 µm dendrite, "
        "0.3 nA step into the dendrite from 5 to 55 ms"
    )
    solved = _solve.solve(loaded, progress=_show_progress(args))
    for line in _solve.summary(loaded, solved):
        print(line)
    if not args.no_plot:
        if not plotting:
            print(f"no plot: {_plot.NO_MATPLOTLIB}")
        else:
            path = folder / "demo.png"
            _figure.plot(
                path, loaded, solved, title="stable_ode demo: ball-and-stick neuron"
            )
            print(f"wrote {path}")
    if solved.failure is not None:
        _solve.report_failure(solved)
        return EXIT_FAILED_SOLVE
    return 0


def diagnose_spec():
    """`stable_ode.diagnostics.diagnose_spec` (imported on use: it is only needed
    by this command)."""
    from ..diagnostics import diagnose_spec

    return diagnose_spec


def _cmd_diagnose(args) -> int:
    loaded = _load(args.model)
    report = diagnose_spec()(loaded)
    print(report)
    # A finding is a failure of the model, as a failed solve is for `run`: scripts
    # can tell a healthy model from a broken one by the exit code.
    return EXIT_FAILED_SOLVE if report.found else 0


def _cmd_from_neuron(args) -> int:
    from .._neuron_import._cli import command

    return command(args)


_COMMANDS = {
    "run": _cmd_run,
    "demo": _cmd_demo,
    "diagnose": _cmd_diagnose,
    "from-neuron": _cmd_from_neuron,
}


def _one_line(e: BaseException, limit: int = 400) -> str:
    """The first non-empty line of an exception's message, shortened to `limit`."""
    text = str(e).strip()
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return line


def _classify(e: BaseException) -> tuple[int, str]:
    """Exit code and one-line message for an exception escaping a command."""
    from .._errors import Unsupported
    from .._spec import SpecError

    # Unsupported: a setting this machine cannot run (float64 on a TPU), with
    # what to use instead
    if isinstance(e, (SpecError, UsageError, Unsupported)):
        return EXIT_USAGE, " ".join(str(e).split())
    message = _one_line(e)
    if isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in message:
        return EXIT_USAGE, f"out of memory ({message or type(e).__name__}): " + (
            "use a smaller model, a larger save_dt or a shorter t_stop"
        )
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        return EXIT_USAGE, f"{where}{e.strerror or message}"
    if isinstance(e, ValueError):
        return EXIT_USAGE, message
    return (
        EXIT_UNEXPECTED,
        f"unexpected error: {type(e).__name__}: {message} "
        "(run again with --debug for the traceback)",
    )


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`).

    **Returns:** the exit code: 0 success, 1 unsuccessful solve, 2 usage, model-file
    or output error, 3 unexpected error, 130 interrupted. The caller's Ctrl-C
    handler is put back on return (`main` is called in-process by tests and
    notebooks).
    """
    previous = _interrupt.install()
    try:
        return _main(argv)
    finally:
        _interrupt.restore(previous)


def _main(argv: list[str] | None) -> int:
    _interrupt.clear()
    parser = _args.parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if args.command is None:
        print(
            f"{PROG}: error: choose a command: run, demo, diagnose or from-neuron "
            "(see --help)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    debug = getattr(args, "debug", False)
    try:
        code = _COMMANDS[args.command](args)
        _interrupt.checkpoint()  # a Ctrl-C whose exception was lost
        return code
    except BaseException as e:
        if isinstance(e, SystemExit) or debug:
            raise
        if _interrupt.interrupted(e):
            print(f"{PROG}: interrupted", file=sys.stderr)
            if not all(done.is_set() for done in _interrupt.ABANDONED):
                # XLA cannot cancel a running solve, and exiting normally would wait
                # for it (or abort in its callbacks): end the process now.
                _interrupt.hard_exit(EXIT_INTERRUPTED)
            return EXIT_INTERRUPTED
        if not isinstance(e, Exception):
            raise
        code, message = _classify(e)
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return code


def command_line() -> int:
    """The `python -m stable_ode` and `stable-ode` entry point: `main()` after
    raising XLA:CPU's small-loop threshold (`set_cpu_small_loop_bytes(65536)`, so
    small models' step loops run as one compiled function) unless `XLA_FLAGS`
    already names it. It has to come before anything runs JAX, so it is not in
    `main`, which tests call in-process."""
    _interrupt.install()
    _command_line_default()
    return main()
