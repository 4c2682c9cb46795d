"""The command line: `python -m stable_ode {run,demo,diagnose}`.

Two subprocess runs (a fresh interpreter: x64 off, as a user starts it), and five
short ones interrupted at start-up; the rest calls `stable_ode._cli.main`
in-process. Only five tests compile a solve; the error tests stop before solving
(or stub the solve).
"""

import _thread
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import diffrax as dfx
import numpy as np
import pytest

import stable_ode
import stable_ode._cli as cli
import stable_ode._cli._commands as cli_commands
import stable_ode._cli._figure as cli_figure
import stable_ode._cli._interrupt as cli_interrupt
import stable_ode._cli._solve as cli_solve
import stable_ode._plot as plot
from stable_ode._spec import load_spec, SpecError


MODELS = Path(__file__).parents[1] / "data" / "models"
TINY = MODELS / "tiny.json"
NETWORK = MODELS / "network.json"
STATS_KEYS = {
    "num_steps",
    "num_accepted",
    "num_rejected",
    "num_nonfinite_rejected",
    "wall_s",
}
PNG = b"\x89PNG\r\n\x1a\n"


def python_m(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "stable_ode", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def stub_solved(n=201, failure=None, t_fail=None):
    """A `Solved` as `cli.solve` returns it, for tests of what `run` does with one."""
    t = np.linspace(0.0, 5.0, n)
    stats = {
        "num_steps": 7,
        "num_accepted": 3,
        "num_rejected": 4,
        "num_nonfinite_rejected": 4,
        "t_fail": t_fail,
        "wall_s": 0.01,
        "compile_s": 1.0,
        "result": failure or "successful",
    }
    recordings = {"soma": np.full(n, -65.0), "tip": np.full(n, -65.0)}
    return cli.Solved(t, recordings, stats, failure)


# ---------------------------------------------------------------------------
# Runs that solve


def test_run_subprocess_writes_npz_plot_and_progress(tmp_path):
    out, png = tmp_path / "out.npz", tmp_path / "out.png"
    proc = python_m("run", TINY, "-o", out, "--plot", png, "--progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    # The progress bar (tqdm) is on stderr, after the compilation notice.
    assert f"compiling {TINY}" in proc.stderr
    assert "100.00%|" in proc.stderr
    assert "%|" not in proc.stdout
    with np.load(out) as data:
        assert set(data.files) == {"t", "soma", "tip", "stats"}
        t, soma, tip = data["t"], data["soma"], data["tip"]
        stats = json.loads(str(data["stats"]))
    # tiny.json: 5 ms at fixed dt 0.025 ms, float64 (x64 switched on by the loader).
    assert t.dtype == np.float64
    assert np.allclose(t, 0.025 * np.arange(201))
    assert soma.shape == tip.shape == (201,)
    assert soma[0] == -65.0 and np.all(np.isfinite(soma))
    assert soma.max() > 0.0  # 0.5 nA into a 20 µm HH soma fires a spike
    assert STATS_KEYS <= set(stats)
    assert stats["num_steps"] == stats["num_accepted"] == 200
    assert stats["num_rejected"] == stats["num_nonfinite_rejected"] == 0
    assert 0 < stats["wall_s"] < stats["wall_s"] + stats["compile_s"]
    assert stats["result"] == "successful"
    assert png.read_bytes()[:8] == PNG
    # The progress meter does not change the results: the same numbers as a run
    # without one. (Also a subprocess: the command line raises XLA's small-loop
    # threshold, under which this short cable is solved by `Thomas` rather than
    # by `gtsv`, which rounds differently.)
    plain_out = tmp_path / "plain.npz"
    proc = python_m("run", TINY, "-o", plain_out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with np.load(plain_out) as plain:
        for key, value in (("t", t), ("soma", soma), ("tip", tip)):
            assert np.array_equal(plain[key], value), key


def test_demo_progress_without_tqdm(tmp_path, capsys, monkeypatch):
    # Without tqdm, diffrax's text meter prints percentages to stderr.
    find_spec = cli_solve.importlib.util.find_spec
    monkeypatch.setattr(
        cli_solve.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tqdm" else find_spec(name, *a),
    )
    assert cli.main(["demo", "-o", str(tmp_path / "plots"), "--progress"]) == 0
    captured = capsys.readouterr()
    out, err = captured.out, captured.err
    assert (tmp_path / "plots" / "demo.png").read_bytes()[:8] == PNG
    assert "%" not in out
    lines = err.splitlines()
    assert lines[0].startswith("compiling demo (ball and stick)")
    assert lines[1:] and lines[-1] == "100.00%"
    assert all(x.endswith("%") for x in lines[1:])
    # Ball and stick, 0.3 nA for 50 ms: the soma fires repetitively.
    soma = next(line for line in out.splitlines() if line.strip().startswith("soma:"))
    n_spikes = int(soma.split(" spike(s)")[0].rsplit(" ", 1)[1])
    assert n_spikes >= 3
    assert "2400 steps" in out


def test_network_plot_has_raster(tmp_path, capsys, monkeypatch):
    drawn = []
    real = plot.plot_simulation

    def spy(path, t, recordings, **kwargs):
        drawn.append((t, recordings, kwargs))
        real(path, t, recordings, **kwargs)

    monkeypatch.setattr(plot, "plot_simulation", spy)
    out, png = tmp_path / "o.npz", tmp_path / "o.png"
    assert cli.main(["run", str(NETWORK), "-o", str(out), "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == PNG
    ((t, recordings, kwargs),) = drawn
    raster = kwargs["raster"]
    assert raster.cells == ("a", "b", "c") and raster.site == "soma(0.5)"
    # a is stimulated and fires, b fires through the excitatory synapse, c is
    # inhibited (see test_spec.test_network_cli_run).
    assert [sp.size for sp in raster.spikes] == [1, 1, 0]
    # The recordings are at each cell's soma(0.5): the same spikes, and the written
    # recordings (taken from all compartments' voltages) are the solve's.
    for name, sp in zip("abc", raster.spikes):
        assert np.array_equal(sp, cli.spike_times(t, recordings[name]))
    ref = cli.solve(load_spec(NETWORK))  # recordings saved as such
    with np.load(out) as data:
        for name in "abc":
            assert np.array_equal(data[name], ref.recordings[name])
    assert kwargs["record_sites"]["b"] == ("b", "soma(0.5)")
    assert [s.cell for s in kwargs["stimuli"]] == ["a"]
    assert kwargs["t_fail"] is None


POISON = '''
import jax.numpy as jnp
import stable_ode as so


class Poison(so.AbstractMechanism):
    """A NaN current above -30 mV: every retry of the step that gets there fails."""

    def gates(self, v, celsius):
        return {}

    def current(self, v, states, celsius):
        return jnp.where(v > -30.0, jnp.nan, 0.0 * v)
'''


def test_failed_solve_exit_1_writes_output_and_plot(tmp_path, capsys):
    (tmp_path / "cli_poison_mechanism.py").write_text(POISON)
    raw = json.loads(TINY.read_text())
    raw["cells"][0]["mechanisms"].append(
        {"name": "cli_poison_mechanism:Poison", "sections": ["soma"]}
    )
    model = tmp_path / "poisoned.json"
    model.write_text(json.dumps(raw))
    out, png = tmp_path / "o.npz", tmp_path / "o.png"
    argv = ["run", str(model), "-o", str(out), "--plot", str(png)]
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"{cli.PROG}: the solve stopped at t = ")
    assert "non-finite" in line
    assert png.read_bytes()[:8] == PNG
    with np.load(out) as data:
        stats = json.loads(str(data["stats"]))
        t, soma = data["t"], data["soma"]
    t_fail = stats["t_fail"]
    assert 1.0 < t_fail < 4.0  # after the stimulus starts, on the way up
    assert f"t = {t_fail:.6g} ms" in line
    assert stats["num_nonfinite_rejected"] > 0
    # Stopped before the spike; the samples after t_fail hold the last good value.
    assert np.all(np.isfinite(soma)) and soma.max() < 0.0
    assert np.all(soma[t > t_fail] == soma[t <= t_fail][-1])


# ---------------------------------------------------------------------------
# Errors: one line, exit code 2, nothing written; none of these solves.


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _edit(tmp: Path, name: str, edit) -> str:
    raw = json.loads(TINY.read_text())
    edit(raw)
    return _write(tmp / name, json.dumps(raw))


ERRORS = {
    "missing file": (
        lambda tmp: ["run", str(tmp / "nope.toml"), "-o", str(tmp / "o.npz")],
        "nope.toml: no such file",
    ),
    "folder as model": (
        lambda tmp: [
            "run",
            str((tmp / "m.json").mkdir() or tmp / "m.json"),
            "-o",
            str(tmp / "o.npz"),
        ],
        "m.json: cannot read the file",
    ),
    "unknown file type": (
        lambda tmp: ["run", _write(tmp / "m.yaml", "x: 1"), "-o", str(tmp / "o.npz")],
        "m.yaml: unknown model file type '.yaml'",
    ),
    "bad JSON": (
        lambda tmp: [
            "run",
            _write(tmp / "m.json", '{"format": '),
            "-o",
            str(tmp / "o.npz"),
        ],
        "m.json: invalid JSON: Expecting value: line 1 column 12",
    ),
    "bad TOML": (
        lambda tmp: [
            "run",
            _write(tmp / "m.toml", "format = \n"),
            "-o",
            str(tmp / "o.npz"),
        ],
        "m.toml: invalid TOML",
    ),
    "unknown key": (
        lambda tmp: [
            "run",
            _edit(tmp, "m.json", lambda r: r.update(frob=1)),
            "-o",
            str(tmp / "o.npz"),
        ],
        "m.json: frob: unknown key",
    ),
    "wrong type": (
        lambda tmp: [
            "run",
            _edit(
                tmp,
                "m.json",
                lambda r: r["cells"][0]["sections"][0].update(length="20"),
            ),
            "-o",
            str(tmp / "o.npz"),
        ],
        "cells[0].sections[0].length: must be a number, got string '20'",
    ),
    "negative geometry": (
        lambda tmp: [
            "run",
            _edit(
                tmp, "m.json", lambda r: r["cells"][0]["sections"][0].update(length=-5)
            ),
            "-o",
            str(tmp / "o.npz"),
        ],
        "cells[0].sections[0].length: must be > 0, got -5",
    ),
    "unknown solver": (
        lambda tmp: [
            "run",
            _edit(tmp, "m.json", lambda r: r["integration"].update(solver="rk4")),
            "-o",
            str(tmp / "o.npz"),
        ],
        "integration.solver: unknown solver 'rk4'",
    ),
    "unknown mechanism": (
        lambda tmp: [
            "run",
            _edit(
                tmp,
                "m.json",
                lambda r: r["cells"][0]["mechanisms"][0].update(name="hhh"),
            ),
            "-o",
            str(tmp / "o.npz"),
        ],
        "cells[0].mechanisms[0].name: unknown mechanism 'hhh' (did you mean 'hh'?)",
    ),
    "negative dt": (
        lambda tmp: [
            "run",
            _edit(tmp, "m.json", lambda r: r["integration"].update(dt=-0.1)),
            "-o",
            str(tmp / "o.npz"),
        ],
        "integration.dt: must be > 0, got -0.1",
    ),
    "dt not dividing t_stop": (
        lambda tmp: [
            "run",
            _edit(tmp, "m.json", lambda r: r["integration"].update(dt=0.03)),
            "-o",
            str(tmp / "o.npz"),
        ],
        "integration.dt: 0.03 ms must divide t_stop = 5.0 ms",
    ),
    "negative t_stop": (
        lambda tmp: [
            "run",
            _edit(tmp, "m.json", lambda r: r.update(t_stop=-1)),
            "-o",
            str(tmp / "o.npz"),
        ],
        "t_stop: must be > 0, got -1",
    ),
    "NaN t_stop": (
        lambda tmp: [
            "run",
            _edit(tmp, "m.json", lambda r: r.update(t_stop=float("nan"))),
            "-o",
            str(tmp / "o.npz"),
        ],
        "t_stop: must be finite, got nan",
    ),
    "missing output folder": (
        lambda tmp: ["run", str(TINY), "-o", str(tmp / "no" / "dir" / "o.npz")],
        "/no/dir' does not exist",
    ),
    "output is a folder": (
        lambda tmp: ["run", str(TINY), "-o", str(tmp)],
        "is a folder; give a file name",
    ),
    "output under a file": (
        lambda tmp: ["run", str(TINY), "-o", _write(tmp / "f.txt", "") + "/o.npz"],
        "f.txt' is not a folder",
    ),
    "unknown image format": (
        lambda tmp: [
            "run",
            str(TINY),
            "-o",
            str(tmp / "o.npz"),
            "--plot",
            str(tmp / "p.xyz"),
        ],
        "--plot",
    ),
    "image without suffix": (
        lambda tmp: [
            "run",
            str(TINY),
            "-o",
            str(tmp / "o.npz"),
            "--plot",
            str(tmp / "plot"),
        ],
        "unknown image format '(no suffix)'",
    ),
    "plot over output": (
        lambda tmp: [
            "run",
            str(TINY),
            "-o",
            str(tmp / "o.png"),
            "--plot",
            str(tmp / "o.png"),
        ],
        "the same file as -o",
    ),
    "missing -o": (lambda tmp: ["run", str(TINY)], "required: -o/--output"),
    "unknown option": (
        lambda tmp: ["run", str(TINY), "-o", str(tmp / "o.npz"), "--frobnicate"],
        "--frobnicate",
    ),
    "unknown command": (
        lambda tmp: ["simulate", str(TINY)],
        "invalid choice: 'simulate'",
    ),
    "no command": (lambda tmp: [], "choose a command"),
    "demo into a file": (
        lambda tmp: ["demo", "-o", _write(tmp / "f.txt", "")],
        "f.txt: cannot create it",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_one_line_exit_2(tmp_path, capsys, monkeypatch, case):
    monkeypatch.setattr(cli_solve, "solve", lambda *a, **k: pytest.fail("solved"))
    make_argv, fragment = ERRORS[case]
    assert cli.main(make_argv(tmp_path)) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(cli.PROG) and ": error: " in lines[0]
    assert fragment in lines[0]
    assert "Traceback" not in captured.err
    assert not (tmp_path / "o.npz").exists()
    if case == "unknown image format":  # names the value and what would work
        assert "'.xyz'" in lines[0] and ".png" in lines[0] and ".pdf" in lines[0]


def test_error_subprocess_one_line_exit_2(tmp_path):
    proc = python_m("run", "missing.json", "-o", tmp_path / "o.npz", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "missing.json" in lines[0] and "no such file" in lines[0]
    assert not (tmp_path / "o.npz").exists()


def test_debug_shows_the_exception(tmp_path):
    bad = json.loads(TINY.read_text())
    bad["integration"]["solver"] = "rk4"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(SpecError, match="integration.solver: unknown solver 'rk4'"):
        cli.main(["run", str(tmp_path / "bad.json"), "-o", "o.npz", "--debug"])


def test_plot_without_matplotlib_fails_before_solving(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plot, "have_matplotlib", lambda: False)
    monkeypatch.setattr(
        cli_solve, "solve", lambda *a, **k: pytest.fail("solved anyway")
    )
    argv = ["run", str(TINY), "-o", str(tmp_path / "o.npz"), "--plot", "p.png"]
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.endswith("--plot: " + plot.NO_MATPLOTLIB)
    assert "pip install 'stable_ode[plot]'" in line


def test_demo_without_matplotlib(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(plot, "have_matplotlib", lambda: False)
    monkeypatch.setattr(cli_solve, "solve", lambda loaded, **k: stub_solved())
    assert cli.main(["demo", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "pip install 'stable_ode[plot]'" in out
    assert "soma:" in out
    assert not (tmp_path / "demo.png").exists()


@pytest.mark.parametrize(
    "error,code,message",
    [
        (
            RuntimeError("boom\n  with a second line"),
            3,
            "unexpected error: RuntimeError: boom (run again with --debug for the "
            "traceback)",
        ),
        (MemoryError(), 2, "out of memory (MemoryError): use a smaller model"),
        (
            RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 10 GiB\nmore"),
            2,
            "out of memory (RESOURCE_EXHAUSTED: Out of memory allocating 10 GiB)",
        ),
        (ValueError("dt=0.1 must divide\nt1 - t0"), 2, "dt=0.1 must divide"),
        (KeyboardInterrupt(), 130, "interrupted"),
    ],
    ids=["unexpected", "MemoryError", "XLA out of memory", "ValueError", "Ctrl-C"],
)
def test_errors_while_solving(tmp_path, capsys, monkeypatch, error, code, message):
    def solve(loaded, **kwargs):
        raise error

    monkeypatch.setattr(cli_solve, "solve", solve)
    argv = ["run", str(TINY), "-o", str(tmp_path / "o.npz")]
    assert cli.main(argv) == code
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"{cli.PROG}: ")
    assert message in line
    assert "Traceback" not in captured.err
    assert not (tmp_path / "o.npz").exists()
    with pytest.raises(type(error)):
        cli.main([*argv, "--debug"])


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


def test_unsuccessful_solve_still_writes_output(tmp_path, capsys, monkeypatch):
    # The solve itself is stubbed (see test_failed_solve_exit_1_writes_output_and_plot
    # for a real one): this checks what `run` does with a failed result.
    solved = stub_solved(failure="no progress", t_fail=0.075)
    monkeypatch.setattr(cli_solve, "solve", lambda loaded, **k: solved)
    out = tmp_path / "o.npz"
    assert cli.main(["run", str(TINY), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        f"{cli.PROG}: the solve stopped at t = 0.075 ms: no progress\n"
    )
    assert "4 non-finite rejected" in captured.out
    with np.load(out) as data:
        assert json.loads(str(data["stats"]))["t_fail"] == 0.075


# ---------------------------------------------------------------------------
# Progress


def test_progress_meter_choice(monkeypatch):
    loaded = load_spec(TINY)  # 200 fixed steps
    assert isinstance(cli_solve.progress_meter(loaded, False), dfx.NoProgressMeter)
    meter = cli_solve.progress_meter(loaded, True)
    assert isinstance(meter, dfx.TqdmProgressMeter) and meter.refresh_steps == 2
    raw = json.loads(TINY.read_text())
    raw["integration"]["controller"] = {"kind": "pid", "rtol": 1e-3, "atol": 1e-3}
    meter = cli_solve.progress_meter(load_spec(raw), True)
    assert meter.refresh_steps == cli_solve.ADAPTIVE_REFRESH_STEPS
    monkeypatch.setattr(cli_solve.importlib.util, "find_spec", lambda name, *a: None)
    assert isinstance(cli_solve.progress_meter(loaded, True), dfx.TextProgressMeter)


@pytest.mark.parametrize(
    "flag,tty,shown",
    [
        (None, True, True),
        (None, False, False),
        ("--progress", False, True),
        ("--no-progress", True, False),
    ],
)
def test_progress_default_follows_the_terminal(
    tmp_path, capsys, monkeypatch, flag, tty, shown
):
    seen = []

    def solve(loaded, **kwargs):
        seen.append(kwargs["progress"])
        return stub_solved()

    monkeypatch.setattr(cli_solve, "solve", solve)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: tty)
    argv = ["run", str(TINY), "-o", str(tmp_path / "o.npz")] + ([flag] if flag else [])
    assert cli.main(argv) == 0
    assert seen == [shown]


# ---------------------------------------------------------------------------
# The figure and other pieces


def test_plot_simulation_every_panel_kind(tmp_path):
    # Without a solve: 10 recordings (one heat map), a 2-d recording of 30
    # compartments (a heat map) and one of 3 (lines), a raster, a failure mark.
    t = np.linspace(0.0, 10.0, 401)
    spikes = {f"r{i}": 80.0 * np.sin(t + i) - 20.0 for i in range(10)}
    stimuli = [plot.Stimulus("r0", 1.0, 4.0, "1 nA step into r0 soma(0.5), 1–4 ms")]
    raster = plot.Raster(("r0", "r1"), (np.array([1.0, 2.0]), np.array([])), "soma")
    for name, recordings in [
        ("many", spikes),
        ("wide", {"v": np.tile(spikes["r0"][:, None], (1, 30))}),
        ("narrow", {"v": np.tile(spikes["r0"][:, None], (1, 3))}),
        ("one", {"r0": spikes["r0"]}),
    ]:
        path = tmp_path / f"{name}.png"
        plot.plot_simulation(
            path,
            t,
            recordings,
            title=name,
            stimuli=stimuli,
            raster=raster,
            t_fail=7.5,
            compartments=["soma[0]", "dend[0]", "dend[1]"],
        )
        assert path.read_bytes()[:8] == PNG
    path = tmp_path / "figure.svg"
    plot.plot_simulation(path, t, {"r0": spikes["r0"]})
    assert path.read_text().lstrip().startswith("<?xml")


def test_spike_sites_of_a_network():
    loaded = load_spec(NETWORK)
    sites, where = cli_figure.spike_sites(loaded)
    assert sites == [loaded.model.index(c, "soma", 0.5) for c in "abc"]
    assert where == "soma(0.5)"
    assert cli_figure.is_network(loaded.spec)
    assert not cli_figure.is_network(load_spec(TINY).spec)


@pytest.mark.parametrize("found", [False, True])
def test_diagnose_calls_diagnose_spec(capsys, monkeypatch, found):
    seen = []

    class Report:
        def __init__(self):
            self.found = found

        def __str__(self):
            return "a bad value" if found else "no non-finite value"

    def diagnose_spec(loaded):
        seen.append(loaded)
        return Report()

    monkeypatch.setattr(cli_commands, "diagnose_spec", lambda: diagnose_spec)
    # exit code 1 when a bad value was found, as for a failed `run`
    assert cli.main(["diagnose", str(TINY)]) == (1 if found else 0)
    (loaded,) = seen
    assert isinstance(loaded, stable_ode.LoadedModel)
    assert loaded.file == str(TINY)
    assert str(Report()) in capsys.readouterr().out


def test_spike_times():
    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    v = np.array([-60.0, -10.0, 10.0, -20.0, 30.0, 40.0])
    assert np.allclose(cli.spike_times(t, v), [1.5, 3.4])


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
