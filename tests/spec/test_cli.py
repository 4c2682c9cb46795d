"""The command line: `python -m stable_ode {run,demo,diagnose}`, runs that solve,
the progress meter and the figure (errors are `test_cli_errors.py`, Ctrl-C
`test_cli_interrupt.py`).

One test runs it in a subprocess (a fresh interpreter: x64 off, as a user
starts it); the rest call `stable_ode._cli.main` in-process.
"""

import json
import sys

import diffrax as dfx
import numpy as np
import pytest
from cli_helpers import NETWORK, PNG, python_m, STATS_KEYS, stub_solved, TINY

import stable_ode
import stable_ode._cli as cli
import stable_ode._cli._commands as cli_commands
import stable_ode._cli._figure as cli_figure
import stable_ode._cli._solve as cli_solve
import stable_ode._plot as plot
from stable_ode._spec import load_spec


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
