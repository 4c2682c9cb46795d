"""Smoke tests of `benchmarks/gpu.py` (the GPU-size benchmark) at tiny sizes on the
CPU, each in a subprocess: every case runs and computes what it should, a batch
sharded over 4 fake devices lands on all of them, and the time budget is hard."""

import os
import subprocess
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(args, env=None, timeout=600):
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu", *args],
        cwd=ROOT,
        env=dict(os.environ, **(env or {})),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _rows(stdout: str) -> list[list[str]]:
    """The table's body rows, cells stripped."""
    lines = [x for x in stdout.splitlines() if x.startswith("|")]
    return [[c.strip() for c in x.strip("|").split("|")] for x in lines[2:]]


def test_every_case_tiny_in_process(tmp_path):
    out = tmp_path / "gpu.md"
    r = _run(["--size", "tiny", "--in-process", "--out", str(out)])
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _rows(r.stdout)
    assert r.stdout == out.read_text() + "\n"
    by_kind = {row[0]: row for row in rows}
    assert sorted(by_kind) == sorted(
        ["cable", "tree", "batch", "network", "cable-grad", "network-grad"]
    ), rows
    for kind, row in by_kind.items():
        assert row[2] == "float32", row
        assert float(row[7].split()[0]) > 0 and float(row[9]) > 0, row  # ms, c·s/s
        if kind.endswith("-grad"):
            assert row[-1].startswith("grad finite, norm "), row
            assert float(row[-1].split()[-1]) > 0, row
        else:
            # 10 ms with a 0.1 nA step from 5 ms: every model fires.
            assert row[-1].endswith(" spikes") and int(row[-1].split()[0]) > 0, row
    # Compartment-steps = compartments x steps: 8-compartment cable, 400 steps.
    cable = by_kind["cable"]
    assert cable[3] == "8 comp." and cable[4] == "400", cable
    ms = float(cable[7].split()[0])
    assert abs(float(cable[9]) - 8 * 400 / (ms / 1e3)) / float(cable[9]) < 1e-2


def test_isolated_sharded_batch_over_fake_devices():
    r = _run(
        ["--size", "tiny", "--only", "batch", "--dtype", "float64", "--shard"],
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"},
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (row,) = _rows(r.stdout)
    assert row[:3] == ["batch", "stable_ode", "float64"], row
    assert row[-1].endswith(" spikes"), row
    assert "cpu × 4" in r.stdout
    assert "batch float64: output on 4 of 4 device(s)" in r.stdout
    assert "Each case ran in its own process" in r.stdout


def test_budget_is_hard():
    # A fresh JAX import alone takes longer than the budget: the first case is
    # killed at the budget, the others are skipped, and that is no failure.
    start = time.perf_counter()
    r = _run(["--size", "tiny", "--only", "cable", "network", "--budget", "1.5"])
    elapsed = time.perf_counter() - start
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = _rows(r.stdout)
    assert len(rows) == 2, rows
    assert rows[0][-1].startswith("killed at the time limit"), rows
    assert rows[1][-1] == "skipped: budget used up", rows
    assert "2 case(s) killed or skipped" in r.stdout
    assert elapsed < 1.5 + 5.0, elapsed  # + the parent's own start and exit


def test_failure_in_a_worker_is_named():
    r = _run(["--size", "tiny", "--only", "network", "--cells", "2"])
    assert r.returncode == 1
    (row,) = _rows(r.stdout)
    assert row[-1] == (
        "exit code 1: ValueError: syn_per_cell must be in [1, cells - 1] = [1, 1], "
        "got 2"
    ), row


def test_without_jaxley_its_cases_are_skipped_saying_so():
    # As if Jaxley were not installed; a budget too small to start any case.
    code = (
        "import importlib.util as u; real = u.find_spec; "
        "u.find_spec = lambda n, *a: None if n == 'jaxley' else real(n, *a); "
        "from benchmarks.gpu import main; "
        "main(['--size', 'tiny', '--with-jaxley', '--only', 'cable', '--budget', "
        "'0.5'])"
    )
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (row,) = _rows(r.stdout)
    assert row[:2] == ["cable", "stable_ode"], row
    assert "Jaxley cases skipped: jaxley is not installed." in r.stdout
