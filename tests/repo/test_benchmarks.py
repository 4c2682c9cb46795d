"""The benchmarks run (`python -m benchmarks --smoke`: tiny models, float64), compare
the same computation with their peers, and the runner's summary and plots are
right. Jaxley is not a test dependency: without it its columns are left out
(one case runs with Jaxley and NEURON hidden to check that)."""

import importlib
import json
import math
import pathlib
import subprocess
import sys

import pytest


ROOT = pathlib.Path(__file__).parents[2]


def _bench_module(name: str):
    """`benchmarks.<name>`, imported from the repository root."""
    sys.path.insert(0, str(ROOT))
    try:
        return importlib.import_module(f"benchmarks.{name}")
    finally:
        sys.path.remove(str(ROOT))


def _runner():
    return _bench_module("__main__")


def _have(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _smoke(name: str, tmp_path, hide=(), extra=()) -> tuple[str, list[dict]]:
    """Run `python -m benchmarks --smoke --only name [extra]`; returns (results.md,
    rows)."""
    env = None
    if hide:
        # modules that fail to import, ahead of the installed ones
        fake = tmp_path / "hidden"
        for module in hide:
            (fake / module).mkdir(parents=True)
            (fake / module / "__init__.py").write_text(
                f"raise ImportError('{module} hidden by the test')\n"
            )
        import os

        env = dict(os.environ, PYTHONPATH=f"{fake}{os.pathsep}{ROOT}")
    out = tmp_path / "results.md"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--smoke", "--only", name, "--out", out]
        + list(extra),
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    assert "**failed**" not in text
    rows = [json.loads(x) for x in (tmp_path / "results.json").read_text().splitlines()]
    # the runner's own row last: the command, and the benchmark it ran
    run = rows.pop()
    assert run["benchmark"] == "run" and run["command"].startswith(
        "python -m benchmarks --smoke --only " + name
    ), run
    assert [b["name"] for b in run["benchmarks"]] == [name], run
    assert f"`{run['command']}` on " in text
    return text, rows


def _check_fixed(row: dict, *, jaxley: bool, neuron: bool):
    assert row["dtype"] == "float64"
    assert math.isfinite(row["ours_ms"]) and row["ours_ms"] > 0
    if jaxley:
        # the same scheme in float64: the traces agree to rounding (measured
        # <= 5e-11 mV); a benchmark timing different computations would not
        assert row["jaxley_ms"] > 0 and row["jaxley_max_dv"] < 1e-6, row
    else:
        assert row["jaxley"] is None and "jaxley_ms" not in row
    if neuron:
        assert row["neuron_ms"] > 0 and row["neuron_max_dv"] < 1e-6, row
    else:
        assert row["neuron"] is None and "neuron_ms" not in row


@pytest.mark.slow
def test_forward_smoke(tmp_path):
    jaxley = _have("jaxley")
    text, rows = _smoke("forward", tmp_path)
    fixed = [r for r in rows if r["benchmark"] == "forward"]
    assert [r["ours"] for r in fixed] == ["BackwardEuler", "vmap of BackwardEuler"]
    for r in fixed:
        _check_fixed(r, jaxley=jaxley, neuron=True)
    adaptive = {r["method"]: r for r in rows if r["benchmark"] == "forward_adaptive"}
    assert set(adaptive) == {"ours CrankNicolson", "NEURON CVODE"}
    assert adaptive["ours CrankNicolson"]["ratio"] == 1.0
    for r in adaptive.values():
        # one spike in 10 ms, found by both, within 0.1 ms of the reference
        assert r["spikes"] == 1 and r["spike_error_ms"] < 0.1, r
    assert "## Fixed steps: one HH compartment" in text
    assert "## Adaptive steps at the same tolerance" in text
    assert (tmp_path / "plots" / "forward_times.png").stat().st_size > 1000


@pytest.mark.slow
def test_branched_smoke_without_jaxley_and_neuron(tmp_path):
    text, rows = _smoke("branched", tmp_path, hide=("jaxley", "neuron"))
    (row,) = rows
    _check_fixed(row, jaxley=False, neuron=False)
    (line,) = [x for x in text.splitlines() if x.startswith("| branched HH cell")]
    assert line.endswith("| — | — | — | — |"), line  # no Jaxley, no NEURON


@pytest.mark.slow
def test_morphology_smoke(tmp_path):
    # NEURON's Import3d of the same file: the same geometry and scheme, so the
    # traces agree to rounding; Jaxley's own SWC reading is a different cell
    jaxley = _have("jaxley")
    text, rows = _smoke("morphology", tmp_path)
    (load,) = [r for r in rows if r["benchmark"] == "morphology_load"]
    assert load["points"] == 10 and load["sections"] == 4
    assert load["compartments"] == load["neuron_compartments"]
    assert load["ours_s"] > 0 and load["neuron_s"] > 0
    (row,) = [r for r in rows if r["benchmark"] == "morphology"]
    assert row["dtype"] == "float64" and row["ours_ms"] > 0
    assert row["neuron_ms"] > 0 and row["neuron_max_dv"] < 1e-6, row
    assert (row["jaxley_ms"] > 0) if jaxley else row["jaxley"] is None
    assert "## Loading and building a reconstruction" in text
    assert "| reconstructed cell (i3d_three_point_soma.swc)" in text


@pytest.mark.slow
def test_profile_batch_smoke():
    # The batch-profile script (not part of the runner) runs: one row per variant,
    # each with a positive time and the kernel counts of its loops.
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.profile_batch", "--smoke"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [x for x in proc.stdout.splitlines() if x.startswith("| ")][1:]
    expected = 6 + _have("jaxley")
    assert len(rows) == expected, proc.stdout
    for row in rows:
        _, what, median, low, kernels, _ = (c.strip() for c in row.split("|"))
        assert float(median) > 0 and float(low) > 0, row
        assert kernels and all(k.isdigit() for k in kernels.split("+")), row


@pytest.mark.slow
def test_network_smoke(tmp_path):
    # under a raised small-loop threshold (--small-loop-bytes), named in the header
    jaxley = _have("jaxley")
    text, rows = _smoke("network", tmp_path, extra=["--small-loop-bytes", "65536"])
    assert "xla_cpu_small_while_loop_byte_threshold=65536`" in text.split("\n")[4]
    (row,) = [r for r in rows if r["benchmark"] == "network"]
    _check_fixed(row, jaxley=jaxley, neuron=False)
    assert row["spikes"] > 0
    # the compile-time guard: the 1,000-cell network (10,000 synapses, every cell
    # recorded by name) builds and compiles in the smoke run; its times are
    # reported, not asserted
    small, large = [r for r in rows if r["benchmark"] == "network_compile"]
    assert (small["cells"], large["cells"]) == (10, 1000)
    assert (large["synapses"], large["recordings"]) == (10000, 1000)
    assert all(r[k] > 0 for r in (small, large) for k in ("build_s", "compile_s"))
    assert "## Network build and compile time by size" in text


@pytest.mark.slow
def test_events_smoke(tmp_path):
    neuron = _have("neuron")
    text, rows = _smoke("events", tmp_path)
    (row,) = [r for r in rows if r["benchmark"] == "events"]
    assert row["dtype"] == "float64" and row["ours_ms"] > 0
    assert ("neuron_ms" in row) == neuron and row["ours_spikes"] > 0
    if neuron:  # the same network in both: spike counts alike (not equal by rule)
        n_ours, n_nrn = row["ours_spikes"], row["neuron_spikes"]
        assert abs(n_ours - n_nrn) <= n_nrn / 5
    # build and compile in a process of its own (one size in the smoke run):
    # reported, not timed
    (small,) = [r for r in rows if r["benchmark"] == "events_scale"]
    assert (small["cells"], small["netcons"]) == (10, 100)
    assert all(small[k] > 0 for k in ("build_s", "compile_s", "peak_rss_mb"))
    assert "## NetCon networks: build and compile time by size" in text
    assert "## Fixed steps: HH cells, Exp2Syn synapses" in text


@pytest.mark.slow
def test_work_precision_smoke(tmp_path):
    _, rows = _smoke("work_precision", tmp_path)
    methods = [r["method"] for r in rows]
    assert methods == [
        "fixed BackwardEuler",
        "adaptive CrankNicolson",
        "adaptive CrankNicolson timing",
        "NEURON CVODE",
    ]
    assert all(r["error"] < 0.1 and r["steps"] > 0 for r in rows), rows
    png = tmp_path / "plots" / "work_precision_compartment.png"
    assert png.stat().st_size > 1000


@pytest.mark.slow
def test_gradient_smoke(tmp_path):
    jaxley = _have("jaxley")
    text, rows = _smoke("gradient", tmp_path)
    process = [r for r in rows if r["kind"] == "process"]
    inter = [r for r in rows if r["kind"] == "interleaved"]
    assert [(r["impl"], r["adjoint"]) for r in process] == [("ours", "default")]
    assert process[0]["finite"] and process[0]["peak_rss_mb"] > 0
    expected = [("ours", "store-all")]
    if jaxley:
        expected.insert(0, ("jaxley", "levels=40,50"))
    assert [(r["impl"], r["adjoint"]) for r in inter] == expected
    assert all(r["ms"] > 0 and r["xla_temp_mb"] > 0 for r in inter)
    assert (tmp_path / "plots" / "gradient.png").stat().st_size > 1000


def test_loading_smoke(tmp_path):
    # Through the runner: rows for each size, rendered as the loading table; the
    # benchmark's model is what it says (two compartments per section).
    text, rows = _smoke("loading", tmp_path)
    assert [r["sections"] for r in rows] == [20, 80]
    assert all(
        r["compartments"] == 2 * r["sections"]
        and r["seconds"] > 0
        and r["cpu_seconds"] > 0
        and r["growth"] == rows[0]["growth"]
        for r in rows
    )
    assert "## Loading and building model files" in text
    assert "| 80 | " in text


def _row(bench, case, dtype, ours_ms, jaxley_ms, neuron_ms=None):
    row = dict(benchmark=bench, case=case, ours="BackwardEuler", dtype=dtype)
    row |= dict(ours_ms=ours_ms, jaxley="bwd_euler", jaxley_ms=jaxley_ms)
    if neuron_ms is None:
        return row | dict(neuron=None)
    return row | dict(neuron="fixed, secondorder=0", neuron_ms=neuron_ms)


def _grad_row(model, impl, adjoint, ms, xla_temp_mb):
    """A gradient row of the interleaved timing, 50 ms."""
    return dict(
        benchmark="gradient", kind="interleaved", model=model, impl=impl,
        adjoint=adjoint, t_max=50.0, ms=ms, xla_temp_mb=xla_temp_mb,
    )  # fmt: skip


def test_summary_ratios_and_plots(tmp_path):
    runner = _runner()
    rows = [
        _row("forward", "cable", "float64", 30.0, 10.0, 60.0),
        _row("forward", "cable", "float32", 12.0, 8.0, 60.0),
        _row("network", "net", "float64", 5.0, 4.0),
        dict(
            benchmark="forward_adaptive",
            case="cable",
            dtype="float64",
            method="diffrax Kvaerno5",
            tol=1e-4,
            steps=10,
            ms=50.0,
            ratio=5.0,
            spike_error_ms=None,
        ),  # fmt: skip
        _grad_row("cable", "jaxley", "none", 20.0, 100.0),
        _grad_row("cable", "ours", "default", 50.0, 0.5),
        _grad_row("network", "jaxley", "levels=40,50", 80.0, 8.0),
        _grad_row("network", "ours", "levels=40,50", 60.0, 4.0),
    ]
    text = "\n".join(runner.summary(rows))
    # one table per comparison: ours / Jaxley and ours / NEURON, per dtype
    forward = text[text.index("## Fixed steps: one HH compartment") :]
    forward = forward[: forward.index("## Fixed steps: 100 HH point neurons")]
    assert "| cable | BackwardEuler | float64 | 30.00 | 10.00 | 3.00 | " in forward
    assert "| 60.00 | 0.50 |" in forward
    assert "| net |" not in forward
    network = text[text.index("## Fixed steps: 100 HH point neurons") :]
    assert "| net | BackwardEuler | float64 | 5.00 | 4.00 | 1.25 | — | — |" in network
    assert "| diffrax Kvaerno5 | 0.0001 | 10 | 50.00 | 5.00 | — |" in text
    # each model's interleaved gradients against its own better Jaxley time
    cable = text[text.index("Gradient of the cable") :]
    network = cable[cable.index("Gradient of the network") :]
    assert "| ours | default | 50.0 | 2.50 | 0.50 |" in cable
    assert "| ours | levels=40,50 | 60.0 | 0.75 | 4.00 |" in network
    # float32 / float64: ours 12 / 30, Jaxley 8 / 10; the network (one dtype) is out
    dtype_part = text[text.index("## float32 against float64") :]
    assert "| 30.00 | 12.00 | 0.40 | 10.00 | 8.00 | 0.80 |" in dtype_part
    assert "| network |" not in dtype_part
    paths = runner.write_plots(rows, str(tmp_path))
    assert [pathlib.Path(p).name for p in paths] == [
        "forward_times.png",
        "gradient.png",
    ]
    assert all(pathlib.Path(p).stat().st_size > 1000 for p in paths)


def test_render_run_row_comparison_and_failure(tmp_path):
    """`results.md` is rendered from rows alone: the run row gives the command and
    machine, a failed benchmark is marked, another run's rows give a table."""
    report = _bench_module("_report")
    run = dict(
        benchmark="run", command="python -m benchmarks --quick", date="D",
        machine="M", python="3.x", xla_flags=None, wall_s=3.0, cpu_s=4.0,
        benchmarks=[dict(name="forward", wall_s=1.0, cpu_s=2.0, exit=0),
                    dict(name="gradient", wall_s=2.0, cpu_s=2.0, exit=1)],
    )  # fmt: skip
    grads = [("jaxley", "levels=4", 40.0), ("jaxley", "levels=8", 20.0)]
    rows = [run, _row("forward", "cable", "float64", 30.0, 10.0, 60.0)]
    rows += [_grad_row("cable", *g, 1.0) for g in grads + [("ours", "default", 30.0)]]
    other = [_row("forward", "cable", "float64", 15.0, 10.0, 60.0)]
    other += [_grad_row("cable", *g, 1.0) for g in grads + [("ours", "default", 10.0)]]
    text = report.render(rows, [], str(tmp_path), (("flag X", other),))
    assert "`python -m benchmarks --quick` on M, Python 3.x, D" in text
    assert "| gradient | 2 | 2 | 1 |" in text and "**failed**: gradient" in text
    against = text[text.index("## This run against one with flag X") :]
    # our times, that / this, then ours / Jaxley and ours / NEURON in each run
    row = "| forward | cable | BackwardEuler | float64 | 30.00 | 15.00 | 0.50 |"
    assert row + " 3.00 | 1.50 | 0.50 | 0.25 |" in against
    # a gradient against the better Jaxley configuration of its own run
    grad = "| gradient | cable | ours, default | float64 | 30.00 | 10.00 | 0.33 |"
    assert grad + " 1.50 | 0.50 | — | — |" in against
    assert "not recorded" in report.render(rows[1:], [], str(tmp_path))


@pytest.mark.parametrize(
    "folder",
    [
        "",
        "small_loops",
        "mib_loops",
        "whole_loops",
        "sequential_schedule",
        "one_core",
        "events_delivery",
        "nmodl_import",
    ],
)
def test_committed_results_md_is_rendered_from_results_json(folder):
    """The committed results files are exactly what `python -m benchmarks
    --render` makes of the committed rows (nobody edits them by hand)."""
    out = ROOT / "benchmarks" / folder / "results.md"
    assert _runner().rendered(str(out)) == out.read_text()


def test_gradient_verdict_takes_interleaved_times():
    """Matched configurations are judged on the interleaved times when both were
    timed there (the separate processes' times move with the load); ours-only
    configurations are listed against Jaxley's best, not judged."""
    gradient = _bench_module("gradient")

    def proc(model, impl, adjoint, ms, rss, temp):
        return dict(model=model, impl=impl, adjoint=adjoint, t_max=50.0, ms=ms,
                    peak_rss_mb=rss, xla_temp_mb=temp)  # fmt: skip

    results = [
        proc("network", "jaxley", "levels=40,50", 70.0, 900, 8.75),
        # slower than Jaxley in its own process, faster interleaved
        proc("network", "ours", "levels=40,50", 80.0, 500, 4.5),
        proc("network", "ours", "checkpoints=10", 140.0, 500, 0.2),
    ]
    inter = [
        dict(model="network", impl="jaxley", adjoint="levels=40,50", ms=75.0),
        dict(model="network", impl="ours", adjoint="levels=40,50", ms=67.0),
    ]
    text = gradient.verdict(results, inter)
    assert "67.0 / 75.0 ms (interleaved)" in text and "NOT met" not in text
    assert "checkpoints=10: 140.0 ms (1.87x Jaxley's best)" in text
    assert "XLA temp 0.20 MB (0.02x Jaxley's least)" in text
    # without the interleaved rows, the separate processes decide
    assert "80.0 / 70.0 ms (separate processes)" in gradient.verdict(results)
    assert "NOT met" in gradient.verdict(results)


def test_run_row_names_the_cpus_the_run_was_limited_to(monkeypatch):
    """A run under `taskset` records how many of the machine's CPUs it ran on
    (`benchmarks/one_core/` is such a run); an unlimited run records the count."""
    runner = _runner()
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 4)
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {2}, raising=False)
    assert runner._machine().endswith(", 4 CPUs, run on 1")
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    assert runner._machine().endswith(", 4 CPUs")
