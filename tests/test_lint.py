"""The code is formatted and lint-clean (ruff, configured in pyproject.toml)."""

import pathlib
import shutil
import subprocess

import pytest


ROOT = pathlib.Path(__file__).parent.parent
PATHS = ["stable_ode", "tests", "examples", "benchmarks"]


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff is in the test extra")
@pytest.mark.parametrize("args", [["check"], ["format", "--check"]], ids=" ".join)
def test_ruff(args):
    out = subprocess.run(
        ["ruff", *args, *PATHS], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
