"""Diagnose mode: names the mechanism, gate, compartment, time and function of
the first non-finite value, forward and backward; silent for healthy models."""

import types

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import stable_ode as so
from stable_ode.diagnostics import diagnose, diagnose_spec


class UnguardedGate(so.AbstractMechanism):
    """A user's channel with a plain `jnp.exp`: overflows under hyperpolarisation."""

    gbar: float = 0.01
    e: float = -80.0

    def gates(self, v, celsius):
        del celsius
        return {
            "x": so.alpha_beta_gate(jnp.exp(-(v + 65) / 0.5), jnp.exp((v + 65) / 0.5))
        }

    def current(self, v, states, celsius):
        del celsius
        return self.gbar * states["x"] * (v - self.e)


class WhereTrap(so.AbstractMechanism):
    """Finite forward, NaN backward: the untaken `where` branch overflows."""

    g: float = 0.001

    def gates(self, v, celsius):
        del v, celsius
        return {}

    def current(self, v, states, celsius):
        del states, celsius
        return jnp.where(v > -1000.0, self.g * (v + 70), jnp.exp(-20 * v))


class BadDerivative(so.AbstractMechanism):
    """Finite current, NaN slope at v = -65 (sqrt of a square): breaks the
    linearisation."""

    g: float = 0.001

    def gates(self, v, celsius):
        del v, celsius
        return {}

    def current(self, v, states, celsius):
        del states, celsius
        return self.g * jnp.sqrt(jnp.square(v + 65))  # d/dv at -65: inf·0


def _model(mech, amplitude, dtype, n=1):
    cell = so.Cell(
        "cell",
        [
            so.Section("soma", 10.0, 10.0, 1),
            so.Section("dend", 50.0, 2.0, n, parent="soma"),
        ],
        [so.Insert(so.HH(), ["soma"]), so.Insert(mech, ["dend"])]
        + ([] if isinstance(mech, so.Passive) else [so.Insert(so.Passive(), ["dend"])]),
    )
    site = so.Site("cell", "dend", 0.5)
    return so.build(
        [cell],
        [so.StepCurrent(site, amplitude, 0.5, 5.0)],
        [so.Recording("dend", site)],
        dtype=dtype,
    )


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_names_unguarded_user_mechanism(dtype):
    model = _model(UnguardedGate(), -20.0, dtype, n=3)
    d = diagnose(model, 3.0, 0.025)
    assert d.found and d.direction == "forward" and d.kind == "non-finite"
    assert d.mechanism == "UnguardedGate"
    assert d.stage == "kinetics" and d.function == "UnguardedGate.gates"
    assert d.state == "UnguardedGate.x"
    # Every dend compartment overflows in the same step; the first is reported.
    assert "section 'dend'" in d.location
    assert 0.5 <= d.t0 < d.t1 <= 3.0 and d.t1 - d.t0 == pytest.approx(0.025, rel=1e-5)
    # The voltage that fed the rates: hyperpolarised enough to overflow exp.
    overflow_v = -65 - 0.5 * np.log(float(np.finfo(dtype).max))
    assert d.inputs["v"] < overflow_v + 1.0
    assert not np.isfinite(d.outputs["x.rate"])
    text = str(d)
    for word in ("UnguardedGate", "kinetics", "dend", "step", "v = "):
        assert word in text
    assert not np.isfinite(d.value)


def test_linearisation_is_named():
    model = _model(BadDerivative(), 0.0, jnp.float64)
    model = eqx.tree_at(lambda m: m.v_init, model, jnp.full_like(model.v_init, -65.0))
    d = diagnose(model, 0.1, 0.025)
    assert d.found and d.stage == "linearisation" and d.mechanism == "BadDerivative"
    assert d.step == 0 and d.inputs["v"] == -65.0


@pytest.mark.parametrize(
    "solver",
    [so.BackwardEuler(), so.CrankNicolson(), so.ExponentialEuler()],
    ids=lambda s: type(s).__name__,
)
def test_healthy_model_reports_nothing_and_matches_simulate(solver):
    model = _model(so.Passive(g=1e-4), 0.1, jnp.float64)
    d = diagnose(model, 2.0, 0.025, solver=solver)
    assert not d.found and d.n_steps == 80
    assert "no non-finite value" in str(d)


def test_stepping_object_replays_the_same_grid():
    model = _model(so.Passive(g=1e-4), -2.0, jnp.float32)
    by_dt = diagnose(model, 3.0, 0.025, threshold=150.0)
    by_stepping = diagnose(model, 3.0, stepping=so.FixedSteps(0.025), threshold=150.0)
    assert by_dt.found and by_stepping.step == by_dt.step
    assert str(by_stepping) == str(by_dt)
    with pytest.raises(ValueError, match="replays fixed steps"):
        diagnose(
            model,
            3.0,
            stepping=so.AdaptiveSteps(dfx.PIDController(1e-3, 1e-3), 0.025, 0.1),
        )
    with pytest.raises(ValueError, match="not both"):
        diagnose(model, 3.0, 0.025, stepping=so.FixedSteps(0.025))
    with pytest.raises(ValueError, match="needs dt"):
        diagnose(model, 3.0)


@pytest.mark.parametrize(
    "solver", [so.BackwardEuler(), so.CrankNicolson()], ids=lambda s: type(s).__name__
)
def test_voltage_solvers_get_the_probed_linear_solve(solver):
    from stable_ode.diagnostics._common import _probed
    from stable_ode.diagnostics._probes import ProbedLinearSolver

    model = _model(so.Passive(g=1e-4), 0.1, jnp.float64)
    _, probed = _probed(model, solver, record=None)
    assert isinstance(probed.linear_solver, ProbedLinearSolver)
    assert probed.linear_solver.inner == model.coupling.default_solver()
    _, untouched = _probed(model, so.ExponentialEuler(), record=None)
    assert untouched == so.ExponentialEuler()


def test_threshold_names_voltage_update_and_its_inputs():
    model = _model(so.Passive(g=1e-4), -2.0, jnp.float32)
    d = diagnose(model, 3.0, 0.025, threshold=150.0)
    assert d.found and d.kind == "above threshold" and d.state == "v"
    assert d.stage == "voltage update" and abs(d.value) > 150.0
    assert d.inputs["stimulus [mA/cm2]"] < 0
    assert abs(d.inputs["v0 [mV]"]) <= 150.0


def test_non_finite_parameter_and_stimulus():
    model = _model(so.Passive(g=1e-4), 0.1, jnp.float64)
    bad = eqx.tree_at(
        lambda m: m.mechanisms[0].mechanism.gnabar, model, jnp.asarray([jnp.nan])
    )
    d = diagnose(bad, 1.0, 0.025)
    assert d.found and d.stage == "parameters" and d.parameter == "HH.gnabar"
    assert "soma" in d.location
    stim = eqx.tree_at(
        lambda m: m.stimuli.step_amplitude, model, jnp.asarray([jnp.inf])
    )
    d = diagnose(stim, 1.0, 0.025)
    assert d.found and d.stage == "parameters" and "step_amplitude" in d.parameter


def test_backward_names_derivative_and_step():
    model = _model(WhereTrap(), 0.05, jnp.float64)

    def loss(recordings):
        return jnp.mean(recordings["dend"] ** 2)

    # The forward pass is fine ...
    assert not diagnose(model, 1.0, 0.025).found
    d = diagnose(model, 1.0, 0.025, loss=loss)
    assert d.found and d.direction == "backward"
    assert d.step == 39  # the last step: the first one the backward pass visits
    assert d.state == "d loss/d v" and "dend" in d.location
    assert d.mechanism == "WhereTrap" and d.stage == "derivative of current"
    assert "backward" in str(d)


def test_backward_gradient_matches_jax_grad():
    model = _model(so.Passive(g=2e-4), 0.05, jnp.float64)

    def loss(recordings):
        return jnp.mean(recordings["dend"] ** 2)

    d = diagnose(model, 1.0, 0.025, loss=loss)
    assert not d.found
    ref = eqx.filter_grad(lambda m: loss(so.simulate(m, 1.0, 0.025).recordings))(model)
    ours = jax.tree_util.tree_leaves(d.gradient)
    theirs = jax.tree_util.tree_leaves(eqx.filter(ref, eqx.is_inexact_array))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(
            a, b, rtol=1e-10, atol=1e-14 * max(1.0, float(np.max(np.abs(b), initial=0)))
        )


def test_diagnose_spec_accepts_loaded_object():
    model = _model(UnguardedGate(), -20.0, jnp.float32)
    loaded = types.SimpleNamespace(
        model=model, t_stop=3.0, dt=0.025, solver=so.BackwardEuler(), controller=None
    )
    d = diagnose_spec(loaded)
    assert d.found and d.mechanism == "UnguardedGate"


class NaiveSigmoidSynapse(so.AbstractSynapse):
    """A user's synapse with `e / (1 + e)`, `e = exp(...)`: inf/inf = NaN once the
    presynaptic cell spikes."""

    gmax: float = 1e-3
    e_syn: float = 0.0

    def gates(self, v_pre, celsius):
        del celsius
        e = jnp.exp((v_pre + 35.0) / 0.05)
        return {"s": so.Gate(inf=e / (1 + e), rate=0.5 + 0 * e)}

    def current(self, v_post, states, celsius):
        del celsius
        return self.gmax * states["s"] * (v_post - self.e_syn)


def test_names_broken_user_synapse():
    cells = [
        so.Cell(n, [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
        for n in ("pre", "post")
    ]
    pre, post = so.Site("pre", "soma"), so.Site("post", "soma")
    model = so.build(
        cells,
        [so.StepCurrent(pre, 0.3, 0.5, 10.0)],
        [so.Recording("post", post)],
        [so.Connections(NaiveSigmoidSynapse(), [pre], [post], name="naive")],
    )
    d = diagnose(model, 10.0, 0.025)
    assert d.found
    assert d.stage == "synapse kinetics"
    assert d.function == "NaiveSigmoidSynapse.gates"
    assert "naive" in d.mechanism
    assert d.state == "synapse naive.s"
    assert "'pre'" in d.culprit_location and "'post'" in d.culprit_location
    assert d.inputs["v_pre"] > -35.0 + 0.05 * np.log(np.finfo(np.float64).max)
    assert 0.5 < d.t0 < 10.0
    # A healthy synapse of the same network: nothing to report.
    ok = eqx.tree_at(
        lambda m: m.synapses[0].synapse,
        model,
        so.IonotropicSynapse(
            gmax=jnp.full((1,), 1e-3),
            e_syn=jnp.zeros(1),
            k_minus=jnp.full((1,), 0.025),
            v_th=jnp.full((1,), -35.0),
            delta=jnp.full((1,), 10.0),
        ),
    )
    assert not diagnose(ok, 10.0, 0.025).found
