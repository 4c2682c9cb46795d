"""`read_morphology` against NEURON's own `Import3d`, section by section.

Each file is loaded once by NEURON (`Import3d_SWC_read` / `Import3d_Neurolucida3`,
then `Import3d_GUI(reader, 0).instantiate(None)`), its sections read out and deleted
before the next file, so names never collide.
"""

import pathlib

import numpy as np
import pytest

from stable_ode.morphology._import3d import define_shape, point_sites, read_morphology


DATA = pathlib.Path(__file__).parent.parent / "data" / "morphologies"
SWC = [
    "i3d_one_point_soma.swc",
    "i3d_three_point_soma.swc",
    "i3d_three_point_cylinder.swc",
    "i3d_soma_stack.swc",
    "i3d_branched_soma.swc",
    "i3d_branching.swc",
    "variable_radii.swc",
    "ca1_n120.swc",
]
ASC = ["i3d_contour.asc", "i3d_contour_stack.asc", "tc_jy160728_A_idA.asc"]
FILES = SWC + ASC


def _neuron_read(h, path: pathlib.Path):
    if path.suffix == ".swc":
        reader = h.Import3d_SWC_read()
    else:
        reader = h.Import3d_Neurolucida3()
    reader.quiet = 1
    reader.input(str(path))
    before = set(h.allsec())
    h.Import3d_GUI(reader, 0).instantiate(None)
    made = [s for s in h.allsec() if s not in before]
    secs = {}
    for s in made:
        p = s.parentseg()
        n = s.n3d()
        secs[s.name()] = dict(
            points=np.array(
                [[s.x3d(i), s.y3d(i), s.z3d(i), s.diam3d(i)] for i in range(n)]
            ),
            arc=np.array([s.arc3d(i) for i in range(n)]),
            parent=None if p is None else p.sec.name(),
            x=None if p is None else p.x,
        )
    for s in made:
        h.delete_section(sec=s)
    return secs


@pytest.fixture(scope="module")
def neuron_sections(tmp_path_factory):
    from neuron import h

    h.load_file("stdlib.hoc")
    h.load_file("import3d.hoc")
    out = {}
    tmp = tmp_path_factory.mktemp("import3d")
    for name in FILES:
        path = DATA / name
        if name == "i3d_branching.swc":
            # NEURON 9.0.2's Import3d_SWC_read fails on ids out of file order (its
            # check_pid sort is broken); give it the lines in id order, which is
            # what that sort means to do.
            rows = [r for r in path.read_text().splitlines() if not r.startswith("#")]
            rows.sort(key=lambda r: int(r.split()[0]))
            path = tmp / name
            path.write_text("\n".join(rows) + "\n")
        out[name] = _neuron_read(h, path)
    return out


@pytest.fixture(scope="module")
def ours():
    return {name: read_morphology(DATA / name) for name in FILES}


@pytest.mark.neuron
@pytest.mark.parametrize("name", FILES)
def test_sections_as_neuron(name, ours, neuron_sections):
    nrn = neuron_sections[name]
    mine = ours[name]
    assert [s.name for s in mine] != []
    assert sorted(s.name for s in mine) == sorted(nrn)
    for sec in mine:
        ref = nrn[sec.name]
        assert sec.parent == ref["parent"], sec.name
        if sec.parent is not None:
            assert sec.parent_position == ref["x"], sec.name
        assert sec.points.shape == ref["points"].shape, sec.name
        assert len(sec.point_ids) == len(sec.points)
        # NEURON stores pt3d as float32 of the "%.8g" text Import3d executes
        err = np.abs(sec.neuron_points.astype(np.float64) - ref["points"]).max()
        assert err <= 1e-9, (sec.name, err)
        # and the doubles we give are that close before NEURON's rounding
        scale = np.maximum(np.abs(ref["points"]), 1.0)
        assert np.all(np.abs(sec.points - ref["points"]) <= 1e-6 * scale), sec.name


_SHAPE_SCRIPT = """
import json, sys
from neuron import h
h.load_file("stdlib.hoc")
h.load_file("import3d.hoc")
out = {}
for path in sys.argv[1:]:
    r = h.Import3d_SWC_read() if path.endswith(".swc") else h.Import3d_Neurolucida3()
    r.quiet = 1
    r.input(path)
    h.Import3d_GUI(r, 0).instantiate(None)
    h.define_shape()
    out[path] = {s.name(): [[s.x3d(i), s.y3d(i), s.z3d(i)] for i in range(s.n3d())]
                 for s in h.allsec()}
    for s in list(h.allsec()):
        h.delete_section(sec=s)
print("JSON" + json.dumps(out))
"""


@pytest.mark.neuron
def test_define_shape_as_neuron(tmp_path):
    """`define_shape` moves sections as NEURON's does (run in a fresh NEURON, as
    `h.define_shape()` acts on every section of the process)."""
    import json
    import subprocess
    import sys

    sorted_swc = tmp_path / "i3d_branching.swc"  # in id order, see above
    rows = (DATA / "i3d_branching.swc").read_text().splitlines()
    rows = sorted(
        (r for r in rows if not r.startswith("#")), key=lambda r: int(r.split()[0])
    )
    sorted_swc.write_text("\n".join(rows) + "\n")
    paths = [str(sorted_swc), str(DATA / "i3d_branched_soma.swc")]
    paths += [str(DATA / name) for name in ASC]
    proc = subprocess.run(
        [sys.executable, "-c", _SHAPE_SCRIPT, *paths],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    ref = json.loads(proc.stdout.split("JSON", 1)[1])
    moved_any = False
    for path in paths:
        sections = read_morphology(path)
        for before, sec in zip(sections, define_shape(sections)):
            theirs = np.asarray(ref[path][sec.name])
            # NEURON translates in float32: a few ulps of the coordinates
            tol = 4 * float(np.spacing(np.float32(np.abs(theirs).max())))
            assert np.abs(sec.points[:, :3] - theirs).max() <= tol, (path, sec.name)
            moved_any |= not np.array_equal(before.points, sec.points)
    assert moved_any


def _swc_rows(path):
    rows = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].split()
        if line:
            rows[int(line[0])] = [float(v) for v in line[2:6]]
    return rows


@pytest.mark.neuron
@pytest.mark.parametrize("name", SWC)
def test_point_ids_swc(name, ours, neuron_sections):
    """Each SWC id's site is the NEURON section and arc position holding it."""
    nrn = neuron_sections[name]
    rows = _swc_rows(DATA / name)
    sites = point_sites(ours[name])
    ids = sorted(rows)
    sample = ids if len(ids) < 60 else ids[:: max(1, len(ids) // 150)]
    checked = 0
    for pid in sample:
        sec_name, x = sites[pid]
        sec = next(s for s in ours[name] if s.name == sec_name)
        if pid not in sec.point_ids:
            continue
        k = sec.point_ids.index(pid)
        ref = nrn[sec_name]
        x_, y_, z_, r_ = rows[pid]
        assert np.array_equal(ref["points"][k, :3], np.float32([x_, y_, z_])), pid
        # arc positions: NEURON's, from float32 points
        assert abs(ref["arc"][k] / ref["arc"][-1] - x) <= 1e-6, pid
        checked += 1
    assert checked >= min(len(sample), 10) - 2
    # every file point has a site; those that are no pt3d point: the ends of
    # NeuroMorpho's 3-point soma at its middle, a dropped zero-length section's
    # points where it attached
    assert set(sites) == set(ids)
    others = {pid: (s.name, x) for s in ours[name] for pid, x in s.other_points}
    expected = {
        "i3d_three_point_soma.swc": {2: ("soma[0]", 0.5), 3: ("soma[0]", 0.5)},
        "i3d_branching.swc": {21: ("dend[3]", 1.0)},
    }
    assert others == expected.get(name, {})


@pytest.mark.neuron
def test_point_ids_asc(ours, neuron_sections):
    """`.asc` ids count soma-contour and tree points in file order; check them
    against the points morphio reads (float32) from the same file."""
    import morphio

    name = "tc_jy160728_A_idA.asc"
    m = morphio.Morphology(str(DATA / name), options=morphio.Option.no_duplicates)
    pts = [m.soma.points] + [s.points for s in m.iter()]
    file_points = np.concatenate(pts).astype(np.float64)
    sites = point_sites(ours[name])
    nsoma = len(m.soma.points)
    assert len(file_points) == nsoma + sum(
        sum(1 for i in s.point_ids if i >= 0) for s in ours[name][1:]
    )
    assert set(sites) == set(range(len(file_points)))
    assert all(sites[pid] == ("soma[0]", 0.5) for pid in range(nsoma))
    nrn = neuron_sections[name]
    for pid in range(nsoma, len(file_points), 97):
        sec_name, x = sites[pid]
        sec = next(s for s in ours[name] if s.name == sec_name)
        k = sec.point_ids.index(pid)
        assert np.array_equal(
            nrn[sec_name]["points"][k, :3].astype(np.float32),
            file_points[pid].astype(np.float32),
        ), pid
        assert abs(nrn[sec_name]["arc"][k] / nrn[sec_name]["arc"][-1] - x) <= 1e-6


def test_asc_trees_match_morphio(ours):
    """Cross-check of the parser: every tree section holds the points morphio
    reads (morphio keeps float32 and drops the copied parent points)."""
    import morphio

    name = "tc_jy160728_A_idA.asc"
    m = morphio.Morphology(str(DATA / name), options=morphio.Option.no_duplicates)
    trees = [s for s in ours[name] if s.swc_type != 1]
    theirs = list(m.iter())
    assert len(trees) == len(theirs)
    for sec, ref in zip(trees, theirs):
        own = sec.points[[i for i, p in enumerate(sec.point_ids) if p >= 0]]
        assert own.shape[0] == len(ref.points), sec.name
        assert np.array_equal(own[:, :3].astype(np.float32), ref.points)
        assert np.array_equal(own[:, 3].astype(np.float32), ref.diameters)
        assert int(ref.type) == sec.swc_type


def test_conventions(ours):
    """The rules by name, on the hand-written files (NEURON agrees above)."""
    one = {s.name: s for s in ours["i3d_one_point_soma.swc"]}
    soma = one["soma[0]"]
    assert np.array_equal(soma.points[:, 0], [-6.0, 0.0, 6.0])  # L = diam = 12
    assert np.all(soma.points[:, 3] == 12.0)
    dend = one["dend[0]"]  # a wire from the soma's centre, not membrane
    assert dend.parent_position == 0.5 and dend.logical_connection == (0, 0, 0)
    assert dend.point_ids == (2, 3, 4)
    single = one["dend[3]"]  # a one-point neurite keeps the copied soma point
    assert single.point_ids == (-1, 13) and single.logical_connection is None
    assert single.points[0, 3] == single.points[1, 3]  # with its own diameter
    stack = {s.name: s for s in ours["i3d_soma_stack.swc"]}
    assert stack["apic[0]"].parent_position == 1.0
    assert stack["dend[0]"].parent_position == 0.5
    assert stack["axon[0]"].parent_position == 0.0
    branching = {s.name: s for s in ours["i3d_branching.swc"]}
    assert branching["apic[0]"].parent == "dend[0]"  # type change ends a run
    assert branching["dend[2]"].parent_position == 0.0  # at dend[0]'s first point
    assert "dend_7[0]" in branching
    assert branching["dend[5]"].parent == "dend[3]"  # zero-length dend dropped
