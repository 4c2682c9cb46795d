"""`load_morphology` against NEURON's own `Import3d`: geometry, nseg by d_lambda,
section lists, distance-valued parameters, per-section cm/Ra and distance-valued
cm (per segment) and Ra (per section), input resistance, a backward-Euler trace,
and point sites.

NEURON loads each file once (module-scoped), does what a NEURON user would do
(`Ra`, `cm`, per-list properties, `for seg in sec` loops over `h.distance` on
`Import3d`'s one segment per section, `geom_nseg`'s d_lambda rule, the loops
again on the final segments), reads everything out and deletes its sections.
"""

import math
import pathlib

import numpy as np
import pytest
from helpers import passive_input_resistance

import stable_ode as so
from stable_ode.morphology._geometry import compartment_areas, half_resistances


DATA = pathlib.Path(__file__).parent.parent / "data" / "morphologies"
CA1 = DATA / "ca1_n120.swc"
ASC = DATA / "tc_jy160728_A_idA.asc"
SMALL = [  # the hand-written files, one per soma convention of Import3d
    DATA / name
    for name in (
        "i3d_one_point_soma.swc",
        "i3d_three_point_soma.swc",
        "i3d_three_point_cylinder.swc",
        "i3d_soma_stack.swc",
        "i3d_branched_soma.swc",
        "i3d_contour.asc",
        "i3d_contour_stack.asc",
    )
]
RA, CM = 120.0, 1.0
APICAL_RA, BASAL_CM = 180.0, 2.0
G_PAS = "where(x < 150, 1e-4, 5e-5*(1 + exp(-(x - 150)/80)))"
CM_APICAL = "1 + 0.5*(1 - exp(-x/150))"  # per segment (seg.cm)
RA_BASAL = "100 + 0.4*x"  # per section, at its centre (sec.Ra)


def cm_apical(x):
    return 1 + 0.5 * (1 - np.exp(-x / 150))


def ra_basal(x):
    return 100 + 0.4 * x


def g_pas(x):
    return np.where(x < 150, 1e-4, 5e-5 * (1 + np.exp(-(x - 150) / 80)))


def properties():
    return [
        so.Properties(["apical"], axial_resistivity=APICAL_RA),
        so.Properties(["basal"], capacitance=BASAL_CM),
        so.Properties(["apical"], capacitance=so.Distance(CM_APICAL)),
        so.Properties(["basal"], axial_resistivity=so.Distance(RA_BASAL)),
    ]


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.abs(b)))


def _neuron_cell(h, path: pathlib.Path, run: bool):
    reader = (
        h.Import3d_SWC_read() if path.suffix == ".swc" else h.Import3d_Neurolucida3()
    )
    reader.quiet = 1
    reader.input(str(path))
    before = set(h.allsec())
    h.Import3d_GUI(reader, 0).instantiate(None)
    made = [s for s in h.allsec() if s not in before]
    try:
        for s in made:
            s.Ra, s.cm = RA, CM
            if s.name().startswith("apic"):
                s.Ra = APICAL_RA
            if s.name().startswith("dend["):
                s.cm = BASAL_CM
        soma = next(s for s in made if s.name() == "soma[0]")

        def gradients():
            for s in made:
                if s.name().startswith("apic"):
                    for seg in s:
                        seg.cm = float(cm_apical(h.distance(soma(0.5), seg)))
                if s.name().startswith("dend["):
                    s.Ra = float(ra_basal(h.distance(soma(0.5), s(0.5))))

        gradients()  # on Import3d's one segment per section
        for s in made:  # geom_nseg (stdlib.hoc), d_lambda 0.1 at 100 Hz
            s.nseg = int((s.L / (0.1 * h.lambda_f(100, sec=s)) + 0.9) / 2) * 2 + 1
        gradients()  # on the final segments
        out = {"nseg": {}, "area": {}, "ri": {}, "distance": {}, "cm": {}, "Ra": {}}
        for s in made:
            s.insert("pas")
            n = s.name()
            out["nseg"][n] = s.nseg
            out["area"][n] = np.array([seg.area() for seg in s])
            out["ri"][n] = np.array([seg.ri() for seg in s])
            out["cm"][n] = np.array([seg.cm for seg in s])
            out["Ra"][n] = s.Ra
            d = np.array([h.distance(soma(0.5), seg) for seg in s])
            out["distance"][n] = d
            for seg, x in zip(s, d):
                seg.pas.g = float(g_pas(x))
                seg.pas.e = -65.0
        h.finitialize(-65.0)
        imp = h.Impedance()
        imp.loc(0.5, sec=soma)
        imp.compute(0)
        out["rin"] = imp.input(0.5, sec=soma)
        if run:
            for s in made:
                if s.name().startswith("soma"):  # Import3d's somatic list
                    s.insert("hh")
            clamp = h.IClamp(soma(0.5))
            clamp.delay, clamp.dur, clamp.amp = 0.5, 2.0, 3.0
            apic = next(s for s in made if s.name() == "apic[10]")
            vecs = {"soma": h.Vector(), "apic": h.Vector()}
            vecs["soma"].record(soma(0.5)._ref_v)
            vecs["apic"].record(apic(0.5)._ref_v)
            h.CVode().active(0)
            h.dt, h.secondorder, h.celsius, h.usetable_hh = 0.025, 0, 6.3, 0
            h.finitialize(-65.0)
            for _ in range(round(3.0 / 0.025)):
                h.fadvance()
            out["v"] = {k: np.array(v) for k, v in vecs.items()}
        return out
    finally:
        for s in made:
            h.delete_section(sec=s)


@pytest.fixture(scope="module")
def neuron_cells():
    from neuron import h

    h.load_file("stdrun.hoc")
    h.load_file("import3d.hoc")
    out = {CA1.name: _neuron_cell(h, CA1, True), ASC.name: _neuron_cell(h, ASC, False)}
    out.update((p.name, _neuron_cell(h, p, False)) for p in SMALL)
    return out


def _ours(path, **kw):
    return so.load_morphology(
        path,
        name="c",
        axial_resistivity=RA,
        capacitance=CM,
        properties=properties(),
        mechanisms=[so.Insert(so.Passive(g=so.Distance(G_PAS), e=-65.0))],
        **kw,
    )


@pytest.mark.neuron
@pytest.mark.parametrize(
    "path", [CA1, ASC, *SMALL], ids=lambda p: p.stem if p in SMALL else p.suffix
)
def test_geometry_nseg_distance_and_input_resistance(neuron_cells, path):
    nrn = neuron_cells[path.name]
    cell = _ours(path)
    assert sorted(s.name for s in cell.sections) == sorted(nrn["nseg"])
    ra = so.morphology._regions.section_values(cell)[1]
    for s in cell.sections:
        n = s.name
        assert s.n_compartments == nrn["nseg"][n], n
        assert rel(compartment_areas(s) * 1e8, nrn["area"][n]) < 1e-9, n
        left, right = half_resistances(s, ra[n])
        ri = np.concatenate([[left[0]], right[:-1] + left[1:]]) * 1e-6
        # (the root's first ri() is NEURON's 1e30 guard: no parent node)
        k = 0 if s.parent is not None else 1
        assert rel(ri[k:], nrn["ri"][n][k:]) < 1e-9 if len(ri) > k else True, n
    # Distance-valued g_pas: one value per compartment, as NEURON's seg loop.
    (ins,) = cell.mechanisms
    g_nrn = np.concatenate([g_pas(nrn["distance"][s.name]) for s in cell.sections])
    assert np.abs(np.asarray(ins.mechanism.g) - g_nrn).max() < 1e-15
    # The distances themselves.
    d = so.morphology._regions.path_distances(cell.sections, "soma[0]")
    for s in cell.sections:
        assert np.abs(d[s.name] - nrn["distance"][s.name]).max() < 1e-9, s.name
    # cm per segment and Ra per section, plain and distance-valued, as NEURON's
    model = so.build([cell])
    cm_nrn = np.concatenate([nrn["cm"][s.name] for s in cell.sections])
    assert rel(model.capacitance, cm_nrn) < 1e-14
    assert path != CA1 or len(set(cm_nrn.tolist())) > 3  # the gradient is there
    assert path in SMALL or len({nrn["Ra"][s.name] for s in cell.sections}) > 3
    assert (
        rel(
            [ra[s.name] for s in cell.sections],
            [nrn["Ra"][s.name] for s in cell.sections],
        )
        < 1e-14
    )
    rin = passive_input_resistance(model, model.index("c", "soma[0]", 0.5))
    assert rel(rin, nrn["rin"]) < 1e-9


@pytest.mark.neuron
def test_trace_matches_neuron(neuron_cells):
    nrn = neuron_cells[CA1.name]
    cell = _ours(CA1)
    cell = so.Cell(
        cell.name,
        cell.sections,
        [*cell.mechanisms, so.Insert(so.HH(), ["somatic"])],
        cell.axial_resistivity,
        cell.capacitance,
        properties=cell.properties,
        morphology=cell.morphology,
    )
    model = so.build(
        [cell],
        [so.StepCurrent(so.Site("c", "soma[0]", 0.5), 3.0, 0.5, 2.0)],
        [
            so.Recording("soma", so.Site("c", "soma[0]", 0.5)),
            so.Recording("apic", so.Site("c", "apic[10]", 0.5)),
        ],
    )
    ours = so.simulate(model, 3.0, 0.025, solver=so.BackwardEuler())
    assert float(np.max(nrn["v"]["soma"])) > 0.0  # it spikes
    for name, v_nrn in nrn["v"].items():
        v = np.asarray(ours.recordings[name])
        assert v.shape == v_nrn.shape
        assert np.abs(v - v_nrn).max() < 1e-6, name


def test_point_sites_name_the_compartment_holding_the_point():
    cell = so.load_morphology(CA1, n_compartments=3)
    rows = [
        r.split()
        for r in CA1.read_text().splitlines()
        if r.strip() and not r.startswith("#")
    ]
    read = {s.name: s for s in so.read_morphology(CA1)}
    checked = 0
    for r in rows:
        pid = int(r[0])
        site = so.point_site(cell, pid)
        sec = read[site.section]
        if pid in sec.point_ids:  # a pt3d point: its arc position on the section
            k = sec.point_ids.index(pid)
            steps = np.linalg.norm(np.diff(sec.points[:, :3], axis=0), axis=1)
            arc = np.concatenate([[0.0], np.cumsum(steps)])
            assert math.isclose(site.position, arc[k] / arc[-1], abs_tol=1e-12)
            checked += 1
    assert checked > 100
    model = so.build([cell])
    first = so.point_site(cell, int(rows[0][0]))  # the soma's root point
    assert first.section == "soma[0]"
    assert model.index(cell.name, first.section, first.position) < 3


def test_regions_and_patterns():
    cell = so.load_morphology(
        CA1,
        n_compartments=1,
        mechanisms=[
            so.Insert(so.HH(), ["somatic", "axonal"]),
            so.Insert(so.Passive(), ["basal", "apic[1*"]),
        ],
    )
    types = dict(cell.morphology.types)
    hh, pas = cell.mechanisms
    ions = so.load_morphology(
        CA1,
        n_compartments=1,
        ions=[so.IonSetting("k", ["axonal", "soma*"], reversal=-80.0)],
        properties=[so.Properties(None, capacitance=0.9)],
    )
    (setting,) = ions.ions
    assert setting.sections == tuple(
        [n for n, t in types.items() if t == 2]
        + [n for n in types if n.startswith("soma")]
    )
    assert set(so.morphology._regions.section_values(ions)[0].values()) == {0.9}
    assert set(hh.sections) == {n for n, t in types.items() if t in (1, 2)}
    basal = [n for n, t in types.items() if t == 3]
    assert set(pas.sections) == set(basal) | {
        n for n in types if n.startswith("apic[1")
    }
    with pytest.raises(
        ValueError, match=r"mechanisms\[0\]\.sections\[0\].*'dend\[\*x'"
    ):
        so.load_morphology(
            CA1, n_compartments=1, mechanisms=[so.Insert(so.HH(), ["dend[*x"])]
        )
    with pytest.raises(ValueError, match=r"mechanisms\[0\]\.sections\[0\].*apikal"):
        so.load_morphology(
            CA1, n_compartments=1, mechanisms=[so.Insert(so.HH(), ["apikal"])]
        )


def test_errors():
    with pytest.raises(FileNotFoundError, match="no such morphology file"):
        so.load_morphology(DATA / "nope.swc")
    with pytest.raises(ValueError, match="n_compartments"):
        so.load_morphology(CA1, n_compartments=0)
    with pytest.raises(ValueError, match="d_lambda"):
        so.load_morphology(CA1, d_lambda=-1.0)
    cell = so.load_morphology(CA1, n_compartments=1)
    with pytest.raises(ValueError, match="not a point of"):
        so.point_site(cell, 10**6)
    plain = so.Cell("p", [so.Section("soma", 10.0, 10.0)])
    with pytest.raises(ValueError, match="not read from a morphology file"):
        so.point_site(plain, 1)
    with pytest.raises(ValueError, match=r"mechanisms\[0\]\.g.*not finite|finite"):
        so.load_morphology(
            CA1,
            n_compartments=1,
            mechanisms=[so.Insert(so.Passive(g=so.Distance("log(x - 1e9)")))],
        )
