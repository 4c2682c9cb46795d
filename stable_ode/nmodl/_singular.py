"""The removable singularities that code generation (`_codegen`) makes
exact: `exp(u) - 1` denominators (`expm1_of`), and `if (fabs(E) < eps)`
guards whose regular branch was made exact (`guarded_singularity`: the
regular branch alone)."""

from . import _ir as ir


def expm1_of(den: ir.Expr):
    """`(u, +1)` for `exp(u) - 1` (or `-1 + exp(u)`), `(u, -1)` for `1 - exp(u)`."""

    def is_one(e):
        return isinstance(e, ir.Num) and e.value == 1.0

    def exp_arg(e):
        if isinstance(e, ir.Call) and e.fn == "exp" and len(e.args) == 1:
            return e.args[0]
        return None

    if isinstance(den, ir.BinOp) and den.op == "-":
        if exp_arg(den.lhs) is not None and is_one(den.rhs):
            return exp_arg(den.lhs), 1
        if is_one(den.lhs) and exp_arg(den.rhs) is not None:
            return exp_arg(den.rhs), -1
    if isinstance(den, ir.BinOp) and den.op == "+":
        for a, b in ((den.lhs, den.rhs), (den.rhs, den.lhs)):
            if exp_arg(a) is not None and isinstance(b, ir.Num) and b.value == -1.0:
                return exp_arg(a), 1
    return None


def _targets(body) -> set[str]:
    out = set()
    for s in body:
        if isinstance(s, ir.Assign):
            out.add(s.target)
        elif isinstance(s, ir.If):
            out |= _targets(s.body) | _targets(s.orelse)
        else:
            out.add(None)  # anything else: not a plain guard
    return out


def guarded_singularity(em, s: ir.If, sc):
    """The code of the regular branch alone, if `s` is `if (fabs(E) < eps)
    {approximation} else {regular}` (or `>` with the branches swapped) and the
    regular branch's singular quotients were all made exact; else `None`."""
    c = s.cond
    if not (isinstance(c, ir.BinOp) and c.op in ("<", "<=", ">", ">=")):
        return None

    def is_fabs(e):
        return isinstance(e, ir.Call) and e.fn == "fabs"

    if is_fabs(c.lhs) and isinstance(c.rhs, ir.Num):
        small_first = c.op in ("<", "<=")
    elif is_fabs(c.rhs) and isinstance(c.lhs, ir.Num):
        small_first = c.op in (">", ">=")
    else:
        return None
    approx, regular = (s.body, s.orelse) if small_first else (s.orelse, s.body)
    if (
        not regular
        or None in _targets(regular)
        or _targets(regular) != _targets(approx)
    ):
        return None
    sub = type(em)(em.module, em.known, em.label)  # an `Emitter`
    sub.equation, sub.solve, sub.n_if = em.equation, em.solve, em.n_if + 100
    sub.reaction = em.reaction
    sub.stmts(regular, type(sc)(sc.names, sc.owner))  # a `Scope`
    if sub.rewrites == 0 or any(
        "safe_div" in line and "x_over_expm1" not in line for line in sub.out
    ):
        return None
    em.rewrites += sub.rewrites
    line = s.line
    return [
        f"    # {em.label}:{line}: guard 'if (fabs(...) < eps)' dropped: "
        "the regular branch is exact at the singularity"
    ] + sub.out
