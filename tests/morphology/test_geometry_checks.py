"""Sections of 3-D points: the checks on their points and attachments."""

import dataclasses
import math

import pytest

import stable_ode as so
from stable_ode._errors import InvalidArgument


CONE = [(0.0, 0.0, 0.0, 4.0), (0.0, 40.0, 30.0, 1.0)]


@pytest.mark.parametrize(
    "kwargs, argument, words",
    [
        ({"points": [(0, 0, 0, 1)]}, "points", "at least 2"),
        ({"points": 5.0}, "points", "a sequence"),
        ({"points": [(0, 0, 0, 1), (1, 0, 0)]}, "points[1]", "four numbers"),
        ({"points": [(0, 0, 0, 1), (1, "a", 0, 1)]}, "points[1]", "four numbers"),
        ({"points": [(0, 0, 0, 1), (1, math.nan, 0, 1)]}, "points[1]", "finite"),
        ({"points": [(0, 0, 0, 1), (1, 0, 0, 1), (2, 0, 0, -1)]}, "points[2]", ">= 0"),
        (
            {"points": [(0, 0, 0, 1), (1, 0, 0, 0), (2, 0, 0, 1)]},
            "points[1]",
            "inside the section",
        ),
        ({"points": [(0, 0, 0, 0), (1, 0, 0, 1)], "parent": "p"}, "points[0]", "0 end"),
        ({"points": [(0, 0, 0, 0), (1, 0, 0, 0)]}, "points", "every diameter is 0"),
        ({"points": [(1, 2, 3, 1), (1, 2, 3, 2)]}, "points", "zero length"),
        ({"points": CONE, "length": 50.0}, "points", "not both"),
        ({"points": [(0, 0, 0, 1), (1e39, 0, 0, 1)]}, "points[1]", "single"),
        (
            {"points": [(0, 0, 0, 1), (1, 0, 0, 1e-46), (2, 0, 0, 1)]},
            "points[1]",
            "single",
        ),
        ({"length": 10.0}, "diameter", "required"),
    ],
)
def test_bad_points_are_one_clear_error(kwargs, argument, words):
    with pytest.raises(InvalidArgument) as info:
        so.Section("dend", **kwargs)
    assert info.value.argument == argument
    assert words in info.value.problem
    assert "'dend'" in str(info.value)


def test_attaching_to_a_zero_diameter_end_is_an_error():
    root = so.Section("root", points=[(0, 0, 0, 2.0), (10, 0, 0, 0.0)])
    with pytest.raises(
        InvalidArgument, match=r"sections\[1\]\.parent.*1 end of 'root'"
    ):
        so.Cell("c", [root, so.Section("kid", 10.0, 1.0, 1, "root", 1.0)])
    root0 = so.Section("root", points=[(0, 0, 0, 0.0), (10, 0, 0, 2.0)])
    with pytest.raises(
        InvalidArgument, match=r"sections\[1\]\.parent.*0 end of 'root'"
    ):
        so.Cell("c", [root0, so.Section("kid", 10.0, 1.0, 1, "root", 0.0)])
    # At the 0 end of a section attached at root(0): the same node.
    mid0 = so.Section("mid", 10.0, 1.0, 1, "root", 0.0)
    with pytest.raises(
        InvalidArgument, match=r"sections\[1\]\.parent.*0 end of 'root'"
    ):
        so.Cell("c", [root0, mid0, so.Section("kid", 10.0, 1.0, 1, "mid", 0.0)])
    # Elsewhere the zero-diameter end is not in the path.
    for x in (0.5, 1.0):
        mid = so.Section("mid", 10.0, 1.0, 1, "root", x)
        so.Cell("c", [root0, mid, so.Section("kid", 10.0, 1.0, 1, "mid", 0.0)])


def test_replace_keeps_the_points():
    sec = so.Section("s", points=CONE, n_compartments=3)
    finer = dataclasses.replace(sec, n_compartments=5)
    assert finer.points == sec.points and finer.n_compartments == 5
    assert (finer.length, finer.diameter) == (sec.length, sec.diameter) == (50.0, 2.5)
    with pytest.raises(InvalidArgument, match="not both"):
        dataclasses.replace(sec, length=10.0)
