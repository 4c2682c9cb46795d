"""What the command-line tests share: the model files they run, the statistics
keys, and two helpers."""

import subprocess
import sys

import numpy as np
from spec_helpers import MODELS

import stable_ode._cli as cli


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
