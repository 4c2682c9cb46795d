"""Model files: the `morphology` key, `properties`, section lists and patterns,
distance-valued parameters and SWC-point sites, each against the Python API
(which `tests/morphology/test_load_morphology.py` checks against NEURON), and
their errors at key paths."""

import json
import pathlib
import shutil

import equinox as eqx
import numpy as np
import pytest
from spec_helpers import load_fails, write

import stable_ode as so
from stable_ode.morphology._expression import evaluate, ExpressionError, parse


DATA = pathlib.Path(__file__).parent.parent / "data" / "morphologies"
SWC = DATA / "i3d_three_point_soma.swc"
GNA = "0.12*exp(-x/100)"
GPAS = "where(x < 20, 1e-4, max(2e-5, 3e-4 - 1e-6*x))"


def _model(cell: dict, record=None, stimuli=None) -> dict:
    return {
        "format": "stable_ode.model/1",
        "t_stop": 1.0,
        "cells": [{"name": "c", **cell}],
        "stimuli": stimuli or [],
        "record": record or [],
        "integration": {"dt": 0.025, "solver": "backward_euler"},
    }


MORPHOLOGY_CELL = {
    "morphology": "morph/cell.swc",
    "axial_resistivity": 150.0,
    "swc_options": {"d_lambda": 0.05},
    "properties": [
        {"sections": ["basal", "axon*"], "capacitance": 2.0},
        {"sections": ["apic[0]"], "axial_resistivity": 90.0, "capacitance": 0.8},
        {
            "sections": ["axonal"],
            "capacitance": {"distance": "2 + x/50"},
            "axial_resistivity": {"distance": "100 + 2*x"},
        },
    ],
    "mechanisms": [
        {
            "name": "hh",
            "sections": ["somatic"],
            "params": {"gnabar": {"distance": GNA}},
        },
        {
            "name": "pas",
            "sections": ["basal", "apical", "axonal"],
            "params": {"g": {"distance": GPAS}, "e": -65.0},
        },
    ],
}


@pytest.fixture
def morph_dir(tmp_path):
    (tmp_path / "morph").mkdir()
    shutil.copy(SWC, tmp_path / "morph" / "cell.swc")
    return tmp_path


def test_morphology_cell_matches_python_api(morph_dir):
    raw = _model(
        MORPHOLOGY_CELL,
        record=[
            {"name": "soma", "cell": "c", "point": 1},
            {"name": "tip", "cell": "c", "point": 6},
            {"name": "apic", "cell": "c", "section": "apic[0]", "position": 0.9},
        ],
        stimuli=[
            {
                "kind": "step",
                "cell": "c",
                "point": 2,
                "amplitude": 0.5,
                "delay": 0.1,
                "duration": 0.5,
            }
        ],
    )
    loaded = so.load_spec(write(morph_dir, raw, "model.json"))
    cell = so.load_morphology(
        morph_dir / "morph" / "cell.swc",
        name="c",
        axial_resistivity=150.0,
        d_lambda=0.05,
        properties=[
            so.Properties(["basal", "axon*"], capacitance=2.0),
            so.Properties(["apic[0]"], capacitance=0.8, axial_resistivity=90.0),
            so.Properties(
                ["axonal"],
                capacitance=so.Distance(lambda x: 2 + x / 50),
                axial_resistivity=so.Distance(lambda x: 100 + 2 * x),
            ),
        ],
        mechanisms=[
            so.Insert(
                so.HH(gnabar=so.Distance(lambda x: 0.12 * np.exp(-x / 100))),
                ["somatic"],
            ),
            so.Insert(
                so.Passive(
                    g=so.Distance(
                        lambda x: np.where(
                            x < 20, 1e-4, np.maximum(2e-5, 3e-4 - 1e-6 * x)
                        )
                    ),
                    e=-65.0,
                ),
                ["basal", "apical", "axonal"],
            ),
        ],
    )
    expected = so.build(
        [cell],
        [so.StepCurrent(so.point_site(cell, 2), 0.5, 0.1, 0.5)],
        [
            so.Recording("soma", so.point_site(cell, 1)),
            so.Recording("tip", so.point_site(cell, 6)),
            so.Recording("apic", so.Site("c", "apic[0]", 0.9)),
        ],
    )
    assert eqx.tree_equal(loaded.model, expected)
    assert loaded.model.layout == expected.layout
    (source,) = loaded.spec.swc
    assert source.reader == "load_morphology"
    assert source.path == str((morph_dir / "morph" / "cell.swc").resolve())
    names = {s.name for s in loaded.spec.cells[0].sections}
    assert names == {"soma[0]", "dend[0]", "axon[0]", "apic[0]"}
    # the point-site maps onto the section the point lies in
    assert so.point_site(cell, 6).section == "dend[0]"
    assert so.point_site(cell, 6).position == 1.0
    # per-section cm reached the model: dend 2, apic 0.8, soma 1, axon 2 + x/50
    # at its compartments' centres
    cm = np.asarray(loaded.model.capacitance)
    axon = [
        i
        for i, c in enumerate(loaded.model.layout.compartments)
        if c.section == "axon[0]"
    ]
    x = so.morphology._regions.path_distances(cell.sections, "soma[0]")["axon[0]"]
    assert len(axon) > 1 and np.allclose(cm[axon], 2 + x / 50, rtol=1e-15, atol=0)
    rest = np.delete(cm, axon)
    assert set(np.round(rest, 12).tolist()) == {2.0, 0.8, 1.0}


def test_sections_cell_with_properties_patterns_and_distance(tmp_path):
    raw = _model(
        {
            "sections": [
                {"name": "soma", "length": 20.0, "diameter": 20.0},
                {
                    "name": "dend_a",
                    "length": 200.0,
                    "diameter": 1.0,
                    "n_compartments": 5,
                    "parent": "soma",
                },
                {
                    "name": "dend_b",
                    "length": 100.0,
                    "diameter": 2.0,
                    "n_compartments": 3,
                    "parent": "soma",
                    "parent_position": 0.0,
                },
            ],
            "properties": [
                {"sections": ["dend_*"], "axial_resistivity": 200.0},
                {
                    "sections": ["dend_a"],
                    "capacitance": {"distance": "1 + x/100"},
                    "axial_resistivity": {"distance": "100 + x"},
                },
                {"sections": ["dend_b"], "capacitance": {"values": [1.5, 2.0, 2.5]}},
            ],
            "mechanisms": [
                {
                    "name": "pas",
                    "sections": ["all"],
                    "params": {"g": {"distance": "1e-4 + 1e-7*x"}},
                }
            ],
        }
    )
    loaded = so.load_spec(write(tmp_path, raw, "model.json"))
    (ins,) = loaded.spec.cells[0].mechanisms
    # path distance from soma(0.5): soma 0; dend_a centres 10 + 20, 60, ...;
    # dend_b hangs from soma(0): 10 + 100·(k + 0.5)/3
    x = np.concatenate(
        [
            [0.0],
            10 + 200 * (np.arange(5) + 0.5) / 5,
            10 + 100 * (np.arange(3) + 0.5) / 3,
        ]
    )
    assert np.allclose(np.asarray(ins.mechanism.g), 1e-4 + 1e-7 * x, rtol=0, atol=1e-18)
    assert ins.sections == ("soma", "dend_a", "dend_b")
    # cm per compartment (dend_a's at its compartments' centres), Ra per section
    # (dend_a's at its centre, 10 + 100 µm from soma(0.5))
    cm = [1.0, *(1 + x[1:6] / 100), 1.5, 2.0, 2.5]
    assert np.allclose(np.asarray(loaded.model.capacitance), cm, rtol=1e-15, atol=0)
    ra = so.morphology._regions.section_values(loaded.spec.cells[0])[1]
    assert ra == {"soma": 35.4, "dend_a": 210.0, "dend_b": 200.0}
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 20.0),
            so.Section("dend_a", 200.0, 1.0, 5, "soma"),
            so.Section("dend_b", 100.0, 2.0, 3, "soma", 0.0),
        ],
        [so.Insert(so.Passive(g=so.Distance(lambda d: 1e-4 + 1e-7 * d)), ["all"])],
        properties=[
            so.Properties(["dend_*"], axial_resistivity=200.0),
            so.Properties(
                ["dend_a"],
                capacitance=so.Distance(lambda d: 1 + d / 100),
                axial_resistivity=so.Distance(lambda d: 100 + d),
            ),
            so.Properties(["dend_b"], capacitance=[1.5, 2.0, 2.5]),
        ],
    )
    assert eqx.tree_equal(loaded.model, so.build([cell]))


def _fails(tmp_path, raw, where, fragment):
    load_fails(write(tmp_path, raw, "model.json"), where, fragment)


def _with(**changes):
    cell = json.loads(json.dumps(MORPHOLOGY_CELL))
    cell.update(changes)
    return cell


@pytest.mark.parametrize(
    "cell,record,where,fragment",
    [
        (
            _with(morphology="morph/none.swc"),
            None,
            "cells[0].morphology",
            "file not found",
        ),
        (
            _with(morphology="morph/bad.swc"),
            None,
            "cells[0].morphology",
            "bad.swc, line 2",
        ),
        (
            _with(swc_options={"soma": "single"}),
            None,
            "cells[0].swc_options.soma",
            "unknown key",
        ),
        (_with(sections=[]), None, "cells[0]", "exactly one of 'sections' and 'swc'"),
        (
            _with(properties=[{"sections": ["apic*x"], "capacitance": 2.0}]),
            None,
            "cells[0].properties[0].sections[0]",
            "matches no section",
        ),
        (
            _with(properties=[{"capacitance": -2.0}]),
            None,
            "cells[0].properties[0].capacitance",
            "must be > 0",
        ),
        (
            _with(properties=[{"axial_resistivity": {"values": [90.0]}}]),
            None,
            "cells[0].properties[0].axial_resistivity.values",
            "one value per section",
        ),
        (
            _with(properties=[{"capacitance": {"values": [1.0]}}]),
            None,
            "cells[0].properties[0].capacitance",
            "needs a fixed n_compartments",
        ),
        (
            _with(
                swc_options={"n_compartments": 1},
                properties=[{"capacitance": {"values": [1.0, 2.0]}}],
            ),
            None,
            "cells[0].properties[0].capacitance",
            "2 values for 4 compartments",
        ),
        (
            _with(properties=[{"capacitance": {"distance": "1 - x/10"}}]),
            None,
            "cells[0].properties[0].capacitance",
            "must be > 0",
        ),
        (
            _with(properties=[{"cm": 2.0}]),
            None,
            "cells[0].properties[0].cm",
            "unknown key",
        ),
        (
            _with(
                mechanisms=[
                    {"name": "pas", "params": {"g": {"distance": "__import__('os')"}}}
                ]
            ),
            None,
            "cells[0].mechanisms[0].params.g.distance",
            "only the functions",
        ),
        (
            _with(mechanisms=[{"name": "pas", "params": {"g": {"distance": "y*2"}}}]),
            None,
            "cells[0].mechanisms[0].params.g.distance",
            "unknown name 'y'",
        ),
        (
            _with(
                mechanisms=[
                    {"name": "pas", "params": {"g": {"distance": "log(x-1e6)"}}}
                ]
            ),
            None,
            "cells[0].mechanisms[0].g",
            "parameters must be finite",
        ),
        (
            _with(mechanisms=[{"name": "pas", "params": {"g": {"dist": "x"}}}]),
            None,
            "cells[0].mechanisms[0].params.g.dist",
            "unknown key",
        ),
        (
            _with(mechanisms=[{"name": "pas", "sections": ["apikal"]}]),
            None,
            "cells[0].mechanisms[0].sections[0]",
            "unknown section 'apikal'",
        ),
        (
            MORPHOLOGY_CELL,
            [{"name": "r", "cell": "c", "point": 99}],
            "record[0].point",
            "99 is not a point of",
        ),
        (
            MORPHOLOGY_CELL,
            [{"name": "r", "cell": "c", "point": 1, "section": "soma[0]"}],
            "record[0]",
            "exactly one of 'section'",
        ),
        (
            MORPHOLOGY_CELL,
            [{"name": "r", "cell": "c", "point": 1, "position": 0.5}],
            "record[0].position",
            "takes no 'position'",
        ),
        (
            MORPHOLOGY_CELL,
            [{"name": "r", "cell": "c"}],
            "record[0]",
            "exactly one of 'section'",
        ),
    ],
)
def test_errors_at_key_paths(morph_dir, cell, record, where, fragment):
    (morph_dir / "morph" / "bad.swc").write_text("1 1 0 0 0 5 -1\n2 3 1 0 0 x 1\n")
    _fails(morph_dir, _model(cell, record), where, fragment)


def test_point_site_on_a_sections_cell(tmp_path):
    raw = _model(
        {"sections": [{"name": "soma", "length": 10.0, "diameter": 10.0}]},
        record=[{"name": "r", "cell": "c", "point": 1}],
    )
    _fails(tmp_path, raw, "record[0].point", "not read from a morphology file")


def test_expression_evaluator():
    x = np.array([0.0, 50.0, 200.0])
    assert np.allclose(evaluate(parse("2*x**2 - -x/4 + 1"), x), 2 * x**2 + x / 4 + 1)
    assert np.allclose(
        evaluate(parse("where(x >= 50, min(x, 100), abs(-3))"), x), [3, 50, 100]
    )
    assert np.allclose(
        evaluate(parse("max(log(1 + x), 1, 2)"), x), [2, np.log(51), np.log(201)]
    )
    assert np.allclose(evaluate(parse("0 < x <= 50"), x), [0, 1, 0])
    assert evaluate(parse("3"), x).shape == (3,)
    assert np.isinf(evaluate(parse("exp(1e6) * x"), x)[1])  # caller checks finiteness
    for bad in (
        "x.real",
        "(lambda: 1)()",
        "[x]",
        "exp(x=1)",
        "where(x, 1)",
        "min(x)",
        "'a'",
        "True",
        "x if x else 1",
        "x @ x",
        "open('f')",
        "exp",
        "",
        "x" * 1001,
    ):
        with pytest.raises(ExpressionError):
            ev = parse(bad)
            evaluate(ev, x)  # names of functions alone evaluate to nothing valid
