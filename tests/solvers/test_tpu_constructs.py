"""Float64 programs free of two things suspected of stopping XLA:TPU's compiler: a
bitcast of a float64 to a signed 64-bit integer (`clip_floor`; it aborted a shape
check on a TPU) and unsigned 32-bit arithmetic (JAX's searchsorted; not shown to
matter). Checked here in the lowered programs; the compiler itself runs only on a
TPU (`benchmarks/gpu.py`). What does stop it is `jnp.nextafter` in float64, which
diffrax calls in every solve: `check_backend` refuses float64 there up front."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import hh_compartment

import stable_ode as so
from stable_ode import _backend
from stable_ode._misc import search_sorted


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_search_sorted_is_searchsorted(dtype, side):
    rng = np.random.default_rng(0)
    search = jax.jit(lambda a, v: search_sorted(a, v, side))
    for n in [1, 2, 3, 7, 8, 64, 1001]:
        a = np.sort(rng.integers(0, 20, n)).astype(dtype)  # with repeats
        a[n - n // 4 :] = np.inf  # diffrax's padding of unused steps
        v = np.concatenate([a[np.isfinite(a)], np.arange(-1.0, 21.0, 0.5)])
        v = v.astype(dtype)
        got = np.asarray(search(jnp.asarray(a), jnp.asarray(v)))
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, np.searchsorted(a, v, side=side))
        scalar = np.asarray(search(jnp.asarray(a), jnp.asarray(v[0])))
        assert scalar.shape == () and scalar == np.searchsorted(a, v[0], side)
    empty = search(jnp.zeros(0, dtype), jnp.asarray([1.0, 2.0], dtype))
    np.testing.assert_array_equal(empty, [0, 0])


def _lowered(fn, *args) -> str:
    return jax.jit(fn).lower(*args).as_text()


def test_float64_solves_lower_without_rejected_constructs():
    model = hh_compartment(dtype=jnp.float64)

    def plain(m):  # the plain scan (clip_floor)
        return so.simulate(m, 5.0, 0.025).recordings["soma"]

    def loss(g, m):  # the safe grid solve, checkpointed (search_sorted)
        hh = lambda m: m.mechanisms[0].mechanism.gnabar  # noqa: E731
        m = eqx.tree_at(hh, m, jnp.full_like(hh(m), g))
        sim = so.simulate(m, 5.0, 0.025, adjoint=so.Checkpointing())
        return jnp.mean(sim.recordings["soma"])

    texts = [_lowered(plain, model), _lowered(jax.grad(loss), 0.12, model)]
    assert "bitcast_convert" in texts[0]  # clip_floor is there, unsigned
    for text in texts:
        _no_rejected_construct(text)


def _no_rejected_construct(text: str) -> None:
    assert not re.search(r"tensor<[0-9x]*ui32>", text)
    assert not re.search(r"\(tensor<f64>\) -> tensor<i64>", text)


def test_float64_event_solve_lowers_without_rejected_constructs():
    # Arrival windows (spike-time sources) search sorted times every step.
    site = so.Site("c", "soma", 0.5)
    syn = so.Exp2Syn(site, tau1=0.5, tau2=3.0, e=0.0, name="syn")
    model = so.build(
        [so.Cell("c", [so.Section("soma", 20.0, 20.0, 1)], [so.Insert(so.HH())])],
        point_processes=[syn],
        netcons=[so.NetCon(so.SpikeTimes([1.0, 2.5]), syn, delay=0.5, weight=0.004)],
        recordings=[so.Recording("v", site)],
        dtype=jnp.float64,
    )
    text = _lowered(lambda m: so.simulate(m, 5.0, 0.025).recordings["v"], model)
    assert "while" in text
    _no_rejected_construct(text)


def test_float64_refused_where_nextafter_does_not_compile(monkeypatch):
    # As on a TPU: one clear error before anything is traced, not XLA's.
    monkeypatch.setattr(_backend, "_platform", lambda: "tpu")
    monkeypatch.setattr(_backend, "_nextafter_compiles", lambda *a: False)
    model = hh_compartment(dtype=jnp.float64)
    with pytest.raises(NotImplementedError, match="float64 model .* tpu backend"):
        so.simulate(model, 5.0, 0.025)
    _backend.check_backend(jnp.float32)  # float32 passes


def test_backend_check_on_the_cpu(monkeypatch):
    # The probe compiles on the CPU, but the CPU is never probed.
    assert _backend._nextafter_compiles("cpu", "float64")
    assert _backend._platform() == "cpu"
    with jax.default_device(jax.devices("cpu")[0]):
        assert _backend._platform() == "cpu"

    def fail(*args):
        raise AssertionError("probed on the CPU")

    monkeypatch.setattr(_backend, "_nextafter_compiles", fail)
    _backend.check_backend(jnp.float64)
