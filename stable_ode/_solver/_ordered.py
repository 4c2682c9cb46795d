"""NEURON's order of the state updates within a fixed step (`BackwardEuler`).

NEURON's `fadvance` at `secondorder = 0` computes every mechanism's current at
the step's start (`nrn_rhs`: each ion's own "current" function first zeroes
the ion's total current and, for an ion whose concentrations a mechanism
writes, recomputes its Nernst reversal potential from the concentrations of
that moment; then each mechanism adds its current), solves for the new
voltage, and then calls each mechanism type's `nrn_state` in turn. A
mechanism's generated `nrn_state` copies the ion variables it uses from the
ion (`cai = _ion_cai; ica = _ion_ica;`), takes its step, and copies a
concentration it writes back (`_ion_cai = cai;`; no `nrn_wrote_conc`, which
only `finitialize` calls).

The order of those calls is NEURON's `memb_order_`: mechanism types in the
order they are registered (`AbstractMechanism.mechanism_type`), except that
every mechanism that writes a concentration (`USEION ca WRITE cai`; its
registration calls `nrn_writes_conc`) is moved in front of all the others,
each one in front of those moved before it. So:

- every mechanism that writes a concentration is advanced first, the one
  registered last first; then every other mechanism, in registration order;
- a mechanism reading a concentration (`cai`) sees the value this step's
  update wrote when its writer is advanced before it (always, for a
  mechanism that writes no concentration itself), else the step's start's;
- every ion current a mechanism reads (`ica`) is the one of the step's start
  (voltage and states of the start);
- reversal potentials stay those of the step's start: NEURON recomputes them
  from the new concentrations at the next step's current computation.

`advance_in_order` does exactly this. A model in which no mechanism reads a
concentration that another one writes (every model without ions, and many
with) takes the former path, all groups from the states of the step's start,
with identical results.
"""

from .._group import ion_uses, uses_ions
from .._ion_table import reads_current
from .._state import group_states, State
from ..mechanisms import IonView
from ..mechanisms._scheme import map_kinetics
from ._staggered import advance


def _concentrations(group) -> tuple[set, set]:
    """The `(ion, side)` concentrations (`side` "i" or "o") that `group`'s
    mechanism (or point process) reads, and those it writes."""
    reads, writes = set(), set()
    for use in ion_uses(group):
        for side in ("i", "o"):
            name = f"{use.ion}{side}"
            if name in use.write:
                writes.add((use.ion, side))
            elif name in use.read:
                reads.add((use.ion, side))
    return reads, writes


def neuron_order(model) -> tuple[tuple[int, ...], frozenset[int]] | None:
    """NEURON's order of `model.groups` within a step (module docstring: the
    mechanism groups writing a concentration by decreasing `mechanism_type`,
    then the other mechanism groups by increasing `mechanism_type`, ties and
    the synapse and point-process groups in their order), and the mechanism
    groups that read a concentration an earlier group in that order writes;
    `None` when there is none (the order then changes nothing)."""
    if not model.ions:
        return None
    mechs = model.mechanisms

    def key(g):
        kind = mechs[g].mechanism.mechanism_type
        return (0, -kind, g) if _concentrations(mechs[g])[1] else (1, kind, g)

    order = sorted(range(len(mechs)), key=key)
    rest = tuple(range(len(mechs), len(model.groups)))
    readers, written = set(), set()
    for g in (*order, *rest):  # (point processes write no concentration)
        reads, writes = _concentrations(model.groups[g])
        if reads & written:
            readers.add(g)
        written |= writes
    if not readers:
        return None
    return tuple(order) + rest, frozenset(readers)


def _with_concentrations(model, views, states) -> dict[str, IonView]:
    """`views` with the concentrations that mechanisms write taken from
    `states`; reversal potentials and currents as in `views`."""
    out = {}
    for ion in model.ions:
        view = views[ion.name]
        ci, co = view.inside, view.outside
        for g, name in ion.writes_inside:
            ci = model.groups[g].put(ci, states[g][name])
        for g, name in ion.writes_outside:
            co = model.groups[g].put(co, states[g][name])
        out[ion.name] = IonView(
            inside=ci,
            outside=co,
            reversal=view.reversal,
            current=view.current,
            valence=view.valence,
        )
    return out


def advance_in_order(model, v1, y0: State, dt):
    """The kinetics of every group and the states after `dt` (`State` at
    voltages `v1`), NEURON's `nrn_state` sequence (module docstring): each
    group's kinetics at `v1`, its states of the step's start, the ion
    currents and reversal potentials of the step's start, and the
    concentrations written by the groups before it in NEURON's order as they
    are after their update.

    **Returns:** `(kinetics, y1)`, `kinetics` a tuple in `State.groups` order.
    """
    plan = neuron_order(model)
    if plan is None:
        kin = model.kinetics(v1, y0.groups, current_v=y0.v)
        return kin, advance(kin, y0, dt, v1)
    order, readers = plan
    views = model.ion_views(y0.v, y0.groups, currents=reads_current(model))
    groups = model.groups
    kin, new = [None] * len(groups), list(y0.groups)
    for g in order:
        group, x = groups[g], y0.groups[g]
        if g in readers:
            k = group.kinetics(model, v1, x, _with_concentrations(model, views, new))
        elif uses_ions(group):
            k = group.kinetics(model, v1, x, views)
        else:
            k = group.kinetics(model, v1, x)
        kin[g] = k
        new[g] = map_kinetics(lambda kk, xx: kk.update(xx, dt), k, x)
    return group_states(kin), State(v=v1, groups=group_states(new))


def init_in_order(model, v):
    """Every group's initial states at voltages `v` (mV) as NEURON's
    `finitialize` computes them, or `None` when `neuron_order` is `None`.

    NEURON runs each mechanism's `INITIAL` (`nrn_init`) in the order of its
    state updates; a mechanism writing a concentration writes it to the ion
    and recomputes the ion's Nernst reversal potential (`nrn_wrote_conc`), so
    a mechanism after it initialises at that concentration and reversal
    potential (a K(Ca) scheme's steady state at a pool's initial `cai`).

    **Returns:** the groups' states as a tuple in `State.groups` order.
    """
    plan = neuron_order(model)
    if plan is None:
        return None
    order, readers = plan
    base = model.ion_views()
    groups = model.groups
    new = [None] * len(groups)
    for g in order:
        group = groups[g]
        if g in readers:
            new[g] = group.init_states(model, v, _initial_views(model, base, new))
        elif uses_ions(group):
            new[g] = group.init_states(model, v, base)
        else:
            new[g] = group.init_states(model, v)
    return group_states(new)


def _initial_views(model, views, states) -> dict[str, IonView]:
    """`views` (the model's initial ions) with the concentrations written by
    the groups already initialised (`states[g]` not `None`), and the Nernst
    reversal potentials recomputed from them where they follow Nernst."""
    out = {}
    for ion in model.ions:
        view = views[ion.name]
        ci, co = view.inside, view.outside
        for g, name in ion.writes_inside:
            if states[g] is not None:
                ci = model.groups[g].put(ci, states[g][name])
        for g, name in ion.writes_outside:
            if states[g] is not None:
                co = model.groups[g].put(co, states[g][name])
        e = ion.reversal_at(ci, co, view.reversal, model.celsius)
        out[ion.name] = IonView(
            inside=ci,
            outside=co,
            reversal=e,
            current=view.current,
            valence=view.valence,
        )
    return out
