"""Model files: branched trees and SWC morphologies, as the Python API builds them,
and one clear error for each broken SWC file."""

from pathlib import Path

import numpy as np
import pytest
from spec_helpers import load_fails, MODELS, same, write

import stable_ode as so
from stable_ode._spec import SpecError


# ---------------------------------------------------------------------------
# Branched trees, SWC morphologies and synapses in model files

DATA = Path(__file__).parents[1] / "data"
SWC_DENDRITES = ["dend_0", "dend_1", "dend_2", "dend_3", "dend_4", "apic_0"]


def test_branched_file_matches_python_api():
    # Three children at soma(1), one at soma(0), two at the interior point d1(0.4)
    # and two at d1's end.
    def sec(name, length, diameter, n=1, parent=None, position=1.0):
        return so.Section(name, length, diameter, n, parent, position)

    cell = so.Cell(
        "tree",
        [
            sec("soma", 20.0, 20.0, 3),
            sec("d1", 80.0, 2.0, 4, "soma"),
            sec("d2", 60.0, 1.5, 3, "soma"),
            sec("d3", 40.0, 1.0, 2, "soma"),
            sec("axon", 100.0, 1.0, 5, "soma", 0.0),
            sec("obl1", 30.0, 0.8, 2, "d1", 0.4),
            sec("obl2", 30.0, 0.8, 2, "d1", 0.4),
            sec("t1", 25.0, 0.6, 1, "d1"),
            sec("t2", 25.0, 0.6, 1, "d1"),
        ],
        [
            so.Insert(so.HH(), ["soma", "axon"]),
            so.Insert(
                so.Passive(g=1e-4, e=-65.0),
                ["d1", "d2", "d3", "obl1", "obl2", "t1", "t2"],
            ),
        ],
        axial_resistivity=120.0,
    )
    expected = so.build(
        [cell],
        [so.StepCurrent(so.Site("tree", "soma", 0.5), 1.0, 0.5, 2.0)],
        [
            so.Recording("soma", so.Site("tree", "soma", 0.5)),
            so.Recording("t2", so.Site("tree", "t2", 1.0)),
            so.Recording("obl1", so.Site("tree", "obl1", 1.0)),
        ],
    )
    loaded = so.load_spec(MODELS / "branched.json")
    assert same(loaded.model, expected)
    assert loaded.model.layout == expected.layout


def swc_api():
    """`swc_cell.json` written with the Python API (a model file's `"swc"` cell
    is `load_swc(..., geometry="import3d")`)."""
    cell = so.load_swc(
        DATA / "branched.swc",
        name="pyr",
        soma="single",
        geometry="import3d",
        d_lambda=0.1,
        frequency=100.0,
        axial_resistivity=100.0,
        mechanisms=[
            so.Insert(so.HH(), ["somatic", "axon_0"]),
            so.Insert(so.Passive(g=1e-4, e=-65.0), SWC_DENDRITES),
        ],
    )
    return so.build(
        [cell],
        [so.StepCurrent(so.Site("pyr", "soma", 0.5), 1.0, 0.5, 2.0)],
        [
            so.Recording("soma", so.Site("pyr", "soma", 0.5)),
            so.Recording("tip", so.Site("pyr", "dend_4", 1.0)),
            so.Recording("apic", so.Site("pyr", "apic_0", 0.9)),
        ],
    )


def test_swc_model_file_matches_python_api():
    loaded = so.load_spec(MODELS / "swc_cell.json")
    expected = swc_api()
    assert same(loaded.model, expected)
    assert loaded.model.layout == expected.layout
    (cell,) = loaded.spec.cells
    assert isinstance(cell, so.Cell)  # the library's own object
    (source,) = loaded.spec.swc
    assert source.path == str((DATA / "branched.swc").resolve())
    assert dict(source.options) == {
        "soma": "single",
        "n_compartments": None,
        "d_lambda": 0.1,
        "frequency": 100.0,
    }
    # Import3d reads this three-point soma (an apical child on an outer point)
    # as two soma sections from the centre: `soma` and `soma_1`.
    names = {s.name for s in cell.sections}
    assert names == {"soma", "soma_1", "axon_0", *SWC_DENDRITES}
    # It runs: 1 nA into the soma fires it and the spike spreads into the tree.
    sim = loaded.simulate()
    for v in sim.recordings.values():
        assert np.all(np.isfinite(v))
    assert float(sim.recordings["soma"].max()) > 0.0
    assert float(sim.recordings["tip"].max()) > -60.0


def test_swc_options_and_relative_path(tmp_path):
    (tmp_path / "morph").mkdir()
    (tmp_path / "morph" / "cell.swc").write_text((DATA / "branched.swc").read_text())
    raw = {
        "format": "stable_ode.model/1",
        "t_stop": 1.0,
        "cells": [
            {
                "name": "n",
                "swc": "morph/cell.swc",
                "swc_options": {"soma": "points", "n_compartments": 2},
                "capacitance": 2.0,
                "mechanisms": [
                    {"name": "hh", "sections": ["soma_0", "soma_1"]},
                    {"name": "pas", "sections": ["axon_0"]},
                ],
            }
        ],
        "record": [{"name": "v", "cell": "n", "section": "dend_3", "position": 0.0}],
        "integration": {"dt": 0.1},
    }
    loaded = so.load_spec(write(tmp_path, raw, "model.json"))
    api = so.load_swc(
        tmp_path / "morph" / "cell.swc",
        name="n",
        soma="points",
        n_compartments=2,
        capacitance=2.0,
        geometry="import3d",
        mechanisms=[
            so.Insert(so.HH(), ["soma_0", "soma_1"]),
            so.Insert(so.Passive(), ["axon_0"]),
        ],
    )
    expected = so.build([api], [], [so.Recording("v", so.Site("n", "dend_3", 0.0))])
    assert same(loaded.model, expected)
    assert all(s.n_compartments == 2 for s in loaded.spec.cells[0].sections)


SWC_LINES = (DATA / "one_point_soma.swc").read_text().splitlines()


def _swc_model(tmp_path, swc: str = "cell.swc", **cell):
    raw = {
        "format": "stable_ode.model/1",
        "t_stop": 1.0,
        "cells": [{"name": "n", "swc": swc, **cell}],
        "integration": {"dt": 0.1},
    }
    return write(tmp_path, raw, "model.json")


@pytest.mark.parametrize(
    "swc_text,cell,where,fragment",
    [
        (
            [*SWC_LINES[:4], "2 3 6 0 0 1.0", *SWC_LINES[5:]],
            {},
            "cells[0].swc",
            "cell.swc, line 5: expected 7 columns `id type x y z radius parent`, "
            "got 6: '2 3 6 0 0 1.0'",
        ),
        (
            [*SWC_LINES[:4], "2 3 6 0 0 -1.0 1", *SWC_LINES[5:]],
            {},
            "cells[0].swc",
            "cell.swc, line 5: radius must be > 0 µm, got -1.0",
        ),
        (
            [*SWC_LINES[:4], "2 3 6 0 0 1.0 42", *SWC_LINES[5:]],
            {},
            "cells[0].swc",
            "cell.swc, line 5: point 2 has parent 42, which is not a point",
        ),
        (
            [*SWC_LINES, "9 3 0 0 9 1.0 x"],
            {},
            "cells[0].swc",
            "cell.swc, line 12: id, type and parent must be integers",
        ),
        (
            [line.replace(" 1 0 0 0 6 -1", " 3 0 0 0 6 -1") for line in SWC_LINES],
            {},
            "cells[0].swc",
            "cell.swc: no soma",
        ),
        (
            SWC_LINES,
            {"swc_options": {"dlambda": 0.2}},
            "cells[0].swc_options.dlambda",
            "unknown key (did you mean 'd_lambda'?)",
        ),
        (
            SWC_LINES,
            {"swc_options": {"soma": "point"}},
            "cells[0].swc_options.soma",
            "must be 'single' or 'points', got 'point' (did you mean 'points'?)",
        ),
        (
            SWC_LINES,
            {"swc_options": {"d_lambda": None}},
            "cells[0].swc_options",
            "give 'n_compartments'",
        ),
        (
            SWC_LINES,
            {"swc_options": {"n_compartments": 0}},
            "cells[0].swc_options.n_compartments",
            "positive integer",
        ),
        (
            SWC_LINES,
            {"swc_options": {"frequency": -100}},
            "cells[0].swc_options.frequency",
            "must be > 0",
        ),
        (
            SWC_LINES,
            {"mechanisms": [{"name": "pas", "sections": ["dend"]}]},
            "cells[0].mechanisms[0].sections[0]",
            "unknown section 'dend' (did you mean 'dend_1'?): not a section of this "
            "cell (sections: soma, dend_0, type5_0, dend_1); an SWC file's sections "
            "are named soma "
            "(or soma_k), axon_k, dend_k, apic_k and type{t}_k",
        ),
    ],
    ids=[
        "six columns",
        "negative radius",
        "unknown parent",
        "non-integer parent",
        "no soma",
        "unknown option",
        "bad soma option",
        "no compartment rule",
        "zero compartments",
        "negative frequency",
        "unknown section name",
    ],
)
def test_broken_swc(tmp_path, swc_text, cell, where, fragment):
    swc = tmp_path / "cell.swc"
    swc.write_text("\n".join(swc_text) + "\n")
    file = _swc_model(tmp_path, **cell)
    message = str(load_fails(file, where, fragment))
    if where == "cells[0].swc":
        assert str(swc.resolve()) in message
    assert "\n" not in message


def test_missing_swc_file_resolved_from_model_file(tmp_path):
    file = _swc_model(tmp_path, "morph/cell.swc")
    with pytest.raises(SpecError) as info:
        so.load_spec(file)
    assert str(info.value) == (
        f"{file}: cells[0].swc: no such SWC file: "
        f"{tmp_path.resolve() / 'morph' / 'cell.swc'}"
    )
