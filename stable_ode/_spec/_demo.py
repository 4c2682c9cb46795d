"""The embedded default model of `python -m stable_ode demo`.

A ball-and-stick neuron: an HH soma and a passive 400 µm dendrite (41
compartments), driven by a 0.3 nA step current near the dendrite's tip, which
makes the soma fire a train of spikes. Same as the format's example
`ball_and_stick.json`.
"""

DEMO_MODEL = {
    "format": "stable_ode.model/1",
    "temperature": 6.3,
    "v_init": -65.0,
    "t_stop": 60.0,
    "cells": [
        {
            "name": "neuron",
            "axial_resistivity": 150.0,
            "capacitance": 1.0,
            "sections": [
                {"name": "soma", "length": 15.0, "diameter": 15.0, "n_compartments": 1},
                {
                    "name": "dend",
                    "length": 400.0,
                    "diameter": 1.5,
                    "n_compartments": 41,
                    "parent": "soma",
                    "parent_position": 1.0,
                },
            ],
            "mechanisms": [
                {"name": "hh", "sections": ["soma"]},
                {
                    "name": "pas",
                    "sections": ["dend"],
                    "params": {"g": 5e-5, "e": -65.0},
                },
            ],
        }
    ],
    "synapses": [],
    "stimuli": [
        {
            "kind": "step",
            "cell": "neuron",
            "section": "dend",
            "position": 0.9,
            "amplitude": 0.3,
            "delay": 5.0,
            "duration": 50.0,
        }
    ],
    "record": [
        {"name": "soma", "cell": "neuron", "section": "soma", "position": 0.5},
        {"name": "dend_mid", "cell": "neuron", "section": "dend", "position": 0.5},
    ],
    "integration": {
        "solver": "backward_euler",
        "dt": 0.025,
        "dtype": "float64",
        "controller": None,
    },
}
