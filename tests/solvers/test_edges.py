"""CrankNicolson through stimulus edges: its default `tr_bdf2=True` (TR-BDF2
start-up steps, steps split at an edge inside them) keeps second order through
an on- and an off-grid edge, damps the stiff cable modes (no ringing) and beats
backward Euler, against the compartment equations' exact solution."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from helpers import finite_difference_grad, hh_cable

import stable_ode as so


DT = 0.025
T1 = 4.0
DURATION = 2.0
# The current switches on at 1 ms (on every grid) or 1 ms + DT/3 (off every
# grid DT/2**k: a third or two thirds into a step), and off DURATION later.
DELAYS = {"on_grid": 1.0, "off_grid": 1.0 + DT / 3}


def cable(delay, dtype=jnp.float64, n=41):
    """`n` compartments of a passive cable (1000 µm, 1 µm diameter), 0.1 nA into
    its 0 end from `delay` ms for `DURATION` ms."""
    cell = so.Cell(
        "c",
        [so.Section("s", 1000.0, 1.0, n)],
        [so.Insert(so.Passive(g=1e-4, e=-65.0))],
        axial_resistivity=100.0,
    )
    site = so.Site("c", "s", 0.0)
    return so.build([cell], [so.StepCurrent(site, 0.1, delay, DURATION)], dtype=dtype)


def exact(model, delay, times):
    """The compartment equations' exact solution (mV) at `times` (ms), piecewise
    by matrix exponential between the edges."""
    n = model.n_compartments
    lap = np.stack(
        [np.asarray(model.coupling.current(jnp.asarray(e))) for e in np.eye(n)], 1
    )
    mech = model.mechanisms[0].mechanism
    k = 1000 / np.asarray(model.capacitance)
    area = np.asarray(model.area)
    g, e = np.asarray(mech.g), np.asarray(mech.e)
    a = k[:, None] * (-np.diag(g) + lap / area[:, None])

    def rest(t):  # the steady state under the stimulus at time t
        c = k * (g * e + np.asarray(model.stimulus_density(t)))
        return -np.linalg.solve(a, c)

    pieces = [0.0, delay, delay + DURATION, np.inf]
    v = np.asarray(model.v_init, dtype=float)
    out, start = [], 0.0
    for lo, hi in zip(pieces, pieces[1:]):
        star = rest(0.5 * (lo + min(hi, T1 + 1)))
        for t in [t for t in times if lo <= t < hi]:
            out.append(scipy.linalg.expm(a * (t - lo)) @ (v - star) + star)
        if np.isfinite(hi):
            v = scipy.linalg.expm(a * (hi - lo)) @ (v - star) + star
        start = hi
    del start
    return np.stack(out)


def run(model, solver, dt):
    """Voltages (mV) on the grid of `DT`, `(time, compartment)`."""
    v = so.simulate(model, T1, dt, solver=solver).recordings["v"]
    return np.asarray(v)[:: round(DT / dt)]


@pytest.fixture(scope="module")
def references():
    times = np.arange(round(T1 / DT) + 1) * DT
    return {
        name: (cable(delay), exact(cable(delay), delay, times))
        for name, delay in DELAYS.items()
    }


CN = so.CrankNicolson()
# Rannacher's backward Euler start-up steps, the default before TR-BDF2.
RANNACHER = so.CrankNicolson(tr_bdf2=False)


@pytest.mark.parametrize("where", list(DELAYS))
def test_second_order_through_edges(references, where):
    """Errors at dt, dt/2, dt/4 fall by about 4 each, everywhere from 0.25 ms
    after each edge on. (Closer to an edge the voltage at the stimulated end
    rises as `sqrt(t - edge)` until the cable's finest modes have settled; no
    fixed step resolves that layer to second order in the maximum norm.)"""
    model, ref = references[where]
    delay = DELAYS[where]
    t = np.arange(ref.shape[0]) * DT
    away = ~(
        ((t >= delay) & (t < delay + 0.25))
        | ((t >= delay + DURATION) & (t < delay + DURATION + 0.25))
    )
    errors = []
    for k in (1, 2, 4):
        e = np.abs(run(model, CN, DT / k) - ref)
        errors.append(e[away].max())
    ratios = [a / b for a, b in zip(errors, errors[1:])]
    print(where, "errors", errors, "ratios", ratios)
    assert all(3.2 < r < 5.0 for r in ratios), (errors, ratios)


@pytest.mark.parametrize("where", list(DELAYS))
def test_beats_backward_euler_at_the_stimulus(references, where):
    """At dt 0.025 the largest error at the stimulated end is at most a third of
    backward Euler's (and of Rannacher's backward Euler start-up steps)."""
    model, ref = references[where]
    err = {
        name: np.abs(run(model, solver, DT)[:, 0] - ref[:, 0]).max()
        for name, solver in [
            ("be", so.BackwardEuler()),
            ("rannacher", RANNACHER),
            ("cn", CN),
        ]
    }
    print(where, err)
    assert err["cn"] * 3 < err["be"], err
    assert err["cn"] * 3 < err["rannacher"], err


def extrema(e):
    """The number of local extrema of the time series `e` (mV) whose neighbouring
    increments exceed 1e-4 mV: a ringing error has one per step."""
    d = np.diff(e)
    big = np.abs(d) > 1e-4
    return int(np.sum((d[1:] * d[:-1] < 0) & big[1:] & big[:-1]))


@pytest.fixture(scope="module")
def stiff_runs():
    """On a finer cable (101 compartments: stiff modes that plain Crank–Nicolson
    barely damps at dt 0.025), the exact solution and the runs at dt 0.025."""
    times = np.arange(round(T1 / DT) + 1) * DT
    out = {}
    for where, delay in DELAYS.items():
        model = cable(delay, n=101)
        out[where] = (
            exact(model, delay, times),
            {
                name: run(model, solver, DT)
                for name, solver in [
                    ("cn", CN),
                    ("plain", so.CrankNicolson(startup=False)),
                ]
            },
        )
    return out


@pytest.mark.parametrize("where", list(DELAYS))
def test_no_ringing_after_edges(stiff_runs, where):
    """In the 40 samples after the current switches on and after it switches off,
    the stimulated end moves monotonically with shrinking increments (as the
    exact solution) and its error neither changes sign nor zig-zags; plain
    Crank–Nicolson's does."""
    ref, runs = stiff_runs[where]
    for edge in (DELAYS[where], DELAYS[where] + DURATION):
        k = int(np.floor(edge / DT + 1e-9)) + 1  # the first sample after the edge
        window = slice(k, k + 40)
        v = runs["cn"][window, 0]
        step = np.diff(v) * np.sign(v[-1] - v[0])
        assert np.all(step > 0) and np.all(np.diff(step) <= 1e-12), edge
        e = v - ref[window, 0]
        assert np.all(np.sign(e) == np.sign(e[0])), edge
        plain = runs["plain"][window, 0] - ref[window, 0]
        print(where, edge, "extrema", extrema(e), "plain", extrema(plain))
        assert extrema(e) <= 3 and extrema(plain) >= 10, edge


def test_smooth_steps_are_unchanged():
    """Away from edges and the initial time a step is the θ = 1/2 step of
    `tr_bdf2=False`, bit for bit."""
    model = cable(DELAYS["on_grid"])
    term = so.MembraneTerm(model)
    y0 = so.State(v=model.v_init + 0.5 * jnp.arange(41.0) / 41, groups=({},))
    out = []
    for solver in (RANNACHER, CN):
        state = solver.init(term, 0.0, T1, y0, None)
        out.append(solver.step(term, 1.5, 1.5 + DT, y0, None, state, False)[:2])
    for a, b in zip(out[0], out[1]):
        np.testing.assert_array_equal(np.asarray(a.v), np.asarray(b.v))


@pytest.mark.parametrize("where", list(DELAYS))
def test_float32(references, where):
    """In float32 the run is finite and follows the float64 one."""
    model, ref = references[where]
    v32 = run(cable(DELAYS[where], jnp.float32), CN, DT)
    assert v32.dtype == np.float32 and np.all(np.isfinite(v32))
    np.testing.assert_allclose(v32, run(model, CN, DT), atol=1e-3)


def test_grad_wrt_amplitude_and_off_grid_delay():
    """The split step makes the run a smooth function of an off-grid edge's
    time: reverse-mode gradients with respect to the amplitude and the delay
    match central differences (float64). (Sampling the stimulus at the step's
    middle, as `tr_bdf2=False` does, gives no gradient with respect to the delay.)"""
    model = cable(DELAYS["off_grid"], n=11)

    def loss(x):
        amp, delay = x
        m = eqx.tree_at(
            lambda m: (m.stimuli.step_amplitude, m.stimuli.step_delay),
            model,
            (jnp.reshape(amp, (1,)), jnp.reshape(delay, (1,))),
        )
        v = so.simulate(m, 1.5, DT, solver=CN).recordings["v"]
        return jnp.mean(v[:, 0])

    x = jnp.asarray([0.1, DELAYS["off_grid"]])
    g = jax.jit(jax.grad(loss))(x)
    fd = finite_difference_grad(jax.jit(loss), x, eps=1e-7)
    print("grad", g, "fd", fd)
    assert g[1] < 0  # a later onset lowers the mean voltage
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_second_order_with_gates():
    """On an HH cable (gates split around the voltage step) the error through
    an on-grid current step and through the spikes it drives falls by about 4
    per halving of dt, against a run at dt/64, at both ends."""
    model = hh_cable(n=5, amplitude=0.3, delay=1.0, duration=2.0)

    def v(dt):
        rec = so.simulate(model, 5.0, dt, solver=CN).recordings
        out = np.stack([np.asarray(rec["start"]), np.asarray(rec["end"])], -1)
        return out[:: round(DT / dt)]

    ref = v(DT / 64)
    assert ref.max() > 0  # the cable fires
    errors = [np.abs(v(DT / k) - ref).max() for k in (1, 2, 4)]
    ratios = [a / b for a, b in zip(errors, errors[1:])]
    print("HH errors", errors, "ratios", ratios)
    assert all(3.5 < r < 4.5 for r in ratios), (errors, ratios)
