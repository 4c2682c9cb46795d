"""The documentation site builds with `mkdocs build --strict` and documents the API.

Strict mode (with the `validation` settings in `mkdocs.yml`) turns every broken
link or anchor, page missing from the nav, unresolved API cross-reference and
docstring that mkdocstrings cannot render into a failure.
"""

import inspect
import os
import pathlib
import re
import subprocess
import sys

import pytest

import stable_ode


ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> pathlib.Path:
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"mkdocs build --strict failed (exit {proc.returncode}):\n"
            f"{proc.stdout}\n{proc.stderr}"
        )
    return out


def test_every_page_built(site):
    for md in (ROOT / "docs").rglob("*.md"):
        rel = md.relative_to(ROOT / "docs").with_suffix("")
        html = site / "index.html" if rel.name == "index" else site / rel / "index.html"
        assert html.is_file(), f"docs/{md.relative_to(ROOT / 'docs')} was not built"


def test_api_reference_covers_exports(site):
    """Every public class and function `stable_ode` exports has an API entry
    rendered from its docstring."""
    ids: set[str] = set()
    for html in (site / "api").rglob("index.html"):
        ids |= set(re.findall(r'id="(stable_ode\.[\w.]+)"', html.read_text()))
    exported = {
        f"stable_ode.{name}"
        for name, obj in vars(stable_ode).items()
        if not name.startswith("_") and not inspect.ismodule(obj)
    }
    missing = sorted(exported - ids)
    assert not missing, f"exported but not in docs/api/: {missing}"
    assert "stable_ode.transforms.Bounded" in ids


def test_docstrings_rendered(site):
    html = (site / "api" / "control" / "index.html").read_text()
    # The `**Arguments:**` section of `simulate`'s docstring, rendered as markdown.
    assert "<strong>Arguments:</strong>" in html
    assert "<code>t1</code>" in html
