"""The benchmark models in NEURON, for side-by-side timing (fixed step and CVODE).

NEURON is a benchmark-only dependency (`pip install neuron`); `neuron` is imported
inside `NeuronModel`, so this module imports without it (`have_neuron()` tells).

The NEURON model is made from the same `stable_ode.Cell` descriptions that
`stable_ode.build` discretises: `Section` → a section with `L`, `diam`, `nseg`,
`child.connect(parent(x), 0)`, `Ra`, `cm`; `HH` → `hh` (exact rates,
`usetable_hh = 0`, as ours); `Passive` → `pas`; `StepCurrent` → `IClamp` at the
literal position (at a free section end NEURON injects into the membrane-less end
node, which passes all of it on to the end compartment: the same as ours);
`Recording` → `v` at the centre of the compartment stable_ode assigns to the site.
Mechanism parameters may be scalars or one value per cell (for a batch of
single-compartment cells, `HH(gnabar=array)` is applied cell by cell).

Runs are `h.finitialize(v_init)` + `ParallelContext.psolve(t_stop)` (NEURON's
run loop in C; `h.continuerun`, the hoc loop of `stdrun.hoc`, adds interpreter
work at every step that outweighs the solver on small models), fixed step
(`secondorder` 0 = backward Euler, as our `BackwardEuler`; 2 = NEURON's
Crank–Nicolson) or CVODE (`cvode.atol`, `rtol = 0`), recording `v` at every fixed
step, or every `dt` by CVODE's interpolation (and the CVODE step times, for its
step count).
"""

import itertools

import numpy as np


_counter = itertools.count()


def have_neuron() -> bool:
    """Whether `import neuron` works here."""
    try:
        import neuron  # noqa: F401
    except ImportError:
        return False
    return True


def _value(x, k: int, what: str) -> float:
    a = np.asarray(x, dtype=float)
    if a.ndim == 0:
        return float(a)
    if a.ndim == 1 and k < a.shape[0]:
        return float(a[k])
    raise ValueError(f"{what}: expected a scalar or one value per cell, got {a.shape}")


class NeuronModel:
    """NEURON sections for stable_ode cells, stimuli and recordings.

    NEURON simulates every section that exists, so `close()` the model (or use it
    as a context manager) before building the next one in the same process.

    **Arguments:**

    - `cells`, `stimuli`, `recordings`: as for `stable_ode.build` (`StepCurrent`
      stimuli; `HH` and `Passive` mechanisms).
    - `t_stop`: end time, ms. `dt`: fixed step (and CVODE's recording interval), ms.
    - `celsius`: °C. `v_init`: mV.
    """

    def __init__(
        self, cells, stimuli, recordings, *, t_stop, dt, celsius=6.3, v_init=-65.0
    ):
        from neuron import h

        import stable_ode as so
        from stable_ode.morphology._discretise import compartment_of

        h.load_file("stdrun.hoc")
        self.h, self.cvode, self.pc = h, h.CVode(), h.ParallelContext()
        self.t_stop, self.dt, self.celsius, self.v_init = t_stop, dt, celsius, v_init
        self.steps = 0
        tag = next(_counter)
        secs = {}
        for k, cell in enumerate(cells):
            for s in cell.sections:
                nsec = h.Section(name=f"bench{tag}_{cell.name}_{s.name}")
                nsec.L, nsec.diam, nsec.nseg = s.length, s.diameter, s.n_compartments
                nsec.Ra, nsec.cm = cell.axial_resistivity, cell.capacitance
                secs[cell.name, s.name] = (nsec, s)
            for s in cell.sections:
                if s.parent is not None:
                    secs[cell.name, s.name][0].connect(
                        secs[cell.name, s.parent][0](s.parent_position), 0
                    )
            for ins in cell.mechanisms:
                mech = ins.mechanism
                for name in ins.sections or [s.name for s in cell.sections]:
                    nsec = secs[cell.name, name][0]
                    if isinstance(mech, so.HH):
                        nsec.insert("hh")
                        for seg in nsec:
                            seg.hh.gnabar = _value(mech.gnabar, k, "HH.gnabar")
                            seg.hh.gkbar = _value(mech.gkbar, k, "HH.gkbar")
                            seg.hh.gl = _value(mech.gl, k, "HH.gl")
                            seg.hh.el = _value(mech.el, k, "HH.el")
                            seg.ena = _value(mech.ena, k, "HH.ena")
                            seg.ek = _value(mech.ek, k, "HH.ek")
                    elif isinstance(mech, so.Passive):
                        nsec.insert("pas")
                        for seg in nsec:
                            seg.pas.g = _value(mech.g, k, "Passive.g")
                            seg.pas.e = _value(mech.e, k, "Passive.e")
                    else:
                        raise TypeError(
                            f"no NEURON counterpart for {type(mech).__name__} "
                            "(only HH -> hh and Passive -> pas)"
                        )
        self._secs = secs
        self._clamps = []
        for stim in stimuli:
            if not isinstance(stim, so.StepCurrent):
                raise TypeError(f"StepCurrent stimuli only, got {stim!r}")
            nsec = secs[stim.site.cell, stim.site.section][0]
            clamp = h.IClamp(nsec(stim.site.position))
            clamp.amp, clamp.delay, clamp.dur = (
                stim.amplitude,
                stim.delay,
                stim.duration,
            )
            self._clamps.append(clamp)
        self._segs = []
        for rec in recordings:
            nsec, s = secs[rec.site.cell, rec.site.section]
            xc = (compartment_of(s, rec.site.position) + 0.5) / s.n_compartments
            self._segs.append(nsec(xc))
        self._vecs = [h.Vector() for _ in self._segs]
        self._t_steps = h.Vector()

    def run(self, secondorder: int = 0, cvode_atol: float | None = None) -> np.ndarray:
        """One solve from `t = 0` to `t_stop`.

        **Arguments:**

        - `secondorder`: NEURON's fixed-step scheme (0: backward Euler, 2:
          Crank–Nicolson); ignored with CVODE.
        - `cvode_atol`: integrate with CVODE at this absolute tolerance (`rtol = 0`)
          instead of fixed steps.

        **Returns:** the recorded `v`, mV, shape `(n_recordings, n_samples)`:
        every fixed step including `t = 0`, or every `dt` with CVODE. The number of
        steps taken is left in `self.steps`.
        """
        h = self.h
        h.celsius, h.dt, h.usetable_hh = self.celsius, self.dt, 0
        h.steps_per_ms = 1.0 / self.dt
        if cvode_atol is None:
            self.cvode.active(0)
            h.secondorder = secondorder
            for vec, seg in zip(self._vecs, self._segs, strict=True):
                vec.record(seg._ref_v)
            self._t_steps.play_remove()
        else:
            self.cvode.active(1)
            self.cvode.atol(cvode_atol)
            self.cvode.rtol(0.0)
            for vec, seg in zip(self._vecs, self._segs, strict=True):
                vec.record(seg._ref_v, self.dt)
            self._t_steps.record(h._ref_t)
        self.pc.set_maxstep(10)  # ms; psolve needs it (there are no NetCons)
        h.finitialize(self.v_init)
        self.pc.psolve(self.t_stop)
        if cvode_atol is None:
            self.steps = round(self.t_stop / self.dt)
        else:
            self.steps = len(self._t_steps) - 1
            self.cvode.active(0)
        return np.stack([np.array(v) for v in self._vecs])

    def close(self) -> None:
        """Delete the sections (NEURON would simulate them with the next model)."""
        self.cvode.active(0)
        self._vecs, self._segs, self._clamps = [], [], []
        self._t_steps.play_remove()
        for nsec, _ in self._secs.values():
            self.h.delete_section(sec=nsec)
        self._secs = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
