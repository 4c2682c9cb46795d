"""NMODL arrays, unrolled at import: `x[N]` becomes `N` variables `x[0]`, ...,
`FROM` loops with constant bounds are unrolled, `COMPARTMENT i, vol[i] {x}`
gives each element its volume, and an element is recorded as NEURON names it
(`ca_cadifpmp[3]`).

Against NEURON: its own `cabpump.mod` (radial calcium diffusion over ten
annuli, a buffer folded into the volumes, a pump; `ica` READ and written),
filled by `cachan1.mod`'s calcium current, with `hh`; one compartment (L =
diam = 20 µm, 0.15 nA from 2 ms for 20 ms, 30 ms, dt 0.025 ms), NEURON at
`secondorder = 0`, our `BackwardEuler`, float64 (`nmodl_support`).

- Without the pump's current (`k3 = k4 = 0`): the same scheme, to rounding.
  Measured on the development machine: 2.1e-7 mV in `v` (cachan1's
  finite-difference `di/dv` in NEURON), 2.6e-15 mM in `cai` (of an 8.8e-6 mM
  rise), 2.5e-18 mM in `ca[3]`.
- With it: NEURON's first step passes the pump current that `INITIAL` left
  (`ica_pmp = 0`) to the membrane; every later step, and ours from the first,
  the value the scheme computes at the step's states. That one step moves
  `v` by 0.024 mV at most (spike times 1.2e-4 ms apart; NEURON's own
  dt-convergence error here is 0.08 ms, dt 0.025 against 0.001).
"""

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DEMO
from nmodl_support import FakeEnv, run_neuron, run_ours

import stable_ode as so
from stable_ode.nmodl import load_nmodl


RECORD = ["cai", "ca_cadifpmp[3]", "ca_cadifpmp[9]", "pump_cadifpmp"]


@pytest.fixture(scope="module")
def mechs():
    return load_nmodl([DEMO / "cachan1.mod", DEMO / "cabpump.mod"])


@pytest.fixture(scope="module")
def ours(mechs):
    m = mechs
    cells = {
        "diffusion": [m["cachan1"](imax=0.005), m["cadifpmp"](k3=0.0, k4=0.0)],
        "pump": [m["cachan1"](imax=0.005), m["cadifpmp"]()],
    }
    cells = {k: c + [so.HH()] for k, c in cells.items()}
    return run_ours(cells, {k: RECORD for k in cells})


def _neuron(h, **pump):
    old = {k: getattr(h, f"{k}_cadifpmp") for k in pump}
    for k, x in pump.items():
        setattr(h, f"{k}_cadifpmp", x)
    try:
        cell = [("cachan1", {"imax": 0.005}), ("cadifpmp", {}), ("hh", {})]
        return run_neuron(h, {"c": cell}, {"c": RECORD})
    finally:
        for k, x in old.items():
            setattr(h, f"{k}_cadifpmp", x)


def _spikes(t, v):
    i = np.nonzero((v[:-1] < 0) & (v[1:] >= 0))[0]
    return t[i] - v[i] * (t[i + 1] - t[i]) / (v[i + 1] - v[i])


_GATES = """NEURON {{
  SUFFIX {name}
  NONSPECIFIC_CURRENT i
  RANGE gbar
}}
DEFINE NG 2
PARAMETER {{ gbar = 0.01 (S/cm2) }}
ASSIGNED {{ v (mV) i (mA/cm2) {assigned} }}
STATE {{ m h }}
BREAKPOINT {{
  SOLVE s METHOD cnexp
  i = gbar*m*m*m*h*(v - 50)
}}
INITIAL {{
  rates(v)
  {initial}
}}
DERIVATIVE s {{
  rates(v)
  {equations}
}}
PROCEDURE rates(v (mV)) {{
  {rates}
}}
"""
ARRAYED = _GATES.format(
    name="arrayed",
    assigned="inf[NG] tau[NG]",
    initial="m = inf[0]\n  h = inf[NG-1]",
    equations="m' = (inf[0] - m)/tau[0]\n  h' = (inf[1] - h)/tau[1]",
    rates="FROM k = 0 TO NG-1 {\n"
    "    inf[k] = 1/(1 + exp((-40 + 25*k - v)/(7 - 14*k)))\n"
    "    tau[k] = 0.5 + 4*k\n  }",
)
SCALAR = _GATES.format(
    name="scalar",
    assigned="inf0 inf1 tau0 tau1",
    initial="m = inf0\n  h = inf1",
    equations="m' = (inf0 - m)/tau0\n  h' = (inf1 - h)/tau1",
    rates="inf0 = 1/(1 + exp((-40 + 25*0 - v)/(7 - 14*0)))\n  tau0 = 0.5 + 4*0\n"
    "  inf1 = 1/(1 + exp((-40 + 25*1 - v)/(7 - 14*1)))\n  tau1 = 0.5 + 4*1",
)
"""Ours: the same two-gate channel with arrays, a `DEFINE` and `FROM` loops, and
written out by hand."""


def test_unrolled_arrays_equal_the_scalars(tmp_path):
    """The arrayed channel (`inf[NG]`, `tau[NG]` filled by a `FROM` loop) and
    the one written out by hand give the same trace, to the last bit."""
    for name, text in (("arrayed", ARRAYED), ("scalar", SCALAR)):
        (tmp_path / f"{name}.mod").write_text(text)
    m = load_nmodl([tmp_path / "arrayed.mod", tmp_path / "scalar.mod"])
    assert "tau__1" in m["arrayed"].nmodl.source
    _, got = run_ours(
        {
            "a": [m["arrayed"](), so.Passive(g=1e-4, e=-65.0)],
            "s": [m["scalar"](), so.Passive(g=1e-4, e=-65.0)],
        },
        t_stop=10.0,
    )
    assert np.ptp(got["a"]) > 20.0
    np.testing.assert_array_equal(got["a"], got["s"])


def test_array_states_by_element(mechs):
    """`cabpump.mod`'s `STATE ca[NANN]` (`DEFINE NANN 10`): ten states."""
    s = mechs["cadifpmp"]().init_states(jnp.full((1,), -65.0), FakeEnv(1))
    assert sorted(s) == sorted([f"ca[{k}]" for k in range(10)] + ["pump", "pumpca"])
    np.testing.assert_allclose([s[f"ca[{k}]"][0] for k in range(10)], 5e-5)


@pytest.mark.neuron
def test_diffusion_agrees_with_neuron(ours, nrn_compiled):
    _, nrn = _neuron(nrn_compiled, k3=0.0, k4=0.0)
    got = ours[1]
    assert np.max(nrn["c"]) > 0.0  # it spikes
    np.testing.assert_allclose(got["diffusion"], nrn["c"], rtol=0, atol=1e-6)
    assert np.ptp(nrn["c.cai"]) > 5e-6  # the calcium current fills the shell
    assert np.ptp(nrn["c.ca_cadifpmp[3]"]) > 1e-9  # and it diffuses inwards
    # (mM; mol/cm²) the calcium current's share of the 2e-9 relative
    # difference in `v`
    bounds = {"cai": 1e-13, "ca_cadifpmp[3]": 1e-16, "ca_cadifpmp[9]": 1e-16}
    for var in RECORD:
        ref = nrn[f"c.{var}"]
        err = np.max(np.abs(got[f"diffusion.{var}"] - ref))
        print(var, err, np.ptp(ref))
        assert err <= bounds.get(var, 1e-24), var


@pytest.mark.neuron
def test_pump_spike_times_agree_with_neuron(ours, nrn_compiled):
    """See the module's docstring: the one difference is NEURON's first
    step, so the states agree to rounding through it and the spike times to
    far below NEURON's dt-convergence error."""
    t, nrn = _neuron(nrn_compiled)
    got = ours[1]
    for var in ("cai", "pump_cadifpmp"):  # the first step: the same scheme
        ref = nrn[f"c.{var}"][:2]
        np.testing.assert_allclose(got[f"pump.{var}"][:2], ref, rtol=1e-12, atol=0)
    theirs, mine = _spikes(t, nrn["c"]), _spikes(ours[0], got["pump"])
    assert len(theirs) == len(mine) == 2
    np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-3)
    err = np.max(np.abs(got["pump"] - nrn["c"]))
    print("max |dv|", err, "spike times", mine - theirs)
    assert err < 0.05


def test_float32_concentrations_non_negative(mechs):
    """A 100× calcium influx in float32: every element finite and never
    negative, the pool's calcium risen."""
    m = mechs
    cell = so.Cell(
        "c",
        [so.Section("soma", 20.0, 20.0, 1)],
        [
            so.Insert(m["cachan1"](imax=0.5)),
            so.Insert(m["cadifpmp"]()),
            so.Insert(so.HH()),
        ],
    )
    site = so.Site("c", "soma", 0.5)
    recs = [so.Recording(f"ca{k}", site, variable=f"ca_cadifpmp[{k}]") for k in (0, 9)]
    model = so.build(
        [cell],
        [so.StepCurrent(site, 0.15, 2.0, 20.0)],
        recs,
        celsius=6.3,
        dtype=jnp.float32,
    )
    sim = so.simulate(model, 30.0, 0.025)
    for k in (0, 9):
        x = np.asarray(sim.recordings[f"ca{k}"])
        assert x.dtype == np.float32 and np.all(np.isfinite(x)) and np.all(x >= 0)
    assert np.max(np.asarray(sim.recordings["ca0"])) > 1e-4
