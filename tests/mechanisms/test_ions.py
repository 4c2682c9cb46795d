"""The ion model: constants, Nernst and GHK, NEURON's rules for reversal
potentials and concentrations, ion currents summed across mechanisms, settings,
recordings, errors, positivity in float32, gradients and diagnostics."""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from ion_mechanisms import CaChan1, CaGatedK, CaPool

import stable_ode as so
from stable_ode._solver._ordered import neuron_order


SITE = so.Site("c", "soma", 0.5)
ION_VARS = ("v", "cai", "cao", "ica", "eca")


def _model(mechs, *, dtype=np.float64, amp=0.3, recs=ION_VARS, n=1, **kw):
    cell = so.Cell(
        "c", [so.Section("soma", 20.0, 20.0, n)], [so.Insert(m) for m in mechs]
    )
    return so.build(
        [cell],
        [so.StepCurrent(SITE, amp, 1.0, 8.0)],
        [so.Recording(r, SITE, variable=r) for r in recs],
        dtype=dtype,
        **kw,
    )


def test_constants_are_neurons():
    neuron = pytest.importorskip("neuron")
    assert so.FARADAY == neuron.h.FARADAY
    assert so.GAS_CONSTANT == neuron.h.R


def test_nernst():
    # NEURON's eca at 6.3 degC with its default concentrations (h.eca after
    # finitialize with cachan1 inserted): 127.58951061761749 mV.
    e = so.nernst(jnp.asarray(5e-5), jnp.asarray(2.0), 2, 6.3)
    np.testing.assert_allclose(float(e), 127.58951061761749, rtol=1e-14)
    assert float(so.nernst(jnp.asarray(1.0), jnp.asarray(1.0), 1, 20.0)) == 0.0
    for dtype in (jnp.float32, jnp.float64):
        z = so.nernst(jnp.zeros((), dtype), jnp.asarray(2.0, dtype), 2, 6.3)
        assert np.isfinite(float(z))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_ghk_finite_and_smooth(dtype):
    def f(v, ci, co):
        return so.ghk(v, ci, co, 2, 6.3)

    grad = jax.grad(f, argnums=(0, 1, 2))
    for v, ci, co in [
        (0.0, 1e-4, 2.0),
        (0.0, 0.0, 2.0),
        (30.0, 0.0, 0.0),
        (-2000.0, 1e-4, 2.0),
        (500.0, 1e-4, 0.0),
        (1e-7, 1e-4, 2.0),
    ]:
        args = [jnp.asarray(x, dtype) for x in (v, ci, co)]
        assert np.isfinite(float(f(*args)))
        assert all(np.isfinite(float(g)) for g in grad(*args))
    # Continuous through v = 0 and equal to the closed form elsewhere.
    ktf = 1e3 * so.GAS_CONSTANT * (6.3 + 273.15) / so.FARADAY
    ci, co = 1e-4, 2.0
    for v in (-40.0, 25.0):
        u = 2 * v / ktf
        ref = 1e-3 * 2 * so.FARADAY * (ci * (-u) / np.expm1(-u) - co * u / np.expm1(u))
        np.testing.assert_allclose(
            float(f(jnp.asarray(v, dtype), ci, co)),
            ref,
            rtol=1e-5 if dtype == jnp.float32 else 1e-12,
        )
    at0 = float(f(jnp.asarray(0.0, dtype), ci, co))
    near = float(f(jnp.asarray(1e-3, dtype), ci, co))
    np.testing.assert_allclose(at0, 1e-3 * 2 * so.FARADAY * (ci - co), rtol=1e-6)
    assert abs(near - at0) < 1e-3 * abs(at0)


def _initial(model, var):
    """The initial value of ion variable `var` (e.g. "eca") at compartment 0,
    from the built model (no solve)."""
    views = model.ion_views()
    kind = {"i": "inside", "o": "outside"}
    if var.startswith("e"):
        return float(views[var[1:]].reversal[0])
    return float(getattr(views[var[:-1]], kind[var[-1]])[0])


def test_reversal_rules():
    """NEURON's rules: a concentration reader makes e Nernst of the constant
    concentrations (NEURON's values at 6.3 and 20 degC); a user's reversal is
    fixed; written concentrations move, and e follows them every step."""
    chan = _model([CaChan1(imax=0.01)])
    np.testing.assert_allclose(_initial(chan, "eca"), 127.58951061761749, rtol=1e-13)
    hot = _model([CaChan1(imax=0.01)], celsius=20.0)
    np.testing.assert_allclose(_initial(hot, "eca"), 133.84456982485082, rtol=1e-13)
    fixed = _model([CaChan1(imax=0.01)], ions={"ca": so.IonSpecies(reversal=120.0)})
    assert _initial(fixed, "eca") == 120.0
    k_only = _model([CaChan1(imax=0.01)], ions={"k": so.IonSpecies()})
    assert _initial(k_only, "ek") == -77.0 and _initial(k_only, "ki") == 54.4
    pooled = _model([CaChan1(imax=0.01), CaPool()])
    rec = so.simulate(pooled, 10.0, 0.025).recordings
    cai = np.asarray(rec["cai"])
    assert cai[0] == 5e-5 and cai[-1] > 1.2 * cai[0]
    np.testing.assert_array_equal(np.asarray(rec["cao"]), 2.0)
    np.testing.assert_allclose(
        np.asarray(rec["eca"]), np.asarray(so.nernst(cai, 2.0, 2, 6.3)), rtol=1e-13
    )
    assert float(rec["ica"][0]) < 0  # inward at rest


def test_settings_and_section_overrides():
    cell = so.Cell(
        "c",
        [
            so.Section("soma", 20.0, 20.0),
            so.Section("dend", 50.0, 2.0, 2, parent="soma"),
        ],
        [so.Insert(so.HH()), so.Insert(CaChan1(imax=0.01))],
        ions=[
            so.IonSetting("ca", ["dend"], outside=4.0),
            so.IonSetting("na", reversal=55.0),
        ],
    )
    m = so.build([cell], [], [], ions={"ca": so.IonSpecies(inside=1e-4)})
    views = m.ion_views()
    ca = views["ca"]
    np.testing.assert_array_equal(np.asarray(ca.outside), [2.0, 4.0, 4.0])
    np.testing.assert_array_equal(np.asarray(ca.inside), 1e-4)
    np.testing.assert_allclose(
        np.asarray(ca.reversal),
        np.asarray(so.nernst(jnp.asarray(1e-4), jnp.asarray([2.0, 4.0, 4.0]), 2, 6.3)),
        rtol=1e-13,
    )
    np.testing.assert_array_equal(np.asarray(views["na"].reversal), 55.0)


class _KPump(so.AbstractMechanism):
    """An outward potassium current of fixed density, to check per-ion sums."""

    ions: ClassVar = (so.UseIon("k", write=("ik",)),)
    i: float = 1e-3

    def kinetics(self, v, states, env):
        return {}

    def current(self, v, states, env):
        return {"k": jnp.full_like(v, self.i), "nonspecific": jnp.zeros_like(v)}


class _KReader(so.AbstractMechanism):
    """A state that integrates the total potassium current (`ik` readers)."""

    ions: ClassVar = (so.UseIon("k", read=("ik", "ek")),)

    def kinetics(self, v, states, env):
        ik = env.ion("k").current
        return {"q": so.RateEquation(lambda q: ik + 0.0 * q)}

    def current(self, v, states, env):
        return jnp.zeros_like(v)

    def init_states(self, v, env):
        return {"q": jnp.zeros_like(v)}


def test_ion_currents_are_summed_over_mechanisms():
    # Two groups (one class each) writing ik in the same compartment.
    class _KPump2(_KPump):
        pass

    m = _model(
        [_KPump(i=1e-3), _KPump2(i=2e-3), _KReader()], recs=("ik", "ek"), amp=0.0
    )
    sim = so.simulate(m, 1.0, 0.025)
    np.testing.assert_allclose(np.asarray(sim.recordings["ik"]), 3e-3, rtol=1e-14)
    np.testing.assert_array_equal(np.asarray(sim.recordings["ek"]), -77.0)
    q = sim.final_state.groups[2]["q"]
    np.testing.assert_allclose(np.asarray(q), 3e-3 * 1.0, rtol=1e-10)
    del m


class _Bad(so.AbstractMechanism):
    ions: ClassVar = ()

    def kinetics(self, v, states, env):
        return {}

    def current(self, v, states, env):
        env.ion("ca")
        return jnp.zeros_like(v)


def _undeclared_current():
    class C(CaChan1):
        def current(self, v, states, env):
            return {"na": super().current(v, states, env)["ca"]}

    return C()


def _no_valence():
    class X(CaChan1):
        ions: ClassVar = (so.UseIon("x", read=("xi",)),)

        def current(self, v, states, env):
            return jnp.zeros_like(v)

    return X()


def _writes_e():
    class E(CaChan1):
        ions: ClassVar = (so.UseIon("ca", write=("eca",)),)

    return E()


def _pool_without_state():
    class P(CaPool):
        def init_states(self, v, env):
            return {"c": env.ion("ca").inside}

        def kinetics(self, v, states, env):
            return {"c": so.Relaxation(inf=jnp.zeros_like(v), rate=jnp.ones_like(v))}

    return P()


class _Pool2(CaPool):
    pass


@pytest.mark.parametrize(
    "mechs, kw, match",
    [
        ([_Bad()], {"recs": ("v",)}, "ion 'ca' is not available"),
        ([_undeclared_current()], {}, "current of 'na'"),
        ([_no_valence()], {}, "ion 'x'.*no valence"),
        ([_writes_e()], {}, "writing a reversal potential is not supported"),
        ([CaPool(), _Pool2()], {}, "both write 'cai'"),
        ([_pool_without_state()], {}, "no state of that name"),
        ([CaChan1()], {"ions": {"ca": so.IonSpecies(inside=-1.0)}}, "inside"),
        ([CaChan1()], {"ions": {"ca": so.IonSpecies(valence=0)}}, "valence"),
        ([CaChan1()], {"ions": {"ca": 3.0}}, "IonSpecies"),
        ([CaChan1()], {"recs": ("m_hh",)}, "cannot record variable 'm_hh'"),
        ([so.HH()], {"recs": ("cai",)}, "no ion variable"),
    ],
)
def test_errors(mechs, kw, match):
    with pytest.raises(ValueError, match=match):
        m = _model(mechs, **kw)
        so.simulate(m, 0.05, 0.025)


def test_cell_ion_setting_errors():
    sec = [so.Section("soma", 10.0, 10.0)]
    with pytest.raises(ValueError, match=r"ions\[0\].sections\[0\].*'axon'"):
        so.Cell("c", sec, ions=[so.IonSetting("k", ["axon"])])
    with pytest.raises(ValueError, match=r"ions\[0\].outside"):
        so.Cell("c", sec, ions=[so.IonSetting("k", outside=0.0)])
    with pytest.raises(ValueError, match=r"ions\[0\]: expected an IonSetting"):
        so.Cell("c", sec, ions=[{"ion": "k"}])


def test_concentration_stays_positive_float32_large_influx():
    """A 100-fold calcium influx (imax × 100) with a fast-removing pool, float32:
    cai never negative nor non-finite, and it rises; a K(Ca) channel reading
    it within the step (NEURON's order) stays finite."""
    m = _model(
        [so.HH(), CaChan1(imax=1.0), CaPool(decay=0.5, cainf=0.0), CaGatedK()],
        dtype=np.float32,
        recs=("cai", "v"),
    )
    sim = so.simulate(m, 10.0, 0.025)
    cai = np.asarray(sim.recordings["cai"])
    assert np.all(np.isfinite(cai)) and np.all(cai >= 0.0)
    assert cai.max() > 50 * 5e-5


def test_gradient_wrt_pool_parameter_matches_finite_differences():
    """d(loss)/d(decay) of the pool (through the states) and d(loss)/d(imax) of
    the channel (also directly through the recorded ica), against central
    differences, float64; with a K(Ca) channel that reads the pool's cai of
    the same step (NEURON's order, `_solver/_ordered.py`) and shapes v."""
    model = _model(
        [so.HH(), CaChan1(imax=0.01), CaPool(), CaGatedK(gbar=0.05)],
        recs=("cai", "ica", "v"),
    )

    def loss(decay, imax):
        m = eqx.tree_at(
            lambda m: (m.mechanisms[2].mechanism.decay, m.mechanisms[1].mechanism.imax),
            model,
            (jnp.full((1,), decay), jnp.full((1,), imax)),
        )
        r = so.simulate(m, 6.0, 0.025).recordings
        return jnp.mean(r["cai"]) * 1e4 + jnp.mean(r["ica"]) * 1e3 + jnp.mean(r["v"])

    d, i = 40.0, 0.01
    g = jax.grad(loss, argnums=(0, 1))(d, i)
    fd_d = (loss(d + 1e-3, i) - loss(d - 1e-3, i)) / 2e-3
    fd_i = (loss(d, i + 1e-6) - loss(d, i - 1e-6)) / 2e-6
    np.testing.assert_allclose(float(g[0]), float(fd_d), rtol=1e-5)
    np.testing.assert_allclose(float(g[1]), float(fd_i), rtol=1e-5)
    assert float(g[0]) != 0.0 and float(g[1]) != 0.0


def test_non_ion_model_has_no_ions():
    m = _model([so.HH()], recs=("v",))
    assert m.ions == () and m.layout.recording_variables == ()


def test_diagnose_names_a_nonfinite_concentration():
    class Blowup(CaPool):
        """A pool whose concentration becomes NaN once v passes -20 mV (in
        CaPool's place in NEURON's order, before CaGatedK, which reads it)."""

        mechanism_type: ClassVar[int] = CaPool.mechanism_type

        def kinetics(self, v, states, env):
            kin = super().kinetics(v, states, env)["cai"]
            bad = jnp.where(v > -20.0, jnp.nan, 0.0)
            return {"cai": so.Relaxation(inf=kin.inf + bad, rate=kin.rate)}

    m = _model([so.HH(), CaChan1(imax=0.01), Blowup(), CaGatedK()], recs=("v",))
    assert neuron_order(m) is not None  # CaGatedK reads this step's cai
    d = so.diagnose(m, 5.0, 0.025)
    assert d.found
    text = str(d)
    assert "Blowup" in text and "cai" in text, text
