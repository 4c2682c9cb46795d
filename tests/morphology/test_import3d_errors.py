"""`read_morphology` on malformed files: one `MorphologyError` naming file and line."""

import pytest

from stable_ode.morphology._import3d import MorphologyError, read_morphology


def _bad(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


_SOMA = "1 1 0 0 0 5 -1\n"
BAD_SWC = [
    ("six columns", "1 1 0 0 0 5\n", 1, "7 numbers"),
    ("not a number", _SOMA + "2 3 0 x 0 1 1\n", 2, "7 numbers"),
    ("zero radius", _SOMA + "2 3 0 9 0 0 1\n", 2, "radius must be > 0"),
    ("negative radius", _SOMA + "2 3 0 9 0 -1 1\n", 2, "radius must be > 0"),
    ("zero soma radius", "1 1 0 0 0 0 -1\n2 3 0 9 0 1 1\n", 1, "radius"),
    ("missing parent", _SOMA + "2 3 0 9 0 1 7\n", 2, "not a point"),
    ("cycle", _SOMA + "2 3 0 9 0 1 3\n3 3 0 19 0 1 2\n", 2, "cycle"),
    ("parent id larger", _SOMA + "2 3 0 9 0 1 3\n3 3 0 19 0 1 1\n", 2, "smaller"),
    ("duplicate id", _SOMA + "2 3 0 9 0 1 1\n2 3 0 19 0 1 1\n", 3, "already"),
    ("two roots", _SOMA + "2 3 0 9 0 1 1\n3 3 9 9 0 1 -1\n", 3, "roots"),
    ("soma off the root", "1 3 0 0 0 1 -1\n2 1 0 9 0 5 1\n", 1, "soma must hold"),
    ("soma in pieces", _SOMA + "2 3 0 9 0 1 1\n3 1 0 19 0 4 2\n", 3, "connected"),
    ("no points", "# only a comment\n", None, "no points"),
]


@pytest.mark.parametrize(
    "case, text, line, words", BAD_SWC, ids=[c[0] for c in BAD_SWC]
)
def test_bad_swc(tmp_path, case, text, line, words):
    path = _bad(tmp_path, "bad.swc", text)
    with pytest.raises(MorphologyError, match=words) as info:
        read_morphology(path)
    assert isinstance(info.value, ValueError)
    assert str(path) in str(info.value)
    assert info.value.line == line
    if line is not None:
        assert f"line {line}:" in str(info.value)


_CONTOUR = """("CellBody"
  (CellBody)
  (4 0 0 0.1)
  (0 4 0 0.1)
  (-4 0 0 0.1)
  (0 -4 0 0.1)
)
"""
_TREE = """( (Dendrite)
  (1 1 0 1.0)
  (1 20 0 0.8)
)
"""
BAD_ASC = [
    ("unclosed block", _CONTOUR + _TREE[:-2] + "\n", 8, "not closed"),
    ("stray close", _CONTOUR + ")\n" + _TREE, 8, "never opened"),
    ("unclosed string", '("CellBody\n  (1 2 3 4)\n)\n', 1, "closing"),
    ("parse error", _CONTOUR + "( (Dendrite)\n  (1 1 0 1.0) @\n)\n", 9, "cannot read"),
    ("point without y", _CONTOUR + "( (Dendrite)\n  (1 , )\n)\n", 9, "parse error"),
    ("no soma contour", _TREE, None, "no soma contour"),
    (
        "two-point soma contour",
        '("CellBody"\n (1 0 0 1)\n (0 1 0 1)\n)\n' + _TREE,
        None,
        "no soma contour",
    ),
    (
        "contour along z",
        '("CellBody"\n (1 1 0 .1)\n (1 1 1 .1)\n (1 1 2 .1)\n)\n' + _TREE,
        2,
        "centroid",
    ),
    (
        "collinear contour",  # NEURON's own Import3d stops with a hoc execerror
        '("CellBody"\n (4 0 0 .1)\n (0 0 0 .1)\n (-4 0 0 .1)\n (-8 0 0 .1)\n)\n'
        + _TREE,
        2,
        "centroid",
    ),
    ("empty", "; nothing\n", None, "no Neurolucida objects"),
    (
        "two cells",
        _CONTOUR
        + _CONTOUR.replace("(4 0", "(64 0")
        .replace("(0 4", "(60 4")
        .replace("(-4 0", "(56 0")
        .replace("(0 -4", "(60 -4")
        + _TREE,
        10,
        "separate soma contours",
    ),
]


@pytest.mark.parametrize(
    "case, text, line, words", BAD_ASC, ids=[c[0] for c in BAD_ASC]
)
def test_bad_asc(tmp_path, case, text, line, words):
    path = _bad(tmp_path, "bad.asc", text)
    with pytest.raises(MorphologyError, match=words) as info:
        read_morphology(path)
    assert str(path) in str(info.value)
    assert info.value.line == line


def test_bad_path(tmp_path):
    with pytest.raises(MorphologyError, match="unknown morphology format"):
        read_morphology(tmp_path / "cell.txt")
    with pytest.raises(MorphologyError, match="cannot read"):
        read_morphology(tmp_path / "missing.swc")
