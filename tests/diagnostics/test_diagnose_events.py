"""`diagnose` on models with point processes: it steps with the events'
hooks as `simulate` does (arrivals delivered, clamps and synapses updated),
names an event delivery that made a state non-finite, and names the `.mod`
line of an imported point process whose current overflowed."""

import pathlib

import numpy as np

import stable_ode as so
from stable_ode.diagnostics._nmodl_source import ModLine


MOD = pathlib.Path(__file__).parent / "mod"
CELL = so.Cell("c", [so.Section("soma", 20.0, 20.0)], [so.Insert(so.HH())])
SITE = so.Site("c", "soma", 0.5)


def _model(syn, weight, times=(1.0,), delay=0.513):
    return so.build(
        [CELL],
        point_processes=[syn],
        netcons=[so.NetCon(so.SpikeTimes(list(times)), syn, delay, weight)],
        recordings=[so.Recording("v", SITE)],
    )


def test_a_healthy_model_with_events():
    """A spike driven by an arrival inside a step (1.513 ms): nothing bad in
    200 steps, as in `simulate`."""
    model = _model(so.ExpSyn(SITE, tau=2.0, e=0.0, name="s"), 0.01)
    v = np.asarray(so.simulate(model, 5.0, 0.025).recordings["v"])
    assert np.all(np.isfinite(v)) and v.max() > 30
    d = so.diagnose(model, 5.0, 0.025)
    assert not d.found and d.n_steps == 200


def test_names_an_event_delivery():
    """A NetCon weight of 1e308 µS: the arrival's mean conductance over its
    step overflows. Before, `diagnose` stepped without the events (no bad
    value) and took the arrivals' `+inf` padding for a bad parameter."""
    model = _model(so.ExpSyn(SITE, tau=2.0, e=0.0, name="s"), 1e308)
    d = so.diagnose(model, 3.0, 0.025)
    print(d)
    assert d.found and d.stage == "event delivery" and d.step == 60
    assert d.function == "ExpSynGroup.before_step"
    assert d.outputs == {"point process ExpSyn.x": np.inf}
    assert "events delivered" in str(d)


def test_names_the_mod_line_of_an_imported_point_process():
    """Three events of weight 200 drive `ppboom.mod`'s `A` past 308 and its
    current `10^A` overflows: the report names that statement."""
    boom = so.load_nmodl(MOD / "ppboom.mod")["PPBoom"](SITE, name="b")
    model = _model(boom, 200.0, times=(1.0, 2.0, 3.0), delay=0.0)
    d = so.diagnose(model, 5.0, 0.025)
    print(d)
    assert d.found and d.stage == "current" and d.step == 80
    assert d.function == "PPBoomGroup.current"
    assert d.outputs["point process PPBoom current [nA]"] == -np.inf
    text = "i = -gain * 10^A"
    (line,) = [
        k
        for k, s in enumerate((MOD / "ppboom.mod").read_text().splitlines(), 1)
        if text in s
    ]
    assert d.source == ModLine(str(MOD / "ppboom.mod"), line, text)
