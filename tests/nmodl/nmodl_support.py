"""Shared by the NMODL importer's tests: a one-compartment run in both
simulators, and a stand-in `Environment` for calling mechanisms directly."""

import jax.numpy as jnp
import numpy as np

import stable_ode as so


class FakeIon:
    def __init__(self, n, dtype, reversal=0.0, inside=1.0, outside=1.0):
        self.reversal = jnp.full((n,), reversal, dtype)
        self.inside = jnp.full((n,), inside, dtype)
        self.outside = jnp.full((n,), outside, dtype)
        self.current = jnp.zeros((n,), dtype)


class FakeEnv:
    """What a mechanism sees of a model (for calling its methods directly):
    `celsius`, geometry, and NEURON's default ions."""

    DEFAULTS = {
        "na": (50.0, 10.0, 140.0),
        "k": (-77.0, 54.4, 2.5),
        "ca": (132.4579341637009, 5e-5, 2.0),
    }

    def __init__(self, n, dtype=jnp.float64, celsius=6.3):
        self.celsius = jnp.asarray(celsius, dtype)
        self.area = jnp.full((n,), 20.0 * 20.0 * np.pi * 1e-8, dtype)
        self.diam = jnp.full((n,), 20.0, dtype)
        self.length = jnp.full((n,), 20.0, dtype)
        self.n, self.dtype = n, dtype

    def ion(self, name):
        e, ci, co = self.DEFAULTS.get(name, (0.0, 1.0, 1.0))
        return FakeIon(self.n, self.dtype, e, ci, co)


def per_compartment(mech, n, dtype=jnp.float64):
    """`mech` with every parameter an array of `n` values (as after `build`)."""
    import jax

    return jax.tree_util.tree_map(lambda x: jnp.full((n,), x, dtype), mech)


STEP = dict(amplitude=0.15, delay=2.0, duration=20.0)


def _model(cells, recorded, celsius, dtype):
    """Per name in `cells`, a compartment (L = diam = 20 µm) with the mechanisms
    `cells[name]`, a step current (`STEP`) and the recordings
    `recorded(name, site)`, built into one model."""
    built, stimuli, recordings = [], [], []
    for name, mechanisms in cells.items():
        built.append(
            so.Cell(
                name,
                [so.Section("soma", 20.0, 20.0, 1)],
                [so.Insert(m) for m in mechanisms],
            )
        )
        site = so.Site(name, "soma", 0.5)
        stimuli.append(so.StepCurrent(site, **STEP))
        recordings += recorded(name, site)
    return so.build(built, stimuli, recordings, celsius=celsius, dtype=dtype)


def run_ours(
    cells,
    record=None,
    *,
    t_stop=30.0,
    dt=0.025,
    celsius=6.3,
    dtype=jnp.float64,
    solver=so.BackwardEuler(),
):
    """One model, one simulation: per name in `cells`, a compartment (L = diam
    = 20 µm) with the mechanisms `cells[name]` and a step current (`STEP`).
    Returns `(t, {name: v})` as NumPy arrays (ms, mV)."""

    def recorded(name, site):
        out = [so.Recording(name, site)]
        for var in (record or {}).get(name, ()):
            out.append(so.Recording(f"{name}.{var}", site, variable=var))
        return out

    model = _model(cells, recorded, celsius, dtype)
    sim = so.simulate(model, t_stop, dt, solver=solver)
    return np.asarray(sim.ts), {k: np.asarray(v) for k, v in sim.recordings.items()}


def _ref(seg, var):
    """NEURON's pointer to `var` at `seg` (`"ca_cadifpmp[3]"`: an array element)."""
    base, _, index = var.partition("[")
    ref = getattr(seg, f"_ref_{base}")
    return ref[int(index[:-1])] if index else ref


def _compartment(h, name, mechanisms):
    """One NEURON compartment (L = diam = 20 µm) with `mechanisms` (`(suffix,
    {parameter: value})`, tables off where the file has them) and the `STEP`
    `IClamp`: `(section, clamp)`."""
    sec = h.Section(name=f"nmodl_{name}")
    sec.L = sec.diam = 20.0
    sec.nseg = 1
    for suffix, params in mechanisms:
        sec.insert(suffix)
        for k, val in params.items():
            setattr(sec(0.5), f"{k}_{suffix}", val)
        if hasattr(h, f"usetable_{suffix}"):
            setattr(h, f"usetable_{suffix}", 0)
    ic = h.IClamp(sec(0.5))
    ic.amp, ic.delay, ic.dur = STEP["amplitude"], STEP["delay"], STEP["duration"]
    return sec, ic


def run_neuron(h, cells, record=None, *, t_stop=30.0, dt=0.025, celsius=6.3):
    """The same compartments in NEURON at `secondorder = 0`: `cells[name]` is a
    list of `(suffix, {parameter: value})`; tables off (`usetable_<suffix> =
    0`) where the file has them. Returns `(t, {name: v})`."""
    secs, clamps, vecs = [], [], {}
    try:
        h.load_file("stdrun.hoc")
        for name, mechanisms in cells.items():
            sec, ic = _compartment(h, name, mechanisms)
            secs.append(sec)
            clamps.append(ic)
            vecs[name] = h.Vector()
            vecs[name].record(sec(0.5)._ref_v)
            for var in (record or {}).get(name, ()):
                vecs[f"{name}.{var}"] = h.Vector()
                vecs[f"{name}.{var}"].record(_ref(sec(0.5), var))
        t = h.Vector()
        t.record(h._ref_t, sec=secs[0])
        h.CVode().active(0)
        h.celsius, h.dt, h.secondorder = celsius, dt, 0
        h.finitialize(-65.0)
        for _ in range(round(t_stop / dt)):
            h.fadvance()
        return np.array(t), {k: np.array(v) for k, v in vecs.items()}
    finally:
        del clamps
        for sec in secs:
            h.delete_section(sec=sec)


SPIKE_THRESHOLD = 0.0  # mV


def spike_times_ours(cells, *, rtol, atol, t_stop=30.0, celsius=6.3):
    """The compartments of `run_ours` under an adaptive `CrankNicolson`
    (`diffrax.PIDController(rtol, atol)`): `{name: spike times}` (ms; upward
    crossings of `SPIKE_THRESHOLD`, located within the step)."""
    import diffrax as dfx

    def recorded(name, site):
        return [so.SpikeRecording(name, site, SPIKE_THRESHOLD, 16)]

    model = _model(cells, recorded, celsius, jnp.float64)
    sim = so.simulate(
        model,
        t_stop,
        0.025,
        save_dt=t_stop,
        solver=so.CrankNicolson(),
        controller=dfx.PIDController(rtol=rtol, atol=atol),
    )
    return {k: np.asarray(v) for k, v in sim.spikes.items()}


def spike_times_neuron(h, cells, *, rtol, atol, t_stop=30.0, celsius=6.3):
    """The compartments of `run_neuron` under CVODE at `rtol`, `atol`
    (`NetCon.record`, threshold `SPIKE_THRESHOLD`; `condition_order(2)`: each
    crossing interpolated within CVODE's step, not its step's end):
    `{name: spike times}`."""
    secs, keep, times = [], [], {}
    cvode = h.CVode()
    old = (cvode.active(), cvode.rtol(), cvode.atol(), cvode.condition_order())
    try:
        h.load_file("stdrun.hoc")
        for name, mechanisms in cells.items():
            sec, ic = _compartment(h, name, mechanisms)
            secs.append(sec)
            nc = h.NetCon(sec(0.5)._ref_v, None, sec=sec)
            nc.threshold = SPIKE_THRESHOLD
            times[name] = h.Vector()
            nc.record(times[name])
            keep += [ic, nc]
        cvode.active(1)
        cvode.rtol(rtol)
        cvode.atol(atol)
        cvode.condition_order(2)
        h.celsius = celsius
        h.finitialize(-65.0)
        h.continuerun(t_stop)
        return {k: np.array(v) for k, v in times.items()}
    finally:
        cvode.active(old[0])
        cvode.rtol(old[1])
        cvode.atol(old[2])
        cvode.condition_order(old[3])
        del keep
        for sec in secs:
            h.delete_section(sec=sec)
