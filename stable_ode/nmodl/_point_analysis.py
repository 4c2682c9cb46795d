"""What the importer reads off a `POINT_PROCESS` file for its group
(`stable_ode.nmodl._point`): the values `INITIAL` derives once, what
`NET_RECEIVE` adds to (states and `ASSIGNED` counters), and the values of
`BREAKPOINT` a recording may name."""

from . import _ir as ir
from ._analysis import (
    _exprs,
    calls_in,
    effects,
    names_in,
    StateDependence,
    statement_reads,
    walk,
)
from ._errors import NmodlError


def derived_names(module: ir.Module) -> set[str]:
    """The `PARAMETER`s and `ASSIGNED`s that `INITIAL` assigns (directly or
    through the procedures it calls) from values that do not change during a
    run (parameters, `celsius`, geometry; not `v`, the states or the ions), and
    that no other block assigns: NEURON computes them once, and so does any
    re-evaluation of INITIAL. (cabpump.mod's `ica_pmp = 0` in INITIAL is not
    one: its KINETIC block computes it every step.)"""
    if module.initial is None:
        return set()
    fx = effects(module)

    def assigned(body) -> set[str]:
        out = set()
        for s in walk(body):
            if isinstance(s, ir.Assign):
                out.add(s.target)
            elif isinstance(s, ir.CallStmt) and s.fn in fx:
                out |= fx[s.fn][1]
            elif isinstance(s, ir.Local):
                out -= set(s.names)
        return out

    out = assigned(module.initial.body)
    for blk in [module.breakpoint, *module.derivatives.values(), module.net_receive]:
        if blk is not None:
            out -= assigned(blk.body)
    out = (out - set(module.states)) & (set(module.parameters) | set(module.assigned))
    dep = StateDependence(module, fx)
    ion_vars = {x for ion in module.ions for x in ion.read + ion.write}
    dep.states = set(module.states) | ion_vars | {"v", "t", "dt"}
    for s in module.initial.body:
        dep.step(s)
    return {n for n in out if not dep.deps.get(n)}


def receive_increments(module: ir.Module) -> dict[str, int]:
    """NET_RECEIVE's targets: state (or `ASSIGNED` counter) → line of its
    `x = x + expr`; every other statement checked (see `check_receive`)."""
    nr = module.net_receive
    states = set(module.states)
    counters = set(module.assigned) - _assigned_outside_receive(module)
    vector = set(nr.params[1:])
    local: set[str] = set()
    out: dict[str, int] = {}
    plain: dict[str, int] = {}  # ASSIGNED temporaries
    fx = effects(module)
    ions = {x for ion in module.ions for x in ion.read + ion.write}

    def fail(s, problem):
        raise NmodlError(
            module.path, getattr(s, "line", nr.line), "NET_RECEIVE", problem
        )

    def reads(s, e, allowed=frozenset()):
        names = names_in(e)
        for fn in calls_in(e) & set(fx):
            names |= fx[fn][0]
        if "flag" in names - local:
            fail(s, "`flag` (self-events, net_send) is not supported yet")
        bad = (names & (states | ions | {"v"})) - allowed - local - vector
        if bad:
            fail(
                s,
                f"reads {', '.join(sorted(bad))}: a NET_RECEIVE may read its "
                "arguments, LOCALs, `t` and the parameters, not the states, "
                "`v` or the ions (its increments are added to states that "
                "decay exactly from the event's time)",
            )

    def visit(body):
        for s in body:
            if isinstance(s, ir.Local):
                local.update(s.names)
            elif isinstance(s, ir.If):
                reads(s, s.cond)
                visit(s.body)
                visit(s.orelse)
            elif isinstance(s, ir.Assign) and s.target == nr.params[0]:
                fail(s, f"assigning the weight {s.target} is not supported")
            elif isinstance(s, ir.Assign) and s.target in local | vector:
                reads(s, s.value)
            elif isinstance(s, ir.Assign) and (
                s.target in states
                or (s.target in counters and _increment(s) is not None)
            ):
                rest = _increment(s)
                if rest is None or s.target in plain:
                    fail(s, _FORMS)
                reads(s, rest)
                out[s.target] = s.line
            elif isinstance(s, ir.Assign) and s.target in _temporaries(module):
                if s.target in out:
                    fail(s, _FORMS)
                reads(s, s.value)
                plain[s.target] = s.line
            else:
                fail(s, _FORMS)

    visit(nr.body)
    if module.net_receive_initial is not None:
        _check_receive_initial(module, vector)
    return out


def sequential_receive(module: ir.Module) -> tuple[str, ...]:
    """For a NET_RECEIVE run in turn at each event (`_sequential`): the
    `ASSIGNED`s it sets that no other block computes (held per instance
    between events). It may read anything, test `flag`, send self-events
    (`net_send`) and assign the states, those `ASSIGNED`s, the weight
    vector's other elements and LOCALs; anything else is one error."""
    nr = module.net_receive
    fx = effects(module)
    outside = _assigned_outside_receive(module)
    vector = set(nr.params[1:])
    local: set[str] = set()
    held: set[str] = set()
    for s in walk(nr.body):
        if isinstance(s, ir.Local):
            local |= set(s.names)
            continue
        if isinstance(s, ir.Assign):
            targets = {s.target}
        elif isinstance(s, ir.CallStmt) and s.fn in fx:
            targets = set(fx[s.fn][1])
        else:
            continue
        for x in sorted(targets - local - vector - set(module.states)):
            if x == nr.params[0]:
                problem = f"assigning the weight {x} is not supported"
            elif x in module.assigned and x not in outside:
                held.add(x)
                continue
            elif x in module.assigned:
                problem = (
                    f"assigns {x}, which BREAKPOINT or the kinetics compute "
                    "(NEURON would overwrite it at the next step)"
                )
            else:
                problem = (
                    f"assigns {x}: a NET_RECEIVE may assign the states, "
                    "ASSIGNEDs that no other block computes, the weight "
                    "vector's other elements and LOCALs"
                )
            raise NmodlError(module.path, s.line, "NET_RECEIVE", problem)
    if module.net_receive_initial is not None:
        _check_receive_initial(module, vector)
    return tuple(sorted(held))


def initial_sends(module: ir.Module) -> bool:
    """Whether INITIAL sends self-events (`net_send`, at t = 0)."""
    if module.initial is None:
        return False
    return any(
        isinstance(s, ir.CallStmt) and s.fn == "net_send"
        for s in walk(module.initial.body)
    )


def event_held(module: ir.Module) -> set[str]:
    """The `ASSIGNED`s that NET_RECEIVE sets (directly or through the
    procedures it calls) and no other block but INITIAL computes: values
    held from one event to the next, which the other blocks may read."""
    nr = module.net_receive
    if nr is None:
        return set()
    fx = effects(module)
    out = set()
    for s in walk(nr.body):
        if isinstance(s, ir.Assign):
            out.add(s.target)
        elif isinstance(s, ir.CallStmt) and s.fn in fx:
            out |= fx[s.fn][1]
    return (out & set(module.assigned)) - _assigned_outside_receive(module)


def check_point_ions(module: ir.Module) -> None:
    """A point process may read ion variables and write ion currents (nA,
    added to its compartment's), not concentrations."""
    for ion in module.ions:
        for x in ion.write:
            if x in (f"{ion.name}i", f"{ion.name}o"):
                raise NmodlError(
                    module.path,
                    ion.line,
                    "USEION",
                    f"a POINT_PROCESS writing the concentration {x} is not "
                    "supported yet (reading ion variables and writing "
                    f"i{ion.name} is)",
                )


def _increment(s: ir.Assign) -> ir.Expr | None:
    """`expr` of `x = x + expr` (or `x = expr + x`), else `None`."""
    v, x = s.value, ir.Name(s.target)
    if isinstance(v, ir.BinOp) and v.op == "+":
        return v.rhs if v.lhs == x else v.lhs if v.rhs == x else None
    return None


_FORMS = (
    "supported statements are `x = x + expr` adding to a state, or to an "
    "ASSIGNED that no other block assigns; assignments to the weight vector's "
    "other elements (NET_RECEIVE's arguments after the weight), to LOCALs and "
    "to ASSIGNEDs no other block reads or assigns; LOCAL and if/else"
)


def _check_receive_initial(module: ir.Module, vector: set[str]) -> None:
    """NET_RECEIVE's INITIAL may assign the weight vector's elements and its
    LOCALs only."""
    body = module.net_receive_initial.body
    local = {n for q in walk(body) if isinstance(q, ir.Local) for n in q.names}
    for s in walk(body):
        if isinstance(s, (ir.Local, ir.If)):
            continue
        if not (isinstance(s, ir.Assign) and s.target in vector | local):
            raise NmodlError(
                module.path,
                s.line,
                "INITIAL",
                "NET_RECEIVE's INITIAL may only assign the weight vector's "
                f"elements ({', '.join(sorted(vector)) or 'none'}) and LOCALs",
            )


def _temporaries(module: ir.Module) -> set[str]:
    """The `ASSIGNED`s that no block but NET_RECEIVE reads or assigns (values it
    computes on the way, as tmgsyn.mod's `x`)."""
    used = set()
    blocks = [module.initial, module.breakpoint, *module.derivatives.values()]
    bodies = [b.body for b in blocks if b is not None]
    bodies += [c.body for c in module.callables.values()]
    for body in bodies:
        for s in walk(body):
            for e in _exprs(s):
                used |= names_in(e)
            if isinstance(s, ir.Assign):
                used.add(s.target)
    return set(module.assigned) - used - set(module.nonspecific)


def _assigned_outside_receive(module: ir.Module) -> set[str]:
    """The names that BREAKPOINT or the DERIVATIVE/KINETIC blocks assign
    (directly or through the procedures they call)."""
    fx = effects(module)
    out = set()
    for blk in [module.breakpoint, *module.derivatives.values()]:
        for s in walk(blk.body) if blk is not None else ():
            if isinstance(s, ir.Assign):
                out.add(s.target)
            elif isinstance(s, ir.CallStmt) and s.fn in fx:
                out |= fx[s.fn][1]
    return out


def breakpoint_values(module: ir.Module, held) -> tuple[str, ...]:
    """The `ASSIGNED`s that BREAKPOINT computes (`i`, `g`) and a recording
    may name (RANGE variables and the currents, not `held` ones), unless
    BREAKPOINT reads the geometry (`diam`, `area`)."""
    bp = module.breakpoint
    if bp is None:
        return ()
    body = list(walk(bp.body))
    fx = effects(module)
    reads = set().union(*(statement_reads(q, fx) for q in body))
    if {"diam", "area"} & reads:
        return ()
    out = set()
    for q in body:
        if isinstance(q, ir.Assign):
            out.add(q.target)
        elif isinstance(q, ir.CallStmt) and q.fn in fx:
            out |= fx[q.fn][1]
    visible = set(module.range_names) | set(module.nonspecific) | set(module.electrode)
    written = {x for ion in module.ions for x in ion.write}  # `ica`, nA
    keep = (out & (set(module.assigned) | written) & visible) - set(held)
    return tuple(sorted(keep))


def counters(module: ir.Module, targets) -> tuple[str, ...]:
    """The `ASSIGNED`s NET_RECEIVE adds to (`total = total + weight`): held
    per instance as states that jump at each event and do not move between
    events."""
    return tuple(s for s in targets if s in module.assigned)


def check_artificial(module: ir.Module) -> None:
    """An `ARTIFICIAL_CELL` is in no compartment: it has no current and reads
    neither the voltage, the geometry nor ions; it sends its spikes with
    `net_event` (in NET_RECEIVE)."""
    line = module.lines.get("SUFFIX")

    def fail(problem, at=None):
        raise NmodlError(module.path, at or line, "ARTIFICIAL_CELL", problem)

    if module.nonspecific or module.electrode or module.ions:
        fail("an artificial cell has no current and uses no ion")
    if module.net_receive is None:
        fail("an artificial cell without NET_RECEIVE receives and sends nothing")
    blocks = [module.initial, module.breakpoint, module.net_receive]
    blocks += [*module.derivatives.values(), *module.callables.values()]
    for blk in blocks:
        for s in walk(blk.body) if blk is not None else ():
            names = set()
            for e in _exprs(s):
                names |= names_in(e)
            local = set(getattr(blk, "params", ()))
            bad = names & {"v", "diam", "area"} - local
            if bad:
                fail(
                    f"reads {', '.join(sorted(bad))}: an artificial cell is in no "
                    "compartment",
                    s.line,
                )


def check_net_event(module: ir.Module) -> None:
    """`net_event` in a `POINT_PROCESS` (not an artificial cell): a spike of a
    point process in a section, which no NetCon here can take as a source."""
    if module.artificial or module.net_receive is None:
        return
    for s in walk(module.net_receive.body):
        if isinstance(s, ir.CallStmt) and s.fn == "net_event":
            raise NmodlError(
                module.path,
                s.line,
                "net_event()",
                "is not supported yet in a POINT_PROCESS (a NetCon source here "
                "is a compartment's voltage or an ARTIFICIAL_CELL's net_event): "
                "its spikes would reach nothing",
            )
