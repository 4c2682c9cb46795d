"""The command line: `python -m stable_ode {run,demo,diagnose}`.

    python -m stable_ode run MODEL.json -o out.npz [--plot out.png] [--debug]
    python -m stable_ode demo [-o DIR] [--no-plot]
    python -m stable_ode diagnose MODEL.json

Exit codes: 0 success; 1 the solve did not succeed (the output is still written,
with the message on stderr); 2 a usage or model-file error (one line on stderr;
`--debug` shows the traceback instead).
"""

import argparse
import importlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


PROG = "python -m stable_ode"
SPIKE_THRESHOLD = 0.0
"""mV: an upward crossing of this voltage counts as a spike in summaries."""


class UsageError(Exception):
    """An error the user can fix: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit code 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    from . import __version__

    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show full tracebacks instead of one-line errors",
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
        parents=[debug],
        help="simulate a model file and write the recordings",
        description="Simulate MODEL and write t (ms), one array per recording (mV) "
        "and stats (a JSON string) to an .npz file.",
    )
    run.add_argument("model", metavar="MODEL", help="model file (.json or .toml)")
    run.add_argument(
        "-o", "--output", required=True, metavar="OUT.npz", help="output .npz file"
    )
    run.add_argument("--plot", metavar="OUT.png", help="also plot the recordings")

    demo = sub.add_parser(
        "demo",
        parents=[debug],
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


def solve(
    loaded,
) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, Any], str | None]:
    """Compile, then run `loaded` (a `LoadedModel`), timing the run alone.

    **Returns:** `(t, recordings, stats, failure)`: times (ms), recordings (mV) as
    NumPy arrays, statistics (`num_steps`, `num_accepted`, `num_rejected`,
    `num_nonfinite_rejected`, `wall_s` — the solve without compilation — and
    `compile_s`), and `None` or the message of an unsuccessful solve.
    """
    import equinox as eqx
    import jax

    dynamic, static = eqx.partition(loaded, eqx.is_array)

    def run(dynamic):
        sim = eqx.combine(dynamic, static).simulate(throw=False)
        return sim.ts, sim.recordings, sim.stats, sim.result

    start = time.perf_counter()
    compiled = jax.jit(run).lower(dynamic).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(dynamic))
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
    order = [name for name, _ in loaded.model.layout.recordings] or list(recordings)
    return (
        np.asarray(ts),
        {k: np.asarray(recordings[k]) for k in order},
        stats,
        failure,
    )


def _json_number(x) -> int | float | None:
    """A scalar statistic for JSON: integers stay integers, non-finite → `None`."""
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.integer) or x.dtype == bool:
        return int(x)
    x = float(x)
    return x if np.isfinite(x) else None


def spike_times(t: np.ndarray, v: np.ndarray, threshold: float = SPIKE_THRESHOLD):
    """Upward crossings of `threshold` (mV) by samples `v`, linearly interpolated
    times in ms."""
    v = np.asarray(v, float)
    k = np.flatnonzero((v[:-1] < threshold) & (v[1:] >= threshold))
    frac = (threshold - v[k]) / (v[k + 1] - v[k])
    return t[k] + frac * (t[k + 1] - t[k])


def _summary(loaded, t, recordings, stats) -> list[str]:
    spec = loaded.spec
    integ = spec.integration
    steps = (
        f"fixed dt {integ.dt:g} ms"
        if integ.controller is None
        else f"adaptive ({dict(integ.controller)['kind']}), dt0 {integ.dt:g} ms"
    )
    lines = [
        f"{spec.file}: {loaded.model.n_compartments} compartments, "
        f"{len(spec.cells)} cell(s), solver {integ.solver}, {steps}, "
        f"t_stop {spec.t_stop:g} ms, {integ.dtype}",
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


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    return Figure, FigureCanvasAgg


_NO_MATPLOTLIB = (
    "matplotlib is not installed; get it with: pip install 'stable_ode[plot]'"
)


def plot(path, t, recordings, *, title: str = "", stimuli=()) -> None:
    """Plot recordings (mV) against time (ms) into `path` (one panel each).

    **Arguments:**

    - `path`: image file (the suffix picks the format, e.g. `.png`).
    - `t`: times, ms. `recordings`: name → voltages (mV), 1-d (one compartment) or
      2-d (samples × compartments, drawn as thin lines).
    - `title`: figure title. `stimuli`: `StimulusSpec`s, shaded where they are on.
    """
    mpl = _matplotlib()
    if mpl is None:
        raise UsageError(_NO_MATPLOTLIB)
    Figure, FigureCanvasAgg = mpl
    names = list(recordings)
    n = max(1, len(names))
    fig = Figure(figsize=(8, 1.2 + 1.9 * n), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, sharex=True, squeeze=False)[:, 0]
    for ax, name in zip(axes, names, strict=True):
        v = recordings[name]
        if v.ndim == 1:
            ax.plot(t, v, lw=1.2, color="C0", label=name)
            sp = spike_times(t, v)
            if sp.size:
                ax.plot(
                    sp,
                    np.full(sp.shape, SPIKE_THRESHOLD),
                    "|",
                    color="C3",
                    ms=8,
                    label=f"{sp.size} spike(s)",
                )
        else:
            ax.plot(t, v, lw=0.6, alpha=0.6)
        for s in stimuli:
            end = s.delay + (s.duration if s.kind == "step" else len(s.values) * s.dt)
            ax.axvspan(s.delay, end, color="0.92", zorder=0, lw=0)
        ax.set_ylabel(f"{name}\nV (mV)")
        ax.grid(alpha=0.3)
        if v.ndim == 1:
            ax.legend(loc="upper right", fontsize="small", frameon=False)
    axes[-1].set_xlabel("time (ms)")
    if stimuli:
        axes[0].set_title("shaded: stimulus on", fontsize="small", loc="right")
    if title:
        fig.suptitle(title)
    fig.savefig(path, dpi=120)


# ---------------------------------------------------------------------------
# Commands


def _load(model):
    from ._spec import load_spec

    return load_spec(model)


def _cmd_run(args) -> int:
    out = Path(args.output)
    if args.plot is not None and _matplotlib() is None:
        raise UsageError(f"--plot: {_NO_MATPLOTLIB}")
    for p in [out, *([Path(args.plot)] if args.plot else [])]:
        if not p.parent.is_dir():
            raise UsageError(f"{p}: folder {str(p.parent)!r} does not exist")
    loaded = _load(args.model)
    t, recordings, stats, failure = solve(loaded)
    for line in _summary(loaded, t, recordings, stats):
        print(line)
    try:
        with open(out, "wb") as f:
            np.savez(f, t=t, stats=np.asarray(json.dumps(stats)), **recordings)
    except OSError as e:
        raise UsageError(f"cannot write {out}: {e.strerror or e}") from e
    print(f"wrote {out}")
    if args.plot:
        plot(
            args.plot,
            t,
            recordings,
            title=Path(args.model).name,
            stimuli=loaded.spec.stimuli,
        )
        print(f"wrote {args.plot}")
    if failure is not None:
        print(f"{PROG}: the solve did not succeed: {failure}", file=sys.stderr)
        return 1
    return 0


def _cmd_demo(args) -> int:
    from ._spec import DEMO_MODEL, load_spec

    loaded = load_spec(DEMO_MODEL, name="demo (ball and stick)")
    print(
        "demo: ball-and-stick neuron, HH soma + passive 400 µm dendrite, "
        "0.3 nA step into the dendrite from 5 to 55 ms"
    )
    t, recordings, stats, failure = solve(loaded)
    for line in _summary(loaded, t, recordings, stats):
        print(line)
    if not args.no_plot:
        if _matplotlib() is None:
            print(f"no plot: {_NO_MATPLOTLIB}")
        else:
            folder = Path(args.output_dir)
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise UsageError(f"cannot create {folder}: {e.strerror or e}") from e
            path = folder / "demo.png"
            plot(
                path,
                t,
                recordings,
                title="stable_ode demo: ball-and-stick neuron",
                stimuli=loaded.spec.stimuli,
            )
            print(f"wrote {path}")
    if failure is not None:
        print(f"{PROG}: the solve did not succeed: {failure}", file=sys.stderr)
        return 1
    return 0


def _diagnose_spec():
    """`stable_ode.diagnostics.diagnose_spec`, or `None` where it does not exist."""
    try:
        module = importlib.import_module("stable_ode.diagnostics")
    except ModuleNotFoundError as e:
        if e.name == "stable_ode.diagnostics":
            return None
        raise
    return getattr(module, "diagnose_spec", None)


def _cmd_diagnose(args) -> int:
    diagnose_spec = _diagnose_spec()
    if diagnose_spec is None:
        print(
            f"{PROG}: error: diagnose is not available in this version of stable_ode "
            f"(stable_ode.diagnostics.diagnose_spec is missing)",
            file=sys.stderr,
        )
        return 2
    loaded = _load(args.model)
    report = diagnose_spec(loaded)
    if report is not None:
        print(report)
    return 0


_COMMANDS = {"run": _cmd_run, "demo": _cmd_demo, "diagnose": _cmd_diagnose}


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`).

    **Returns:** the exit code (0 success, 1 unsuccessful solve, 2 usage or
    model-file error).
    """
    from ._spec import SpecError

    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, usage errors
        return e.code if isinstance(e.code, int) else 2
    if args.command is None:
        print(
            f"{PROG}: error: choose a command: run, demo or diagnose (see --help)",
            file=sys.stderr,
        )
        return 2
    debug = getattr(args, "debug", False)
    try:
        return _COMMANDS[args.command](args)
    except (SpecError, UsageError, ValueError, OSError) as e:
        if debug:
            raise
        message = " ".join(str(e).split())
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
