"""SWC import: geometry of the shipped files, round trips, malformed files."""

import math
import pathlib

import numpy as np
import pytest

import stable_ode as so
from stable_ode.morphology import save_swc


DATA = pathlib.Path(__file__).parents[1] / "data"
BRANCHED = DATA / "branched.swc"
ONE_POINT = DATA / "one_point_soma.swc"


def by_name(cell):
    return {s.name: s for s in cell.sections}


def test_branched_geometry():
    cell = so.load_swc(BRANCHED, n_compartments=3)
    s = by_name(cell)
    assert cell.name == "branched"
    assert sorted(s) == sorted(
        ["soma", "axon_0", "dend_0", "dend_1", "dend_2", "dend_3", "dend_4", "apic_0"]
    )
    # Three-point soma of radius 8: a cylinder of length 16 and diameter 16.
    assert s["soma"].length == pytest.approx(16.0)
    assert s["soma"].diameter == pytest.approx(16.0)
    assert s["soma"].n_compartments == 1
    # Axon: points 4 (r 1), 5 (r 0.8), 6 (r 0.5); the path from the soma centre
    # to point 4 is inside the soma and not counted.
    assert s["axon_0"].length == pytest.approx(30.0 + 50.0)
    assert s["axon_0"].diameter == pytest.approx((30 * 1.8 + 50 * 1.3) / 80)
    assert (s["axon_0"].parent, s["axon_0"].parent_position) == ("soma", 0.5)
    # dend_0 (points 7-9) branches at point 9 into dend_1 (10, 11) and dend_2 (12,
    # 13); dend_2 branches at 13 into dend_3 (14) and dend_4 (15). A child section
    # starts at the branch point, with its own first diameter.
    seg = math.hypot(30, 5) + math.hypot(40, 5)
    assert s["dend_0"].length == pytest.approx(seg)
    assert s["dend_1"].parent == "dend_0" and s["dend_1"].parent_position == 1.0
    l1, l2 = math.hypot(40, 30), math.hypot(30, 20)
    assert s["dend_1"].length == pytest.approx(l1 + l2)
    assert s["dend_1"].diameter == pytest.approx((l1 * 1.4 + l2 * 1.3) / (l1 + l2))
    assert s["dend_3"].parent == "dend_2" and s["dend_4"].parent == "dend_2"
    assert s["dend_3"].length == pytest.approx(math.hypot(30, 20))
    assert s["dend_3"].diameter == pytest.approx(0.8)
    assert s["apic_0"].parent == "soma"


def test_one_point_soma_type_change_and_order():
    cell = so.load_swc(ONE_POINT, n_compartments=1)
    s = by_name(cell)
    assert s["soma"].length == pytest.approx(12.0)
    assert s["soma"].diameter == pytest.approx(12.0)
    assert s["dend_0"].length == pytest.approx(54.0)  # points 2-4, listed 2, 4, 3
    assert s["type5_0"].parent == "dend_0"
    assert s["type5_0"].length == pytest.approx(60.0)
    assert s["type5_0"].diameter == pytest.approx(1.15)
    assert s["dend_1"].length == pytest.approx(44.0)


def test_points_soma():
    cell = so.load_swc(BRANCHED, soma="points", n_compartments=1)
    s = by_name(cell)
    assert s["soma_0"].parent is None and s["soma_0"].length == pytest.approx(8.0)
    assert (s["soma_1"].parent, s["soma_1"].parent_position) == ("soma_0", 0.0)
    # Runs from the root hang from soma_0(0); the apical dendrite from point 2,
    # the end of soma_0.
    assert (s["axon_0"].parent, s["axon_0"].parent_position) == ("soma_0", 0.0)
    assert (s["apic_0"].parent, s["apic_0"].parent_position) == ("soma_0", 1.0)
    area = sum(
        math.pi * x.length * x.diameter for x in cell.sections if "soma" in x.name
    )
    assert area == pytest.approx(math.pi * 16 * 16)
    so.build([cell])  # a valid branched cell


def test_d_lambda_rule():
    ra, cm, f, dl = 100.0, 1.0, 100.0, 0.1
    cell = so.load_swc(
        BRANCHED, d_lambda=dl, frequency=f, axial_resistivity=ra, capacitance=cm
    )
    for sec in cell.sections:
        if sec.name == "soma":
            assert sec.n_compartments == 1
            continue
        lam = 1e5 * math.sqrt(sec.diameter / (4 * math.pi * f * ra * cm))
        assert sec.n_compartments == int((sec.length / (dl * lam) + 0.9) / 2) * 2 + 1
        assert sec.n_compartments % 2 == 1
    # A finer rule gives at least as many compartments everywhere, more somewhere.
    fine = so.load_swc(BRANCHED, d_lambda=0.01, axial_resistivity=ra)
    counts = [s.n_compartments for s in cell.sections]
    fine_counts = [s.n_compartments for s in fine.sections]
    assert all(a <= b for a, b in zip(counts, fine_counts, strict=True))
    assert sum(fine_counts) > sum(counts)


@pytest.mark.parametrize("path", [BRANCHED, ONE_POINT])
def test_round_trip(path, tmp_path):
    cell = so.load_swc(path, d_lambda=0.1, axial_resistivity=100.0)
    out = tmp_path / "written.swc"
    save_swc(cell, out)
    again = so.load_swc(out, name=cell.name, d_lambda=0.1, axial_resistivity=100.0)
    assert [s.name for s in again.sections] == [s.name for s in cell.sections]
    for a, b in zip(cell.sections, again.sections, strict=True):
        assert (a.parent, a.parent_position, a.n_compartments) == (
            b.parent,
            b.parent_position,
            b.n_compartments,
        )
        assert a.length == pytest.approx(b.length, rel=1e-12)
        assert a.diameter == pytest.approx(b.diameter, rel=1e-12)
    # Written twice: the same points, to rounding.
    out2 = tmp_path / "again.swc"
    save_swc(again, out2)
    np.testing.assert_allclose(
        np.loadtxt(out), np.loadtxt(out2), rtol=1e-12, atol=1e-12
    )


def test_loaded_cell_simulates():
    cell = so.load_swc(
        ONE_POINT,
        n_compartments=3,
        axial_resistivity=100.0,
        mechanisms=[so.Insert(so.HH(), ["soma"]), so.Insert(so.Passive())],
    )
    model = so.build(
        [cell],
        [so.StepCurrent(so.Site(cell.name, "soma", 0.5), 0.5, 0.5, 3.0)],
        [so.Recording("tip", so.Site(cell.name, "type5_0", 1.0))],
    )
    sim = so.simulate(model, 4.0, 0.025)
    v = np.asarray(sim.recordings["tip"])
    assert np.all(np.isfinite(v)) and v.max() > -64.0


def write(tmp_path, text, name="bad.swc"):
    p = tmp_path / name
    p.write_text(text)
    return p


SOMA = "1 1 0 0 0 5 -1\n"


@pytest.mark.parametrize(
    "text,match",
    [
        (SOMA + "2 3 10 0 0 1 7\n", r"line 2: point 2 has parent 7, which is not"),
        (SOMA + "2 3 10 0 0 1 3\n3 3 20 0 0 1 2\n", r"line 2: point 2 is on a cycle"),
        (SOMA + "2 3 10 0 0 1 2\n", r"line 2: point 2 is its own parent"),
        (SOMA + "\n# comment\n2 3 10 0 0 0 1\n", r"line 4: radius must be > 0"),
        (SOMA + "2 3 10 0 0 -1.5 1\n", r"line 2: radius must be > 0"),
        ("1 3 0 0 0 1 -1\n2 3 10 0 0 1 1\n", r"no soma"),
        (SOMA + "2 3 10 0 0 1\n", r"line 2: expected 7 columns"),
        (SOMA + "2 3 10 0 0 1 1 9\n", r"line 2: expected 7 columns"),
        (SOMA + "2 3 10 zero 0 1 1\n", r"line 2: x, y, z and radius must be numbers"),
        (SOMA + "2.5 3 10 0 0 1 1\n", r"line 2: id, type and parent must be integers"),
        (SOMA + "1 3 10 0 0 1 1\n", r"line 2: point id 1 already defined on line 1"),
        (SOMA + "2 1 10 0 0 1 -1\n", r"2 roots \(parent -1\) on lines 1, 2"),
        ("1 3 0 0 0 1 -1\n2 1 10 0 0 1 1\n", r"line 1: the root point has type 3"),
        (SOMA + "2 3 0 0 0 1 1\n3 3 0 0 0 1 2\n", r"line 2: .* zero length"),
        ("# only comments\n", r"no points"),
    ],
)
def test_malformed(tmp_path, text, match):
    p = write(tmp_path, text)
    with pytest.raises(ValueError, match=match) as info:
        so.load_swc(p)
    assert str(p) in str(info.value)


def test_bad_arguments():
    with pytest.raises(ValueError, match="soma must be"):
        so.load_swc(BRANCHED, soma="sphere")
    with pytest.raises(ValueError, match="n_compartments or d_lambda"):
        so.load_swc(BRANCHED, d_lambda=None)
