"""The command line: `python -m stable_ode {run,demo,diagnose}`.

    python -m stable_ode run MODEL.json -o out.npz [--plot out.png]
                             [--progress | --no-progress] [--debug]
    python -m stable_ode demo [-o DIR] [--no-plot] [--progress | --no-progress]
    python -m stable_ode diagnose MODEL.json [--debug]

Exit codes: 0 success; 1 the solve did not succeed (the output is still written,
with the message on stderr), or `diagnose` found a bad value; 2 a usage, model-file
or output error; 3 an unexpected error (a bug, here or in a user's mechanism); 130
interrupted (Ctrl-C).
Every error is one line on stderr; `--debug` shows the traceback instead.
"""

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ._plot import (
    have_matplotlib,
    image_formats,
    NO_MATPLOTLIB,
    plot_simulation,
    Raster,
    SPIKE_THRESHOLD,
    spike_times,
    Stimulus,
)
from ._xla import _command_line_default


PROG = "python -m stable_ode"
EXIT_FAILED_SOLVE = 1
EXIT_USAGE = 2
EXIT_UNEXPECTED = 3
EXIT_INTERRUPTED = 130

NETWORK_CELLS = 4
"""A model with more cells than this, or with any synapse, gets a spike raster."""
PROGRESS_UPDATES = 100
"""About this many progress-bar updates over a fixed-step run."""
ADAPTIVE_REFRESH_STEPS = 1000
"""Steps between progress-bar updates of an adaptive run (the number of steps is
not known in advance): an update (a host callback, ~0.3 ms) then costs at most
~0.3 µs per step."""
RASTER_MEMORY = 2**28
"""Bytes: a network's raster needs every compartment's voltage at every saved step;
above this, the raster shows the recordings only."""

__all__ = ["main", "solve", "spike_times", "SPIKE_THRESHOLD"]


class UsageError(Exception):
    """An error the user can fix: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    from . import __version__

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
        "and stats (a JSON string) to an .npz file.",
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
    return p


# ---------------------------------------------------------------------------
# Solving


class Solved(NamedTuple):
    """What `solve` returns.

    - `t`: sample times, ms.
    - `recordings`: name → membrane potential (mV), in the file's order.
    - `stats`: `num_steps`, `num_accepted`, `num_rejected`,
      `num_nonfinite_rejected`, `min_dt`, `t_fail` (`None` when successful),
      `result`, `wall_s` (the solve alone) and `compile_s`.
    - `failure`: `None`, or the message of an unsuccessful solve.
    - `voltages`: every compartment's potential (samples × compartments, mV) if
      asked for, else `None`.
    """

    t: np.ndarray
    recordings: dict[str, np.ndarray]
    stats: dict[str, Any]
    failure: str | None
    voltages: np.ndarray | None = None


def progress_meter(loaded, enabled: bool):
    """The diffrax progress meter of a CLI run: none, a tqdm bar (about
    `PROGRESS_UPDATES` updates for fixed steps, one per `ADAPTIVE_REFRESH_STEPS`
    steps for adaptive ones), or diffrax's text meter (every 5%) where tqdm is not
    installed."""
    import diffrax as dfx

    if not enabled:
        return dfx.NoProgressMeter()
    if importlib.util.find_spec("tqdm") is None:
        return dfx.TextProgressMeter(minimum_increase=0.05)
    if loaded.controller is None:
        n_steps = round(loaded.t_stop / loaded.dt)
        refresh = max(1, n_steps // PROGRESS_UPDATES)
    else:
        refresh = ADAPTIVE_REFRESH_STEPS
    return dfx.TqdmProgressMeter(refresh_steps=refresh)


def solve(loaded, *, progress: bool = False, voltages: bool = False) -> Solved:
    """Compile, then run `loaded` (a `LoadedModel`), timing the run alone.

    **Arguments:**

    - `loaded`: the model file's `LoadedModel`.
    - `progress`: show a progress meter on stderr during the run.
    - `voltages`: also return every compartment's potential (the solve then saves
      all of them and takes the recordings from them: the same values).

    **Returns:** a `Solved`.
    """
    import equinox as eqx
    import jax

    meter = progress_meter(loaded, progress)
    layout = loaded.model.layout
    if voltages:
        # A model without recordings saves every compartment's voltage as "v".
        model = dataclasses.replace(
            loaded.model, layout=dataclasses.replace(layout, recordings=())
        )
        loaded = eqx.tree_at(lambda m: m.model, loaded, model)
    dynamic, static = eqx.partition(loaded, eqx.is_array)

    def run(dynamic):
        sim = eqx.combine(dynamic, static).simulate(throw=False, progress_meter=meter)
        return sim.ts, sim.recordings, sim.stats, sim.result

    if progress:
        print(
            f"compiling {loaded.spec.file} ({loaded.model.n_compartments} "
            f"compartments)...",
            file=sys.stderr,
            flush=True,
        )
    start = time.perf_counter()
    compiled = _interruptible(lambda: jax.jit(run).lower(dynamic).compile())
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    try:
        # diffrax's text meter prints to stdout; stdout is for the summary.
        with contextlib.redirect_stdout(sys.stderr):
            out = _interruptible(lambda: jax.block_until_ready(compiled(dynamic)))
    except BaseException:
        if progress:  # end a half-drawn bar before the message
            print(file=sys.stderr)
        raise
    wall_s = time.perf_counter() - start
    ts, recordings, stats, result = out
    stats = {k: _json_number(v) for k, v in stats.items()}
    stats["wall_s"] = wall_s
    stats["compile_s"] = compile_s
    # `result` is a member of diffrax's RESULTS or of an enumeration extending it.
    results = result._enumeration
    failure = None
    if not bool(result == results.successful):
        failure = results[result] or "the solve did not succeed"
    stats["result"] = "successful" if failure is None else failure
    if voltages:
        v = np.asarray(recordings["v"])
        named = {name: v[:, i] for name, i in layout.recordings} or {"v": v}
        return Solved(np.asarray(ts), named, stats, failure, v)
    order = [name for name, _ in layout.recordings] or list(recordings)
    named = {k: np.asarray(recordings[k]) for k in order}
    return Solved(np.asarray(ts), named, stats, failure)


_ABANDONED: list[threading.Event] = []
"""The "done" events of solves left running after Ctrl-C."""


def _interruptible(fn, poll_s: float = 0.05):
    """`fn()`, run in a worker thread while the main thread waits in short waits,
    so that Ctrl-C interrupts a long compilation or solve at once: Python runs
    signal handlers only in the main thread between bytecodes, never while it
    blocks in XLA (and JAX runs a CPU solve synchronously). On Ctrl-C the worker, a
    daemon thread, is left running (its event in `_ABANDONED`); `main` then ends
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
        _ABANDONED.append(done)
        raise
    ok, value = out[0]
    if not ok:
        raise value
    return value


def _json_number(x) -> int | float | None:
    """A scalar statistic for JSON: integers stay integers, non-finite → `None`."""
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.integer) or x.dtype == bool:
        return int(x)
    x = float(x)
    return x if np.isfinite(x) else None


def _describe_model(loaded) -> str:
    spec = loaded.spec
    integ = spec.integration
    steps = (
        f"fixed dt {integ.dt:g} ms"
        if integ.controller is None
        else f"adaptive ({dict(integ.controller)['kind']}), dt0 {integ.dt:g} ms"
    )
    n_cells = len(spec.cells)
    return (
        f"{loaded.model.n_compartments} compartments, {n_cells} "
        f"cell{'s' if n_cells != 1 else ''}"
        + (f", {len(spec.synapses)} synapses" if spec.synapses else "")
        + f", solver {integ.solver}, {steps}, t_stop {spec.t_stop:g} ms, "
        f"{integ.dtype}"
    )


def _summary(loaded, solved: Solved) -> list[str]:
    t, recordings, stats = solved.t, solved.recordings, solved.stats
    lines = [
        f"{loaded.spec.file}: {_describe_model(loaded)}",
        f"solved in {stats['wall_s']:.3f} s (compiled in {stats['compile_s']:.2f} s): "
        f"{stats['num_steps']} steps, {stats['num_accepted']} accepted, "
        f"{stats['num_rejected']} rejected, {stats['num_nonfinite_rejected']} "
        f"non-finite rejected",
    ]
    for name, v in recordings.items():
        if v.ndim != 1:
            lines.append(f"  {name}: {v.shape[1]} compartments, {v.shape[0]} samples")
            continue
        finite = v[np.isfinite(v)]
        rng = (
            f"{finite.min():.1f} .. {finite.max():.1f} mV"
            if finite.size
            else "no finite"
        )
        sp = spike_times(t, v)
        shown = ", ".join(f"{x:.2f}" for x in sp[:8]) + (", ..." if sp.size > 8 else "")
        spikes = f", {sp.size} spike(s)" + (f" at {shown} ms" if sp.size else "")
        lines.append(f"  {name}: {rng}{spikes}")
    return lines


# ---------------------------------------------------------------------------
# Plotting


def is_network(spec) -> bool:
    """Whether a model file gets a spike raster: more than `NETWORK_CELLS` cells, or
    any synapse."""
    return len(spec.cells) > NETWORK_CELLS or bool(spec.synapses)


def _spike_sites(loaded) -> tuple[list[int], str]:
    """For each cell (file order): the compartment its spikes are detected in, the
    middle of its root section; and how to call that site."""
    layout = loaded.model.layout
    first: dict[tuple[str, str], int] = {}
    count: dict[tuple[str, str], int] = {}
    for i, c in enumerate(layout.compartments):
        key = (c.cell, c.section)
        first.setdefault(key, i)
        count[key] = count.get(key, 0) + 1
    sites, roots = [], set()
    for cell in loaded.spec.cells:
        root = next(s.name for s in cell.sections if s.parent is None)
        roots.add(root)
        key = (cell.name, root)
        sites.append(first[key] + min(count[key] // 2, count[key] - 1))
    where = f"{roots.pop()}(0.5)" if len(roots) == 1 else "root section (0.5)"
    return sites, where


def _raster_fits(loaded) -> bool:
    """Whether every compartment's voltage at every saved step fits
    `RASTER_MEMORY` (fixed steps save every step, and room for retries)."""
    n = loaded.model.n_compartments
    if loaded.controller is None:
        steps = round(loaded.t_stop / loaded.dt)
        saved = steps + max(1000, steps // 10) + 1
    else:
        saved = round(loaded.t_stop / loaded.save_dt) + 2
    return saved * n * loaded.model.dtype.itemsize <= RASTER_MEMORY


def _stimuli(spec) -> list[Stimulus]:
    out = []
    for s in spec.stimuli:
        site = f"{s.site.cell} {s.site.section}({s.site.position:g})"
        if hasattr(s, "duration"):  # a StepCurrent
            end = s.delay + s.duration
            what = f"{s.amplitude:g} nA step"
        else:
            end = s.delay + len(s.values) * s.dt
            what = "current trace"
        label = f"{what} into {site}, {s.delay:g}–{end:g} ms"
        out.append(Stimulus(s.site.cell, s.delay, end, label))
    return out


def _compartment_names(loaded) -> list[str]:
    """`section[i]`, or `cell.section[i]` for a model of several cells."""
    spec = loaded.spec
    several = len(spec.cells) > 1
    return [
        f"{c.cell}.{c.section}[{c.index}]" if several else f"{c.section}[{c.index}]"
        for c in loaded.model.layout.compartments
    ]


def _plot(path, loaded, solved: Solved, title: str) -> None:
    spec = loaded.spec
    raster = None
    if is_network(spec):
        cells = tuple(c.name for c in spec.cells)
        if solved.voltages is not None:
            sites, where = _spike_sites(loaded)
            traces = [solved.voltages[:, i] for i in sites]
        else:  # too large to save every compartment: the recordings' cells
            by_cell = {r.site.cell: r.name for r in spec.record}
            cells = tuple(c for c in cells if c in by_cell)
            traces = [solved.recordings[by_cell[c]] for c in cells]
            where = "recording site"
        t_fail = solved.stats.get("t_fail")
        if t_fail is not None:  # after a failure, samples hold the last good value
            traces = [np.where(solved.t <= t_fail, v, np.nan) for v in traces]
        if cells:
            spikes = tuple(spike_times(solved.t, v) for v in traces)
            raster = Raster(cells, spikes, where)
    try:
        plot_simulation(
            path,
            solved.t,
            solved.recordings,
            title=title,
            subtitle=_describe_model(loaded),
            record_sites={
                r.name: (r.site.cell, f"{r.site.section}({r.site.position:g})")
                for r in spec.record
            },
            stimuli=_stimuli(spec),
            raster=raster,
            t_fail=solved.stats.get("t_fail"),
            compartments=_compartment_names(loaded),
        )
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from e


# ---------------------------------------------------------------------------
# Commands


def _load(model):
    from ._spec import load_spec

    return load_spec(model)


def _show_progress(args) -> bool:
    return sys.stderr.isatty() if args.progress is None else args.progress


def _check_output(path: Path, option: str) -> None:
    """Fail before solving if `path` cannot be written."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a folder; give a file name")
    folder = path.parent
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"{option} {path}: {str(folder)!r} is not a folder")
    if not folder.is_dir():
        raise UsageError(f"{option} {path}: folder {str(folder)!r} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: folder {str(folder)!r} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise UsageError(f"{option} {path}: the file is not writable")


def _check_plot_path(path: Path) -> None:
    if not have_matplotlib():
        raise UsageError(f"--plot: {NO_MATPLOTLIB}")
    formats = image_formats()
    suffix = path.suffix[1:].lower()
    if suffix not in formats:
        raise UsageError(
            f"--plot {path}: unknown image format {path.suffix or '(no suffix)'!r}; "
            f"use one of {', '.join('.' + f for f in sorted(formats))}"
        )
    _check_output(path, "--plot")


def _cmd_run(args) -> int:
    out = Path(args.output)
    _check_output(out, "-o")
    if args.plot is not None:
        plot_path = Path(args.plot)
        _check_plot_path(plot_path)
        if plot_path.resolve() == out.resolve():
            raise UsageError(f"--plot {plot_path}: the same file as -o")
    loaded = _load(args.model)
    raster = args.plot is not None and is_network(loaded.spec)
    solved = solve(
        loaded,
        progress=_show_progress(args),
        voltages=raster and _raster_fits(loaded),
    )
    for line in _summary(loaded, solved):
        print(line)
    try:
        with open(out, "wb") as f:
            np.savez(
                f,
                t=solved.t,
                stats=np.asarray(json.dumps(solved.stats)),
                **solved.recordings,
            )
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from e
    print(f"wrote {out}")
    if args.plot:
        _plot(args.plot, loaded, solved, title=Path(args.model).name)
        print(f"wrote {args.plot}")
    if solved.failure is not None:
        _report_failure(solved)
        return EXIT_FAILED_SOLVE
    return 0


def _report_failure(solved: Solved) -> None:
    t_fail = solved.stats.get("t_fail")
    at = "" if t_fail is None else f" at t = {t_fail:.6g} ms"
    message = " ".join(solved.failure.split())
    print(f"{PROG}: the solve stopped{at}: {message}", file=sys.stderr)


def _cmd_demo(args) -> int:
    from ._spec import DEMO_MODEL, load_spec

    folder = Path(args.output_dir)
    plotting = not args.no_plot and have_matplotlib()
    if plotting:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"-o {folder}: cannot create it: {e.strerror or e}") from e
        _check_output(folder / "demo.png", "-o")
    loaded = load_spec(DEMO_MODEL, name="demo (ball and stick)")
    print(
        "demo: ball-and-stick neuron, HH soma + passive 400 µm dendrite, "
        "0.3 nA step into the dendrite from 5 to 55 ms"
    )
    solved = solve(loaded, progress=_show_progress(args))
    for line in _summary(loaded, solved):
        print(line)
    if not args.no_plot:
        if not plotting:
            print(f"no plot: {NO_MATPLOTLIB}")
        else:
            path = folder / "demo.png"
            _plot(path, loaded, solved, title="stable_ode demo: ball-and-stick neuron")
            print(f"wrote {path}")
    if solved.failure is not None:
        _report_failure(solved)
        return EXIT_FAILED_SOLVE
    return 0


def _diagnose_spec():
    """`stable_ode.diagnostics.diagnose_spec` (imported on use: it is only needed
    by this command)."""
    from .diagnostics import diagnose_spec

    return diagnose_spec


def _cmd_diagnose(args) -> int:
    loaded = _load(args.model)
    report = _diagnose_spec()(loaded)
    print(report)
    # A finding is a failure of the model, as a failed solve is for `run`: scripts
    # can tell a healthy model from a broken one by the exit code.
    return EXIT_FAILED_SOLVE if report.found else 0


_COMMANDS = {"run": _cmd_run, "demo": _cmd_demo, "diagnose": _cmd_diagnose}


def _one_line(e: BaseException, limit: int = 400) -> str:
    """The first non-empty line of an exception's message, shortened to `limit`."""
    text = str(e).strip()
    line = next((x.strip() for x in text.splitlines() if x.strip()), "")
    if len(line) > limit:
        line = line[: limit - 3] + "..."
    return line


def _classify(e: BaseException) -> tuple[int, str]:
    """Exit code and one-line message for an exception escaping a command."""
    from ._spec import SpecError

    if isinstance(e, (SpecError, UsageError)):
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


def _interrupted(e: BaseException) -> bool:
    """Ctrl-C: a `KeyboardInterrupt`, also one re-raised as the cause of another
    error."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _hard_exit(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`).

    **Returns:** the exit code: 0 success, 1 unsuccessful solve, 2 usage, model-file
    or output error, 3 unexpected error, 130 interrupted.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    if args.command is None:
        print(
            f"{PROG}: error: choose a command: run, demo or diagnose (see --help)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    debug = getattr(args, "debug", False)
    try:
        return _COMMANDS[args.command](args)
    except BaseException as e:
        if isinstance(e, SystemExit) or debug:
            raise
        if _interrupted(e):
            print(f"{PROG}: interrupted", file=sys.stderr)
            if not all(done.is_set() for done in _ABANDONED):
                # XLA cannot cancel a running solve, and exiting normally would wait
                # for it (or abort in its callbacks): end the process now.
                _hard_exit(EXIT_INTERRUPTED)
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
    _command_line_default()
    return main()
