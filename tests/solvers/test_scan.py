"""The plain fixed-step run's `lax.scan` (`_stepping/scan.py`) takes diffeqsolve's
steps with a `StepTo` grid, bit for bit, clipping of the last step ends included."""

import diffrax as dfx
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import hh_cable

import stable_ode as so
import stable_ode._stepping.scan as scan_module
from stable_ode._stepping._base import Recorder
from stable_ode._stepping.scan import chunk_size, clip_floor, grid_scan
from stable_ode._term import MembraneTerm


def _chain(t):
    for _ in range(100):
        t = eqxi.prevbefore(t)
    return t


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_floor_is_diffrax_chain_bit_for_bit(dtype):
    fi = np.finfo(dtype)
    values = [20.0, 1e4, 0.025, 0.0, -1.0, -20.0, 1e-30, fi.max, np.inf, -np.inf]
    values += [fi.tiny, fi.tiny * (1 + 99 * fi.eps), fi.tiny * (1 + 150 * fi.eps)]
    values += [fi.smallest_subnormal, 3 * fi.smallest_subnormal]
    x = jnp.asarray(np.array(values, dtype))
    want = np.asarray(jax.jit(jax.vmap(_chain))(x))
    got = np.asarray(jax.jit(jax.vmap(clip_floor))(x))
    assert want.tobytes() == got.tobytes(), (values, want, got)
    # Unbatched, the `cond` takes one branch (under `vmap`, both and a select).
    one = jax.jit(clip_floor)
    got = np.array([one(v) for v in x])
    assert want.tobytes() == got.tobytes(), (values, want, got)


def _both(model, grid, solver):
    recorder = Recorder.of(model)
    y0 = model.init_state()

    @eqx.filter_jit
    def diffrax_run(model, y0):
        sol = dfx.diffeqsolve(
            MembraneTerm(model),
            solver,
            grid[0],
            grid[-1],
            None,
            y0,
            saveat=dfx.SaveAt(
                subs=[
                    dfx.SubSaveAt(t0=True, steps=True, fn=recorder),
                    dfx.SubSaveAt(t1=True),
                ]
            ),
            stepsize_controller=dfx.StepTo(grid),
            max_steps=len(grid) - 1,
        )
        saved, final = sol.ys
        return saved, jax.tree_util.tree_map(lambda x: x[0], final)

    @eqx.filter_jit
    def scan_run(model, y0):
        saved, final, result = grid_scan(
            MembraneTerm(model), solver, grid, y0, None, recorder
        )
        return saved, final, result

    want = diffrax_run(model, y0)
    got_saved, got_final, result = scan_run(model, y0)
    assert result == dfx.RESULTS.successful
    np.testing.assert_array_equal(np.asarray(got_saved), np.asarray(want[0]))
    for a, b in zip(jax.tree.leaves(got_final), jax.tree.leaves(want[1])):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_scan_takes_diffeqsolves_steps_where_the_last_ends_are_clipped():
    """float32 at t = 10 s with dt = 0.025 ms: the grid's last steps end within
    100 ulp of t1, where diffeqsolve ends them at t1 (its last step then has
    length 0); the scan does the same, bit for bit."""
    with jax.enable_x64(False):
        model = hh_cable(n=3, dtype=jnp.float32)
        t1 = np.float32(10_000.0)
        grid = t1 - np.float32(0.025) * np.arange(40, -1, -1, dtype=np.float32)
        grid[-1] = t1
        floor = np.asarray(clip_floor(jnp.asarray(t1)))
        assert (grid[1:-1] > floor).any()  # the case is what it says
        _both(model, jnp.asarray(grid), so.BackwardEuler())


def test_scan_takes_diffeqsolves_steps_on_a_plain_grid():
    model = hh_cable(n=3)
    grid = 0.025 * np.arange(81)
    _both(model, jnp.asarray(grid), so.CrankNicolson())


def test_scan_in_chunks_takes_diffeqsolves_steps(monkeypatch):
    """A carry over `SMALL_CARRY_BYTES` (a 12-compartment cable): the 80 steps
    run as a scan over chunks of 20 (the largest divisor of 80 whose saved
    rows fit in `CHUNK_BYTES`), bit for bit diffeqsolve's steps."""
    sizes = []
    chunked = scan_module._chunked_scan

    def spy(step, init, xs, size):
        sizes.append(size)
        return chunked(step, init, xs, size)

    monkeypatch.setattr(scan_module, "_chunked_scan", spy)
    model = hh_cable(n=12)
    _both(model, jnp.asarray(0.025 * np.arange(81)), so.BackwardEuler())
    assert sizes == [20]


def test_chunk_size():
    # 2,000 steps saving 3 float64 values: chunks of 20 (480 bytes each)
    assert chunk_size(2000, 24, 1000) == 20
    assert chunk_size(2000, 8, 1000) == 50  # the largest divisor up to 64
    assert chunk_size(2000, 8, 100) is None  # one compartment: one flat scan
    assert chunk_size(997, 8, 1000) is None  # a prime number of steps
    assert chunk_size(2000, 600, 1000) is None  # a row over 512 bytes
    assert chunk_size(40, 8, 1000) is None  # all the steps fit in one chunk
