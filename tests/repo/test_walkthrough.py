"""docs/walkthrough.md runs as written and its outputs are what the page shows.

The page marks the blocks to run with an HTML comment just before the fence:

- `<!-- walkthrough: file NAME -->`: write the block to NAME (a block that is only
  `--8<-- "NAME"` includes `docs/data/NAME`, as the site build does);
- `<!-- walkthrough: shell -->`: run each line with bash, which must exit 0
  (`shell exit=N`: must exit N);
- `<!-- walkthrough: python -->`: run in one Python interpreter that lives for
  the whole page (a user's session: a fresh process, JAX's default config);
- `<!-- walkthrough: output -->`: what the block before it prints. Timings
  (`1.23 s`) are masked; everything else must match.

Blocks run in document order in an empty folder. Unmarked blocks (the install
and the demo, which `tests/spec/test_cli.py` covers) are not run.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np


ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "walkthrough.md"
DATA = ROOT / "docs" / "data"

_BLOCK = re.compile(
    r"<!-- walkthrough: (?P<kind>file|shell|python|output)(?: (?P<arg>\S+))? -->\n"
    r"```[^\n]*\n(?P<body>.*?)^```",
    re.S | re.M,
)
_SNIPPET = re.compile(r'^--8<-- "([^"]+)"\n?$')
_TIME = re.compile(r"\d+(\.\d+)? s\b")

# A persistent interpreter: reads one JSON-encoded block per line, runs it in one
# namespace, answers one JSON line {"out": stdout, "error": traceback or null}.
_WORKER = r"""
import contextlib, io, json, sys, traceback
reply, namespace = sys.stdout, {"__name__": "__main__"}
for line in sys.stdin:
    buffer = io.StringIO()
    error = None
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            exec(compile(json.loads(line), "<walkthrough>", "exec"), namespace)
        except BaseException:
            error = traceback.format_exc()
    reply.write(json.dumps({"out": buffer.getvalue(), "error": error}) + "\n")
    reply.flush()
"""


def blocks() -> list[tuple[str, str | None, str]]:
    """The marked blocks of the page, in order: `(kind, argument, body)`."""
    found = []
    for m in _BLOCK.finditer(PAGE.read_text()):
        body = m["body"]
        include = _SNIPPET.match(body)
        if include:
            body = (DATA / include[1]).read_text()
        found.append((m["kind"], m["arg"], body))
    return found


def _normalise(text: str) -> list[str]:
    return [_TIME.sub("<t> s", line.rstrip()) for line in text.strip().splitlines()]


def test_page_is_marked():
    kinds = [k for k, _, _ in blocks()]
    assert kinds.count("shell") >= 3 and kinds.count("python") >= 4
    # Every output block follows a block that runs.
    for before, after in zip(kinds, kinds[1:]):
        if after == "output":
            assert before in ("shell", "python")
    # The files the page writes from docs/data are the shipped ones.
    text = PAGE.read_text()
    for name in ("cell.swc", "cell.json"):
        assert f'--8<-- "{name}"' in text


def test_walkthrough(tmp_path):
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        MPLBACKEND="Agg",
    )
    worker = subprocess.Popen(
        [sys.executable, "-u", "-c", _WORKER],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    outputs: list[tuple[str, str, str]] = []  # (what ran, its stdout, its stderr)
    try:
        for kind, arg, body in blocks():
            if kind == "file":
                (tmp_path / arg).write_text(body)
            elif kind == "python":
                worker.stdin.write(json.dumps(body) + "\n")
                worker.stdin.flush()
                reply = json.loads(worker.stdout.readline() or "null")
                assert reply is not None, f"the Python session died running:\n{body}"
                assert reply["error"] is None, f"{body}\nraised:\n{reply['error']}"
                outputs.append((body, reply["out"], ""))
            elif kind == "shell":
                out, err = "", ""
                for command in body.strip().splitlines():
                    proc = subprocess.run(
                        ["bash", "-c", command],
                        cwd=tmp_path,
                        env=env,
                        capture_output=True,
                        text=True,
                        timeout=300,
                    )
                    out, err = out + proc.stdout, err + proc.stderr
                    outputs.append((command, out, err))
                    out, err = "", ""
                    code = int(arg.removeprefix("exit=")) if arg else 0
                    assert proc.returncode == code, (
                        f"{command} exited {proc.returncode}, not {code}:\n"
                        f"{proc.stderr}"
                    )
            else:  # output: of the block just run
                ran, out, err = outputs[-1]
                if os.environ.get("WALKTHROUGH_DUMP"):  # maintainers: see the outputs
                    with open(os.environ["WALKTHROUGH_DUMP"], "a") as f:
                        f.write(json.dumps([ran, out, err]) + "\n")
                    continue
                expected, actual = _normalise(body), _normalise(out)
                stdout_part = [line for line in expected if line in actual]
                stderr_part = [line for line in expected if line not in actual]
                assert stdout_part == actual and all(
                    line in _normalise(err) for line in stderr_part
                ), (
                    f"docs/walkthrough.md shows a different output for\n{ran}\n"
                    f"shown:\n{body}\nactual stdout:\n{out}\nactual stderr:\n{err}"
                )
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)

    # The key results, checked directly as well.
    out = np.load(tmp_path / "out.npz")
    assert {"t", "soma", "apical_tip", "stats"} <= set(out.files)
    assert out["soma"].shape == out["t"].shape and np.isfinite(out["soma"]).all()
    assert out["soma"].max() > 0.0  # the soma spikes
    assert (tmp_path / "out.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads(str(np.load(tmp_path / "km.npz")["stats"]))["result"] != (
        "successful"
    )
    diagnosis = next(o for c, o, _ in outputs if c.endswith("diagnose cell_km.json"))
    assert "Km.gates" in diagnosis and "Km.n" in diagnosis
    fit = next(o for c, o, _ in outputs if "optax.adam" in c)
    losses = [float(x) for x in re.findall(r"loss +([\d.]+) mV²", fit)]
    assert len(losses) >= 10 and min(losses[-3:]) < 0.01 * losses[0]
