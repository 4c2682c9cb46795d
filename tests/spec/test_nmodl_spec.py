"""The model file's `nmodl` key: NEURON's demo channels (read from its wheel,
never copied here) inserted by their `SUFFIX`, with their NMODL parameter
names; one clear error at `nmodl[i]` for each kind of bad entry."""

import copy
import json
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest
from spec_helpers import TINY

import stable_ode as so
from stable_ode._spec import SpecError


pytest.importorskip("neuron")


def _release() -> pathlib.Path:
    import importlib.util

    origin = pathlib.Path(importlib.util.find_spec("neuron").origin)
    return origin.parent / ".data" / "share" / "nrn" / "demo" / "release"


def _model(nmodl, mechanisms):
    raw = copy.deepcopy(TINY)
    raw["nmodl"] = nmodl
    raw["cells"][0]["mechanisms"] = mechanisms
    return raw


CHANNELS = [
    {"name": "HHna", "sections": ["soma"], "params": {"gnabar": 0.1}},
    {"name": "HHk", "sections": ["soma"], "params": {"gkbar": 0.03}},
    {"name": "pas", "sections": ["soma", "dend"], "params": {"g": 1e-4, "e": -65.0}},
]


def test_nmodl_mechanisms_from_a_model_file_equal_the_python_api(tmp_path):
    release = _release()
    raw = _model([str(release / "nachan.mod"), str(release / "khhchan.mod")], CHANNELS)
    path = tmp_path / "model.json"
    path.write_text(json.dumps(raw))
    loaded = so.load_spec(path)
    ours = so.simulate(loaded.model, 5.0, 0.025).recordings["soma"]

    mechs = so.load_nmodl([release / "nachan.mod", release / "khhchan.mod"])
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 20.0),
            so.Section("dend", 60.0, 1.0, 3, parent="soma"),
        ],
        [
            so.Insert(mechs["HHna"](gnabar=0.1), ["soma"]),
            so.Insert(mechs["HHk"](gkbar=0.03), ["soma"]),
            so.Insert(so.Passive(g=1e-4, e=-65.0)),
        ],
        axial_resistivity=100.0,
    )
    site = so.Site("c", "soma")
    model = so.build(
        [cell],
        [so.StepCurrent(site, 0.5, 1.0, 3.0)],
        [so.Recording("soma", site)],
        dtype=jnp.float64,
    )
    expected = so.simulate(model, 5.0, 0.025).recordings["soma"]
    assert float(jnp.max(ours)) > 0  # it spikes
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(expected))


def _error(tmp_path, raw) -> str:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(SpecError) as e:
        so.load_spec(path)
    return str(e.value)


def test_missing_nmodl_path_is_an_error_at_its_entry(tmp_path):
    msg = _error(tmp_path, _model(["mechanisms/"], CHANNELS[2:]))
    assert "nmodl[0]" in msg and "no such file or folder" in msg


def test_unsupported_construct_names_entry_file_line_and_construct(tmp_path):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "bad.mod").write_text(
        "NEURON { SUFFIX bad }\nVERBATIM\nint x;\nENDVERBATIM\n"
    )
    msg = _error(tmp_path, _model(["mods"], CHANNELS[2:]))
    assert "nmodl[0]" in msg and "bad.mod:2" in msg and "VERBATIM" in msg


def test_suffix_of_a_built_in_mechanism_is_an_error(tmp_path):
    (tmp_path / "pas.mod").write_text(
        "NEURON { SUFFIX pas NONSPECIFIC_CURRENT i RANGE g }\n"
        "PARAMETER { g = 0.001 (S/cm2) }\nASSIGNED { v (mV) i (mA/cm2) }\n"
        "BREAKPOINT { i = g*(v + 70) }\n"
    )
    msg = _error(tmp_path, _model(["pas.mod"], CHANNELS[2:]))
    assert "nmodl[0]" in msg and "'pas'" in msg and "built-in" in msg


def test_unknown_parameter_lists_the_nmodl_names(tmp_path):
    release = _release()
    bad = [{"name": "HHk", "params": {"gbar": 0.03}}]
    msg = _error(tmp_path, _model([str(release / "khhchan.mod")], bad))
    assert "cells[0].mechanisms[0].params.gbar" in msg and "gkbar" in msg
