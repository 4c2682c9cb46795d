"""`build`'s part for events: point processes into one vectorised group per
kind, NetCons into each synapse group's sorted `Arrivals`, IClamps into
`StepCurrent`s, and point-process recordings into `(name, group, variable,
entry)` entries."""

from collections import Counter
from collections.abc import Sequence

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from .._errors import InvalidArgument
from .._stimulus import Site, StepCurrent
from ._arrivals import build_arrivals
from ._netcon import is_artificial, NetCon, spike_times_of
from ._processes import (
    AlphaSynapse,
    Exp2Syn,
    ExpSyn,
    IClamp,
    POINT_PROCESS_KINDS,
    SEClamp,
    VClamp,
)
from ._sources import build_sources, SpikeRecording
from ._synapses import Exp2SynGroup, ExpSynGroup
from ._timed import AlphaSynapseGroup, IClampGroup, SEClampGroup
from ._vclamp import VClampGroup


class PointRecording(eqx.Module):
    """Record `variable` of `point_process` (the object given to `build`, or
    its name) under `name`: NEURON's `Vector.record(pp._ref_variable)`. The
    variables: `ExpSyn` `g`; `Exp2Syn` `A`, `B`, `g`; `AlphaSynapse` `g`
    (µS); `SEClamp` `i` (nA), `vc` (mV); `IClamp` `i` (nA, the current it
    injects during each step, NEURON's `IClamp.i`)."""

    name: str
    point_process: object
    variable: str


_GROUPS = {ExpSyn: ExpSynGroup, Exp2Syn: Exp2SynGroup}

EVENT_RECORDINGS = (PointRecording, SpikeRecording)
"""The recordings `build` hands to `build_events`."""


def _imported(pp) -> bool:
    """Whether `pp` is a point process imported from an NMODL file
    (`stable_ode.load_nmodl`), which builds its own group."""
    return callable(getattr(type(pp), "make_point_process_group", None))


def _receives(pp) -> bool:
    """Whether an imported point process has a NET_RECEIVE."""
    return _imported(pp) and bool(getattr(type(pp), "receives_events", False))


def _name(pp, k, counts) -> str:
    if pp.name is not None:
        return str(pp.name)
    kind = type(pp).__name__
    j = counts.get(kind, 0)
    counts[kind] = j + 1
    return f"{kind}[{j}]"


def build_events(
    point_processes: Sequence,
    netcons: Sequence[NetCon],
    recordings: Sequence,
    index_of,
    dtype,
    celsius: float = 6.3,
):
    """`(groups, step_currents, recordings)`: the point-process groups (in a
    fixed kind order, then the threshold sources), the IClamps as
    `StepCurrent`s, and each `PointRecording` as `(name, k, variable, entry)`
    with `k` the position in `groups` (`SpikeRecording`s are logged by the
    sources' group)."""
    spike_recs = [
        (j, r) for j, r in enumerate(recordings) if isinstance(r, SpikeRecording)
    ]
    recordings = [r for r in recordings if not isinstance(r, SpikeRecording)]
    pps = list(point_processes)
    counts: dict = {}
    names = []
    for k, pp in enumerate(pps):
        if type(pp) not in POINT_PROCESS_KINDS.values() and not _imported(pp):
            raise InvalidArgument(
                "build",
                f"point_processes[{k}]",
                f"must be one of {sorted(POINT_PROCESS_KINDS)}, got {pp!r}",
            )
        names.append(_name(pp, k, counts))
    dup = {n for n, c in Counter(names).items() if c > 1}  # O(n), not names.count
    if dup:
        raise InvalidArgument(
            "build", "point_processes", f"duplicate names {sorted(dup)}"
        )

    by_id = {id(pp): k for k, pp in enumerate(pps)}
    by_name = {n: k for k, n in enumerate(names)}

    def find(target, where) -> int:
        if id(target) in by_id:
            return by_id[id(target)]
        if isinstance(target, str) and target in by_name:
            return by_name[target]
        raise InvalidArgument(
            "build",
            where,
            f"names no point process given to build: {target!r} (names: {names})",
        )

    for j, r in spike_recs:
        if is_artificial(r.site) and id(r.site) not in by_id:
            raise InvalidArgument(
                "build",
                f"recordings[{j}].site",
                f"an artificial cell not given to build (point_processes): {r.site!r}",
            )

    # The entry of each point process within its kind's group.
    by_kind: dict = {}
    entry_of = {}
    for k, pp in enumerate(pps):
        members = by_kind.setdefault(type(pp), [])
        entry_of[k] = len(members)
        members.append(k)

    # NetCons → arrivals per target kind.
    arrivals: dict = {}
    cell_netcons: list = []
    for j, nc in enumerate(netcons):
        where = f"netcons[{j}].target"
        if not isinstance(nc, NetCon):
            raise InvalidArgument(
                "build", f"netcons[{j}]", f"must be a NetCon, got {nc!r}"
            )
        source, target, delay, weight = nc.source, nc.target, nc.delay, nc.weight
        k = find(target, where)
        if type(pps[k]) not in _GROUPS and not _receives(pps[k]):
            raise InvalidArgument(
                "build",
                where,
                f"{names[k]!r} is a {type(pps[k]).__name__}, which receives no "
                "NetCon events (targets: ExpSyn, Exp2Syn)",
            )
        if is_artificial(source) and id(source) not in by_id:
            raise InvalidArgument(
                "build",
                f"netcons[{j}].source",
                f"an artificial cell not given to build (point_processes): {source!r}",
            )
        if isinstance(source, Site) or is_artificial(source):
            cell_netcons.append((j, type(pps[k]), entry_of[k], nc))
            continue
        t = spike_times_of(source)
        a = arrivals.setdefault(type(pps[k]), ([], [], [], [], [], []))
        a[0].append(t)
        a[1].append(np.full(t.shape, entry_of[k], np.int32))
        a[2].append(np.full(t.shape, len(a[3]), np.int32))
        a[3].append(weight)
        a[4].append(delay)
        a[5].append(entry_of[k])

    def params(kind, fields):
        ks = by_kind[kind]
        out = {}
        for f in fields:
            out[f] = jnp.asarray(
                np.asarray([float(getattr(pps[k], f)) for k in ks]), dtype
            )
        return out, ks

    sources, log, cell_arrivals, art_rows = build_sources(
        cell_netcons, spike_recs, index_of, dtype
    )
    groups, steps = [], []
    where_of = {}
    for kind in (ExpSyn, Exp2Syn, AlphaSynapse, SEClamp, VClamp):
        if kind not in by_kind:
            continue
        ks = by_kind[kind]
        index = jnp.asarray([index_of(pps[k].site) for k in ks], jnp.int32)
        gnames = tuple(names[k] for k in ks)
        if kind in _GROUPS:
            arr = None
            if kind in arrivals and sum(t.size for t in arrivals[kind][0]):
                t, e, n, w, d, g = arrivals[kind]
                arr = build_arrivals(
                    *(np.concatenate(x) for x in (t, e, n)), w, d, g, dtype
                )
            fields = ("tau", "e") if kind is ExpSyn else ("tau1", "tau2", "e")
            p, _ = params(kind, fields)
            group = _GROUPS[kind](
                **p,
                index=index,
                arrivals=arr,
                cell=cell_arrivals.get(kind),
                names=gnames,
            )
        elif kind is AlphaSynapse:
            p, _ = params(kind, ("onset", "tau", "gmax", "e"))
            group = AlphaSynapseGroup(**p, index=index, names=gnames)
        elif kind is VClamp:
            p, _ = params(kind, ("gain", "rstim", "tau1", "tau2", "fac"))
            arr3 = {
                f: jnp.asarray(
                    np.asarray([[float(x) for x in getattr(pps[k], f)] for k in ks]).T,
                    dtype,
                )
                for f in ("dur", "amp")
            }
            group = VClampGroup(**p, **arr3, index=index, names=gnames)
        else:
            p, _ = params(kind, ("rs", "dur1", "dur2", "dur3", "amp1", "amp2", "amp3"))
            group = SEClampGroup(
                rs=p["rs"],
                dur=jnp.stack([p["dur1"], p["dur2"], p["dur3"]]),
                amp=jnp.stack([p["amp1"], p["amp2"], p["amp3"]]),
                index=index,
                names=gnames,
            )
        for j, k in enumerate(ks):
            where_of[k] = (len(groups), j)
        groups.append(group)
    for kind in by_kind:  # point processes imported from NMODL files
        if not _imported(pps[by_kind[kind][0]]):
            continue
        ks = by_kind[kind]
        art = bool(getattr(kind, "artificial_cell", False))
        # (an artificial cell is in no compartment: it reads no voltage)
        sites = [0 if art else index_of(pps[k].site) for k in ks]
        index = jnp.asarray(sites, jnp.int32)
        arr = None
        if kind in arrivals and sum(t.size for t in arrivals[kind][0]):
            t, e, n, w, d, g = arrivals[kind]
            arr = build_arrivals(
                np.concatenate(t), np.concatenate(e), np.concatenate(n), w, d, g, dtype
            )
        names_k = tuple(names[k] for k in ks)
        extra = {}
        if art:  # each instance's source (-1: none), for its net_events
            rows = [art_rows.get(id(pps[k]), -1) for k in ks]
            extra["fire_rows"] = jnp.asarray(rows, jnp.int32)
        group = kind.make_point_process_group(
            [pps[k] for k in ks],
            index,
            arr,
            names_k,
            dtype,
            cell=cell_arrivals.get(kind),
            celsius=celsius,
            **extra,
        )
        for j, k in enumerate(ks):
            where_of[k] = (len(groups), j)
        groups.append(group)
    for k in by_kind.get(IClamp, []):
        pp = pps[k]
        steps.append(StepCurrent(pp.site, pp.amp, pp.delay, pp.dur))
    targets = [
        find(r.point_process, f"recordings[{j}].point_process")
        for j, r in enumerate(recordings)
    ]
    recorded = sorted({k for k in targets if type(pps[k]) is IClamp})
    if recorded:  # their injected currents, recordable (the StepCurrents inject)
        p = {
            f: jnp.asarray(np.asarray([float(getattr(pps[k], f)) for k in recorded]))
            for f in ("delay", "dur", "amp")
        }
        group = IClampGroup(
            **{f: x.astype(dtype) for f, x in p.items()},
            index=jnp.asarray([index_of(pps[k].site) for k in recorded], jnp.int32),
            names=tuple(names[k] for k in recorded),
        )
        for j, k in enumerate(recorded):
            where_of[k] = (len(groups), j)
        groups.append(group)
    groups.extend(g for g in (sources, log) if g is not None)

    recs = []
    for j, (r, k) in enumerate(zip(recordings, targets)):
        g, entry = where_of[k]
        if r.variable not in groups[g].recordable:
            raise InvalidArgument(
                "build",
                f"recordings[{j}].variable",
                f"{type(pps[k]).__name__} {names[k]!r} has no recordable variable "
                f"{r.variable!r} (recordable: {list(groups[g].recordable)})",
            )
        recs.append((r.name, g, r.variable, entry))
    return tuple(groups), steps, tuple(recs)
