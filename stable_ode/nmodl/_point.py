"""Point processes from NMODL files: `POINT_PROCESS` with `NET_RECEIVE`.

`load_nmodl` returns, for a `POINT_PROCESS` file, a class used like the
built-in `stable_ode.events.ExpSyn`: `syn = cls(site, tau=2.0, name="s")`,
given to `build(..., point_processes=[syn])` and targeted by NetCons. Its
fields are the site, the file's `PARAMETER`s (NEURON's names, units and
defaults) and `name`; `build` turns all the instances of one class into one
vectorised group (`AbstractNmodlPointGroup`, an
`stable_ode.events._groups.AbstractArrivalGroup`):

- states and their kinetics from the file's `DERIVATIVE` / `KINETIC` blocks,
  the current (`NONSPECIFIC_CURRENT`, nA, outward) from `BREAKPOINT`, with the
  voltage of the compartment that holds each instance;
- `NET_RECEIVE(weight, a1, ...)`: each statement `x = x + expr` adds `expr`
  (which may read the arguments, `LOCAL`s, `t` and the parameters, not the
  states) to state `x`, or to an `ASSIGNED` counter `x` that no other block
  assigns, at the event's arrival, whose time is `t`. `a1, ...` are the
  NetCon's weight vector, kept per NetCon (the group's states `netcon:a1`,
  `cellnetcon:a1`; set by an `INITIAL` block inside NET_RECEIVE at t = 0,
  else 0) and updated by assignments at each of its events. As for the
  built-in synapses, an arrival inside a step is
  decayed exactly to the step's end, which needs each such state to relax at
  a rate that depends on the parameters and `celsius` only (checked at
  import; the group keeps the model's `celsius`), and
  during the step the current sees its mean over the step (the state
  `in_step:x`, as the built-ins' `x`);
- values `INITIAL` computes from the parameters (exp2syn.mod's `factor`, its
  bounded `tau1`) are recomputed from the parameters wherever the other
  blocks read them.

- `ELECTRODE_CURRENT i`: nA injected (positive depolarising), so `-i` joins
  the outward current; a `BREAKPOINT` that reads `t` sees the step's middle,
  and the times it compares `t` with are jump times and edges
  (`stable_ode.nmodl._clock`); `SOLVE p METHOD after_cvode` runs `p` after
  the step, for the recorded values.
- `USEION`: the ion variables it reads come from the model's ions at its
  compartments (`{name: IonView}` passed as `ions`, as to the mechanism
  groups); the ion currents it writes (nA) join its compartments' ion
  currents as densities (`ion_densities`), and its total current (the
  nonspecific and the ion currents) drives the voltage.

A NET_RECEIVE with statements other than those above (see
`_point_analysis.receive_increments`: it reads the states, tests `flag`,
sends self-events) runs in turn at each event instead, on adaptive steps that
land there: `stable_ode.nmodl._sequential`. Not supported (one `NmodlError`
each): `WATCH`, `FOR_NETCONS`, `net_event` outside an `ARTIFICIAL_CELL`
(whose spikes `_sequential` sends), a point process writing a
concentration, an increment target whose decay rate depends on `v` or a
state.
"""

from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ..events._arrivals import CELL_NETCON, NETCON
from ..events._groups import AbstractArrivalGroup, Held
from . import _runtime
from ._clock import CLOCK
from ._codegen import py


_T_NONE = -1e-30  # as the built-in synapses: nothing delivered yet


class AbstractNmodlPointGroup(AbstractArrivalGroup):
    """The instances of one imported point process, vectorised: `params` by
    field name (one value per instance), at compartments `index`."""

    params: eqx.AbstractVar[dict[str, Float[Array, " n"]]]
    celsius: eqx.AbstractVar[Float[Array, ""]]  # the model's, °C
    spec: eqx.AbstractClassVar[object]  # the class's `_PointSpec`
    # NET_RECEIVE sees the event (its time `t`, its NetCon's weight vector)
    netcon_states: ClassVar[bool] = True

    @property
    def uses_ions(self) -> bool:
        return bool(self.ions)

    @property
    def reads_clock(self) -> bool:
        """Whether BREAKPOINT reads `t` (`stable_ode.nmodl._clock`)."""
        return self.spec.clock

    def _vars(self, params, v, states, celsius, geometry=None, ions=None):
        """The file's variables for entries with parameters `params` at
        voltages `v`: `ions`, the values of the ion variables it reads
        (`spec.ion_reads`: name → `(n,)`), NaN where not given (so that a
        value computed without them cannot pass for a number)."""
        sp = self.spec
        values = {p: params[f] for f, p in sp.fields.items()}
        values |= {a: 0.0 for a in sp.module.assigned}
        for x, (_, _, read) in sp.ion_reads.items():
            given = ions is not None and x in ions
            values[x] = (
                ions[x] if given else (jnp.full_like(v, jnp.nan) if read else 0.0)
            )
        values |= {s: jnp.zeros_like(v) for s in sp.module.states}
        held = set(sp.module.states) | set(sp.counters)
        values |= {k: x for k, x in states.items() if k in held}
        t = states[CLOCK] if CLOCK in states else 0.0
        values |= dict(v=v, celsius=celsius, diam=None, area=None, t=t)
        if geometry is not None:
            values |= geometry
        m = _runtime.Vars(**{py(k): x for k, x in values.items()})
        if sp.derived:
            m0 = m.copy()
            sp.ns["initial_derived"](m0)
            for k in sp.derived:
                setattr(m, py(k), getattr(m0, py(k)))
        return m

    def _model_vars(self, model, v, states, ions=None):
        geometry = dict(diam=model.diameter[self.index])
        if model.area is not None:
            geometry["area"] = model.area[self.index] * 1e8
        vi = v[self.index]
        ions = self._ions(ions)
        return self._vars(self.params, vi, states, model.celsius, geometry, ions)

    def _ions(self, ions):
        """The ion variables the file reads, at the entries' compartments,
        from the model's ions `ions` (`{name: IonView}`, all compartments), or
        `None`."""
        if ions is None:
            return None
        return {
            x: getattr(ions[ion], attr)[self.index]
            for x, (ion, attr, read) in self.spec.ion_reads.items()
            if read
        }

    def kinetics(self, model, v, states, ions=None):
        m = self._model_vars(model, v, states, ions)
        out = {}
        for d in self.spec.derivs:
            out |= d(m)
        out["t_delivered"] = Held()
        held = (*self.in_step_states, *self.spec.counters, *self.spec.recorded)
        held += (CLOCK,) if self.spec.clock else ()
        held += tuple(k for k in states if k.startswith((NETCON, CELL_NETCON)))
        return out | {k: Held() for k in held}

    def currents(self, model, v, states, ions=None, v_solve=None):
        """The current split as the ions' are: `{ion: ..., "nonspecific": ...}`,
        each nA (outward) per entry."""
        del v_solve
        # the arrivals inside the step, as their mean over it (`average`)
        states = states | {
            s: states[s] + states[in_step_key(s)] for s in self.spec.targets
        }
        m = self._model_vars(model, v, states, ions)
        self.spec.ns["breakpoint"](m)
        vi = v[self.index]
        i = [_runtime.as_n(getattr(m, py(x)), vi) for x in self.spec.module.nonspecific]
        i += [-_runtime.as_n(getattr(m, py(x)), vi) for x in self.spec.module.electrode]
        out = {"nonspecific": sum(i[1:], i[0]) if i else jnp.zeros_like(vi)}
        for ion, x in self.spec.ion_writes:
            out[ion] = _runtime.as_n(getattr(m, py(x)), vi)
        return out

    def current(self, model, v, states, ions=None, v_solve=None):
        parts = list(self.currents(model, v, states, ions, v_solve).values())
        return sum(parts[1:], parts[0])

    def ion_densities(self, model, v, states, ions=None, v_solve=None):
        """The ion currents as densities of the compartments (mA/cm²): what
        `MembraneModel`'s ion table sums (NEURON adds a point process's `ica`,
        nA, to its segment's `ica` over the segment's area)."""
        parts = self.currents(model, v, states, ions, v_solve)
        area = model.area[self.index]
        return {k: 1e-6 * x / area for k, x in parts.items() if k != "nonspecific"}

    def add_current(self, model, i, v, states, ions=None, v_solve=None):
        return i.at[self.index].add(self.current(model, v, states, ions, v_solve))

    def add_to(self, x, y):
        """`x` (all compartments) with `y` (per entry) added at the entries'
        compartments."""
        return x.at[self.index].add(y)

    def init_states(self, model, v, ions=None):
        sp = self.spec
        m = self._initial(model, v, ions)
        vi = v[self.index]
        held = (*sp.module.states, *sp.counters)
        out = {s: _runtime.as_n(getattr(m, py(s)), vi) for s in held}
        out["t_delivered"] = jnp.full_like(vi, _T_NONE)
        if sp.clock:
            out[CLOCK] = jnp.zeros_like(vi)
        out |= {k: jnp.zeros_like(vi) for k in self.in_step_states}
        out |= {k: jnp.zeros_like(vi) for k in sp.recorded}
        if sp.vector and self.arrivals is not None:
            a = self.arrivals
            out |= self._receive_initial(NETCON, a.target, a.weight, model.celsius)
        if sp.vector and self.cell is not None:
            c = self.cell
            out |= self._receive_initial(CELL_NETCON, c.entry, c.weight, model.celsius)
        if self.cell is not None:
            out |= self.cell.init_next(vi.dtype)
        return self.with_current(v, out, ions)

    def _initial(self, model, v, ions=None):
        """The file's variables after its INITIAL block, at voltages `v` (mV,
        all compartments) and t = 0."""
        sp = self.spec
        start = {s: sp.module.state_start[s] for s in sp.module.states}
        m = self._model_vars(model, v, start, ions)
        sp.ns["initial"](m)
        return m

    def _receive_initial(self, prefix, entry, w, celsius):
        """The weight vectors of NetCons into instances `entry` with weights
        `w` (µS) after NET_RECEIVE's INITIAL (at t = 0; the elements it does not
        set start at 0, as NEURON's): `{prefix + name: (m,) array}`."""
        sp = self.spec
        z = jnp.zeros_like(w)
        vals = {a: z for a in sp.vector}
        if "net_receive_initial" in sp.ns:
            params = {f: x[entry] for f, x in self.params.items()}
            m = self._vars(params, z, {}, celsius)
            m.t = z
            lv = sp.ns["net_receive_initial"](m, w, *vals.values())
            vals = {a: _runtime.as_n(getattr(lv, py(a)), w) for a in sp.vector}
        return {prefix + a: x for a, x in vals.items()}

    def cell_arrivals(self):
        return self.cell

    def with_current(self, v, states, ions=None):
        """`states` with the BREAKPOINT values a recording may name
        (`spec.recorded`) at voltages `v` (mV, all compartments) and the
        model's ions `ions` (`{name: IonView}`, for a file that uses them):
        at the step's end, as the built-in synapses' `i`."""
        names = self.spec.recorded
        if not names:
            return states
        vi = v[self.index]
        m = self._vars(self.params, vi, states, self.celsius, None, self._ions(ions))
        self.spec.ns["breakpoint"](m)
        if "after_solve" in self.spec.ns:  # METHOD after_cvode: at the new `v`
            self.spec.ns["after_solve"](m)
        return states | {x: _runtime.as_n(getattr(m, py(x)), vi) for x in names}

    def derived(self):
        return tuple(self.spec.recorded)

    # -- the clock (`_clock`): `t` at the step's middle, as NEURON's fixed step

    def before_step(self, t0, t1, t_start, states, span):
        out = super().before_step(t0, t1, t_start, states, span)
        return self.sample_inputs(0.5 * (t0 + t1), out)

    def sample_inputs(self, t, states):
        if not self.spec.clock:
            return states
        return states | {CLOCK: jnp.full_like(states[CLOCK], t)}

    def clock_times(self, dtype):
        """The times (ms) at which the inputs BREAKPOINT reads off the clock
        jump (`_clock`), one row per instance."""
        if not self.spec.clock:
            return jnp.zeros((0,), dtype)
        z = jnp.zeros(self.index.shape, dtype)
        m = self._vars(self.params, z, {}, self.celsius)
        times = self.spec.ns["clock_times"](m)
        if not times:
            return jnp.zeros((0,), dtype)
        return jnp.concatenate([_runtime.as_n(x, z).astype(dtype) for x in times])

    def jump_times(self, dtype):
        return jnp.concatenate([super().jump_times(dtype), self.clock_times(dtype)])

    def edges(self, dtype):
        return jax.lax.stop_gradient(self.clock_times(dtype))

    def stiff(self, states):
        """Whether an electrode current depends on the voltage at `states` (a
        voltage clamp that is on, as svclmp.mod's `i = (vc - v)/rs`): its
        series resistance makes the clamped compartment's mode stiff, and
        `CrankNicolson` takes L-stable steps then (as for the built-in
        `SEClamp`)."""
        electrode = self.spec.module.electrode
        if not electrode:
            return jnp.asarray(False)
        z = jnp.zeros(self.index.shape, self.celsius.dtype)
        ones = dict(diam=jnp.ones_like(z), area=jnp.ones_like(z))

        def i(v):
            m = self._vars(self.params, v, states, self.celsius, ones)
            self.spec.ns["breakpoint"](m)
            return sum(_runtime.as_n(getattr(m, py(x)), v) for x in electrode)

        _, g = jax.jvp(i, (z,), (jnp.ones_like(z),))
        return jnp.any(jnp.abs(g) > 0)

    def _increments(self, entry, w, event):
        """NET_RECEIVE at arrivals at instances `entry` with weights `w` and
        events `event` (`t`, ms, and the weight vectors' other elements):
        `(inc, rate, new)`, see `_PointSpec.increments`."""
        params = {f: x[entry] for f, x in self.params.items()}
        return self.spec.increments(self, params, w, self.celsius, event)

    def jump(self, entry, w, age, event=None):
        inc, rate, new = self._increments(entry, w, event)
        out = {s: inc[s] * jnp.exp(-rate[s] * age) for s in inc}
        return out | {"@" + a: x for a, x in new.items()}

    def average(self, entry, w, age, dt, event=None):
        """Each target's increment decayed from its arrival `age` ms before
        the step's end, averaged over the step of `dt` ms."""
        inc, rate, _ = self._increments(entry, w, event)
        out = {}
        for s in inc:
            z = rate[s] * age
            small = jnp.abs(z) < 1e-6
            zs = jnp.where(small, 1.0, z)
            mean = jnp.where(small, 1 - 0.5 * z, -jnp.expm1(-zs) / zs)  # (1-e^-z)/z
            out[in_step_key(s)] = inc[s] * mean * age / dt
        return out

    def in_step_jump(self, dt):
        return lambda entry, w, age, event=None: self.average(entry, w, age, dt, event)

    def onset_jump(self, dt):
        def jump(entry, w, age, event=None):
            inc, _, _ = self._increments(entry, w, event)
            return {in_step_key(s): inc[s] * age / dt for s in inc}

        return jump


def in_step_key(state: str) -> str:
    """The state that holds, during a step, the mean over it of the arrivals
    inside it into NET_RECEIVE target `state` (not an NMODL name)."""
    return f"in_step:{state}"
