"""Every example runs at small size and writes its figure; the README's quick
start runs as written."""

import pathlib
import re
import runpy

import jax
import pytest


ROOT = pathlib.Path(__file__).parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs(path, tmp_path, monkeypatch):
    out = tmp_path / f"{path.stem}.png"
    monkeypatch.setattr("sys.argv", [str(path), "--small", "--out", str(out)])
    with jax.numpy_dtype_promotion("standard"):
        runpy.run_path(str(path), run_name="__main__")
    assert out.exists() and out.stat().st_size > 1000


def test_readme_quick_start():
    text = (ROOT / "README.md").read_text()
    code = re.search(r"## Quick start\n\n```python\n(.*?)```", text, re.S).group(1)
    with jax.numpy_dtype_promotion("standard"):
        exec(compile(code, "README.md", "exec"), {})
