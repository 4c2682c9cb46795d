"""`python -m benchmarks.tpu_float64` (not part of the runner) runs each case in
its own process and prints one row per case; on the CPU every case runs, and the
workaround changes nothing that the forward run computes."""

import pathlib
import subprocess
import sys


ROOT = pathlib.Path(__file__).parents[2]


def test_tpu_float64_script_on_the_cpu():
    cases = [
        "nextafter_f64",
        "arithmetic_f64",
        "simulate_f64",
        "simulate_f64_workaround",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.tpu_float64", "--cases", *cases],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [x for x in proc.stdout.splitlines() if x.startswith("| ")][1:]
    cells = [[c.strip() for c in row.split("|")[1:-1]] for row in rows]
    assert [c[0] for c in cells] == cases, proc.stdout
    assert all(c[1] == "ran" for c in cells), proc.stdout
    values = dict((c[0], c[2]) for c in cells)
    assert values["nextafter_f64"] == repr(float.fromhex("0x1.fffffffffffffp-1"))
    assert "1e300*10 = 1e+301" in values["arithmetic_f64"], proc.stdout
    assert values["simulate_f64"] == values["simulate_f64_workaround"], proc.stdout
    assert float(values["simulate_f64"]) > 0.0  # the step current makes it spike
