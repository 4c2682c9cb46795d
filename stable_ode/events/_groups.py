"""The vectorised groups of point processes: one `AbstractStateGroup` per kind
(`point_current = True`: nA into one compartment each), with two hooks the
event-stepping wrapper (`stable_ode.events._stepping.EventSteps`) calls around
every step:

- `before_step(t0, t1, t_start, states, span)`: the states a step from `t0`
  to `t1` starts from (NetCon arrivals at or just before `t0` delivered; a
  clamp's level and an alpha synapse's conductance at the step's middle);
- `after_step(t0, t1, v1, states, span)`: the states it ends with (arrivals
  strictly inside the step delivered, each decayed exactly from its arrival
  time to `t1`; a clamp's recorded current at the new voltage `v1`).

Time-dependent quantities are held as states that the step keeps constant
(`Held` kinetics) and the hooks set, so every solver sees them. The kinds
driven by time alone (`AlphaSynapse`, `SEClamp`) are in
`stable_ode.events._timed`, the built-in synapses `ExpSyn` and `Exp2Syn` in
`stable_ode.events._synapses`.
"""

import abc
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int

from .._group import AbstractStateGroup
from ..mechanisms import AbstractKinetics, Environment
from ._arrivals import Arrivals, CellArrivals, just_before, NETCON


_T_NONE = -1e-30  # "nothing delivered yet": just before t = 0


class Held(AbstractKinetics):
    """A state that a step leaves unchanged (`dx/dt = 0`, no error)."""

    def rhs(self, x):
        return jnp.zeros_like(x)

    def update(self, x, dt):
        del dt
        return x

    def filter(self, r, dt, x, *, quadratic: bool):
        del r, dt, quadratic
        return jnp.zeros_like(x)


class AbstractPointProcessGroup(AbstractStateGroup):
    """Point processes of one kind at compartments `index` (see the module
    docstring). `names` labels each entry; `recordable` lists the variables
    a recording may name."""

    point_current: ClassVar[bool] = True
    recordable: ClassVar[tuple[str, ...]]

    index: eqx.AbstractVar[Int[Array, " n"]]
    names: eqx.AbstractVar[tuple[str, ...]]
    kind: eqx.AbstractVar[str]

    @property
    def name(self) -> str:
        return self.kind

    @property
    def compartments(self):
        return self.index

    @property
    def label(self) -> str:
        return f"point process {self.kind}"

    def environment(self, model) -> Environment:
        return Environment(
            celsius=model.celsius,
            area=model.area[self.index],
            diam=model.diameter[self.index],
            length=model.length[self.index],
        )

    def add_current(self, model, i, v, states):
        return i.at[self.index].add(self.current(model, v, states))

    def before_step(self, t0, t1, t_start, states, span: float):
        del t0, t1, t_start, span
        return states

    def after_step(self, t0, t1, v1, states, span: float, ions=None):
        """`ions`: the model's ions at the step's end (`{name: IonView}`),
        given to groups that use them (`stable_ode._group.uses_ions`)."""
        del t0, t1, v1, span, ions
        return states

    def jump_times(self, dtype) -> Float[Array, " njump"]:
        """Times (ms, in `dtype`) at which this group's inputs are
        discontinuous: adaptive steps land on them."""
        return jnp.zeros((0,), dtype)

    def with_current(self, v, states, ions=None):
        """`states` with the recorded values (`derived`) at voltages `v` (mV,
        all compartments); `ions`: the model's ions there (`{name:
        IonView}`), for a group that uses them. (None by default.)"""
        del v, ions
        return states

    def derived(self) -> tuple[str, ...]:
        """The recordable variables that `with_current` computes from the
        voltage and the states at one instant (a synapse's or a clamp's
        `i`). A sample between two step ends records them from the states
        interpolated there (`stable_ode._stepping._base.Recorder`), so that
        they agree with the sampled voltage, rather than interpolating them
        on their own."""
        return ()


class AbstractNoCurrentGroup(AbstractPointProcessGroup):
    """Point-process states with no current of their own (held through each
    step, set by the hooks): threshold sources, spike logs, recorded IClamp
    currents."""

    recordable: ClassVar[tuple[str, ...]] = ()

    def kinetics(self, model, v, states):
        del model, v
        return {k: Held() for k in states}

    def current(self, model, v, states):
        del model, states
        return jnp.zeros(self.index.shape, v.dtype)

    def add_current(self, model, i, v, states):
        del model, v, states
        return i


def _deliver(
    arrivals: Arrivals | None,
    states,
    t_lo,
    t_hi,
    t_at,
    span,
    closed,
    jump,
    netcon_states=False,
):
    """`states` with the arrivals in `(t_lo, t_hi]` (`closed`) or `(t_lo, t_hi)`
    added by `jump(entry, weight, age)` (a dict of per-arrival increments,
    `age = t_at - time` ms); non-finite if they overflow the window.

    With `netcon_states`, `jump` takes a fourth argument, the event: `t` (the
    arrival time, ms) and the NetCons' own states (the states `netcon:<name>`,
    one per NetCon, by `<name>`), and may return their new values (keys
    `@<name>`), kept for the NetCons that received. Each arrival in the window
    reads its NetCon's states as they were before the window; two arrivals of
    one NetCon in one window make the states non-finite instead (the step is
    retried shorter, as on an overflow)."""
    if arrivals is None:
        return states
    t, entry, w, mask, overflow, nc = arrivals.select(t_lo, t_hi, span, closed)
    age = jnp.where(mask, t_at - t, 0.0)
    if netcon_states:
        event = {"t": jnp.where(mask, t, t_at)}
        own = {k: x for k, x in states.items() if k.startswith(NETCON)}
        event |= {k[len(NETCON) :]: x[nc] for k, x in own.items()}
        incs = jump(entry, w, age, event)
        if own:  # a NetCon's states are read before the window: once per window
            same = (nc[:, None] == nc[None, :]) & mask[:, None] & mask[None, :]
            overflow = overflow | (jnp.sum(same) > jnp.sum(mask))
    else:
        incs = jump(entry, w, age)
    out = dict(states)
    for k, inc in incs.items():
        if k.startswith("@"):
            key = NETCON + k[1:]
            n = states[key].shape[0]
            at = jnp.where(mask, nc, n)  # out of range: dropped
            x = states[key].at[at].set(inc.astype(states[key].dtype), mode="drop")
        else:
            x = states[k].at[entry].add(jnp.where(mask, inc, jnp.zeros_like(inc)))
            key = k
        out[key] = jnp.where(overflow, jnp.nan, x)
    return out


class AbstractArrivalGroup(AbstractPointProcessGroup):
    """Shared by the synapses that receive NetCon events: the `t_delivered`
    state (ms, the time up to which arrivals are in the states) and the two
    delivery hooks, in terms of `jump`."""

    arrivals: eqx.AbstractVar[Arrivals | None]
    in_step: ClassVar[bool] = False
    """Whether the group has the state `x` (µS): the mean conductance, over
    the step, of the arrivals strictly inside it (`average`), which its
    current adds to the voltage's step (so a fixed step sees an arrival from
    its time on, and the forward pass is continuous in the arrival time)."""
    netcon_states: ClassVar[bool] = False
    """Whether the group keeps states per NetCon (`netcon:<name>`,
    `cellnetcon:<name>`; an NMODL weight vector): its jumps then take the
    event (`_deliver`) and may update them."""
    in_step_states: ClassVar[tuple[str, ...]] = ("x",)
    """The states that hold, during a step, the arrivals strictly inside it
    (zeroed before and after each step): `x` for the built-in synapses."""

    @abc.abstractmethod
    def jump(self, entry, w, age) -> dict[str, Array]:
        """The increments of the states by arrivals at synapses `entry` with
        weights `w` (µS), decayed over `age` ms since their arrival."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.in_step and cls.average is AbstractArrivalGroup.average:
            raise TypeError(
                f"{cls.__name__} sets in_step = True (a state `x`) but defines no "
                "average(entry, w, age, dt)"
            )

    def average(self, entry, w, age, dt):
        """The mean conductance (µS) over a step of `dt` ms of arrivals
        `age` ms before its end. Only `in_step` groups have it (and must: a
        class that sets `in_step` without it is refused when defined)."""
        raise TypeError(f"{type(self).__name__} is no in_step group: no average()")

    def in_step_jump(self, dt):
        """`jump` for the `x` state: the mean over a step of `dt` ms."""

        def jump(entry, w, age):
            return {"x": self.average(entry, w, age, dt)}

        return jump

    def onset_jump(self, dt):
        """`jump` for the `x` state of arrivals at the step's start (`age` 0
        up to rounding): `w·age/dt`, zero in value, whose derivative with
        respect to the arrival time, `-w/dt`, is the onset term of moving
        the arrival into the step (as `in_step_jump`'s at `age -> dt`)."""

        def jump(entry, w, age):
            del entry
            return {"x": w * age / dt}

        return jump

    def cell_arrivals(self) -> CellArrivals | None:
        """The NetCons from threshold sources into this group, or `None` (the
        default). The event stepping delivers them after `before_step` and
        `after_step`, by `jump`, over the same intervals (from the
        `t_delivered` state), and then calls `with_current`."""
        return None

    def before_step(self, t0, t1, t_start, states, span):
        t_done = jnp.maximum(states["t_delivered"][0], just_before(t_start))
        own = self.netcon_states
        out = dict(states)
        if self.in_step:  # (the onset of the arrivals at t0 from their NetCons'
            # states before them: first)
            out |= {k: jnp.zeros_like(out[k]) for k in self.in_step_states}
            onset = self.onset_jump(t1 - t0)
            out = _deliver(self.arrivals, out, t_done, t0, t0, span, True, onset, own)
        out = dict(
            _deliver(self.arrivals, out, t_done, t0, t0, span, True, self.jump, own)
        )
        out["t_delivered"] = jnp.full_like(states["t_delivered"], t0)
        if self.in_step:
            jump = self.in_step_jump(t1 - t0)
            out = _deliver(self.arrivals, out, t0, t1, t1, span, False, jump, own)
        return out

    def after_step(self, t0, t1, v1, states, span, ions=None):
        del t0
        t_done = states["t_delivered"][0]
        own = self.netcon_states
        out = dict(
            _deliver(self.arrivals, states, t_done, t1, t1, span, False, self.jump, own)
        )
        out["t_delivered"] = jnp.full_like(states["t_delivered"], just_before(t1))
        if self.in_step:  # in the states now
            out |= {k: jnp.zeros_like(out[k]) for k in self.in_step_states}
        return self.with_current(v1, out, ions)

    def jump_times(self, dtype):
        if self.arrivals is None:
            return jnp.zeros((0,), dtype)
        # Steps land on the arrivals; the gradient with respect to a delay
        # flows through the delivered state (`jump`'s `age`), not the grid.
        t = jax.lax.stop_gradient(self.arrivals.time).astype(dtype)
        return jnp.where(jnp.isfinite(t), t, t[0])


class AbstractClampGroup(AbstractPointProcessGroup):
    """Voltage clamps with three levels (`dur` ms of shape `(3, n)`) and a
    state `on` (0 or 1): their level changes are jump times and
    `CrankNicolson` edges, and they are stiff while on."""

    dur: eqx.AbstractVar[Float[Array, "3 n"]]

    def jump_times(self, dtype):
        d = self.dur.astype(dtype)
        return jnp.concatenate([d[0], d[0] + d[1], d[0] + d[1] + d[2]])

    def edges(self, dtype):
        return jax.lax.stop_gradient(self.jump_times(dtype))

    def stiff(self, states):
        return jnp.any(states["on"] > 0)
