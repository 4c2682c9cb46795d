"""Fixtures of the NMODL importer's tests: NEURON's own `.mod` files (from the
installed wheel, never copied here), this folder's own small `.mod` files, and
NEURON compiling them once per session."""

import pathlib

import numpy as np
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


def run_fixed(h, vecs, secs, keep, t1, dt, celsius=6.3):
    """NEURON's fixed step (`secondorder = 0`, no CVODE) at `celsius` °C from
    `finitialize(-65)` for `t1` ms at `dt`: the recorded `vecs` as arrays. Then
    the point processes in `keep` are released and the sections `secs` deleted."""
    h.CVode().active(0)
    h.celsius, h.dt, h.secondorder = celsius, dt, 0
    h.finitialize(-65.0)
    for _ in range(round(t1 / dt)):
        h.fadvance()
    out = {k: np.array(v) for k, v in vecs.items()}
    keep.clear()
    for sec in secs:
        h.delete_section(sec=sec)
    return out
