"""What the importer reads off a `POINT_PROCESS` file for its group
(`stable_ode.nmodl._point`): the values `INITIAL` derives once, what
`NET_RECEIVE` adds to (states and `ASSIGNED` counters), and the values of
`BREAKPOINT` a recording may name."""

from . import _ir as ir
from ._analysis import _exprs, calls_in, effects, names_in, StateDependence, walk
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
    `x = x + expr`."""
    nr = module.net_receive
    states = set(module.states)
    counters = set(module.assigned) - _assigned_outside_receive(module)
    out = {}
    for s in nr.body:
        ok = isinstance(s, ir.Assign) and s.target in states | counters
        if ok:
            v = s.value
            ok = isinstance(v, ir.BinOp) and v.op == "+"
            if ok:
                x = ir.Name(s.target)
                rest = v.rhs if v.lhs == x else v.lhs if v.rhs == x else None
                ok = rest is not None and not (names_in(rest) & states)
        if not ok:
            line = getattr(s, "line", nr.line)
            raise NmodlError(
                module.path,
                line,
                "NET_RECEIVE",
                "only statements `x = x + expr` adding to a state, or to an "
                "ASSIGNED that no other block assigns (expr reading the weight "
                "and parameters, not states) are supported",
            )
        out[s.target] = s.line
    if module.ions:
        raise NmodlError(
            module.path,
            module.ions[0].line,
            "USEION",
            "ions in a POINT_PROCESS are not supported yet",
        )
    return out


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
    reads = set()
    for q in body:
        for e in _exprs(q):
            reads |= names_in(e)
            for fn in calls_in(e) & set(fx):
                reads |= fx[fn][0]
        if isinstance(q, ir.CallStmt) and q.fn in fx:
            reads |= fx[q.fn][0]
    if {"diam", "area"} & reads:
        return ()
    out = set()
    for q in body:
        if isinstance(q, ir.Assign):
            out.add(q.target)
        elif isinstance(q, ir.CallStmt) and q.fn in fx:
            out |= fx[q.fn][1]
    visible = set(module.range_names) | set(module.nonspecific)
    keep = (out & set(module.assigned) & visible) - set(held)
    return tuple(sorted(keep))


def counters(module: ir.Module, targets) -> tuple[str, ...]:
    """The `ASSIGNED`s NET_RECEIVE adds to (`total = total + weight`): held
    per instance as states that jump at each event and do not move between
    events."""
    return tuple(s for s in targets if s in module.assigned)
