"""A point process's `BREAKPOINT` that reads the time `t` (NEURON's `stim.mod`:
`if (t < del + dur && t >= del) {i = amp}`; `svclmp.mod`'s levels).

As in NEURON's fixed step, `BREAKPOINT` sees `t` at the middle of each step:
the group holds it as a state (`CLOCK`) that each step sets. The times at
which such a file's inputs jump are read off the file: each `at_time(x)`, and
each comparison of `t` with an expression `x` (`t < x`, `x >= t`, ...), where
`x` is computed from the parameters alone (directly or through what
`INITIAL` derives from them once). Adaptive steps land on them, and fixed
`CrankNicolson` steps treat them as edges. A comparison with anything that
changes during a run (a state, `v`, an argument of a procedure) has no such
time: one `NmodlError`.
"""

from . import _ir as ir
from ._analysis import _exprs, calls_in, effects, names_in, walk
from ._codegen import Emitter, Scope
from ._errors import NmodlError


CLOCK = "clock:t"
"""The state that holds the time (ms) `BREAKPOINT` sees during a step (not an
NMODL name)."""

_CMP = {"<", ">", "<=", ">="}


def reads_clock(module: ir.Module) -> bool:
    """Whether `BREAKPOINT` (or a FUNCTION or PROCEDURE it calls) reads `t`."""
    return any("t" in names for _, _, names in _breakpoint_reads(module))


def clock_times_code(module: ir.Module, known: set[str], derived: set[str]) -> str:
    """`def clock_times(m)`: the jump times (ms) of the inputs `BREAKPOINT`
    reads off the clock, as a tuple, for parameters (and derived values) `m`;
    `known` the file's names, `derived` the values `INITIAL` derives from the
    parameters."""
    allowed = set(module.parameters) | set(module.constants) | set(derived)
    times: list[ir.Expr] = []
    for stmt, e, _ in _breakpoint_reads(module):
        for x in _time_points(e, stmt):
            bad = names_in(x) - allowed
            if bad:
                raise NmodlError(
                    module.path,
                    stmt.line,
                    "t",
                    f"t is compared with an expression of {', '.join(sorted(bad))}, "
                    "which may change during a run: the time of this "
                    "discontinuity is not known before the run (only comparisons "
                    "with values of the parameters are supported)",
                )
            if x not in times:
                times.append(x)
    em = Emitter(module, known, "")
    code = ", ".join(em.expr(x, Scope()) for x in times)
    return f"def clock_times(m):\n    return ({code}{',' if times else ''})"


def _time_points(e: ir.Expr, stmt) -> list[ir.Expr]:
    """The expressions `t` is compared with in `e` (and `at_time`'s argument)."""
    out = []
    if isinstance(e, ir.Call) and e.fn == "at_time" and isinstance(stmt, ir.CallStmt):
        out.append(e.args[0])
    if isinstance(e, ir.BinOp):
        if e.op in _CMP:
            for a, b in ((e.lhs, e.rhs), (e.rhs, e.lhs)):
                if a == ir.Name("t") and "t" not in names_in(b):
                    out.append(b)
        out += _time_points(e.lhs, None) + _time_points(e.rhs, None)
    elif isinstance(e, ir.Unary):
        out += _time_points(e.operand, None)
    elif isinstance(e, ir.Call):
        for a in e.args:
            out += _time_points(a, None)
    return out


def _breakpoint_reads(module: ir.Module):
    """`(statement, expression, names read)` for each expression of
    `BREAKPOINT` and of the callables it calls (transitively; a callable's
    own arguments and LOCALs are not module names)."""
    bp = module.breakpoint
    if bp is None:
        return []
    fx = effects(module)
    seen: set[str] = set()
    todo: list[str] = []
    out = []

    def visit(body, local):
        for s in walk(body):
            if isinstance(s, ir.Local):
                local = local | set(s.names)
            if isinstance(s, ir.Solve) and s.method == "after_cvode":
                todo.append(s.block)
            for e in _exprs(s):
                out.append((s, e, names_in(e) - local))
                todo.extend(calls_in(e) & set(fx))

    visit(bp.body, set())
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        c = module.callables[name]
        visit(c.body, set(c.params) | {name})
    return out
