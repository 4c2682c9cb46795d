"""Model files: one clear error (file + key path) for every kind of broken file."""

import copy

import pytest
from helpers import set_key
from spec_helpers import load_fails, same, TINY, write

import stable_ode as so
from stable_ode._spec import SpecError


# ---------------------------------------------------------------------------
# Broken files: one message naming the file and the key path.


def _del(path):
    def edit(raw):
        *head, last = path
        node = raw
        for k in head:
            node = node[k]
        del node[last]

    return edit


def _append(path, value):
    def edit(raw):
        node = raw
        for k in path:
            node = node[k]
        node.append(value)

    return edit


def _syn(**changes):
    """A valid synapse entry of the tiny model, with `changes`."""
    entry = {
        "kind": "ionotropic",
        "pre": {"cell": "c", "section": "soma"},
        "post": {"cell": "c", "section": "dend", "position": 0.9},
        "params": {"gmax": 1e-3},
    }
    entry.update(changes)
    return entry


def _cycle(raw):
    raw["cells"][0]["sections"] += [
        {"name": "a", "length": 1.0, "diameter": 1.0, "parent": "b"},
        {"name": "b", "length": 1.0, "diameter": 1.0, "parent": "a"},
    ]


SEC = ("cells", 0, "sections")
BROKEN = [
    # (id, edit, key path in the message, a fragment of the problem)
    (
        "missing key",
        _del((*SEC, 0, "length")),
        "cells[0].sections[0].length",
        "missing",
    ),
    ("missing top key", _del(("cells",)), "cells", "missing"),
    (
        "wrong type",
        set_key((*SEC, 0, "length"), "20"),
        "cells[0].sections[0].length",
        "must be a number, got string '20'",
    ),
    (
        "bool not number",
        set_key(("stimuli", 0, "amplitude"), True),
        "stimuli[0].amplitude",
        "must be a number",
    ),
    (
        "list not table",
        set_key(("integration",), [0.025]),
        "integration",
        "must be a table",
    ),
    (
        "negative length",
        set_key((*SEC, 1, "length"), -5),
        "cells[0].sections[1].length",
        "must be > 0, got -5",
    ),
    (
        "zero diameter",
        set_key((*SEC, 0, "diameter"), 0.0),
        "cells[0].sections[0].diameter",
        "must be > 0",
    ),
    (
        "fractional n_compartments",
        set_key((*SEC, 1, "n_compartments"), 2.5),
        "cells[0].sections[1].n_compartments",
        "positive integer",
    ),
    (
        "zero n_compartments",
        set_key((*SEC, 1, "n_compartments"), 0),
        "cells[0].sections[1].n_compartments",
        "positive integer",
    ),
    (
        "unknown mechanism",
        set_key(("cells", 0, "mechanisms", 0, "name"), "HH"),
        "cells[0].mechanisms[0].name",
        "unknown mechanism 'HH' (did you mean 'hh'?)",
    ),
    (
        "bad user mechanism",
        set_key(("cells", 0, "mechanisms", 0, "name"), "stable_ode:Site"),
        "cells[0].mechanisms[0].name",
        "not a subclass of stable_ode.AbstractMechanism",
    ),
    (
        "missing user module",
        set_key(("cells", 0, "mechanisms", 0, "name"), "no_such_mod:X"),
        "cells[0].mechanisms[0].name",
        "no_such_mod",
    ),
    (
        "unknown param",
        set_key(("cells", 0, "mechanisms", 1, "params", "gg"), 1e-4),
        "cells[0].mechanisms[1].params.gg",
        "unknown parameter of 'pas'",
    ),
    (
        "unknown section in mechanism",
        set_key(("cells", 0, "mechanisms", 1, "sections"), ["dendrite"]),
        "cells[0].mechanisms[1].sections[0]",
        "unknown section 'dendrite'",
    ),
    (
        "unknown section in stimulus",
        set_key(("stimuli", 0, "section"), "axon"),
        "stimuli[0].section",
        "unknown section 'axon'",
    ),
    (
        "unknown section in record",
        set_key(("record", 1, "section"), "axon"),
        "record[1].section",
        "unknown section 'axon'",
    ),
    (
        "unknown cell in record",
        set_key(("record", 0, "cell"), "d"),
        "record[0].cell",
        "unknown cell 'd'",
    ),
    (
        "unknown parent",
        set_key((*SEC, 1, "parent"), "som"),
        "cells[0].sections[1].parent",
        "parent 'som' is not a section",
    ),
    ("cycle", _cycle, "cells[0].sections[2].parent", "cycle: a -> b -> a"),
    (
        "self parent",
        set_key((*SEC, 1, "parent"), "dend"),
        "cells[0].sections[1].parent",
        "cycle: dend -> dend",
    ),
    (
        "two roots",
        _del((*SEC, 1, "parent")),
        "cells[0].sections",
        "exactly one root section",
    ),
    (
        "duplicate section",
        set_key((*SEC, 1, "name"), "soma"),
        "cells[0].sections[1].name",
        "duplicate section name 'soma'",
    ),
    ("unknown key", set_key(("tstop",), 5.0), "tstop", "did you mean 't_stop'"),
    (
        "unknown nested key",
        set_key((*SEC, 0, "lenght"), 5.0),
        "cells[0].sections[0].lenght",
        "unknown key (did you mean 'length'?)",
    ),
    (
        "bad position",
        set_key(("stimuli", 0, "position"), 1.5),
        "stimuli[0].position",
        "must be in [0, 1], got 1.5",
    ),
    (
        "bad parent_position",
        set_key((*SEC, 1, "parent_position"), -0.1),
        "cells[0].sections[1].parent_position",
        "must be in [0, 1]",
    ),
    (
        "unknown solver",
        set_key(("integration", "solver"), "rk4"),
        "integration.solver",
        "unknown solver 'rk4'",
    ),
    (
        "bad dtype",
        set_key(("integration", "dtype"), "float16"),
        "integration.dtype",
        "'float32' or 'float64'",
    ),
    (
        "bad format",
        set_key(("format",), "stable_ode.model/2"),
        "format",
        "must be 'stable_ode.model/1'",
    ),
    ("missing format", _del(("format",)), "format", "missing"),
    (
        "dt off grid",
        set_key(("integration", "dt"), 0.3),
        "integration.dt",
        "whole number of steps",
    ),
    (
        "save_dt off grid",
        set_key(("integration", "save_dt"), 0.03),
        "integration.save_dt",
        "whole multiple of dt",
    ),
    (
        "unknown controller",
        set_key(("integration", "controller"), {"kind": "p"}),
        "integration.controller.kind",
        "unknown controller kind 'p'",
    ),
    (
        "controller missing rtol",
        set_key(("integration", "controller"), {"kind": "pid", "atol": 1e-3}),
        "integration.controller.rtol",
        "missing",
    ),
    (
        "controller negative atol",
        set_key(
            ("integration", "controller"), {"kind": "pid", "rtol": 1e-3, "atol": -1}
        ),
        "integration.controller.atol",
        "must be > 0",
    ),
    (
        "swc",
        set_key(("cells", 0, "swc"), "cell.swc"),
        "cells[0]",
        "exactly one of 'sections' and 'swc'",
    ),
    (
        "duplicate recording",
        set_key(("record", 1, "name"), "soma"),
        "record[1].name",
        "duplicate recording name 'soma'",
    ),
    (
        "reserved recording",
        set_key(("record", 1, "name"), "t"),
        "record[1].name",
        "reserved",
    ),
    (
        "unknown stimulus kind",
        set_key(("stimuli", 0, "kind"), "ramp"),
        "stimuli[0].kind",
        "unknown stimulus kind 'ramp'",
    ),
    (
        "negative delay",
        set_key(("stimuli", 0, "delay"), -1.0),
        "stimuli[0].delay",
        "must be >= 0",
    ),
    ("nan", set_key(("v_init",), float("nan")), "v_init", "must be finite"),
    (
        "unknown synapse kind",
        _append(("synapses",), _syn(kind="exp2syn")),
        "synapses[0].kind",
        "unknown synapse kind 'exp2syn'",
    ),
    (
        "misspelt synapse kind",
        _append(("synapses",), _syn(kind="ionotropc")),
        "synapses[0].kind",
        "(did you mean 'ionotropic'?)",
    ),
    (
        "user synapse not a synapse",
        _append(("synapses",), _syn(kind="stable_ode:Site")),
        "synapses[0].kind",
        "not a subclass of stable_ode.AbstractSynapse",
    ),
    (
        "unknown synapse param",
        _append(("synapses",), _syn(params={"gmx": 1e-3})),
        "synapses[0].params.gmx",
        "unknown parameter of synapse kind 'ionotropic' (did you mean 'gmax'?)",
    ),
    (
        "gap junction param of ionotropic",
        _append(("synapses",), _syn(params={"g": 1e-3})),
        "synapses[0].params.g",
        "its parameters are delta, e_syn, gmax, k_minus, v_th",
    ),
    (
        "synapse param not a number",
        _append(("synapses",), _syn(params={"gmax": "1e-3"})),
        "synapses[0].params.gmax",
        "must be a number, got string",
    ),
    (
        "negative gmax",
        _append(("synapses",), _syn(params={"gmax": -1e-3})),
        "synapses[0].params.gmax",
        "must be >= 0.0, got -0.001",
    ),
    (
        "zero k_minus",
        _append(("synapses",), _syn(params={"k_minus": 0})),
        "synapses[0].params.k_minus",
        "must be > 0.0",
    ),
    (
        "negative gap junction",
        _append(("synapses",), _syn(kind="gap_junction", params={"g": -1.0})),
        "synapses[0].params.g",
        "must be >= 0.0",
    ),
    (
        "synapse unknown key",
        _append(("synapses",), {**_syn(), "weight": 1.0}),
        "synapses[0].weight",
        "unknown key",
    ),
    (
        "synapse missing post",
        _append(("synapses",), {k: v for k, v in _syn().items() if k != "post"}),
        "synapses[0].post",
        "required key is missing",
    ),
    (
        "synapse unknown cell",
        _append(("synapses",), _syn(post={"cell": "d", "section": "soma"})),
        "synapses[0].post.cell",
        "unknown cell 'd'",
    ),
    (
        "synapse unknown section",
        _append(("synapses",), _syn(pre={"cell": "c", "section": "axon"})),
        "synapses[0].pre.section",
        "unknown section 'axon'",
    ),
    (
        "synapse bad position",
        _append(
            ("synapses",), _syn(pre={"cell": "c", "section": "dend", "position": 2})
        ),
        "synapses[0].pre.position",
        "must be in [0, 1], got 2",
    ),
    (
        "synapse site unknown key",
        _append(("synapses",), _syn(pre={"cell": "c", "section": "dend", "x": 0.5})),
        "synapses[0].pre.x",
        "unknown key",
    ),
    (
        "synapse site not a table",
        _append(("synapses",), _syn(pre="c.soma")),
        "synapses[0].pre",
        "must be a table",
    ),
    (
        "gap junction to itself",
        _append(
            ("synapses",),
            _syn(
                kind="gap_junction",
                pre={"cell": "c", "section": "dend", "position": 0.4},
                post={"cell": "c", "section": "dend", "position": 0.5},
                params={},
            ),
        ),
        "synapses[0].post",
        "joins compartment 1 of c.dend to itself",
    ),
    (
        "synapses not a list",
        set_key(("synapses",), {"kind": "ionotropic"}),
        "synapses",
        "must be a list",
    ),
    (
        "swc_options without swc",
        set_key(("cells", 0, "swc_options"), {"soma": "single"}),
        "cells[0].swc_options",
        "only a cell read from an SWC file",
    ),
    ("no cells", set_key(("cells",), []), "cells", "at least one cell"),
]


def _base():
    raw = copy.deepcopy(TINY)
    raw["synapses"] = []
    raw["temperature"] = 6.3
    return raw


@pytest.mark.parametrize(
    "edit,where,fragment", [c[1:] for c in BROKEN], ids=[c[0] for c in BROKEN]
)
def test_broken_file(tmp_path, edit, where, fragment):
    raw = _base()
    edit(raw)
    file = write(tmp_path, raw)
    error = load_fails(file, where, fragment)
    assert "\n" not in str(error)
    assert (error.file, error.where) == (file, where)


def test_base_of_broken_files_is_valid(tmp_path):
    so.load_spec(write(tmp_path, _base(), "fine.json"))


@pytest.mark.parametrize("position", [1.0, 0.5, 0.0], ids=["end", "interior", "start"])
def test_branched_cell_as_build_does(tmp_path, position):
    # Two children at one point of the soma: a branch. The loader builds exactly
    # what `stable_ode.build` builds.
    raw = _base()
    raw["cells"][0]["sections"] = [
        {"name": "soma", "length": 20.0, "diameter": 20.0, "n_compartments": 3},
        {
            "name": "d1",
            "length": 50.0,
            "diameter": 1.0,
            "parent": "soma",
            "parent_position": position,
        },
        {
            "name": "d2",
            "length": 50.0,
            "diameter": 1.0,
            "parent": "soma",
            "parent_position": position,
        },
    ]
    raw["cells"][0]["mechanisms"] = [{"name": "hh"}]
    raw["record"] = [{"name": "soma", "cell": "c", "section": "soma"}]
    file = write(tmp_path, raw)
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 20.0, 3),
            so.Section("d1", 50.0, 1.0, 1, parent="soma", parent_position=position),
            so.Section("d2", 50.0, 1.0, 1, parent="soma", parent_position=position),
        ],
        [so.Insert(so.HH())],
        axial_resistivity=100.0,
    )
    site = so.Site("c", "soma", 0.5)
    expected = so.build(
        [cell], [so.StepCurrent(site, 0.5, 1.0, 3.0)], [so.Recording("soma", site)]
    )
    assert same(so.load_spec(file).model, expected)


def test_build_errors_name_the_file(tmp_path, monkeypatch):
    import stable_ode._spec._loader as loader

    def build(*args, **kwargs):
        raise ValueError("branched cells are not supported yet")

    monkeypatch.setattr(loader, "build", build)
    file = write(tmp_path, _base())
    with pytest.raises(SpecError) as info:
        so.load_spec(file)
    assert str(info.value) == f"{file}: cells: branched cells are not supported yet"


@pytest.mark.parametrize(
    "name,text,fragment",
    [
        ("bad.json", '{"format": "stable_ode.model/1",', "invalid JSON"),
        ("dup.json", '{"format": "a", "format": "b"}', "duplicate key 'format'"),
        ("bad.toml", 'format = "stable_ode.model/1"\nt_stop = \n', "invalid TOML"),
        ("model.yaml", "format: x", "unknown model file type '.yaml'"),
        ("list.json", "[1, 2]", "top level must be a table"),
    ],
)
def test_unparseable_file(tmp_path, name, text, fragment):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpecError, match=fragment) as info:
        so.load_spec(path)
    assert str(info.value).startswith(f"{path}: ")


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no such file") as info:
        so.load_spec(tmp_path / "nope.json")
    assert "nope.json" in str(info.value)
    assert isinstance(info.value, ValueError)
