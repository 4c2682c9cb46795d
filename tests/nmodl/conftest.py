"""Fixtures of the NMODL importer's tests: NEURON's own `.mod` files (from the
installed wheel, never copied here), this folder's own small `.mod` files, and
NEURON compiling them once per session."""

import pathlib

import pytest


def neuron_share() -> pathlib.Path:
    import importlib.util

    spec = importlib.util.find_spec("neuron")
    return pathlib.Path(spec.origin).parent / ".data" / "share"


MODFILE = neuron_share() / "modfile"
DEMO = neuron_share() / "nrn" / "demo" / "release"
OWN = pathlib.Path(__file__).parent / "mod"


@pytest.fixture(scope="session")
def nrn_compiled(neuron_mechanisms):
    """NEURON with every test `.mod` file loaded: the suite's one compiled set
    (`tests/conftest.py::neuron_mechanisms`)."""
    return neuron_mechanisms
