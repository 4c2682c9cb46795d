"""Nonlinear `KINETIC` schemes, `COMPARTMENT` volumes, `CONSERVE` in amounts
and `f_flux`/`b_flux`, against NEURON running the same files (compiled once
per session, `tests/conftest.py`): one compartment each (L = diam = 20 µm,
0.15 nA from 2 ms for 20 ms, 30 ms, dt 0.025 ms, `nmodl_support`), NEURON at
`secondorder = 0`, our `BackwardEuler`, float64.

- `cabuf.mod` (ours): a calcium pool that `cachan1.mod`'s `ica` fills and a
  buffer binds, `~ cai + b <-> cab` (nonlinear), its volume by `COMPARTMENT`,
  the buffer conserved in amounts, `f_flux - b_flux` into a `RANGE` variable.
- `cacopy.mod` (ours): `capool.mod`'s pool as a KINETIC block whose state
  is `ca`, the ion's `cai` written as `cai = ca` (as dbbs' `cdp5` files do).
- NEURON's own `capmpr.mod`: a calcium pump (`~ cai + pump <-> pumpca`,
  `~ pumpca <-> pump + cao`) in three compartments (the pool, the membrane,
  the outside), its current from `f_flux - b_flux`, `ica` and `ipump_last`
  read in the scheme as BREAKPOINT set them, the steady state in `INITIAL`
  (with a reservoir at `car`, relaxing with `tau`).

NEURON's `sparse` stops iterating once its updates sum to 1e-6 (in the
states' units): for these steps after one iteration, with the `<<` fluxes
and rates held where the step starts. `neuron_schemes=True` (the default)
takes that iteration and agrees to rounding; `neuron_schemes=False` takes
implicit Euler to convergence and differs by NEURON's iteration error.

Measured on the development machine: `cabuf` 2.1e-7 mV in `v` (cachan1's
finite-difference `di/dv` in NEURON), 2e-14 mM in `cai` (of a 4.7e-6 mM
rise), 6.6e-13 mM in `b` (NEURON's own steady state is 5e-12 mM from the
exact one: ill-conditioned, see `test_gradient_through_the_scheme`);
converged, 1.4e-9 mM. `capmpr` (its steady state and how it stays there):
1.3e-19 mM in `cai`, 1e-29 mol/cm² in `pump`. `cacopy` 9.5e-13 mM in `cai`
(of a 1.8e-3 mM rise; `capool.mod` on the same inputs: 9.5e-13).
"""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DEMO, OWN
from helpers import finite_difference_grad
from nmodl_support import FakeEnv, per_compartment, run_neuron, run_ours

import stable_ode as so
from stable_ode.nmodl import load_nmodl


FILES = [
    DEMO / "cachan1.mod",
    OWN / "cabuf.mod",
    OWN / "cacopy.mod",
    DEMO / "capmpr.mod",
]
RESERVOIR = {"tau": 10.0, "car": 2e-4}  # capmpr's GLOBALs: a reservoir at 2e-4 mM
BUFFER = ["cai", "b_cabuf", "cab_cabuf", "jbind_cabuf"]
PUMP = ["cai", "pump_capmpr", "pumpca_capmpr"]
RECORD = {"buffer": BUFFER, "pump": PUMP, "copy": ["cai"]}
DT = 0.025


@pytest.fixture(scope="module")
def mechs():
    return load_nmodl(FILES)


def cells(m, **cabuf):
    return {
        "buffer": [m["cachan1"](imax=0.005), m["cabuf"](**cabuf), so.HH()],
        "pump": [m["cachan1"](imax=0.005), m["capmpr"](**RESERVOIR), so.HH()],
        "copy": [m["cachan1"](imax=0.005), m["cacopy"](), so.HH()],
    }


@pytest.fixture(scope="module")
def neuron_traces(nrn_compiled):
    h = nrn_compiled
    old = {k: getattr(h, f"{k}_capmpr") for k in RESERVOIR}
    for k, x in RESERVOIR.items():
        setattr(h, f"{k}_capmpr", x)
    try:
        c = {
            "buffer": [("cachan1", {"imax": 0.005}), ("cabuf", {}), ("hh", {})],
            "pump": [("cachan1", {"imax": 0.005}), ("capmpr", {}), ("hh", {})],
            "copy": [("cachan1", {"imax": 0.005}), ("cacopy", {}), ("hh", {})],
        }
        return run_neuron(h, c, RECORD)[1]
    finally:
        for k, x in old.items():
            setattr(h, f"{k}_capmpr", x)


@pytest.fixture(scope="module")
def ours(mechs):
    return run_ours(cells(mechs), RECORD)[1]


def test_schemes_are_nonlinear(mechs):
    for name in ("cabuf", "capmpr"):
        assert set(mechs[name].nmodl.forms.values()) == {"nonlinear scheme (sparse)"}


@pytest.mark.neuron
def test_buffer_agrees_with_neuron(ours, neuron_traces):
    nrn = neuron_traces
    assert np.max(nrn["buffer"]) > 0.0  # it spikes
    np.testing.assert_allclose(ours["buffer"], nrn["buffer"], rtol=0, atol=1e-6)
    assert np.ptp(nrn["buffer.cai"]) > 4e-6 and np.ptp(nrn["buffer.b_cabuf"]) > 5e-5
    # b and cab start from NEURON's steady state, which is itself 5e-12 mM
    # from the exact one (ill-conditioned: see the module's docstring).
    bounds = {"cai": 1e-12, "b_cabuf": 1e-11, "cab_cabuf": 1e-11, "jbind_cabuf": 1e-12}
    for var in BUFFER:
        err = np.max(np.abs(ours[f"buffer.{var}"] - nrn[f"buffer.{var}"]))
        print(var, err)
        assert err < bounds[var], var


@pytest.mark.neuron
def test_pump_agrees_with_neuron(ours, neuron_traces):
    """The steady state (the reservoir's influx against the pump) and how the
    pool stays there: the scheme reads `ica - ipump_last` as BREAKPOINT left
    them, which is 0 (capmpr READs no `ica`: its own), as in NEURON."""
    nrn = neuron_traces
    assert np.max(nrn["pump"]) > 0.0
    np.testing.assert_allclose(ours["pump"], nrn["pump"], rtol=0, atol=1e-6)
    assert 1e-5 < nrn["pump.cai"][0] < 2e-4  # between the pump's and the reservoir's
    for var in PUMP:
        ref = nrn[f"pump.{var}"]
        err = np.max(np.abs(ours[f"pump.{var}"] - ref))
        print(var, err, np.max(ref))
        assert err < 1e-12 * np.max(np.abs(ref)), var


@pytest.mark.neuron
def test_concentration_copied_from_a_state(mechs, ours, neuron_traces):
    """`cacopy.mod` writes the ion's `cai` as `cai = ca` in its KINETIC
    block: the ion's concentration is the state `ca`. Its scheme (two `<<`
    fluxes, one depending on `ca`) is linear to nocmodl, which takes one
    iteration (`linflag`): the decay explicit, as here."""
    assert mechs["cacopy"].concentration_states == {"cai": "ca"}
    nrn = neuron_traces
    np.testing.assert_allclose(ours["copy"], nrn["copy"], rtol=0, atol=1e-6)
    assert np.ptp(nrn["copy.cai"]) > 1e-3
    err = np.max(np.abs(ours["copy.cai"] - nrn["copy.cai"]))
    print("cai", err)
    assert err < 1e-11


@pytest.mark.neuron
def test_converged_steps_differ_by_neurons_iteration(neuron_traces):
    """`neuron_schemes=False` (implicit Euler to convergence) is not NEURON's
    single iteration: the comparison resolves the difference."""
    exact = load_nmodl(FILES, neuron_schemes=False)
    got = run_ours(cells(exact), RECORD)[1]
    err = np.max(np.abs(got["buffer.cai"] - neuron_traces["buffer.cai"]))
    assert 1e-10 < err < 1e-8, err


def _buffer_model(mechs, dtype=jnp.float64, **cabuf):
    cell = so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0, 1)],
        [so.Insert(m) for m in cells(mechs, **cabuf)["buffer"]],
    )
    site = so.Site("c", "soma", 0.5)
    recs = [so.Recording(x, site, variable=x) for x in ("cai", "b_cabuf", "cab_cabuf")]
    return so.build([cell], [so.StepCurrent(site, 0.15, 2.0, 20.0)], recs, dtype=dtype)


@pytest.mark.parametrize("neuron_schemes", [True, False])
def test_buffer_conserved_and_non_negative(neuron_schemes):
    m = load_nmodl(FILES, neuron_schemes=neuron_schemes)
    rec = so.simulate(_buffer_model(m), 30.0, 0.025).recordings
    total = np.asarray(rec["b_cabuf"]) + np.asarray(rec["cab_cabuf"])
    np.testing.assert_allclose(total, 0.05, rtol=1e-14)
    assert min(np.min(np.asarray(x)) for x in rec.values()) > 0


def test_float32_and_adaptive(mechs):
    """In float32 (its steady state by steps of up to 1e6 ms) the buffer
    follows the float64 run; under an adaptive CrankNicolson (tolerance 1e-6:
    the scheme's error filter) it follows a converged run (CrankNicolson at
    dt/8), each within 1 % of the pool's rise (measured: 0.2 % and 0.5 %;
    backward Euler at dt 0.025 is 12 % off, from its spike times)."""
    ref = np.asarray(so.simulate(_buffer_model(mechs), 30.0, 0.025).recordings["cai"])
    f32 = so.simulate(_buffer_model(mechs, jnp.float32), 30.0, 0.025).recordings
    assert f32["cai"].dtype == jnp.float32
    rise = np.ptp(ref)
    assert np.max(np.abs(np.asarray(f32["cai"]) - ref)) < 0.01 * rise
    model = _buffer_model(mechs)
    fine = so.simulate(model, 30.0, DT / 8, solver=so.CrankNicolson())
    converged = np.asarray(fine.recordings["cai"])[::8]
    sim = so.simulate(
        model,
        30.0,
        DT,
        save_dt=DT,
        solver=so.CrankNicolson(),
        controller=dfx.PIDController(rtol=1e-6, atol=1e-6),
    )
    err = np.max(np.abs(np.asarray(sim.recordings["cai"]) - converged))
    assert err < 0.01 * np.ptp(converged), err / np.ptp(converged)


def test_gradient_through_the_scheme():
    """d(mean cai over 10 ms)/d(kon, btot) through the Newton iterations
    against central differences (float64), with `neuron_schemes=False`.
    (NEURON's iteration is differentiated too, finite in
    `test_hostile_float32`, but not compared: its steady state in `INITIAL`
    solves with NEURON's Jacobian, the `<<` decay held constant, in which the
    rows of `cai` and `b` differ by the identity alone, 1 against ~5e9 at
    the 1e9 ms step, so the initial `cai` carries ~1e-14 mM of rounding that
    moves with `kon` and that finite differences cannot see past.)"""
    m = load_nmodl(FILES, neuron_schemes=False)
    model = _buffer_model(m)
    (buf,) = [
        k for k, g in enumerate(model.mechanisms) if type(g.mechanism) is m["cabuf"]
    ]

    def loss(p):
        mm = eqx.tree_at(
            lambda x: (
                x.mechanisms[buf].mechanism.kon,
                x.mechanisms[buf].mechanism.btot,
            ),
            model,
            (p[0:1], p[1:2]),
        )
        return jnp.mean(so.simulate(mm, 10.0, 0.025).recordings["cai"])

    p = jnp.array([100.0, 0.05])
    g = np.asarray(jax.jit(jax.grad(loss))(p))
    assert np.all(np.isfinite(g)) and np.all(g != 0)
    fd = finite_difference_grad(jax.jit(loss), p, eps=1e-6)
    print(g, fd)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_steady_state_from_far_away():
    """The scheme's steady state from `b = btot`, `cab = 0`, `cai = 0`: the
    decay's fixed point `cai = cainf`, the buffer at its equilibrium with the
    total kept, by Newton's method (`neuron_schemes=False`; NEURON's own
    iteration, its Jacobian at its 1e9 ms step, need not converge from there,
    and does not), in float64 and in float32 (steps of up to 1e6 ms by
    Newton's method, whichever `neuron_schemes`)."""
    m = load_nmodl(OWN / "cabuf.mod", neuron_schemes=False)["cabuf"]
    out = {}
    for dtype in (jnp.float64, jnp.float32):
        mech = per_compartment(m(), 1, dtype)
        env = FakeEnv(1, dtype)
        v = jnp.full((1,), -65.0, dtype)
        start = {"cai": 0.0, "b": 0.05, "cab": 0.0}
        states = {k: jnp.full((1,), x, dtype) for k, x in start.items()}
        (scheme,) = mech.kinetics(v, states, env).values()
        out[dtype] = np.asarray(scheme.steady_state(tuple(states.values())))[:, 0]
    b = 0.05 / (1 + 100.0 * 1e-4 / 0.1)
    want = np.array([1e-4, b, 0.05 - b])
    # One step of 1e9 ms leaves the decay (the total's change)/1e9 ms away
    # from its fixed point: 1e-6 relative in `cai` here.
    np.testing.assert_allclose(out[jnp.float64], want, rtol=2e-6)
    np.testing.assert_allclose(out[jnp.float32], want, rtol=1e-4)


class _HostileEnv(FakeEnv):
    """NEURON's default ions with calcium currents `ica` (mA/cm², per
    compartment)."""

    def __init__(self, ica, dtype):
        super().__init__(ica.shape[0], dtype)
        self.ica = ica

    def ion(self, name):
        out = super().ion(name)
        if name == "ca":
            out.current = self.ica
        return out


def test_hostile_float32(mechs):
    """`cabuf` and `capmpr` in float32 at v from -2000 to +500 mV under
    calcium currents of 0 and ±1e3 mA/cm² (one that empties the pool in a
    step): initial states, steps of 0.025 and 1000 ms and the right-hand
    sides finite, the steps non-negative, and the gradient of a step w.r.t.
    the parameters finite. One jitted function."""
    f32 = jnp.float32
    v = jnp.tile(jnp.asarray([-2000.0, -65.0, 0.0, 500.0], f32), 3)
    ica = jnp.repeat(jnp.asarray([-1e3, 0.0, 1e3], f32), 4)
    env = _HostileEnv(ica, f32)
    all_mechs = {n: per_compartment(mechs[n](), 12, f32) for n in ("cabuf", "capmpr")}

    def step(mech, dt):
        s0 = mech.init_states(v, env)
        (kin,) = mech.kinetics(v, s0, env).values()
        xs = tuple(s0[x] for x in kin.states)
        return s0, kin.update(xs, dt), kin.rhs(xs)

    def run(all_mechs):
        return {n: (step(m, 0.025), step(m, 1e3)) for n, m in all_mechs.items()}

    def loss(all_mechs):
        return sum(
            sum(jnp.sum(x) for x in step(m, 0.025)[1]) for m in all_mechs.values()
        )

    out, grads = jax.jit(lambda m: (run(m), jax.grad(loss)(m)))(all_mechs)
    for name in all_mechs:
        for x in jax.tree_util.tree_leaves(out[name]):
            assert x.dtype == f32 and bool(jnp.all(jnp.isfinite(x))), name
        for short_or_long in out[name]:
            assert all(bool(jnp.all(x >= 0)) for x in short_or_long[1]), name
        for g in jax.tree_util.tree_leaves(grads[name]):
            assert bool(jnp.all(jnp.isfinite(g))), name
