"""Kinetics objects (`Relaxation`, `RateEquation`), the environment mechanisms
see, the calcium-pool mechanism of docs/concepts.md, and build-time checks of
mechanism parameters and shapes."""

import pathlib
import re

import diffrax as dfx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so


ROOT = pathlib.Path(__file__).resolve().parents[2]
FARADAY = 96485.309


def _docs_mechanism():
    """The calcium mechanism exactly as docs/concepts.md shows it."""
    text = (ROOT / "docs" / "concepts.md").read_text()
    section = text.split("## A mechanism with its own calcium", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "docs/concepts.md", "exec"), namespace)
    return namespace["CaPoolKCa"]


CaPoolKCa = _docs_mechanism()


# ------------------------------------------------------------ kinetics objects


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_relaxation_is_the_former_gate_update(dtype):
    """`Relaxation` computes exactly the former `Gate` update, right-hand side
    and error filter (the expressions of the solvers before kinetics objects)."""
    assert so.Gate is so.Relaxation
    rng = np.random.default_rng(0)
    inf, x, r = (jnp.asarray(rng.uniform(0, 1, 50), dtype) for _ in range(3))
    rate = jnp.asarray(10.0 ** rng.uniform(-3, 4, 50), dtype)
    dt = jnp.asarray(0.025, dtype)
    kin = so.Relaxation(inf=inf, rate=rate)

    @jax.jit
    def new(kin, x, r, dt):
        return (
            kin.update(x, dt),
            kin.rhs(x),
            kin.filter(r, dt, x, quadratic=False),
            kin.filter(r, dt, x, quadratic=True),
        )

    @jax.jit
    def old(inf, rate, x, r, dt):
        z = rate * dt
        return (
            x + (inf - x) * (1 - jnp.exp(-rate * dt)),
            rate * (inf - x),
            r / (1 + 0.5 * z + 0),
            r / (1 + 0.5 * z + z * z / 12),
        )

    for a, b in zip(new(kin, x, r, dt), old(inf, rate, x, r, dt)):
        np.testing.assert_array_equal(a, b)


def test_rate_equation_exact_for_affine_f():
    """`dx/dt = a + b·x` relaxes to `-a/b` with rate `-b`: one update of any
    length is the exact solution, decaying (b < 0), growing (b > 0), stiff."""
    a = jnp.asarray([1.0, -2.0, 0.5, 3.0, 1e6])
    b = jnp.asarray([-0.5, -3.0, 0.2, 0.0, -1e9])
    x0 = jnp.asarray([0.3, 2.0, -1.0, 1.0, 0.0])
    kin = so.RateEquation(lambda x: a + b * x)
    for dt in (1e-3, 0.1, 1.0, 7.0):
        got = np.asarray(jax.jit(kin.update)(x0, dt))
        bn, an, xn = np.asarray(b), np.asarray(a), np.asarray(x0)
        with np.errstate(divide="ignore", invalid="ignore"):
            exact = np.where(
                bn == 0,
                xn + an * dt,
                -an / bn + (xn + an / bn) * np.exp(bn * dt),
            )
        np.testing.assert_allclose(got, exact, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(kin.rhs(x0), a + b * x0)
    # The error filter divides by 1 + z/2 (+ z²/12), z = max(-b·dt, 0).
    r = jnp.ones(5)
    z = np.maximum(-np.asarray(b) * 0.1, 0)
    np.testing.assert_allclose(
        kin.filter(r, 0.1, x0, quadratic=True), 1 / (1 + z / 2 + z * z / 12)
    )


def test_rate_equation_nonlinear_is_stable_and_second_order():
    """`dx/dt = -k·x²` (exact `x0/(1 + k·x0·t)`): finite and positive for any
    step, and the error of one step shrinks like dt³ (exponential
    Rosenbrock–Euler with the exact Jacobian is of order 2)."""
    k = 5.0
    kin = so.RateEquation(lambda x: -k * x * x)
    x0 = jnp.asarray([2.0])
    for dt in (1e-2, 1.0, 1e6):
        x1 = float(kin.update(x0, dt)[0])
        assert np.isfinite(x1) and 0 < x1 <= 2.0
    errs = [
        abs(float(kin.update(x0, dt)[0]) - 2.0 / (1 + k * 2.0 * dt))
        for dt in (1e-3, 5e-4)
    ]
    assert 7.0 < errs[0] / errs[1] < 9.0


def test_environment_geometry():
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 10.0, 1),
            so.Section("dend", 90.0, 2.0, 3, parent="soma"),
        ],
        [so.Insert(so.Passive(), sections=["dend"])],
    )
    model = so.build([cell])
    env = model.mechanisms[0].environment(model)
    np.testing.assert_allclose(env.diam, [2.0] * 3)
    np.testing.assert_allclose(env.length, [30.0] * 3)
    np.testing.assert_allclose(env.area, np.pi * 2.0 * 30.0 * 1e-8 * np.ones(3))
    np.testing.assert_allclose(env.volume, np.pi * 1.0 * 30.0 * np.ones(3))
    assert float(env.celsius) == 6.3
    assert model.index("c", "dend", 0.5) == 1 + 1


class _LegacyKdr(so.AbstractMechanism):
    """A mechanism written for the former interface (`gates(v, celsius)`)."""

    gbar: float = 0.036

    def gates(self, v, celsius):
        q10 = 3.0 ** ((celsius - 6.3) / 10)
        return {"n": so.alpha_beta_gate(0.01 * so.vtrap(-(v + 55), 10.0), 0.1, q10)}

    def current(self, v, states, celsius):
        del celsius
        return self.gbar * states["n"] ** 4 * (v + 77.0)


class _NewKdr(so.AbstractMechanism):
    """The same mechanism on the new interface."""

    gbar: float = 0.036

    def kinetics(self, v, states, env):
        del states
        q10 = 3.0 ** ((env.celsius - 6.3) / 10)
        return {"n": so.alpha_beta_gate(0.01 * so.vtrap(-(v + 55), 10.0), 0.1, q10)}

    def current(self, v, states, env):
        del env
        return self.gbar * states["n"] ** 4 * (v + 77.0)


def test_former_gates_interface_still_works():
    models = [
        so.build([_cell(so.Insert(m()))], celsius=20.0, v_init=-50.0)
        for m in (_LegacyKdr, _NewKdr)
    ]
    y = [m.init_state() for m in models]
    np.testing.assert_array_equal(y[0].groups[0]["n"], y[1].groups[0]["n"])
    for m, yi in zip(models, y):
        kin = m.kinetics(yi.v, yi.groups)[0]["n"]
        assert isinstance(kin, so.Relaxation)
        np.testing.assert_array_equal(
            kin.rate, models[1].kinetics(y[1].v, y[1].groups)[0]["n"].rate
        )
    i = [m.ionic_current(yi.v, yi.groups) for m, yi in zip(models, y)]
    np.testing.assert_array_equal(i[0], i[1])


# ------------------------------------------------------- the calcium mechanism


def _soma(mech, *, capacitance=1.0, v_init=-65.0, dtype=jnp.float64, stimuli=()):
    cell = so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0, 1)],
        [so.Insert(so.HH()), so.Insert(mech)],
        capacitance=capacitance,
    )
    return so.build([cell], stimuli, v_init=v_init, dtype=dtype)


def _solve(model, solver, t1, dt, ts):
    return dfx.diffeqsolve(
        so.MembraneTerm(model),
        solver,
        t0=0.0,
        t1=t1,
        dt0=dt,
        y0=model.init_state(),
        saveat=dfx.SaveAt(ts=ts),
        max_steps=int(round(t1 / dt)) + 1,
    ).ys


def test_calcium_pool_steady_state_and_time_constant():
    """Under a voltage that stays put (capacitance 1e12 µF/cm²: v moves by
    < 1e-7 mV), `m` and so `ica` are constant and the pool is
    `cai(t) = cai∞ + (cai0 - cai∞)·exp(-t/taur)`,
    `cai∞ = cai0 + taur·1e4·(-ica)/(2·F·depth)`: derived on paper, compared
    along the whole trajectory (one time constant and five)."""
    mech = CaPoolKCa(taur=20.0)
    v = -10.0
    model = _soma(mech, capacitance=1e12, v_init=v)
    y0 = model.init_state()
    m = float(y0.groups[1]["m"][0])
    alpha = 0.055 * (-(v + 27)) / np.expm1(-(v + 27) / 3.8)
    beta = 0.94 * np.exp(-(v + 75) / 17)
    np.testing.assert_allclose(m, alpha / (alpha + beta), rtol=1e-12)
    ica = mech.gcabar * m**2 * (v - mech.eca)
    assert ica < 0
    cai_inf = mech.cai0 + mech.taur * 1e4 * (-ica) / (2 * FARADAY * mech.depth)
    ts = jnp.asarray([0.0, 20.0, 40.0, 100.0])
    ys = _solve(model, so.BackwardEuler(), 100.0, 0.5, ts)
    np.testing.assert_allclose(ys.v, v, atol=1e-6)
    cai = np.asarray(ys.groups[1]["cai"][:, 0])
    exact = cai_inf + (mech.cai0 - cai_inf) * np.exp(-np.asarray(ts) / mech.taur)
    np.testing.assert_allclose(cai, exact, rtol=1e-8)
    # One time constant: 1 - 1/e of the way; five: at the steady state.
    frac = (cai[1] - mech.cai0) / (cai_inf - mech.cai0)
    np.testing.assert_allclose(frac, 1 - np.exp(-1.0), rtol=1e-8)
    np.testing.assert_allclose(cai[3], cai_inf, rtol=1e-2)


@pytest.mark.parametrize("solver", [so.BackwardEuler(), so.CrankNicolson()])
def test_calcium_pool_float32_under_100x_conductance(solver):
    """100× the calcium conductance, spiking, float32, 0.1 ms steps: every state
    stays finite and the calcium concentration never goes negative (nor below
    its resting value: the pool only takes calcium in)."""
    mech = CaPoolKCa(gcabar=1e-2)
    site = so.Site("c", "soma")
    model = _soma(
        mech, dtype=jnp.float32, stimuli=[so.StepCurrent(site, 0.5, 1.0, 40.0)]
    )
    ts = jnp.arange(0.0, 50.0, 0.5, dtype=jnp.float32)
    ys = _solve(model, solver, 50.0, 0.1, ts)
    for leaf in jax.tree_util.tree_leaves(ys):
        assert np.all(np.isfinite(np.asarray(leaf)))
    cai = np.asarray(ys.groups[1]["cai"])
    assert np.all(cai >= 0)
    assert np.all(cai >= np.float32(mech.cai0) * (1 - 1e-6))
    assert cai.max() > 10 * mech.cai0  # the pool did fill
    q = np.asarray(ys.groups[1]["q"])
    assert np.all((q >= 0) & (q <= 1))


# ----------------------------------------------------------- build-time checks


def _cell(*inserts):
    return so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 20.0, 1),
            so.Section("dend", 50.0, 2.0, 2, parent="soma"),
        ],
        list(inserts),
    )


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_nonfinite_parameter_is_one_clear_error(value):
    with pytest.raises(ValueError) as e:
        so.build([_cell(so.Insert(so.HH(gnabar=value), sections=["dend"]))])
    msg = str(e.value)
    assert "HH" in msg and "'gnabar'" in msg and "section 'dend'" in msg
    assert "finite" in msg
    # One bad entry of a per-compartment array names its own section.
    arr = np.asarray([0.12, 0.12, value])
    with pytest.raises(ValueError, match=r"'gkbar' .*section 'dend'"):
        so.build([_cell(so.Insert(so.HH(gkbar=arr)))])


def test_nonfinite_synapse_parameter_and_temperature():
    cells = [so.Cell(f"n{i}", [so.Section("soma", 20.0, 20.0)]) for i in range(2)]
    sites = [so.Site(f"n{i}", "soma") for i in range(2)]
    conn = so.Connections(
        so.IonotropicSynapse(gmax=float("nan")), [sites[0]], [sites[1]]
    )
    with pytest.raises(ValueError, match=r"IonotropicSynapse.*'gmax' is nan"):
        so.build(cells, connections=[conn])
    with pytest.raises(ValueError, match="celsius must be finite"):
        so.build(cells, celsius=float("inf"))


class _ScalarCurrent(so.AbstractMechanism):
    g: float = 1e-3

    def kinetics(self, v, states, env):
        del v, states, env
        return {}

    def current(self, v, states, env):
        del states, env
        return jnp.sum(self.g * (v + 65.0))  # a scalar, not one per compartment


def test_current_of_the_wrong_shape_is_a_build_error():
    with pytest.raises(ValueError) as e:
        so.build([_cell(so.Insert(_ScalarCurrent(), sections=["dend"]))])
    msg = str(e.value)
    assert "_ScalarCurrent" in msg and "current()" in msg and "'dend'" in msg
    assert "expected (2,)" in msg


def test_rate_equation_state_needs_init_states():
    class NoInit(so.AbstractMechanism):
        def kinetics(self, v, states, env):
            del env
            return {"c": so.RateEquation(lambda c: -c + 0 * v)}

        def current(self, v, states, env):
            return 0 * v

    with pytest.raises(TypeError, match="NoInit.*init_states"):
        so.build([_cell(so.Insert(NoInit()))])


def test_mechanism_without_kinetics_is_a_build_error():
    class NoKinetics(so.AbstractMechanism):
        g: float = 1e-3

        def current(self, v, states, env):
            del states, env
            return self.g * (v + 65.0)

    with pytest.raises(TypeError, match="NoKinetics defines no kinetics"):
        so.build([_cell(so.Insert(NoKinetics()))])
