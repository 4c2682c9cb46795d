"""Fixtures of the NMODL importer's tests: NEURON's own `.mod` files (from the
installed wheel, never copied here), this folder's own small `.mod` files, and
NEURON compiling them once per session."""

import pathlib

import numpy as np
import pytest

from stable_ode.nmodl import load_nmodl, NmodlError


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


def run_cvode(h, t1, events=(), refs=None, dt=None):
    """NEURON's CVODE (rtol = atol = 1e-10, hh's rate tables off, 6.3 °C,
    `condition_order(2)`: threshold crossings interpolated within its step)
    from -65 mV to `t1` ms, with NetCon events `(netcon, time)` queued after
    `finitialize`; fixed steps again afterwards. With `refs` (name ->
    NEURON pointer, `sec(0.5)._ref_v`), their values at every multiple of
    `dt` (CVODE's own interpolation, `CVode.solve` to each): `{name: array}`."""
    cv = h.CVode()
    h.usetable_hh, h.celsius = 0, 6.3
    cv.active(1)
    cv.rtol(1e-10)
    cv.atol(1e-10)
    order = cv.condition_order()
    cv.condition_order(2)
    h.finitialize(-65.0)
    for nc, t in events:
        nc.event(t)
    out = None
    if refs is None:
        cv.solve(t1)
    else:
        rows = [[r[0] for r in refs.values()]]
        for k in range(1, round(t1 / dt) + 1):
            cv.solve(k * dt)
            rows.append([r[0] for r in refs.values()])
        out = dict(zip(refs, np.array(rows).T))
    cv.condition_order(order)
    cv.active(0)
    return out


def assert_load_error(path, text, construct, line, words):
    """Writing `text` to `path` and loading it is one `NmodlError` naming
    `construct` at `line`, whose message holds `words`."""
    path.write_text(text)
    with pytest.raises(NmodlError) as e:
        load_nmodl(path)
    assert (e.value.construct, e.value.line) == (construct, line), str(e.value)
    assert words in str(e.value)
