"""Bit-identity against reference traces saved from the code before the redesign.

The cases and their generator are `tests/reference/generate.py`; a refactor that
changes any saved sample by one ulp fails here.

The traces were saved from XLA:CPU's AVX2 (with FMA) code. On a CPU with AVX-512
XLA vectorises wider and rounds some float32 reductions differently (one
adaptive float32 case moves by one float32 step), so there the cases run in a
process whose XLA:CPU is limited to AVX2 (`--xla_cpu_max_isa=AVX2`): the same
code as the traces', compared bit for bit.
"""

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest


sys.path.insert(0, str(Path(__file__).resolve().parent / "reference"))

from generate import cases, DATA, run  # noqa: E402


REFERENCE = np.load(DATA / "traces.npz")
CASES = list(cases())
AVX2 = "--xla_cpu_max_isa=AVX2"


def _avx512_host() -> bool:
    """Whether this process's XLA:CPU would use AVX-512 (an x86-64 CPU with it,
    and no `--xla_cpu_max_isa` in `XLA_FLAGS`)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    if "--xla_cpu_max_isa" in os.environ.get("XLA_FLAGS", ""):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512f" in flags


def test_every_case_has_a_reference():
    assert sorted(REFERENCE.files) == sorted(name for name, *_ in CASES)


if _avx512_host():

    def test_bit_identical_in_an_avx2_process():
        env = dict(os.environ)
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + AVX2).strip()
        env.pop("PYTEST_XDIST_WORKER", None)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            + ["-n", "0", f"{__file__}::test_bit_identical"],
            cwd=Path(__file__).parent.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
        assert f"{len(CASES)} passed" in proc.stdout, proc.stdout[-2000:]

else:

    @pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
    def test_bit_identical(case):
        name, model, solve, dtype = case
        got = run(model, solve, dtype)
        want = REFERENCE[name]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
