"""The command line's errors: one line, exit code 2, nothing written; and what a
solve that fails or raises leaves. None of these compiles a solve: they stop
before solving or stub the solve (one runs in a subprocess)."""

import json
from pathlib import Path

import numpy as np
import pytest
from cli_helpers import python_m, stub_solved, TINY

import stable_ode._cli as cli
import stable_ode._cli._solve as cli_solve
import stable_ode._plot as plot
from stable_ode._errors import Unsupported
from stable_ode._spec import SpecError


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
        (
            Unsupported("a float64 model cannot\n be compiled on this tpu"),
            2,
            "a float64 model cannot be compiled on this tpu",
        ),
        (
            NotImplementedError("abstract\n in a user's mechanism"),
            3,
            "unexpected error: NotImplementedError: abstract (run again with",
        ),
        (KeyboardInterrupt(), 130, "interrupted"),
    ],
    ids=[
        "unexpected",
        "MemoryError",
        "XLA out of memory",
        "ValueError",
        "not supported here",
        "NotImplementedError",
        "Ctrl-C",
    ],
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


def test_float64_model_where_the_backend_refuses_it(tmp_path, capsys, monkeypatch):
    # As on a TPU (see tests/solvers/test_tpu_constructs.py): exit 2, one line
    # that says what to use instead, nothing written.
    import stable_ode._backend as backend

    monkeypatch.setattr(backend, "_platform", lambda: "tpu")
    monkeypatch.setattr(backend, "_nextafter_compiles", lambda *a: False)
    argv = ["run", str(TINY), "-o", str(tmp_path / "o.npz")]
    assert cli.main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "a float64 model cannot be compiled on this tpu backend" in line
    assert '"integration": {"dtype": "float32"}' in line
    assert "JAX_PLATFORMS=cpu" in line
    assert not (tmp_path / "o.npz").exists()
