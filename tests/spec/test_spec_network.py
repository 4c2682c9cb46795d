"""Model files: networks and synapses, as the Python API builds them, and run
from the command line."""

import json

import numpy as np
import pytest
from spec_helpers import MODELS, same

import stable_ode as so
from stable_ode._spec import SpecError


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
