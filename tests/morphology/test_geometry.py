"""Sections of 3-D points: NEURON's geometry (`pt3dadd`, `area()`, `ri()`,
`lambda_f`), the checks on points, and whole cells against NEURON."""

import math

import numpy as np
import pytest
from helpers import passive_input_resistance

import stable_ode as so
from stable_ode.morphology import n_compartments_d_lambda
from stable_ode.morphology._discretise import discretise
from stable_ode.morphology._geometry import (
    compartment_areas,
    compartment_diameters,
    half_resistances,
)


# Tapering, several points per compartment, coordinates that single precision
# cannot hold (0.1, 1.1, ...) and that cross zero (NEURON subtracts them in
# single precision).
TAPER = [
    (-3.7, 0.1, 0.0, 3.1),
    (-0.2, 0.3, -0.1, 2.7),
    (4.1, 1.3, 0.2, 2.65),
    (9.7, -1.2, 0.5, 2.2),
    (15.0, 0.0, 2.0, 2.0),
    (21.3, 1.1, 2.2, 1.3),
    (26.0, 0.9, 1.7, 1.05),
    (30.3, 0.0, 0.0, 0.9),
]
# Points exactly at the boundaries of 3 compartments (arc 10 and 20), and a
# diameter step (two points at one place, the annulus between them).
BOUNDARY = [
    (0.0, 0.0, 0.0, 2.0),
    (5.0, 0.0, 0.0, 1.5),
    (10.0, 0.0, 0.0, 1.0),
    (20.0, 0.0, 0.0, 3.0),
    (20.0, 0.0, 0.0, 1.0),
    (30.0, 0.0, 0.0, 1.25),
]
# A tip of zero diameter (NEURON allows it at the last point).
ZERO_TIP = [(0.0, 0.0, 0.0, 2.0), (7.0, 1.0, 0.0, 1.5), (12.0, 2.0, 1.0, 0.0)]
# Two points only: one frustum for the whole section.
CONE = [(0.0, 0.0, 0.0, 4.0), (0.0, 40.0, 30.0, 1.0)]
CASES = {"taper": TAPER, "boundary": BOUNDARY, "zero_tip": ZERO_TIP, "cone": CONE}
RA, CM = 123.4, 1.3


def one_section_cell(points, n):
    sec = so.Section("s", points=points, n_compartments=n)
    return so.Cell("c", [sec], axial_resistivity=RA, capacitance=CM)


def segment_ri(sec, ra):
    """Our `seg.ri()` for each compartment and `sec(1).ri()`, MΩ."""
    left, right = half_resistances(sec, ra)
    ri = np.concatenate([[left[0]], right[:-1] + left[1:]]) * 1e-6
    return ri, right[-1] * 1e-6


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.abs(b)))


@pytest.mark.neuron
@pytest.mark.parametrize("n", [1, 3, 7])
@pytest.mark.parametrize("case", sorted(CASES))
def test_area_and_ri_match_neuron(case, n):
    from neuron_reference import neuron_geometry

    cell = one_section_cell(CASES[case], n)
    sec = cell.sections[0]
    nrn = neuron_geometry([cell])["c", "s"]
    assert rel(sec.length, nrn["L"]) < 1e-13
    assert rel(compartment_areas(sec) * 1e8, nrn["area"]) < 1e-9
    ri, ri1 = segment_ri(sec, RA)
    assert rel(ri, nrn["ri"]) < 1e-9
    # The 1-end node; for a zero-diameter tip NEURON's guard value (~4e14 MΩ).
    assert rel(ri1, nrn["ri1"]) < 1e-9
    assert np.abs(compartment_diameters(sec) - nrn["diam"]).max() < 2e-9
    # `diameter` is the mean diameter along the arc: the mean of `seg.diam`.
    assert rel(sec.diameter, nrn["diam"].mean()) < 1e-9


@pytest.mark.neuron
def test_random_sections_match_neuron():
    """Random walks of 2-11 points (some repeated, some tips of zero diameter),
    1-9 compartments: every area, `ri()` and `seg.diam` as NEURON's."""
    from neuron_reference import neuron_geometry

    rng = np.random.default_rng(19)
    cells = []
    for i in range(60):
        npt = int(rng.integers(2, 12))
        xyz = rng.normal(size=(npt, 3)) * rng.uniform(0.1, 20.0)
        xyz = np.cumsum(xyz, axis=0) + rng.normal(size=3) * 50.0
        d = rng.uniform(0.05, 5.0, npt)
        if i % 5 == 0:
            d[-1] = 0.0
        if i % 7 == 0 and npt > 2:
            xyz[1] = xyz[2]
        points = np.column_stack([xyz, d]).tolist()
        n = int(rng.choice([1, 2, 3, 5, 9]))
        sec = so.Section("s", points=points, n_compartments=n)
        cells.append(so.Cell(f"c{i}", [sec], axial_resistivity=RA, capacitance=CM))
    nrn = neuron_geometry(cells)
    for cell in cells:
        sec, got = cell.sections[0], nrn[cell.name, "s"]
        ri, ri1 = segment_ri(sec, RA)
        assert rel(compartment_areas(sec) * 1e8, got["area"]) < 1e-9, cell.name
        assert rel(ri, got["ri"]) < 1e-9, cell.name
        if sec.points[-1][3] > 0:  # else NEURON's guard, rounding-dependent
            assert rel(ri1, got["ri1"]) < 1e-9, cell.name
        assert np.abs(compartment_diameters(sec) - got["diam"]).max() < 2e-9


def test_cone_by_hand():
    """One frustum, by formula: slant area and `4·Ra·l/(π·d1·d2)` per piece."""
    n = 4
    sec = so.Section("s", points=CONE, n_compartments=n)
    length = 50.0
    assert sec.length == length
    edges = np.linspace(0.0, length, 2 * n + 1)
    d = 4.0 + (1.0 - 4.0) * edges / length
    area = [
        math.pi
        / 2
        * (d[i] + d[i + 2])
        * math.hypot(2 * length / (2 * n), (d[i + 2] - d[i]) / 2)
        for i in range(0, 2 * n, 2)
    ]
    np.testing.assert_allclose(compartment_areas(sec) * 1e8, area, rtol=1e-12)
    left, right = half_resistances(sec, 100.0)
    r = [
        4 * 100.0 * (length / (2 * n)) * 1e-4 / (math.pi * d[i] * d[i + 1] * 1e-8)
        for i in range(2 * n)
    ]
    np.testing.assert_allclose(left, r[0::2], rtol=1e-12)
    np.testing.assert_allclose(right, r[1::2], rtol=1e-12)
    assert sec.diameter == pytest.approx(2.5, rel=1e-12)


def nrn_d_lambda(nrn, d_lambda):
    return int((nrn["L"] / (d_lambda * nrn["lambda_f"]) + 0.9) / 2) * 2 + 1


@pytest.mark.neuron
@pytest.mark.parametrize("frequency", [100.0, 2000.0])
def test_d_lambda_matches_neuron(frequency):
    from neuron_reference import neuron_geometry

    cells = [one_section_cell(CASES[c], 1) for c in sorted(CASES)]
    cells = [
        so.Cell(f"c{i}", c.sections, axial_resistivity=RA, capacitance=CM)
        for i, c in enumerate(cells)
    ]
    cylinder = so.Section("s", 400.0, 0.7)
    cells.append(so.Cell("cyl", [cylinder], axial_resistivity=RA, capacitance=CM))
    nrn = neuron_geometry(cells, define_shape=False, frequency=frequency)
    seen = set()
    for cell in cells:
        sec = cell.sections[0]
        for d_lambda in (0.1, 0.02, 0.005, 0.001):
            ours = n_compartments_d_lambda(sec, CM, RA, d_lambda, frequency)
            assert ours == nrn_d_lambda(nrn[cell.name, "s"], d_lambda), (
                cell.name,
                d_lambda,
            )
            seen.add(ours)
    assert len(seen) > 4  # the counts are not all 1
    # A cylinder's rule is the formula `load_swc` always used.
    lam = 1e5 * math.sqrt(0.7 / (4 * math.pi * frequency * RA * CM))
    assert (
        n_compartments_d_lambda(cylinder, CM, RA, 0.02, frequency)
        == int((400.0 / (0.02 * lam) + 0.9) / 2) * 2 + 1
    )


def test_d_lambda_of_a_taper_differs_from_its_mean_cylinder():
    """A section thick at one end and thin at the other is longer in units of its
    local length constant than the cylinder of its mean diameter."""
    pts = [(0.0, 0.0, 0.0, 8.0), (500.0, 0.0, 0.0, 8.0), (1000.0, 0.0, 0.0, 0.2)]
    sec = so.Section("s", points=pts)
    mean = so.Section("m", sec.length, sec.diameter)
    assert n_compartments_d_lambda(sec, 1.0, 100.0, 0.01) > n_compartments_d_lambda(
        mean, 1.0, 100.0, 0.01
    )


def branched_cell(mechanisms=()):
    """A soma of 3-D points; tapering children at soma(0.5) and soma(1), one
    hanging from the latter's 1 end (its 1-end node), and a cylinder at soma(0)."""
    sections = [
        so.Section(
            "soma",
            points=[
                (-8.0, 0.0, 0.0, 9.5),
                (0.0, 0.5, 0.0, 16.0),
                (8.0, 0.0, 0.0, 10.0),
            ],
        ),
        so.Section(
            "mid",
            points=[
                (0.0, 0.0, 0.0, 3.0),
                (0.0, 12.5, 0.1, 2.5),
                (0.3, 30.0, 0.0, 2.0),
                (0.0, 61.7, -2.0, 1.1),
            ],
            n_compartments=5,
            parent="soma",
            parent_position=0.5,
        ),
        so.Section(
            "end", points=TAPER, n_compartments=3, parent="soma", parent_position=1.0
        ),
        so.Section(
            "tip",
            points=[
                (30.3, 0.0, 0.0, 0.9),
                (60.0, 10.0, 0.0, 0.6),
                (95.0, 12.0, 0.0, 0.0),
            ],
            n_compartments=7,
            parent="end",
            parent_position=1.0,
        ),
        so.Section("axon", 50.0, 1.5, 3, "soma", 0.0),
    ]
    return so.Cell(
        "cell", sections, mechanisms, axial_resistivity=150.0, capacitance=1.0
    )


@pytest.mark.neuron
def test_branched_geometry_matches_neuron():
    from neuron_reference import neuron_geometry

    cell = branched_cell()
    nrn = neuron_geometry([cell])
    for sec in cell.sections:
        got = nrn["cell", sec.name]
        assert rel(compartment_areas(sec) * 1e8, got["area"]) < 1e-9, sec.name
        ri, ri1 = segment_ri(sec, cell.axial_resistivity)
        # `ri()` of a first segment is the child's own half (to its parent's node).
        assert rel(ri, got["ri"]) < 1e-9, sec.name
        assert rel(ri1, got["ri1"]) < 1e-9, sec.name


@pytest.mark.neuron
def test_input_resistance_matches_neuron():
    from neuron_reference import neuron_input_resistance

    cell = branched_cell([so.Insert(so.Passive(g=2e-4, e=-65.0))])
    model = so.build([cell])
    for site in (
        so.Site("cell", "soma", 0.5),
        so.Site("cell", "tip", 0.5),
        so.Site("cell", "mid", 0.7),
    ):
        r_nrn = neuron_input_resistance([cell], site)
        ours = passive_input_resistance(
            model, model.index(site.cell, site.section, site.position)
        )
        assert rel(ours, r_nrn) < 1e-9, site
    # The geometry matters: the same cell with each section one cylinder of its
    # length and mean diameter has another input resistance.
    flat = so.Cell(
        "cell",
        [
            so.Section(
                s.name,
                s.length,
                s.diameter,
                s.n_compartments,
                s.parent,
                s.parent_position,
            )
            for s in cell.sections
        ],
        cell.mechanisms,
        axial_resistivity=150.0,
    )
    flat_model = so.build([flat])
    i = model.index("cell", "tip", 0.5)
    flat_rin = passive_input_resistance(flat_model, i)
    assert abs(flat_rin / passive_input_resistance(model, i) - 1) > 1e-3


@pytest.mark.neuron
def test_branched_trace_matches_neuron():
    from neuron_reference import run_neuron

    cell = branched_cell(
        [
            so.Insert(so.HH(), ["soma", "mid"]),
            so.Insert(so.Passive(g=2e-4, e=-65.0), ["end", "tip", "axon"]),
        ]
    )
    stimuli = [so.StepCurrent(so.Site("cell", "soma", 0.5), 0.5, 1.0, 8.0)]
    recordings = [
        so.Recording(name, so.Site("cell", name, x))
        for name, x in (("soma", 0.5), ("mid", 0.9), ("tip", 0.9), ("axon", 0.5))
    ]
    model = so.build([cell], stimuli, recordings)
    dt, t_stop = 0.025, 10.0
    nrn = run_neuron([cell], stimuli, recordings, t_stop=t_stop, dt=dt, secondorder=0)
    ours = so.simulate(model, t_stop, dt, solver=so.BackwardEuler())
    assert float(np.max(nrn["v"]["soma"])) > 0.0  # it spikes
    for name, v_nrn in nrn["v"].items():
        v = np.asarray(ours.recordings[name])
        assert v.shape == v_nrn.shape
        assert np.abs(v - v_nrn).max() < 1e-6, name


def test_cylinders_keep_their_numbers():
    """A cell of cylinders is discretised with the formulas it always had."""
    ra = 100.0
    soma = so.Section("soma", 20.0, 17.3, 1)
    dend = so.Section("dend", 213.0, 1.1, 7, "soma", 1.0)
    side = so.Section("side", 55.5, 0.7, 3, "soma", 0.5)
    cell = so.Cell("c", [soma, dend, side], axial_resistivity=ra)
    _, area, _, _, edges, _ = discretise([cell])

    def a(s):
        return math.pi * s.diameter * (s.length / s.n_compartments) * 1e-8

    def g(s):
        return 1.0 / (
            ra
            * (s.length / (2 * s.n_compartments))
            * 1e-4
            / (math.pi * (s.diameter / 2) ** 2 * 1e-8)
        )

    assert area.tolist() == [a(soma)] + [a(dend)] * 7 + [a(side)] * 3
    expected = [(1 + k, 2 + k, g(dend) / 2) for k in range(6)]
    expected += [(8, 9, g(side) / 2), (9, 10, g(side) / 2), (0, 8, g(side))]
    expected += [(0, 1, g(soma) * g(dend) / (g(soma) + g(dend)))]
    assert sorted(edges) == sorted(expected)
    assert soma.points is None


def test_points_sections_build_and_save(tmp_path):
    """A cell of 3-D points builds with NEURON's per-compartment geometry in the
    model, and `save_swc` writes it (each section as a cylinder of its length and
    mean diameter)."""
    cell = branched_cell([so.Insert(so.Passive())])
    model = so.build([cell])
    tip = cell.section("tip")
    i = model.index("cell", "tip", 0.0)
    np.testing.assert_array_equal(
        np.asarray(model.area)[i : i + 7], compartment_areas(tip)
    )
    np.testing.assert_array_equal(
        np.asarray(model.diameter)[i : i + 7], compartment_diameters(tip)
    )
    assert np.ptp(np.asarray(model.diameter)[i : i + 7]) > 0.3  # it tapers
    assert tip.points is not None and str(tip.points[0][0]) == "30.3"  # as given
    soma = so.Section("soma", points=[(0, 0, 0, 10.0), (10, 0, 0, 10.0)])
    dend = so.Section("dend_0", points=TAPER, n_compartments=3, parent="soma")
    kid = so.Section("dend_1", points=ZERO_TIP, parent="dend_0")
    other = so.Section("dend_2", points=CONE, parent="dend_0")
    so.save_swc(so.Cell("c", [soma, dend, kid, other]), tmp_path / "c.swc")
    back = so.load_swc(tmp_path / "c.swc", n_compartments=1)
    for s in (dend, kid, other):
        assert back.section(s.name).length == pytest.approx(s.length, rel=1e-12)
        assert back.section(s.name).diameter == pytest.approx(s.diameter, rel=1e-12)
