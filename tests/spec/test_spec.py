"""Model files: loading JSON/TOML into the same objects as the Python API, and one
clear error (file + key path) for every kind of broken file."""

import copy
import json
from pathlib import Path

import diffrax as dfx
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import set_key

import stable_ode as so
from stable_ode._spec import make_controller, resolve_solver, SpecError


MODELS = Path(__file__).parents[1] / "data" / "models"
TINY = json.loads((MODELS / "tiny.json").read_text())


def ball_and_stick_api(dtype=jnp.float64):
    """`ball_and_stick.json` written with the Python API."""
    cell = so.Cell(
        "neuron",
        [
            so.Section("soma", 15.0, 15.0, 1),
            so.Section("dend", 400.0, 1.5, 41, parent="soma", parent_position=1.0),
        ],
        [
            so.Insert(so.HH(), ["soma"]),
            so.Insert(so.Passive(g=5e-5, e=-65.0), ["dend"]),
        ],
        axial_resistivity=150.0,
        capacitance=1.0,
    )
    return so.build(
        [cell],
        [so.StepCurrent(so.Site("neuron", "dend", 0.9), 0.3, 5.0, 50.0)],
        [
            so.Recording("soma", so.Site("neuron", "soma", 0.5)),
            so.Recording("dend_mid", so.Site("neuron", "dend", 0.5)),
        ],
        celsius=6.3,
        v_init=-65.0,
        dtype=dtype,
    )


def same(a, b) -> bool:
    """Same structure (static fields included) and exactly equal arrays."""
    return bool(eqx.tree_equal(a, b))


def write(tmp_path, raw, name="broken.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(raw))
    return str(path)


# ---------------------------------------------------------------------------
# Loading


def test_json_example_matches_python_api():
    loaded = so.load_spec(MODELS / "ball_and_stick.json")
    assert isinstance(loaded, so.LoadedModel)
    expected = ball_and_stick_api()
    assert same(loaded.model, expected)
    assert loaded.model.layout == expected.layout
    assert loaded.model.dtype == jnp.float64
    assert isinstance(loaded.solver, so.BackwardEuler)
    assert loaded.controller is None
    assert (loaded.t_stop, loaded.dt, loaded.save_dt) == (60.0, 0.025, 0.025)
    assert loaded.file.endswith("ball_and_stick.json")


def test_toml_equals_json():
    from_json = so.load_spec(MODELS / "ball_and_stick.json")
    from_toml = so.load_spec(str(MODELS / "ball_and_stick.toml"))
    assert same(from_json.model, from_toml.model)
    assert from_toml.spec.cells == from_json.spec.cells
    assert from_toml.spec.stimuli == from_json.spec.stimuli
    assert from_toml.spec.record == from_json.spec.record
    assert from_toml.spec.integration == from_json.spec.integration


def test_mapping_source_and_defaults():
    raw = copy.deepcopy(TINY)
    del raw["cells"][0]["mechanisms"][0]["sections"]  # hh everywhere
    loaded = so.load_spec(raw, name="inline")
    assert loaded.file == "inline"
    hh, pas = loaded.model.mechanisms
    # Omitted sections: every compartment; omitted params: NEURON's defaults.
    assert np.array_equal(hh.index, np.arange(4))
    assert hh.sections == (("c", "soma"), ("c", "dend"))
    default = so.HH()
    for name in ("gnabar", "gkbar", "gl", "ena", "ek", "el"):
        assert np.all(np.asarray(getattr(hh.mechanism, name)) == getattr(default, name))
    assert np.all(np.asarray(pas.mechanism.g) == 1e-4)
    # Omitted top-level settings: 6.3 °C, -65 mV, backward Euler, save_dt = dt.
    assert float(loaded.model.celsius) == 6.3
    assert np.all(np.asarray(loaded.model.v_init) == -65.0)
    assert loaded.save_dt == loaded.dt == 0.025


def test_float32_model():
    raw = copy.deepcopy(TINY)
    raw["integration"]["dtype"] = "float32"
    loaded = so.load_spec(raw)
    assert loaded.model.dtype == jnp.float32
    assert loaded.model.area.dtype == jnp.float32


def test_user_mechanism_next_to_model_file():
    loaded = so.load_spec(MODELS / "user_mechanism.json")
    (group,) = loaded.model.mechanisms
    assert type(group.mechanism).__name__ == "Leak"
    assert np.all(np.asarray(group.mechanism.g) == 2e-4)
    # An importable module path works the same way, with defaults for params.
    raw = json.loads((MODELS / "user_mechanism.json").read_text())
    raw["cells"][0]["mechanisms"][0] = {"name": "stable_ode.mechanisms:Passive"}
    (group,) = so.load_spec(raw).model.mechanisms
    assert isinstance(group.mechanism, so.Passive)
    assert np.all(np.asarray(group.mechanism.e) == so.Passive().e)


def test_simulate_uses_file_settings():
    raw = copy.deepcopy(TINY)
    raw["t_stop"] = 2.0
    raw["integration"] = {
        "solver": "exponential_euler",
        "dt": 0.05,
        "save_dt": 0.5,
        "controller": {"kind": "pid", "rtol": 1e-3, "atol": 1e-3, "dtmax": 0.5},
    }
    loaded = so.load_spec(raw)
    assert isinstance(loaded.solver, so.ExponentialEuler)
    assert isinstance(loaded.controller, dfx.PIDController)
    sim = loaded.simulate()
    ref = so.simulate(
        loaded.model,
        2.0,
        0.05,
        solver=so.ExponentialEuler(),
        controller=dfx.PIDController(rtol=1e-3, atol=1e-3, dtmax=0.5),
        save_dt=0.5,
    )
    assert np.allclose(sim.ts, np.arange(5) * 0.5)
    assert same(sim.recordings, ref.recordings)
    assert int(sim.stats["num_steps"]) == int(ref.stats["num_steps"])


def test_make_controller():
    assert make_controller(None) is None
    c = make_controller({"kind": "pid", "rtol": 1e-4, "atol": 1e-3, "dtmin": 1e-6})
    assert isinstance(c, dfx.PIDController)
    assert (c.rtol, c.atol, c.dtmin, c.dtmax) == (1e-4, 1e-3, 1e-6, None)
    with pytest.raises(ValueError, match="unknown controller kind 'i'"):
        make_controller({"kind": "i", "rtol": 1e-4, "atol": 1e-3})
    with pytest.raises(ValueError, match="needs keys"):
        make_controller({"kind": "pid", "rtol": 1e-4})


def test_solver_registry():
    assert resolve_solver("crank_nicolson") is so.CrankNicolson
    assert resolve_solver("Kvaerno5") is dfx.Kvaerno5
    with pytest.raises(LookupError, match="did you mean 'backward_euler'"):
        resolve_solver("backward_eular")
    with pytest.raises(LookupError, match="abstract"):
        resolve_solver("AbstractERK")
    with pytest.raises(LookupError, match="unknown solver 'Section'"):
        resolve_solver("Section")


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
    with pytest.raises(SpecError) as info:
        so.load_spec(file)
    message = str(info.value)
    assert message.startswith(f"{file}: {where}: "), message
    assert fragment in message, message
    assert "\n" not in message
    assert (info.value.file, info.value.where) == (file, where)


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
    with pytest.raises(SpecError) as info:
        so.load_spec(file)
    message = str(info.value)
    assert message.startswith(f"{file}: {where}: "), message
    assert fragment in message, message
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


def network_api():
    """`network.json` written with the Python API."""
    cells = [
        so.Cell(n, [so.Section("soma", 20.0, 20.0, 1)], [so.Insert(so.HH())])
        for n in "abc"
    ]

    def soma(n):
        return so.Site(n, "soma", 0.5)

    connections = [
        so.Connections(
            so.IonotropicSynapse(
                gmax=np.array([0.002, 0.001]),
                e_syn=np.array([0.0, -80.0]),
                k_minus=np.array([0.025, 0.05]),
            ),
            [soma("a"), soma("b")],
            [soma("b"), soma("c")],
            name="ionotropic",
        ),
        so.Connections(so.IonotropicSynapse(), [soma("c")], [soma("a")], "ionotropic"),
        so.Connections(so.GapJunction(g=0.0005), [soma("a")], [soma("c")]),
    ]
    return so.build(
        cells,
        [so.StepCurrent(soma("a"), 0.5, 0.5, 3.0)],
        [so.Recording(n, soma(n)) for n in "abc"],
        connections,
    )


def test_network_file_matches_python_api():
    loaded = so.load_spec(MODELS / "network.json")
    expected = network_api()
    assert same(loaded.model, expected)
    # Entries with the same kind and parameter names form one vectorised group.
    first, second = loaded.model.synapses
    assert (first.name, second.name) == ("ionotropic", "ionotropic")
    assert np.array_equal(first.synapse.gmax, [0.002, 0.001])
    assert np.array_equal(first.synapse.delta, [10.0, 10.0])  # the default
    assert np.array_equal(first.pre, [0, 1]) and np.array_equal(first.post, [1, 2])
    assert np.array_equal(second.synapse.gmax, [so.IonotropicSynapse().gmax])
    # Without the gap junction the model differs (it is an axial-like edge).
    raw = json.loads((MODELS / "network.json").read_text())
    raw["synapses"] = raw["synapses"][:3]
    assert not same(so.load_spec(raw).model, expected)


def test_network_cli_run(tmp_path):
    from stable_ode import _cli

    out = tmp_path / "out.npz"
    assert _cli.main(["run", str(MODELS / "network.json"), "-o", str(out)]) == 0
    data = np.load(out)
    assert {"t", "a", "b", "c", "stats"} <= set(data.files)
    assert json.loads(str(data["stats"]))["num_steps"] == 200
    # Only a is stimulated: b fires through the excitatory synapse a -> b; c is
    # inhibited by b and never fires.
    assert float(data["a"].max()) > 0.0
    assert float(data["b"].max()) > 0.0
    assert float(data["c"].max()) < -50.0
    # The run equals the Python API's model simulated with the file's settings.
    ref = so.simulate(network_api(), 5.0, 0.025, solver=so.BackwardEuler())
    for name in "abc":
        np.testing.assert_allclose(data[name], ref.recordings[name], rtol=0, atol=1e-9)


def test_user_synapse_class_next_to_model_file(tmp_path):
    raw = json.loads((MODELS / "network.json").read_text())
    raw["synapses"] = [
        {
            "kind": "my_synapse:FixedTau",
            "pre": {"cell": "a", "section": "soma"},
            "post": {"cell": "b", "section": "soma"},
            "params": {"tau": 2.0},
        }
    ]
    (group,) = so.load_spec(raw, name=str(MODELS / "inline.json")).model.synapses
    assert group.name == "my_synapse:FixedTau"
    assert type(group.synapse).__name__ == "FixedTau"
    assert np.array_equal(group.synapse.tau, [2.0])
    raw["synapses"][0]["params"] = {"taus": 2.0}
    with pytest.raises(SpecError, match="did you mean 'tau'"):
        so.load_spec(raw, name=str(MODELS / "inline.json"))


def test_many_synapses_are_one_group_at_the_right_compartments():
    rng = np.random.default_rng(0)
    cells = [
        {
            "name": f"n{i}",
            "sections": [
                {"name": "soma", "length": 10.0, "diameter": 10.0, "n_compartments": 2},
                {
                    "name": "dend",
                    "length": 50.0,
                    "diameter": 1.0,
                    "n_compartments": 1 + i % 4,
                    "parent": "soma",
                },
            ],
        }
        for i in range(10)
    ]
    n = 200
    pre_cell, post_cell = rng.integers(0, 10, n), rng.integers(0, 10, n)
    pre_sec = rng.choice(["soma", "dend"], n)
    post_sec = rng.choice(["soma", "dend"], n)
    pre_x, post_x = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    gmax = rng.uniform(0, 1e-3, n)
    synapses = [
        {
            "kind": "ionotropic",
            "pre": {
                "cell": f"n{pre_cell[k]}",
                "section": str(pre_sec[k]),
                "position": float(pre_x[k]),
            },
            "post": {
                "cell": f"n{post_cell[k]}",
                "section": str(post_sec[k]),
                "position": float(post_x[k]),
            },
            "params": {"gmax": float(gmax[k])},
        }
        for k in range(n)
    ]
    raw = {
        "format": "stable_ode.model/1",
        "t_stop": 1.0,
        "cells": cells,
        "synapses": synapses,
        "integration": {"dt": 0.1},
    }
    model = so.load_spec(raw).model
    (group,) = model.synapses
    assert group.pre.shape == group.post.shape == group.synapse.gmax.shape == (n,)
    assert np.array_equal(group.synapse.gmax, gmax)
    expected_pre = [
        model.index(f"n{pre_cell[k]}", pre_sec[k], pre_x[k]) for k in range(n)
    ]
    expected_post = [
        model.index(f"n{post_cell[k]}", post_sec[k], post_x[k]) for k in range(n)
    ]
    assert np.array_equal(group.pre, expected_pre)
    assert np.array_equal(group.post, expected_post)
