"""Every example runs at small size and writes its figure; batch_training also
runs sharded over 4 fake CPU devices; the README's quick start runs as written."""

import os
import pathlib
import re
import runpy
import subprocess
import sys

import jax
import pytest


ROOT = pathlib.Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path, tmp_path, monkeypatch):
    out = tmp_path / f"{path.stem}.png"
    monkeypatch.setattr("sys.argv", [str(path), "--small", "--out", str(out)])
    with jax.numpy_dtype_promotion("standard"):
        runpy.run_path(str(path), run_name="__main__")
    assert out.exists() and out.stat().st_size > 1000


@pytest.mark.slow
def test_batch_training_sharded(tmp_path):
    # The device count is fixed when JAX starts: a fresh process with 4 fake CPU
    # devices, so the batch of 8 stimuli is split 4 ways. 10 Adam steps: the fit
    # itself is checked (to 2 %) by the one-device run above.
    out = tmp_path / "batch_training.png"
    env = dict(
        os.environ,
        XLA_FLAGS="--xla_force_host_platform_device_count=4",
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    )
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "batch_training.py"),
            "--small",
            "--steps",
            "10",
            "--no-check",
            "--out",
            str(out),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "4 cpu device(s); batch of 8 stimuli split over 4" in r.stdout, r.stdout
    # The per-stimulus losses come back split over the 4 devices, the parameters
    # replicated on all 4.
    assert "shape (8,), split over 4 device(s)" in r.stdout, r.stdout
    assert "parameters replicated on 4 device(s)" in r.stdout, r.stdout
    first, last = map(float, re.search(r"loss: (\S+) -> (\S+) ", r.stdout).groups())
    assert last < 0.5 * first, r.stdout
    assert out.exists() and out.stat().st_size > 1000


def test_readme_quick_start():
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S).group(1)
    with jax.numpy_dtype_promotion("standard"):
        exec(compile(code, "README.md", "exec"), {})
