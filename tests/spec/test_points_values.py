"""Model-file sections from 3-D `points` and per-compartment parameter
`{"values": [...]}` (what `from-neuron` writes); no solve, only loading."""

import numpy as np
import pytest

import stable_ode as so


POINTS = [[0.0, 0.0, 0.0, 10.0], [10.0, 0.0, 0.0, 12.0], [20.0, 5.0, 0.0, 8.0]]


def _raw(soma=None, g=None):
    soma = soma or {"name": "soma", "points": POINTS, "n_compartments": 2}
    return {
        "format": "stable_ode.model/1",
        "t_stop": 1.0,
        "cells": [
            {
                "name": "c",
                "sections": [
                    soma,
                    {"name": "dend", "length": 50.0, "diameter": 1.0,
                     "n_compartments": 3, "parent": "soma"},
                ],
                "mechanisms": [
                    {"name": "pas", "sections": ["dend", "soma"],
                     "params": {"g": g if g is not None else 1e-4}}
                ],
            }
        ],
        "integration": {"dt": 0.1},
    }  # fmt: skip


def test_points_and_values_match_the_python_api():
    g = [1e-4, 2e-4, 3e-4, 4e-4, 5e-4]  # dend's 3 compartments, then soma's 2
    loaded = so.load_spec(_raw(g={"values": g}))
    soma = so.Section("soma", points=[tuple(p) for p in POINTS], n_compartments=2)
    dend = so.Section("dend", 50.0, 1.0, 3, parent="soma")
    cell = so.Cell(
        "c", [soma, dend], [so.Insert(so.Passive(g=np.asarray(g)), ["dend", "soma"])]
    )
    expected = so.build([cell], [], [])
    np.testing.assert_array_equal(loaded.model.area, expected.area)
    (group,) = loaded.model.mechanisms
    (want,) = expected.mechanisms
    np.testing.assert_array_equal(group.mechanism.g, want.mechanism.g)
    # the values land in their compartments: dend's then soma's
    index = {c: np.asarray(group.index)[i] for i, c in enumerate(range(5))}
    assert sorted(index.values()) == list(range(5))
    assert loaded.spec.cells[0].sections[0].points is not None


@pytest.mark.parametrize(
    "soma, g, where, fragment",
    [
        (
            {"name": "soma", "points": POINTS, "length": 5.0},
            None,
            "sections[0].length",
            "takes no 'length'",
        ),
        ({"name": "soma", "diameter": 5.0}, None, "sections[0].length", "'points'"),
        (
            {"name": "soma", "points": [POINTS[0], [1.0, 2.0, 3.0]]},
            None,
            "sections[0].points[1]",
            "[x, y, z, diam]",
        ),
        (
            {"name": "soma", "points": [POINTS[0]]},
            None,
            "sections[0].points",
            "",
        ),
        (None, {"values": [1e-4, 2e-4]}, "params.g.values", "2 values for 5"),
        (None, {"values": []}, "params.g.values", "must not be empty"),
        (None, {"distance": "x", "values": [1.0]}, "params.g", "unknown key"),
    ],
)
def test_errors(soma, g, where, fragment):
    with pytest.raises(so.SpecError) as info:
        so.load_spec(_raw(soma, g))
    message = str(info.value)
    assert where in message and fragment in message, message
