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

import stable_ode as so
from stable_ode._spec import make_controller, resolve_solver, SpecError


MODELS = Path(__file__).parent / "data" / "models"
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
    assert hh.sections == ("soma", "dend")
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


def _set(path, value):
    def edit(raw):
        *head, last = path
        node = raw
        for k in head:
            node = node[k]
        node[last] = value

    return edit


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
        _set((*SEC, 0, "length"), "20"),
        "cells[0].sections[0].length",
        "must be a number, got string '20'",
    ),
    (
        "bool not number",
        _set(("stimuli", 0, "amplitude"), True),
        "stimuli[0].amplitude",
        "must be a number",
    ),
    (
        "list not table",
        _set(("integration",), [0.025]),
        "integration",
        "must be a table",
    ),
    (
        "negative length",
        _set((*SEC, 1, "length"), -5),
        "cells[0].sections[1].length",
        "must be > 0, got -5",
    ),
    (
        "zero diameter",
        _set((*SEC, 0, "diameter"), 0.0),
        "cells[0].sections[0].diameter",
        "must be > 0",
    ),
    (
        "fractional n_compartments",
        _set((*SEC, 1, "n_compartments"), 2.5),
        "cells[0].sections[1].n_compartments",
        "positive integer",
    ),
    (
        "zero n_compartments",
        _set((*SEC, 1, "n_compartments"), 0),
        "cells[0].sections[1].n_compartments",
        "positive integer",
    ),
    (
        "unknown mechanism",
        _set(("cells", 0, "mechanisms", 0, "name"), "HH"),
        "cells[0].mechanisms[0].name",
        "unknown mechanism 'HH' (did you mean 'hh'?)",
    ),
    (
        "bad user mechanism",
        _set(("cells", 0, "mechanisms", 0, "name"), "stable_ode:Site"),
        "cells[0].mechanisms[0].name",
        "not a subclass of stable_ode.AbstractMechanism",
    ),
    (
        "missing user module",
        _set(("cells", 0, "mechanisms", 0, "name"), "no_such_mod:X"),
        "cells[0].mechanisms[0].name",
        "no_such_mod",
    ),
    (
        "unknown param",
        _set(("cells", 0, "mechanisms", 1, "params", "gg"), 1e-4),
        "cells[0].mechanisms[1].params.gg",
        "unknown parameter of 'pas'",
    ),
    (
        "unknown section in mechanism",
        _set(("cells", 0, "mechanisms", 1, "sections"), ["dendrite"]),
        "cells[0].mechanisms[1].sections[0]",
        "unknown section 'dendrite'",
    ),
    (
        "unknown section in stimulus",
        _set(("stimuli", 0, "section"), "axon"),
        "stimuli[0].section",
        "unknown section 'axon'",
    ),
    (
        "unknown section in record",
        _set(("record", 1, "section"), "axon"),
        "record[1].section",
        "unknown section 'axon'",
    ),
    (
        "unknown cell in record",
        _set(("record", 0, "cell"), "d"),
        "record[0].cell",
        "unknown cell 'd'",
    ),
    (
        "unknown parent",
        _set((*SEC, 1, "parent"), "som"),
        "cells[0].sections[1].parent",
        "parent 'som' is not a section",
    ),
    ("cycle", _cycle, "cells[0].sections[2].parent", "cycle: a -> b -> a"),
    (
        "self parent",
        _set((*SEC, 1, "parent"), "dend"),
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
        _set((*SEC, 1, "name"), "soma"),
        "cells[0].sections[1].name",
        "duplicate section name 'soma'",
    ),
    ("unknown key", _set(("tstop",), 5.0), "tstop", "did you mean 't_stop'"),
    (
        "unknown nested key",
        _set((*SEC, 0, "lenght"), 5.0),
        "cells[0].sections[0].lenght",
        "unknown key (did you mean 'length'?)",
    ),
    (
        "bad position",
        _set(("stimuli", 0, "position"), 1.5),
        "stimuli[0].position",
        "must be in [0, 1], got 1.5",
    ),
    (
        "bad parent_position",
        _set((*SEC, 1, "parent_position"), -0.1),
        "cells[0].sections[1].parent_position",
        "must be in [0, 1]",
    ),
    (
        "unknown solver",
        _set(("integration", "solver"), "rk4"),
        "integration.solver",
        "unknown solver 'rk4'",
    ),
    (
        "bad dtype",
        _set(("integration", "dtype"), "float16"),
        "integration.dtype",
        "'float32' or 'float64'",
    ),
    (
        "bad format",
        _set(("format",), "stable_ode.model/2"),
        "format",
        "must be 'stable_ode.model/1'",
    ),
    ("missing format", _del(("format",)), "format", "missing"),
    (
        "dt off grid",
        _set(("integration", "dt"), 0.3),
        "integration.dt",
        "whole number of steps",
    ),
    (
        "save_dt off grid",
        _set(("integration", "save_dt"), 0.03),
        "integration.save_dt",
        "whole multiple of dt",
    ),
    (
        "unknown controller",
        _set(("integration", "controller"), {"kind": "p"}),
        "integration.controller.kind",
        "unknown controller kind 'p'",
    ),
    (
        "controller missing rtol",
        _set(("integration", "controller"), {"kind": "pid", "atol": 1e-3}),
        "integration.controller.rtol",
        "missing",
    ),
    (
        "controller negative atol",
        _set(("integration", "controller"), {"kind": "pid", "rtol": 1e-3, "atol": -1}),
        "integration.controller.atol",
        "must be > 0",
    ),
    (
        "synapses",
        _append(("synapses",), {"kind": "exp2syn"}),
        "synapses",
        "synapses are not supported yet",
    ),
    (
        "swc",
        _set(("cells", 0, "swc"), "cell.swc"),
        "cells[0]",
        "exactly one of 'sections' and 'swc'",
    ),
    (
        "duplicate recording",
        _set(("record", 1, "name"), "soma"),
        "record[1].name",
        "duplicate recording name 'soma'",
    ),
    (
        "reserved recording",
        _set(("record", 1, "name"), "t"),
        "record[1].name",
        "reserved",
    ),
    (
        "unknown stimulus kind",
        _set(("stimuli", 0, "kind"), "ramp"),
        "stimuli[0].kind",
        "unknown stimulus kind 'ramp'",
    ),
    (
        "negative delay",
        _set(("stimuli", 0, "delay"), -1.0),
        "stimuli[0].delay",
        "must be >= 0",
    ),
    ("nan", _set(("v_init",), float("nan")), "v_init", "must be finite"),
    ("no cells", _set(("cells",), []), "cells", "at least one cell"),
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


def test_swc_is_resolved_from_model_file(tmp_path):
    raw = _base()
    del raw["cells"][0]["sections"]
    raw["cells"][0]["swc"] = "morph/cell.swc"
    raw["cells"][0]["mechanisms"] = []
    raw["stimuli"] = raw["record"] = []
    file = write(tmp_path, raw)
    with pytest.raises(SpecError, match="not supported yet") as info:
        so.load_spec(file)
    assert info.value.where == "cells[0].swc"
    assert str(tmp_path.resolve() / "morph" / "cell.swc") in str(info.value)


@pytest.mark.parametrize("position", [1.0, 0.5], ids=["end", "interior"])
def test_branched_cell_as_build_does(tmp_path, position):
    # Two children at one point of the soma: a branch. The loader builds exactly
    # what `stable_ode.build` builds, or surfaces its error with the file name.
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
    try:
        expected = so.build(
            [cell], [so.StepCurrent(site, 0.5, 1.0, 3.0)], [so.Recording("soma", site)]
        )
    except ValueError as e:
        with pytest.raises(SpecError) as info:
            so.load_spec(file)
        assert str(info.value) == f"{file}: cells: {e}"
    else:
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
