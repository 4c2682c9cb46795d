"""Shape plots (`stable_ode._shape_plot`, `run --plot-shape`), Agg backend."""

import json

import numpy as np
import pytest


matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import stable_ode as so  # noqa: E402
from stable_ode._shape_plot import animate_shape, plot_shape, shape_lines  # noqa: E402


POINTS = [(0.0, 0.0, 0.0, 10.0), (10.0, 0.0, 0.0, 12.0), (20.0, 5.0, 0.0, 8.0)]


def _model():
    soma = so.Section("soma", points=POINTS, n_compartments=2)
    dend = so.Section("dend", 100.0, 1.0, 4, parent="soma", parent_position=1.0)
    cell = so.Cell("c", [soma, dend], [so.Insert(so.Passive())])
    return so.build([cell], [], [])


def test_lines_follow_points_and_values():
    model = _model()
    lines, index, diameters = shape_lines(model)
    assert sorted(index.tolist()) == list(range(model.n_compartments)) == list(range(6))
    soma = [ln for ln, i in zip(lines, index) if i < 2]
    # The soma's two compartments split its 3-D polyline at half its arc length.
    np.testing.assert_allclose(soma[0][0], POINTS[0][:3])
    np.testing.assert_allclose(soma[1][-1], POINTS[2][:3])
    np.testing.assert_allclose(soma[0][-1], soma[1][0])
    # The dendrite (no points) starts at soma(1) and is 100 µm long.
    dend = [ln for ln, i in zip(lines, index) if i >= 2]
    np.testing.assert_allclose(dend[0][0], POINTS[2][:3])
    length = sum(np.linalg.norm(ln[-1] - ln[0]) for ln in dend)
    assert length == pytest.approx(100.0)
    assert diameters[index.tolist().index(2)] == 1.0

    values = np.arange(6.0) * 10 - 70
    collection = plot_shape(model, values)
    np.testing.assert_array_equal(collection.get_array(), values[index])
    assert collection.get_clim() == (-70.0, -20.0)
    samples = np.stack([values, values + 1])
    shown = plot_shape(model, samples, t=[0.0, 0.5], time=0.4)
    np.testing.assert_array_equal(shown.get_array(), (values + 1)[index])
    animation = animate_shape(model, samples, [0.0, 0.5])
    html = animation.to_jshtml()  # renders both frames, no external writer
    assert html.count("data:image/png;base64") == 2
    with pytest.raises(ValueError, match="values"):
        plot_shape(model, values[:3])
    matplotlib.pyplot.close("all")


def test_cli_plot_shape(tmp_path):
    from stable_ode._cli import main

    model = {
        "format": "stable_ode.model/1",
        "t_stop": 0.5,
        "cells": [
            {
                "name": "c",
                "sections": [
                    {"name": "soma", "points": [list(p) for p in POINTS]},
                    {"name": "dend", "length": 50.0, "diameter": 1.0,
                     "n_compartments": 3, "parent": "soma"},
                ],
                "mechanisms": [{"name": "pas"}],
            }
        ],
        "stimuli": [{"kind": "step", "cell": "c", "section": "soma",
                     "amplitude": 0.5, "delay": 0.0, "duration": 1.0}],
        "record": [{"name": "soma", "cell": "c", "section": "soma"}],
        "integration": {"dt": 0.05},
    }  # fmt: skip
    path = tmp_path / "m.json"
    path.write_text(json.dumps(model))
    shape = tmp_path / "shape.png"
    code = main(
        ["run", str(path), "-o", str(tmp_path / "o.npz"), "--plot-shape", str(shape)]
    )
    assert code == 0
    assert shape.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = np.load(tmp_path / "o.npz")
    assert list(out.files) == ["t", "stats", "soma"]
