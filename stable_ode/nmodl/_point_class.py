"""The classes `load_nmodl` returns for `POINT_PROCESS` files: `make_point_class`
builds the user-facing class (fields: site, the file's `PARAMETER`s, name) and
its group class (an `AbstractNmodlPointGroup`, `stable_ode.nmodl._point`), with
the `_PointSpec` both read."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from .._stimulus import Site
from ..events._arrivals import Arrivals, CellArrivals
from . import _runtime
from ._clock import reads_clock
from ._codegen import py
from ._errors import NmodlError
from ._point import AbstractNmodlPointGroup, in_step_key
from ._point_analysis import (
    breakpoint_values,
    check_artificial,
    check_net_event,
    counters,
    derived_names,
    initial_sends,
    receive_increments,
    sequential_receive,
)
from ._sequential import AbstractNmodlSequentialGroup


class _PointSpec:
    """What the group of one imported point process needs (a class attribute,
    static)."""

    def __init__(self, module, fields, ns, derivs, derived, targets, held=None):
        self.module, self.fields, self.ns = module, fields, ns
        self.derivs, self.derived, self.targets = derivs, derived, targets
        # `held`: a NET_RECEIVE run in turn (`_sequential`) and the ASSIGNEDs
        # it sets, held between events
        self.sequential = held is not None
        self.counters = held if held is not None else counters(module, targets)
        self.n_sends = ns.get("N_SENDS", 0)
        self.n_initial_sends = ns.get("N_INITIAL_SENDS", 0)
        self.recorded = breakpoint_values(module, self.counters)
        self.ion_reads = {
            x: (
                ion.name,
                {f"e{ion.name}": "reversal", f"{ion.name}i": "inside",
                 f"{ion.name}o": "outside", f"i{ion.name}": "current"}[x],
                x in ion.read,
            )
            for ion in module.ions
            for x in ion.read + ion.write
        }  # fmt: skip
        self.ion_writes = tuple(
            (ion.name, f"i{ion.name}")
            for ion in module.ions
            if f"i{ion.name}" in ion.write
        )
        nr = module.net_receive
        self.vector = nr.params[1:] if nr is not None else ()
        self.clock = reads_clock(module)  # BREAKPOINT reads `t` (`_clock`)

    def increments(self, group, params, w, celsius, event=None):
        """NET_RECEIVE's increment of each target at each arrival (from states
        at zero, at the event's time `event["t"]`, with its NetCon's weight
        vector `event[name]`), each target's decay rate (/ms; 0 for a
        counter), and the weight vector's new elements: `(inc, rate, new)`."""
        z = jnp.zeros_like(w)
        event = event or {}
        m = group._vars(params, z, {}, celsius)
        kin = {}
        for d in self.derivs:
            kin |= d(m.copy())
        m0 = m.copy()
        m0.t = event.get("t", z)
        lv = self.ns["pr_NET_RECEIVE"](m0, w, *(event.get(a, z) for a in self.vector))
        inc = {s: _runtime.as_n(getattr(m0, py(s)), w) for s in self.targets}
        rate = {
            s: _runtime.as_n(0.0 if s in self.counters else kin[s].rate, w)
            for s in self.targets
        }
        new = {a: _runtime.as_n(getattr(lv, py(a)), w) for a in self.vector}
        return inc, rate, new


def make_point_class(module, fields, ns, derivs, info, use_ions):
    """The user-facing class of point process `module` (fields: site, the
    `PARAMETER`s, name) and its group class."""
    targets, held = {}, None
    if module.net_receive is not None:
        # increments that decay exactly, unless it does more, or INITIAL sends
        # self-events: then NET_RECEIVE runs in turn at each event
        try:
            targets = None if initial_sends(module) else receive_increments(module)
        except NmodlError:
            targets = None
        if targets is None:
            targets, held = {}, sequential_receive(module)
    if module.artificial:
        check_artificial(module)
    check_net_event(module)
    spec = _PointSpec(module, fields, ns, derivs, derived_names(module), targets, held)
    name = module.suffix
    base = AbstractNmodlSequentialGroup if spec.sequential else AbstractNmodlPointGroup
    group_cls = type(
        f"{name}Group",
        (base,),
        {
            "__annotations__": {
                "params": dict[str, Float[Array, " n"]],
                "index": Int[Array, " n"],
                "arrivals": Arrivals | None,
                "cell": CellArrivals | None,
                "celsius": Float[Array, ""],
                "names": tuple[str, ...],
                "kind": str,
                "fire_rows": Int[Array, " n"] | None,
            },
            "names": eqx.field(static=True),
            "kind": eqx.field(static=True, default=name),
            "fire_rows": None,  # an artificial cell's sources (`_artificial`)
            "recordable": (*module.states, *spec.counters, *spec.recorded),
            "spec": spec,
            "ions": use_ions(module),
            "in_step": bool(targets),
            "in_step_states": tuple(in_step_key(s) for s in targets),
            "nmodl": info,
            "__module__": "stable_ode.nmodl.generated",
        },
    )
    _check_decay(module, spec, group_cls)

    def make_point_process_group(
        cls, pps, index, arrivals, names, dtype, cell=None, celsius=6.3, fire_rows=None
    ):
        params = {
            f: jnp.asarray(np.asarray([float(getattr(p, f)) for p in pps]), dtype)
            for f in fields
        }
        return group_cls(
            params=params,
            index=index,
            arrivals=arrivals,
            cell=cell,
            celsius=jnp.asarray(celsius, dtype),
            names=names,
            fire_rows=fire_rows,
        )

    def __check_init__(self):
        if not isinstance(self.site, Site):
            raise ValueError(
                f"{name}: site must be a stable_ode.Site, got {self.site!r}"
            )

    art = module.artificial
    annotations = {} if art else {"site": Site}
    annotations |= {f: float for f in fields}
    annotations["name"] = str | None
    listed = ", ".join(f"`{f}` = {module.parameters[p]}" for f, p in fields.items())
    what = "artificial cell" if art else "point process"
    namespace = {
        "__annotations__": annotations,
        **{f: module.parameters[p] for f, p in fields.items()},
        "name": None,
        "make_point_process_group": classmethod(make_point_process_group),
        "receives_events": bool(targets) or spec.sequential,
        "artificial_cell": art,
        "group_class": group_cls,
        "nmodl": info,
        "__doc__": f"NMODL {what} `{name}` imported from `{module.path}`. "
        f"**Fields:** {'' if art else '`site`, '}the file's PARAMETERs ({listed}), "
        f"`name`. States: {', '.join(module.states) or 'none'}."
        + (" A NetCon source (its net_events are spikes)." if art else ""),
        "__module__": "stable_ode.nmodl.generated",
    }
    if not art:
        namespace["__check_init__"] = __check_init__
    return type(
        py(name) if name.isidentifier() else "point_process", (eqx.Module,), namespace
    )


def _check_decay(module, spec, group_cls):
    """Each NET_RECEIVE target relaxes at a rate that the parameters alone set
    (so that an arrival inside a step can be decayed exactly)."""
    if not spec.targets:
        return
    fields = spec.fields
    params = {f: jnp.full((1,), module.parameters[p]) for f, p in fields.items()}
    g = group_cls(
        params=params,
        index=jnp.zeros(1, jnp.int32),
        arrivals=None,
        cell=None,
        celsius=jnp.asarray(6.3),
        names=("x",),
    )
    for celsius in (6.3, 37.0):  # constant during a run: may set the rate
        rates = []
        for v in (-65.0, 20.0):
            m = g._vars(params, jnp.full((1,), v), {}, jnp.asarray(celsius))
            kin = {}
            for d in spec.derivs:
                kin |= d(m)
            rates.append({s: getattr(kin.get(s), "rate", None) for s in spec.targets})
        for s, line in spec.targets.items():
            if s in spec.counters:
                continue
            r0, r1 = rates[0][s], rates[1][s]
            if r0 is None or r1 is None or not np.allclose(r0, r1, rtol=0, atol=0):
                raise NmodlError(
                    module.path,
                    line,
                    "NET_RECEIVE",
                    f"state {s}, which NET_RECEIVE adds to, must relax at a rate "
                    "set by the parameters and celsius alone (not v or the "
                    "states) to deliver events exactly; not supported yet",
                )
