"""The code is formatted and lint-clean (ruff, configured in pyproject.toml; ruff is
in the test extra, so a missing ruff is a failure, not a skip)."""

import pathlib
import subprocess
import sys

import pytest


ROOT = pathlib.Path(__file__).parents[2]
PATHS = ["stable_ode", "tests", "examples", "benchmarks"]


@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=" ".join)
def test_ruff(args):
    out = subprocess.run(
        [sys.executable, "-m", "ruff", *args, *PATHS],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
