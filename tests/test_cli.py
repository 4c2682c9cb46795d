"""The command line: `python -m stable_ode {run,demo,diagnose}`.

Two subprocess runs (a fresh interpreter: x64 off, as a user starts it); the rest
calls `stable_ode._cli.main` in-process.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import stable_ode
import stable_ode._cli as cli
from stable_ode._spec import SpecError


MODELS = Path(__file__).parent / "data" / "models"
TINY = MODELS / "tiny.json"
STATS_KEYS = {
    "num_steps",
    "num_accepted",
    "num_rejected",
    "num_nonfinite_rejected",
    "wall_s",
}


def python_m(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "stable_ode", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_run_subprocess_writes_npz_and_plot(tmp_path):
    out, png = tmp_path / "out.npz", tmp_path / "out.png"
    proc = python_m("run", TINY, "-o", out, "--plot", png, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
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
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_error_subprocess_one_line_exit_2(tmp_path):
    proc = python_m("run", "missing.json", "-o", tmp_path / "o.npz", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "missing.json" in lines[0] and "no such file" in lines[0]
    assert not (tmp_path / "o.npz").exists()


def test_demo(tmp_path, capsys):
    assert cli.main(["demo", "-o", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "plots" / "demo.png").read_bytes()[:4] == b"\x89PNG"
    # Ball and stick, 0.3 nA for 50 ms: the soma fires repetitively.
    soma = next(line for line in out.splitlines() if line.strip().startswith("soma:"))
    assert "spike(s) at" in soma
    n_spikes = int(soma.split(" spike(s)")[0].rsplit(" ", 1)[1])
    assert n_spikes >= 3
    assert "2400 steps" in out


def test_demo_without_matplotlib(tmp_path, capsys, monkeypatch):
    # A tiny stand-in for the embedded model, so that this compiles quickly.
    import stable_ode._spec as spec

    monkeypatch.setattr(spec, "DEMO_MODEL", json.loads(TINY.read_text()))
    monkeypatch.setattr(cli, "_matplotlib", lambda: None)
    assert cli.main(["demo", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "pip install 'stable_ode[plot]'" in out
    assert "soma:" in out
    assert not (tmp_path / "demo.png").exists()


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (
            ["run", "{bad}", "-o", "{tmp}/o.npz"],
            "cells[0].sections[0].length: must be > 0",
        ),
        (["run", "{tmp}/nope.toml", "-o", "{tmp}/o.npz"], "nope.toml: no such file"),
        (["run", str(TINY), "-o", "{tmp}/no/such/dir/o.npz"], "does not exist"),
        (["run", str(TINY)], "required: -o/--output"),
        (["run", str(TINY), "-o", "{tmp}/o.npz", "--frobnicate"], "--frobnicate"),
        (["simulate", str(TINY)], "invalid choice: 'simulate'"),
        ([], "choose a command"),
    ],
    ids=[
        "bad model",
        "missing file",
        "missing folder",
        "missing -o",
        "unknown option",
        "unknown command",
        "no command",
    ],
)
def test_errors_one_line_exit_2(tmp_path, capsys, argv, fragment):
    bad = json.loads(TINY.read_text())
    bad["cells"][0]["sections"][0]["length"] = -5
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    argv = [a.format(tmp=tmp_path, bad=tmp_path / "bad.json") for a in argv]
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert fragment in lines[0]
    assert "Traceback" not in captured.err
    assert not (tmp_path / "o.npz").exists()


def test_debug_shows_the_exception(tmp_path):
    bad = json.loads(TINY.read_text())
    bad["integration"]["solver"] = "rk4"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(SpecError, match="integration.solver: unknown solver 'rk4'"):
        cli.main(["run", str(tmp_path / "bad.json"), "-o", "o.npz", "--debug"])


def test_plot_without_matplotlib_fails_before_solving(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(cli, "_matplotlib", lambda: None)
    monkeypatch.setattr(cli, "solve", lambda loaded: pytest.fail("solved anyway"))
    argv = ["run", str(TINY), "-o", str(tmp_path / "o.npz"), "--plot", "p.png"]
    assert cli.main(argv) == 2
    assert "pip install 'stable_ode[plot]'" in capsys.readouterr().err


def test_diagnose_not_available(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_diagnose_spec", lambda: None)
    assert cli.main(["diagnose", str(TINY)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not available" in err[0]


def test_diagnose_calls_diagnose_spec(capsys, monkeypatch):
    seen = []

    def diagnose_spec(loaded):
        seen.append(loaded)
        return "no non-finite value"

    monkeypatch.setattr(cli, "_diagnose_spec", lambda: diagnose_spec)
    assert cli.main(["diagnose", str(TINY)]) == 0
    (loaded,) = seen
    assert isinstance(loaded, stable_ode.LoadedModel)
    assert loaded.file == str(TINY)
    assert "no non-finite value" in capsys.readouterr().out


def test_spike_times():
    t = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0])
    v = np.array([-60.0, -10.0, 10.0, -20.0, 30.0, 40.0])
    assert np.allclose(cli.spike_times(t, v), [1.5, 3.4])


def test_unsuccessful_solve_still_writes_output(tmp_path, capsys, monkeypatch):
    # The solve itself is stubbed (a real failure needs a long or hostile run):
    # this checks what `run` does with a failed result.
    t = np.linspace(0.0, 5.0, 201)
    stats = {
        "num_steps": 7,
        "num_accepted": 3,
        "num_rejected": 4,
        "num_nonfinite_rejected": 4,
        "t_fail": 0.075,
        "wall_s": 0.01,
        "compile_s": 1.0,
        "result": "no progress",
    }
    recordings = {"soma": np.full(201, -65.0), "tip": np.full(201, -65.0)}
    monkeypatch.setattr(
        cli, "solve", lambda loaded: (t, recordings, stats, "no progress")
    )
    out = tmp_path / "o.npz"
    assert cli.main(["run", str(TINY), "-o", str(out)]) == 1
    captured = capsys.readouterr()
    assert "did not succeed: no progress" in captured.err
    assert "4 non-finite rejected" in captured.out
    with np.load(out) as data:
        assert json.loads(str(data["stats"]))["t_fail"] == 0.075
