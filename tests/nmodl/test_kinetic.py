"""`KINETIC` blocks (`METHOD sparse`) imported, against NEURON running the same
files (compiled once per session, `tests/conftest.py`): one compartment per
case (L = diam = 20 µm), 0.15 nA from 2 ms for 20 ms, 30 ms, dt 0.025 ms,
NEURON at `secondorder = 0`, our `BackwardEuler`, float64. Every case starts
from NEURON's initial states (NEURON's `STEADYSTATE sparse` is iterative and
stops ~1e-6 relative from the exact steady state, which is ours).

- `kmarkov.mod` (closed three-state scheme, `CONSERVE`): a `MarkovScheme`.
- `kcascheme.mod` (ours: `~ c + cai <-> cca`, the binding rate proportional
  to `cai` that `capool.mod` fills from `cachan1.mod`'s `ica`): a
  `MarkovScheme` whose rates follow the concentration. NEURON advances the
  mechanisms that write a concentration (`capool`) before all others, so the
  scheme reads the `cai` of the pool's update of the same step; so does
  `BackwardEuler`. `cabind.mod` (ours: the same scheme in a file NEURON
  registers before `capool.mod`, case `kcab`, its pool starting at 2e-4 mM):
  the same, whatever the order, and its initial populations are the steady
  state at the pool's initial `cai` (NEURON's `INITIAL`s run in that order).
- NEURON's `release.mod` (transmitter release driven by `cai`; `GenVes` a
  parameter species, `~ Ach <-> X (Aase, 0)`): a `LinearScheme` with a source.
- `cakin.mod` (ours: a one-state pool, `~ cai << (flux)` from `ica`, relaxing
  to a parameter species): a `LinearScheme`, and a concentration that the ion
  model couples to `cachan1.mod`.

Asserted: max |Δv| < 1e-6 mV over the trace, and each scheme's states at the
end within 1e-9 relative (measured values in `docs/nmodl.md`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DEMO, OWN, run_fixed

import stable_ode as so
from stable_ode.mechanisms import MarkovScheme
from stable_ode.mechanisms._ions import IonView
from stable_ode.nmodl import load_nmodl, NmodlError
from stable_ode.nmodl._kinetics import LinearScheme


DATA = OWN.parent.parent / "data" / "mod"
DT, T1 = 0.025, 30.0
STEP = (0.15, 2.0, 20.0)


@pytest.fixture(scope="module")
def mechs():
    # in the order NEURON registers them (nrnivmodl compiles the session's
    # folder in name order): BackwardEuler advances mechanisms in that order
    return load_nmodl(
        [
            OWN / "cabind.mod",
            DEMO / "cachan1.mod",
            DATA / "cakin.mod",
            OWN / "capool.mod",
            DATA / "kcascheme.mod",
            DATA / "kmarkov.mod",
            DEMO / "release.mod",
        ]
    )


# case -> (ours, NEURON's (suffix, params), scheme mechanism, its states)
def cases(m):
    # capool starts at the ion's default cai
    ca = ([m["cachan1"](imax=0.005), m["capool"](cainf=5e-5)],
          [("cachan1", {"imax": 0.005}), ("capool", {"cainf": 5e-5})])  # fmt: skip
    # a pool starting away from the ion's default: the scheme's initial
    # populations at the pool's initial cai, as NEURON's INITIALs run in order
    ca2 = ([m["cachan1"](imax=0.005), m["capool"](cainf=2e-4)],
           [("cachan1", {"imax": 0.005}), ("capool", {"cainf": 2e-4})])  # fmt: skip
    return {
        "km": ([so.HH(gkbar=0.0), m["kmarkov"]()],
               [("hh", {"gkbar": 0.0}), ("kmarkov", {})], "kmarkov", ("c1", "c2", "o")),
        "kca": ([*ca[0], m["kcascheme"](gbar=0.0005), so.HH()],
                [*ca[1], ("kcascheme", {"gbar": 0.0005}), ("hh", {})], "kcascheme",
                ("c", "cca", "o")),
        "kcab": ([*ca2[0], m["cabind"](gbar=0.0005), so.HH()],
                  [*ca2[1], ("cabind", {"gbar": 0.0005}), ("hh", {})], "cabind",
                  ("c", "cca", "o")),
        "rel": ([*ca[0], m["trel"](), so.HH()], [*ca[1], ("trel", {}), ("hh", {})],
                "trel", ("Ves", "B", "Ach", "X")),
        "cakin": ([m["cachan1"](imax=0.005), m["cakin"](), so.HH()],
                  [("cachan1", {"imax": 0.005}), ("cakin", {}), ("hh", {})], "cakin",
                  ("cai",)),
    }  # fmt: skip


def run_neuron(h, c):
    """Per case: the voltage trace, `cai`, and each scheme state's trace."""
    secs, keep, vecs = [], [], {}
    h.load_file("stdrun.hoc")
    for name, (_, nrn, suffix, states) in c.items():
        sec = h.Section(name=f"kinetic_{name}")
        secs.append(sec)
        sec.L = sec.diam = 20.0
        for mech, params in nrn:
            sec.insert(mech)
            for k, val in params.items():
                setattr(sec(0.5), f"{k}_{mech}", val)
        ic = h.IClamp(sec(0.5))
        ic.amp, ic.delay, ic.dur = STEP
        keep.append(ic)
        refs = {"v": sec(0.5)._ref_v}
        if name != "km":
            refs["cai"] = sec(0.5)._ref_cai
        for s in states:
            if s != "cai":
                refs[s] = getattr(sec(0.5), f"_ref_{s}_{suffix}")
        for k, ref in refs.items():
            vecs[name, k] = h.Vector().record(ref)
    h.usetable_hh = h.usetable_cachan1 = 0  # tables off: ours are exact
    return run_fixed(h, vecs, secs, keep, T1, DT)


@pytest.fixture(scope="module")
def runs(mechs, neuron_mechanisms):
    c = cases(mechs)
    nrn = run_neuron(neuron_mechanisms, c)
    cells, stimuli, recordings = [], [], []
    for name, (ours, *_) in c.items():
        cells.append(so.Cell(name, [so.Section("soma", 20.0, 20.0)],
                             [so.Insert(x) for x in ours]))  # fmt: skip
        site = so.Site(name, "soma", 0.5)
        stimuli.append(so.StepCurrent(site, *STEP))
        recordings.append(so.Recording(name, site))
        if name != "km":
            recordings.append(so.Recording(f"{name}.cai", site, variable="cai"))
    model = so.build(cells, stimuli, recordings, celsius=6.3)
    y0 = model.init_state()
    # Start every scheme from NEURON's initial states (see the module docstring).
    groups, ours0 = list(y0.groups), {}
    where = {type(g.mechanism).__name__: k for k, g in enumerate(model.mechanisms)}
    for name, (_, _, suffix, states) in c.items():
        if states == ("cai",):
            continue
        k = where[suffix]  # (an imported class is named by its SUFFIX)
        ours0[name] = {s: float(groups[k][s][0]) for s in states}
        groups[k] = {s: jnp.full(1, nrn[name, s][0]) for s in states}
    y0 = so.State(v=y0.v, groups=tuple(groups))
    sim = so.simulate(model, T1, DT, y0=y0, solver=so.BackwardEuler())
    final = {}
    for name, (_, _, suffix, states) in c.items():
        if states != ("cai",):
            g = sim.final_state.groups[where[suffix]]
            final[name] = {s: float(g[s][0]) for s in states}
    rec = {k: np.asarray(v) for k, v in sim.recordings.items()}
    return rec, nrn, ours0, final


def test_kinetic_forms(mechs):
    m = mechs
    assert set(m["kmarkov"].nmodl.forms.values()) == {"markov scheme (sparse)"}
    assert set(m["kcascheme"].nmodl.forms.values()) == {"markov scheme (sparse)"}
    assert set(m["trel"].nmodl.forms.values()) == {"linear scheme (sparse)"}
    assert m["kmarkov"].nmodl.state_lines["o"] == (str(DATA / "kmarkov.mod"), 20)
    v = jnp.full(2, -30.0)
    env = _Env()
    k = m["kcascheme"](gbar=jnp.full(2, 0.002)).kinetics(v, {}, env)
    (scheme,) = k.values()
    assert isinstance(scheme, MarkovScheme) and scheme.total == 1.0
    # the binding rate c -> cca is kon·cai
    np.testing.assert_allclose(scheme.rates[0][1], 2000 * env.cai, rtol=1e-15)
    (rel,) = m["trel"]().kinetics(v, {}, env).values()
    assert isinstance(rel, LinearScheme) and rel.states == ("Ves", "B", "Ach", "X")


class _Ion:
    def __init__(self, inside):
        self.inside = jnp.full(2, inside)
        self.reversal = jnp.full(2, -77.0)


class _Env:
    cai = 2e-4
    celsius = 6.3
    diam = 20.0
    area = None

    def ion(self, name):
        return _Ion(self.cai if name == "ca" else 54.4)


@pytest.mark.neuron
@pytest.mark.parametrize("name", ["km", "kca", "kcab", "rel", "cakin"])
def test_against_neuron(runs, name):
    rec, nrn, ours0, final = runs
    v, v_nrn = rec[name], nrn[name, "v"]
    err = float(np.max(np.abs(v - v_nrn)))
    print(f"{name}: max |v - v_NEURON| = {err:.2g} mV")
    assert np.max(v_nrn) > 0, "the case spikes"
    for s, x in ours0.get(name, {}).items():
        assert abs(x - nrn[name, s][0]) <= 1e-5 * max(abs(x), 1e-3)
    assert err < 1e-6
    if name != "km":
        cai = rec[f"{name}.cai"]
        assert np.max(cai) > 1e-3  # the calcium rises from ~5e-5 mM
        np.testing.assert_allclose(cai, nrn[name, "cai"], rtol=0, atol=1e-11)
    for s, x in final.get(name, {}).items():
        print(f"  {s}: {x:.6g}, relative to NEURON {x / nrn[name, s][-1] - 1:.2g}")
        np.testing.assert_allclose(x, nrn[name, s][-1], rtol=1e-9, atol=1e-14)


@pytest.mark.neuron
@pytest.mark.parametrize("name", ["kca", "rel"])
def test_scheme_step_replays_neuron(mechs, runs, name):
    """Our imported scheme stepped through NEURON's own `v` and `cai` traces
    (each step at the new `v` and the `cai` of the step's end, as NEURON's
    state update reads them) gives NEURON's state traces to rounding: the
    reactions, their `cai`-dependent rates, `CONSERVE` and the implicit
    Euler step are NEURON's."""
    _, nrn, _, _ = runs
    _, _, suffix, states = cases(mechs)[name]
    mech = jax.tree_util.tree_map(lambda x: jnp.full((1,), x), cases(mechs)[name][0][2])
    v, cai = nrn[name, "v"], nrn[name, "cai"]

    def step(x, vc):
        env = so.Environment(celsius=6.3, ions={"ca": _ion(vc[1]), "k": _ion(54.4)})
        kin = mech.kinetics(vc[0][None], dict(zip(states, x)), env)
        (scheme,) = kin.values()
        x1 = scheme.update(x, DT)
        return x1, jnp.stack(x1)

    x0 = tuple(jnp.full((1,), nrn[name, s][0]) for s in states)
    vc = jnp.stack([jnp.asarray(v[1:]), jnp.asarray(cai[1:])], axis=1)
    _, xs = jax.lax.scan(step, x0, vc)
    for i, s in enumerate(states):
        ref = nrn[name, s][1:]
        err = float(np.max(np.abs(np.asarray(xs[:, i, 0]) - ref)))
        print(f"{name}.{s}: max |x - x_NEURON| = {err:.2g} (max {np.max(ref):.3g})")
        assert err <= 1e-11 * max(1.0, float(np.max(np.abs(ref))))


def _ion(inside):
    x = jnp.full((1,), inside)
    return IonView(inside=x, outside=x, reversal=jnp.full((1,), -77.0),
                   current=jnp.zeros(1), valence=2)  # fmt: skip


# -- errors -----------------------------------------------------------------------

HEAD = """NEURON { SUFFIX kin NONSPECIFIC_CURRENT i }
PARAMETER { g = 0.001 (S/cm2) k = 1 (/ms) }
ASSIGNED { v (mV) i (mA/cm2) }
STATE { a b c }
BREAKPOINT { SOLVE s METHOD sparse i = g*c*v }
"""  # 5 lines


ERRORS = {
    "indexed_compartment": (
        "KINETIC s {\n  COMPARTMENT i, 2 {a}\n  ~ a <-> b (k, k)\n}\n",
        "COMPARTMENT",
        7,
        "array",
    ),  # fmt: skip
    "flux_first": (
        "KINETIC s {\n  i = f_flux\n  ~ a <-> b (k, k)\n}\n",
        "f_flux",
        7,
        "no reaction comes before it",
    ),  # fmt: skip
    "in_if": (
        "KINETIC s {\n  if (v > 0) {\n    ~ a <-> b (k, k)\n  }\n"
        "  ~ b <-> c (k, k)\n}\n",
        "~",
        8,
        "inside if",
    ),  # fmt: skip
    "compartment_in_if": (
        "KINETIC s {\n  if (v > 0) {\n    COMPARTMENT 2 {a}\n  }\n"
        "  ~ a <-> b (k, k)\n}\n",
        "COMPARTMENT",
        8,
        "inside if",
    ),  # fmt: skip
    "method": (
        "KINETIC t {\n  ~ a <-> b (k, k)\n}\n",
        "SOLVE",
        5,
        "KINETIC blocks take",
    ),  # fmt: skip
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_unsupported_kinetic_construct(tmp_path, case):
    body, construct, line, words = ERRORS[case]
    head = HEAD
    if case == "method":
        head = head.replace("SOLVE s METHOD sparse", "SOLVE t METHOD cnexp")
    path = tmp_path / "kin.mod"
    path.write_text(head + body)
    with pytest.raises(NmodlError) as e:
        load_nmodl(path)
    err = e.value
    assert (err.construct, err.line) == (construct, line), str(err)
    assert words in str(err)
    assert str(err).startswith(f"{path}:{line}: ")


def test_flux_outside_kinetic_is_an_error(tmp_path):
    path = tmp_path / "kin.mod"
    body = "KINETIC s {\n  ~ a <-> b (k, k)\n  ~ b <-> c (k, k)\n}\n"
    path.write_text(HEAD.replace("i = g*c*v", "i = g*c*v*f_flux") + body)
    with pytest.raises(NmodlError) as e:
        load_nmodl(path)
    assert e.value.construct == "f_flux" and e.value.line == 5, str(e.value)
    assert "belong in KINETIC blocks" in str(e.value)
