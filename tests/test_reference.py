"""Bit-identity against reference traces saved from the code before the redesign.

The cases and their generator are `tests/reference/generate.py`; a refactor that
changes any saved sample by one ulp fails here.
"""

import sys
from pathlib import Path

import numpy as np
import pytest


sys.path.insert(0, str(Path(__file__).resolve().parent / "reference"))

from generate import cases, DATA, run  # noqa: E402


REFERENCE = np.load(DATA / "traces.npz")
CASES = list(cases())


def test_every_case_has_a_reference():
    assert sorted(REFERENCE.files) == sorted(name for name, *_ in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bit_identical(case):
    name, model, solve, dtype = case
    got = run(model, solve, dtype)
    want = REFERENCE[name]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
