"""`python -m benchmarks.thread_placement` (not part of the runner) runs: it finds
XLA's worker threads, pins them, and prints one row per implementation and case."""

import os
import pathlib
import subprocess
import sys


ROOT = pathlib.Path(__file__).parents[2]


def test_thread_placement_smoke():
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.thread_placement", "--smoke"]
        + ["--dtype", "float64", "--rounds", "1", "--calls", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    if len(os.sched_getaffinity(0)) < 2:
        assert "needs Linux and two CPUs; skipped" in proc.stdout
        return
    head = [x for x in proc.stdout.splitlines() if x.startswith("# float64")]
    assert len(head) == 1 and "2 XLA threads" in head[0], proc.stdout
    rows = [x for x in proc.stdout.splitlines() if x.startswith("| ")][1:]
    try:
        import jaxley  # noqa: F401

        impls = ["stable_ode, cell", "Jaxley, cell"]
    except ImportError:
        impls = ["stable_ode, cell"]
    impls.append("stable_ode, events network")
    assert [r.split("|")[1].strip() for r in rows] == impls, proc.stdout
    for row in rows:
        cells = [c.strip() for c in row.split("|")]
        _, _, split, free, apart, together, *ratios, _ = cells
        assert split.isdigit(), row
        assert min(float(free), float(apart), float(together)) > 0, row
        assert len(ratios) == 2, row
