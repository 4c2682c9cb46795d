"""Model files: loading JSON/TOML into the same objects as the Python API (the
broken files are `test_spec_broken.py`, trees, SWC files and networks
`test_spec_cells.py` and `test_spec_network.py`)."""

import copy
import json

import diffrax as dfx
import jax.numpy as jnp
import numpy as np
import pytest
from spec_helpers import ball_and_stick_api, MODELS, same, TINY

import stable_ode as so
from stable_ode._spec import make_controller, resolve_solver


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
