"""What the model-file tests share: the data folder, the tiny model, the ball and
stick of `ball_and_stick.json` in the Python API, and small helpers."""

import json
from pathlib import Path

import equinox as eqx
import jax.numpy as jnp
import pytest

import stable_ode as so
from stable_ode._spec import SpecError


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


def load_fails(file, where: str, fragment: str) -> SpecError:
    """`so.load_spec(file)` raises a `SpecError` whose message starts with `file:
    where: ` and contains `fragment`; returns the error."""
    with pytest.raises(SpecError) as info:
        so.load_spec(file)
    message = str(info.value)
    assert message.startswith(f"{file}: {where}: "), message
    assert fragment in message, message
    return info.value
