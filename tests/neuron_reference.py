"""Build and run a stable_ode model description in NEURON, for validation tests.

The NEURON model is made from the same `stable_ode.Cell` descriptions that
`stable_ode.build` discretises, so both simulators see identical geometry,
mechanism parameters, stimuli and recording sites; the discretisation itself
(areas, axial conductances, the membrane-less nodes at section ends) is NEURON's
own and independent of ours.

`neuron` is imported only inside functions, so this module imports without it.

Mapping (NEURON ← stable_ode):

- `Section(name, length, diameter, n_compartments, parent, parent_position)` →
  a section with `L`, `diam`, `nseg`, connected by `child.connect(parent(x), 0)`;
  the cell's `axial_resistivity` → `Ra`, `capacitance` → `cm`.
- `Section(name, points=..., ...)` → the same with `sec.pt3dadd(x, y, z, diam)`
  for each point instead of `L` and `diam` (NEURON then takes `L`, the areas and
  the axial resistances from the 3-D points). `run_neuron` does not call
  `h.define_shape()` (it would turn the cylinder sections into 3-D points of
  single precision); `neuron_geometry` does, if asked.
- `HH(...)` → `hh` (`gnabar_hh`, `gkbar_hh`, `gl_hh`, `el_hh`, `ena`, `ek`);
  `Passive(g, e)` → `pas` (`g_pas`, `e_pas`). Parameters must be scalars.
- `StepCurrent(site, amplitude, delay, duration)` → `IClamp(sec(x))` with `amp`
  (nA), `del` and `dur` (ms) at the literal position `x`. At an end `x ∈ {0, 1}`
  NEURON injects into the membrane-less end node; when that node has a single
  neighbour compartment (a free end) this is exactly equivalent to our injection
  into that compartment, since all the current flows on into it. At a section end
  where another section attaches the two differ, so do not use such sites here.
- `Recording(name, site)` → `Vector.record(sec(xc)._ref_v)` at the centre
  `xc = (k + 1/2)/n` of the compartment `k` that stable_ode assigns to the site
  (NEURON's `v` at `x = 0` or `1` is the end node's, not a compartment's).
"""

import itertools

import numpy as np

import stable_ode as so
from stable_ode.morphology._discretise import compartment_of


_counter = itertools.count()


def _set_hh(seg, mech: so.HH):
    seg.hh.gnabar = _scalar(mech.gnabar, "HH.gnabar")
    seg.hh.gkbar = _scalar(mech.gkbar, "HH.gkbar")
    seg.hh.gl = _scalar(mech.gl, "HH.gl")
    seg.hh.el = _scalar(mech.el, "HH.el")
    seg.ena = _scalar(mech.ena, "HH.ena")
    seg.ek = _scalar(mech.ek, "HH.ek")


def _set_pas(seg, mech: so.Passive):
    seg.pas.g = _scalar(mech.g, "Passive.g")
    seg.pas.e = _scalar(mech.e, "Passive.e")


def _scalar(x, what: str) -> float:
    a = np.asarray(x, dtype=float)
    if a.ndim != 0:
        raise ValueError(
            f"{what}: the NEURON reference takes scalar parameters, got shape {a.shape}"
        )
    return float(a)


def _instantiate(h, cells):
    """NEURON sections for `cells`: `{(cell, section): (nrn_section, Section)}`."""
    secs = {}
    tag = next(_counter)
    for cell in cells:
        for s in cell.sections:
            nsec = h.Section(name=f"ref{tag}_{cell.name}_{s.name}")
            if s.points is None:
                nsec.L = s.length
                nsec.diam = s.diameter
            else:
                for x, y, z, d in s.points:
                    nsec.pt3dadd(x, y, z, d)
            nsec.nseg = s.n_compartments
            nsec.Ra = cell.axial_resistivity
            nsec.cm = cell.capacitance
            secs[cell.name, s.name] = (nsec, s)
        for s in cell.sections:
            if s.parent is not None:
                child = secs[cell.name, s.name][0]
                parent = secs[cell.name, s.parent][0]
                child.connect(parent(s.parent_position), 0)
        for ins in cell.mechanisms:
            names = ins.sections or tuple(s.name for s in cell.sections)
            mech = ins.mechanism
            for name in names:
                nsec = secs[cell.name, name][0]
                if isinstance(mech, so.HH):
                    nsec.insert("hh")
                    for seg in nsec:
                        _set_hh(seg, mech)
                elif isinstance(mech, so.Passive):
                    nsec.insert("pas")
                    for seg in nsec:
                        _set_pas(seg, mech)
                else:
                    raise TypeError(
                        f"no NEURON counterpart for mechanism {type(mech).__name__} "
                        "(only HH -> hh and Passive -> pas)"
                    )
    return secs


def run_neuron(
    cells,
    stimuli,
    recordings,
    *,
    t_stop: float,
    dt: float,
    celsius: float = 6.3,
    v_init: float = -65.0,
    secondorder: int = 0,
    cvode_atol: float | None = None,
    usetable: bool = False,
):
    """Simulate `cells` in NEURON.

    **Arguments:**

    - `cells`, `stimuli`, `recordings`: as for `stable_ode.build` (`StepCurrent`
      stimuli only).
    - `t_stop`: end time, ms. `dt`: fixed step, ms (NEURON's `h.dt`).
    - `celsius`: °C. `v_init`: mV, passed to `h.finitialize`.
    - `secondorder`: NEURON's `secondorder` for fixed steps (0: backward Euler,
      2: Crank–Nicolson).
    - `cvode_atol`: if given, integrate with CVODE (`cvode.active(1)`) at this
      absolute tolerance (mV, and scaled per state by NEURON) instead of fixed
      steps; `v` is then recorded every `dt` ms by CVODE's interpolation.
    - `usetable`: NEURON's `usetable_hh`; off by default, since table lookup of
      the rates cannot agree to rounding with exact rates.

    **Returns:** a dict with `t` (ms, shape `(nt,)`: the fixed steps, or every `dt`
    with CVODE) and `v` (dict from recording name to mV at `t`).

    Spike times are best taken from `v` by interpolation (`helpers.spike_times`):
    NEURON's `NetCon` reports a crossing at the end of the step that made it, also
    under CVODE (measured: up to 1e-3 ms late at atol 1e-10).
    """
    from neuron import h

    h.load_file("stdrun.hoc")
    cvode = h.CVode()
    old = (h.celsius, h.dt, h.secondorder, h.usetable_hh)
    secs = _instantiate(h, cells)
    try:
        clamps = []
        for stim in stimuli:
            if not isinstance(stim, so.StepCurrent):
                raise TypeError(
                    f"the NEURON reference supports StepCurrent only, got {stim!r}"
                )
            nsec = secs[stim.site.cell, stim.site.section][0]
            ic = h.IClamp(nsec(stim.site.position))
            ic.amp = stim.amplitude
            ic.delay = stim.delay
            ic.dur = stim.duration
            clamps.append(ic)
        t_vec = h.Vector()
        v_vecs = {}
        for rec in recordings:
            nsec, s = secs[rec.site.cell, rec.site.section]
            xc = (compartment_of(s, rec.site.position) + 0.5) / s.n_compartments
            v_vecs[rec.name] = (h.Vector(), nsec(xc))

        h.celsius = celsius
        h.dt = dt
        h.secondorder = secondorder
        h.usetable_hh = 1 if usetable else 0
        if cvode_atol is None:
            cvode.active(0)
            t_vec.record(h._ref_t)
            for vec, seg in v_vecs.values():
                vec.record(seg._ref_v)
        else:
            cvode.active(1)
            cvode.atol(cvode_atol)
            cvode.rtol(0.0)
            t_vec.record(h._ref_t, dt)
            for vec, seg in v_vecs.values():
                vec.record(seg._ref_v, dt)
        h.finitialize(v_init)
        if cvode_atol is None:
            n = round(t_stop / dt)
            for _ in range(n):
                h.fadvance()
        else:
            h.continuerun(t_stop)
        return {
            "t": np.array(t_vec),
            "v": {name: np.array(vec) for name, (vec, _) in v_vecs.items()},
        }
    finally:
        cvode.active(0)
        h.celsius, h.dt, h.secondorder, h.usetable_hh = old
        for nsec, _ in secs.values():
            h.delete_section(sec=nsec)


def neuron_geometry(cells, *, define_shape: bool = True, frequency: float = 100.0):
    """NEURON's own geometry of `cells`, section by section.

    **Arguments:**

    - `cells`: `stable_ode.Cell`s (mechanisms are inserted but play no part).
    - `define_shape`: call `h.define_shape()` first (NEURON's areas and
      resistances "after define_shape"; cylinder sections become 3-D points).
    - `frequency`: Hz, for `lambda_f`.

    **Returns:** `{(cell, section): dict}` with `L` (µm), `area` (µm², per
    segment: `seg.area()`), `ri` (MΩ, per segment: `seg.ri()`), `ri1`
    (`sec(1).ri()`, MΩ: the right half of the last segment), `diam` (µm, per
    segment: `seg.diam`) and `lambda_f` (µm: `h.lambda_f(frequency)`, or `None`
    where NEURON refuses it).
    """
    from neuron import h

    h.load_file("stdrun.hoc")
    secs = _instantiate(h, cells)
    try:
        if define_shape:
            h.define_shape()
        out = {}
        for key, (nsec, _) in secs.items():
            try:
                lam = h.lambda_f(frequency, sec=nsec)
            except RuntimeError:  # a zero diameter before the last 3-D point
                lam = None
            out[key] = {
                "L": nsec.L,
                "area": np.array([seg.area() for seg in nsec]),
                "ri": np.array([seg.ri() for seg in nsec]),
                "ri1": nsec(1).ri(),
                "diam": np.array([seg.diam for seg in nsec]),
                "lambda_f": lam,
            }
        return out
    finally:
        for nsec, _ in secs.values():
            h.delete_section(sec=nsec)


def neuron_input_resistance(cells, site) -> float:
    """NEURON's input resistance at `site` (a `stable_ode.Site`), MΩ: `Impedance`
    at 0 Hz (with `pas` alone this is the exact steady-state `ΔV/I`)."""
    from neuron import h

    h.load_file("stdrun.hoc")
    secs = _instantiate(h, cells)
    try:
        nsec = secs[site.cell, site.section][0]
        h.finitialize(-65.0)
        imp = h.Impedance()
        imp.loc(site.position, sec=nsec)
        imp.compute(0)
        return imp.input(site.position, sec=nsec)
    finally:
        for nsec, _ in secs.values():
            h.delete_section(sec=nsec)
