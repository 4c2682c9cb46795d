"""NEURON runs of the small event models of `tests/events` (`neuron` is
imported inside the functions: a test dependency only)."""

import numpy as np
from neuron_reference import _instantiate

import stable_ode as so


def run(
    cells,
    point_processes,
    netcons,
    record,
    *,
    t_stop,
    dt,
    v_init=-65.0,
    celsius=6.3,
    atol=None,
    spikes=(),
):
    """NEURON's fixed step (`secondorder = 0`, `usetable_hh = 0`) on `cells` with
    the same point processes and NetCons, or CVODE at `atol` (rtol 0, sampled
    every `dt`) if given, at `celsius` °C; `record`: `{name: (site or point process,
    variable)}` with variable `"v"` or a point-process variable; `spikes`:
    `SpikeRecording`s (`NetCon.record`). Returns `(t, {name: trace})`, the
    spike times under their names."""
    from neuron import h

    h.load_file("stdrun.hoc")
    cvode = h.CVode()
    cvode.active(0)
    secs = _instantiate(h, cells)
    keep = []
    try:
        made = {}
        for pp in point_processes:
            nsec = secs[pp.site.cell, pp.site.section][0]
            seg = nsec(pp.site.position)
            kind = type(pp).__name__
            obj = getattr(h, kind)(seg)
            if isinstance(pp, so.IClamp):
                obj.delay, obj.dur, obj.amp = pp.delay, pp.dur, pp.amp
            elif isinstance(pp, so.VClamp):
                for j in range(3):
                    obj.dur[j], obj.amp[j] = pp.dur[j], pp.amp[j]
                for f in ("gain", "rstim", "tau1", "tau2", "fac"):
                    setattr(obj, f, float(getattr(pp, f)))
            else:
                for f in pp.__dataclass_fields__:
                    if f not in ("site", "name"):
                        setattr(obj, f, float(getattr(pp, f)))
            made[id(pp)] = obj
        starts = []
        for nc in netcons:
            target = made[id(nc.target)]
            if isinstance(nc.source, so.Site):
                src = nc.source
                nsec = secs[src.cell, src.section][0]
                con = h.NetCon(nsec(src.position)._ref_v, target, sec=nsec)
                con.threshold = 10.0 if nc.threshold is None else nc.threshold
                con.delay = nc.delay
            elif isinstance(nc.source, so.NetStim):
                ns = h.NetStim()
                ns.interval, ns.number = nc.source.interval, nc.source.number
                ns.start, ns.noise = nc.source.start, nc.source.noise
                con = h.NetCon(ns, target)
                con.delay = nc.delay
                keep.append(ns)
            else:
                con = h.NetCon(None, target)
                starts.append((con, nc.arrival_times()))
            con.weight[0] = nc.weight
            keep.append(con)
        step = () if atol is None else (dt,)
        if atol is not None:
            cvode.active(1)
            cvode.atol(atol)
            cvode.rtol(0.0)
        t_vec = h.Vector()
        t_vec.record(h._ref_t, *step)
        vecs = {}
        for name, (what, var) in record.items():
            vec = h.Vector()
            if var == "v":
                nsec, s = secs[what.cell, what.section]
                vec.record(nsec(what.position)._ref_v, *step)
            else:
                vec.record(getattr(made[id(what)], f"_ref_{var}"), *step)
            vecs[name] = vec
        spiked = {}
        for r in spikes:
            nsec = secs[r.site.cell, r.site.section][0]
            con = h.NetCon(nsec(r.site.position)._ref_v, None, sec=nsec)
            con.threshold = r.threshold
            vec = h.Vector()
            con.record(vec)
            keep.append(con)
            spiked[r.name] = vec
        h.dt, h.celsius = dt, celsius
        h.secondorder = 0
        h.usetable_hh = 0
        h.finitialize(v_init)
        for con, times in starts:
            for t in times:
                con.event(float(t))
        if atol is None:
            for _ in range(round(t_stop / dt)):
                h.fadvance()
        else:
            h.continuerun(t_stop)
        out = {k: np.array(v) for k, v in {**vecs, **spiked}.items()}
        return np.array(t_vec), out
    finally:
        cvode.active(0)
        del keep, made
        for nsec, _ in secs.values():
            h.delete_section(sec=nsec)
