"""The importer on NEURON's own `hh.mod` and `passive.mod` and on this folder's
`hhns.mod` (HH in alpha/beta form with nonspecific currents), without NEURON
running: against the built-in `HH` and `Passive`."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import MODFILE, OWN
from nmodl_support import FakeEnv, per_compartment, run_ours

import stable_ode as so
from stable_ode.mechanisms import Relaxation
from stable_ode.nmodl import load_nmodl


@pytest.fixture(scope="module")
def mechs():
    return load_nmodl([MODFILE / "hh.mod", MODFILE / "passive.mod", OWN / "hhns.mod"])


V = jnp.linspace(-200.0, 150.0, 3501)


@pytest.mark.parametrize("celsius", [6.3, 16.3, 37.0])
def test_hh_kinetics_match_builtin(mechs, celsius):
    """Imported `hh.mod`: every gate a `Relaxation` whose `inf`, `rate` and
    update equal the built-in `HH`'s to rounding at 3,501 voltages (including
    vtrap's singular points -40 and -55 mV); initial states and currents too."""
    n = V.shape[0]
    env = FakeEnv(n, celsius=celsius)
    ours = per_compartment(mechs["hh"](), n)
    k1 = ours.kinetics(V, {}, env)
    k2 = so.HH().kinetics(V, {}, so.Environment(celsius=celsius))
    x = jnp.linspace(0.0, 1.0, n)
    for s in "mhn":
        assert isinstance(k1[s], Relaxation)
        np.testing.assert_allclose(k1[s].inf, k2[s].inf, rtol=1e-14, atol=1e-300)
        np.testing.assert_allclose(k1[s].rate, k2[s].rate, rtol=1e-14)
        np.testing.assert_allclose(
            k1[s].update(x, 0.025), k2[s].update(x, 0.025), rtol=0, atol=1e-15
        )
    s1 = ours.init_states(V, env)
    s2 = so.HH().init_states(V, so.Environment(celsius=celsius))
    for s in "mhn":
        np.testing.assert_allclose(s1[s], s2[s], rtol=0, atol=1e-15)
    i1 = ours.current(V, s1, env)
    assert set(i1) == {"na", "k", "nonspecific"}
    total = i1["na"] + i1["k"] + i1["nonspecific"]
    np.testing.assert_allclose(
        total, so.HH().current(V, s2, env), rtol=1e-13, atol=1e-15
    )


def test_forms_and_metadata(mechs):
    hh = mechs["hh"]
    assert hh.nmodl.forms == {s: "relaxation(tau)" for s in "mhn"}
    assert hh.nmodl.state_lines == {
        "m": (str(MODFILE / "hh.mod"), 81),
        "h": (str(MODFILE / "hh.mod"), 82),
        "n": (str(MODFILE / "hh.mod"), 83),
    }
    assert hh.nmodl.methods == ("cnexp",)
    assert hh.nmodl.tables == ("rates",)
    # the generated source names its lines, and vtrap's guard became exact
    src = hh.nmodl.source
    assert "x_over_expm1" in src and "# hh.mod:119" in src
    assert "1e-06" not in src  # the guard's approximation is gone
    assert mechs["hhns"].nmodl.forms == {s: "relaxation" for s in "mhn"}


def test_parameters_are_fields(mechs):
    hh = mechs["hh"]
    m = hh()
    assert (m.gnabar, m.gkbar, m.gl, m.el) == (0.12, 0.036, 0.0003, -54.3)
    assert hh(gnabar=0.2).gnabar == 0.2
    with pytest.raises(TypeError):
        hh(ena=50.0)  # an ion variable, not a parameter
    assert {f.name for f in dataclasses.fields(mechs["pas"]())} == {"g", "e"}
    # after build: one trainable value per compartment
    cell = so.Cell("c", [so.Section("s", 100.0, 2.0, 5)], [so.Insert(mechs["pas"]())])
    model = so.build([cell])
    group = model.mechanisms[0]
    assert group.mechanism.g.shape == (5,) and group.mechanism.e.shape == (5,)


@pytest.fixture(scope="module")
def traces(mechs):
    """One simulation of four compartments: imported vs built-in."""
    return run_ours(
        {
            "pas_import": [mechs["pas"](g=0.002, e=-60.0)],
            "pas": [so.Passive(g=0.002, e=-60.0)],
            "hhns": [mechs["hhns"]()],
            "hh_import": [mechs["hh"]()],
            "hh": [so.HH()],
        }
    )[1]


def test_passive_trace_equals_builtin(traces):
    assert np.ptp(traces["pas"]) > 5.0
    assert np.max(np.abs(traces["pas_import"] - traces["pas"])) == 0.0


def test_hhns_trace_equals_builtin_hh(traces):
    """`hhns.mod` (HH written with alpha/beta FUNCTIONs, an inline fabs guard,
    nonspecific currents) spikes as the built-in `HH` (measured: 0 mV
    difference at 6.3 °C, 6e-14 mV at 16.3 °C)."""
    v, v2 = traces["hhns"], traces["hh"]
    assert np.max(v2) > 20.0
    np.testing.assert_allclose(v, v2, rtol=0, atol=1e-10)


def test_hh_trace_equals_builtin_hh(traces):
    """NEURON's `hh.mod`, imported, gives the built-in `HH`'s trace to rounding
    (measured: 4e-13 mV on spikes of ~100 mV; the rate `1/mtau` is formed as
    `1/(1/(q10·(alpha + beta)))`, not `q10·(alpha + beta)`)."""
    v, v2 = traces["hh_import"], traces["hh"]
    np.testing.assert_allclose(v, v2, rtol=0, atol=1e-10 * np.max(np.abs(v2)))


def test_docs_example_runs():
    """The example at the top of docs/nmodl.md runs as written."""
    import pathlib
    import re

    page = pathlib.Path(__file__).parents[2] / "docs" / "nmodl.md"
    code = re.search(r"```python\n(.*?)```", page.read_text(), re.S).group(1)
    namespace = {}
    exec(compile(code, str(page), "exec"), namespace)
    assert np.max(np.asarray(namespace["sim"].recordings["v"])) > 20.0


def test_jit_and_grad_through_imported(mechs):
    """Parameters of an imported mechanism are leaves `jax.grad` sees."""
    n = 4
    env = FakeEnv(n)
    mech = per_compartment(mechs["hh"](), n)
    v = jnp.array([-80.0, -55.0, -40.0, 10.0])

    @jax.jit
    def loss(mech):
        s = mech.init_states(v, env)
        i = mech.current(v, s, env)
        return jnp.sum(i["na"] ** 2 + i["k"] ** 2)

    g = jax.grad(loss)(mech)
    assert np.all(np.isfinite(g.gnabar)) and np.any(g.gnabar != 0)


CARRIED = """NEURON {{ SUFFIX {name} NONSPECIFIC_CURRENT i RANGE g }}
PARAMETER {{ g = 0.001 (S/cm2) }}
ASSIGNED {{ v (mV) i (mA/cm2) tau (ms) }}
STATE {{ a }}
INITIAL {{ a = 1 }}
BREAKPOINT {{ SOLVE s METHOD cnexp {breakpoint} i = g*a*(v + 65) }}
DERIVATIVE s {{ {derivative} a' = -a/tau }}
"""


def test_value_carried_from_breakpoint(tmp_path):
    """A value that BREAKPOINT computes and the solved block reads before
    computing it is, as in NEURON, the one BREAKPOINT left (here `tau = 2`
    every step): the same trace as computing it in the block."""
    files = []
    for name, bp, deriv in (("late", "tau = 2", ""), ("early", "", "tau = 2")):
        path = tmp_path / f"{name}.mod"
        path.write_text(CARRIED.format(name=name, breakpoint=bp, derivative=deriv))
        files.append(path)
    m = load_nmodl(files)
    _, late = run_ours({"c": [m["late"](g=0.01), so.HH()]})
    _, early = run_ours({"c": [m["early"](g=0.01), so.HH()]})
    _, without = run_ours({"c": [so.HH()]})
    np.testing.assert_array_equal(late["c"], early["c"])
    assert np.max(np.abs(late["c"] - without["c"])) > 1.0  # the current matters
