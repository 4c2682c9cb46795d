"""Code generation: IR → Python source for JAX, NaN-safe by construction.

Every expression is written with the safe functions of `stable_ode._math`:

- `exp` → `safe_exp` (never overflows);
- `N/(exp(u) - 1)` and `N/(1 - exp(u))` → `(N/u)·x_over_expm1(u)` where `N/u` is
  finite at `u = 0` (hh.mod's `vtrap`, `efun`, Traub-style rates): exact and
  smooth through the removable singularity, value and gradient;
- `if (fabs(E) < eps) {approximation} else {regular}` whose regular branch was
  made exact that way → the regular branch alone (both sides of the guard get
  the exact form, so no `where` can leak a 0/0 into the gradient);
- any other division by a non-constant → `safe_div` (0 where the denominator is
  exactly 0, finite gradients); `log` → `safe_log`, `sqrt` → `safe_sqrt`,
  `a^b` with a non-integer exponent → `power` (NaN-free), `exprelr` →
  `x_over_expm1`.

Each generated statement ends with a `# file:line` comment.
"""

import keyword
import pathlib

from . import _ir as ir
from ._errors import NmodlError
from ._singular import expm1_of, guarded_singularity
from ._symbolic import singular_ratio


_VARS_METHODS = {"copy", "restore"}


def py(name: str) -> str:
    """An NMODL name as a Python attribute of a `Vars` record (keywords and
    `Vars`' own method names get a trailing `_`; an array element `x[3]` is
    `x__3`)."""
    if name.endswith("]"):
        base, k = name[:-1].split("[")
        return f"{base}__{k}"
    return name + "_" if keyword.iskeyword(name) or name in _VARS_METHODS else name


_MATH = {
    "fabs": "fabs",
    "sin": "sin",
    "cos": "cos",
    "tan": "tan",
    "tanh": "tanh",
    "sinh": "sinh",
    "cosh": "cosh",
    "atan": "atan",
    "floor": "floor",
    "ceil": "ceil",
    "erf": "erf",
    "erfc": "erfc",
    "exp": "safe_exp",
    "log": "safe_log",
    "log10": "safe_log10",
    "sqrt": "safe_sqrt",
    "exprelr": "x_over_expm1",
    "fmin": "fmin",
    "fmax": "fmax",
    "atan2": "atan2",
}
"""NMODL's built-in functions → the names generated code calls (each defined in
`_factory._GLOBALS`, taking Python numbers as well as arrays)."""
_ARITY = {"atan2": 2, "fmin": 2, "fmax": 2, "pow": 2}
_CMP = {"<", ">", "<=", ">=", "==", "!="}


class Scope:
    """Names local to a function, procedure or block (`l.`); the rest are the
    mechanism's (`m.`)."""

    def __init__(self, names=(), owner: str = ""):
        self.names = set(names)
        self.owner = owner


class Emitter:
    """Writes Python statements for one entry point into `self.out`."""

    def __init__(self, module: ir.Module, known: set[str], label: str):
        self.module = module
        self.known = known  # names of `m`
        self.label = label  # "hh.mod"
        self.out: list[str] = []
        self.rewrites = 0
        self.line = None
        self.n_if = 0
        self.equation = None  # callback for DiffEq statements
        self.solve = None  # callback for SOLVE statements
        self.reaction = None  # callback for `~` and CONSERVE (KINETIC blocks)
        self.event_time = False  # `t` readable (NET_RECEIVE: the event's time)
        self.clock = False  # `t` readable (a point process: `m.t`)
        self.sends: int | None = None  # net_send calls so far (NET_RECEIVE only)
        self.fires: int | None = None  # net_event calls so far (NET_RECEIVE only)
        self.moves: int | None = None  # net_move calls so far (NET_RECEIVE only)

    def fail(self, construct, problem, line=None):
        raise NmodlError(self.module.path, line or self.line, construct, problem)

    def emit(self, code: str, line: int | None = None):
        line = line or self.line
        self.out.append(f"    {code}  # {self.label}:{line}" if line else f"    {code}")

    # -- expressions -----------------------------------------------------------

    def ref(self, name: str, sc: Scope) -> str:
        if name in sc.names:
            return f"l.{py(name)}"
        if name in self.module.constants:
            return repr(self.module.constants[name])
        if name == "t" and (self.event_time or self.clock):
            return "m.t"
        if name == "flag" and self.event_time:
            self.fail(
                "flag",
                "NET_RECEIVE's flag (self-events sent by net_send) is not "
                "supported yet",
            )
        if name in ("dt", "t"):
            self.fail(
                name,
                f"{name} is not available to a mechanism's rates here "
                "(kinetics are evaluated for a frozen voltage)",
            )
        if name not in self.known:
            self.fail("variable", f"{name} is not declared")
        return f"m.{py(name)}"

    def expr(self, e: ir.Expr, sc: Scope) -> str:
        if isinstance(e, ir.Num):
            return repr(e.value)
        if isinstance(e, ir.Name):
            return self.ref(e.id, sc)
        if isinstance(e, ir.Unary):
            x = self.expr(e.operand, sc)
            return f"(-{x})" if e.op == "-" else f"lnot({x})"
        if isinstance(e, ir.BinOp):
            return self.binop(e, sc)
        if isinstance(e, ir.Call):
            return self.call(e, sc)
        raise AssertionError(e)

    def binop(self, e: ir.BinOp, sc: Scope) -> str:
        op = e.op
        if op == "/":
            return self.divide(e.lhs, e.rhs, sc)
        if op == "^":
            return self.power(e.lhs, e.rhs, sc)
        a, b = self.expr(e.lhs, sc), self.expr(e.rhs, sc)
        if op in ("+", "-", "*") or op in _CMP:
            return f"({a} {op} {b})"
        if op == "&&":
            return f"land({a}, {b})"
        if op == "||":
            return f"lor({a}, {b})"
        self.fail(op, f"operator {op!r} is not supported")

    def divide(self, num: ir.Expr, den: ir.Expr, sc: Scope) -> str:
        singular = expm1_of(den)
        if singular is not None:
            u, sign = singular
            ratio = singular_ratio(num if sign > 0 else ir.Unary("-", num), u)
            if ratio is not None:
                self.rewrites += 1
                return f"({self.expr(ratio, sc)} * x_over_expm1({self.expr(u, sc)}))"
        a, b = self.expr(num, sc), self.expr(den, sc)
        if isinstance(den, ir.Num) and den.value != 0:
            return f"({a} / {b})"
        return f"safe_div({a}, {b})"

    def power(self, base: ir.Expr, exponent: ir.Expr, sc: Scope) -> str:
        a, b = self.expr(base, sc), self.expr(exponent, sc)
        if isinstance(exponent, ir.Num) and exponent.value == int(exponent.value):
            return f"({a} ** {int(exponent.value)})"
        if isinstance(base, ir.Num) and base.value > 0:
            return f"({a} ** {b})"
        return f"power({a}, {b})"

    def call(self, e: ir.Call, sc: Scope) -> str:
        fn, args = e.fn, e.args
        n = _ARITY.get(fn, 1)
        if fn in _MATH or fn == "pow":
            if len(args) != n:
                self.fail(f"{fn}()", f"takes {n} argument(s), got {len(args)}")
            if fn == "pow":
                return self.power(args[0], args[1], sc)
            return f"{_MATH[fn]}({', '.join(self.expr(a, sc) for a in args)})"
        c = self.module.callables.get(fn)
        if c is None:
            self.fail(
                f"{fn}()",
                f"calls {fn}, which is neither a built-in "
                f"function ({', '.join(sorted(_MATH))}, pow) nor a FUNCTION "
                "of this file",
            )
        if c.kind != "FUNCTION":
            self.fail(f"{fn}()", f"PROCEDURE {fn} used as a value")
        if len(args) != len(c.params):
            self.fail(f"{fn}()", f"takes {len(c.params)} argument(s), got {len(args)}")
        return f"fn_{fn}(m, {', '.join(self.expr(a, sc) for a in args)})".replace(
            "(m, )", "(m)"
        )

    # -- statements ------------------------------------------------------------

    def stmts(self, body, sc: Scope):
        for s in body:
            self.stmt(s, sc)

    def stmt(self, s: ir.Stmt, sc: Scope):
        self.line = s.line
        if isinstance(s, ir.Local):
            sc.names |= set(s.names)
            for n in s.names:
                self.emit(f"l.{py(n)} = 0.0")
        elif isinstance(s, ir.Assign):
            self.assign(s, sc)
        elif isinstance(s, ir.CallStmt) and s.fn == "net_send":
            self.net_send(s, sc)
        elif isinstance(s, ir.CallStmt) and s.fn in ("net_event", "net_move"):
            self.event_call(s, sc)
        elif isinstance(s, ir.CallStmt) and s.fn == "at_time":
            self.expr(s.args[0], sc)  # checked; its times are jump times (`_clock`)
        elif isinstance(s, ir.CallStmt):
            c = self.module.callables.get(s.fn)
            if c is not None and c.kind == "PROCEDURE":
                if len(s.args) != len(c.params):
                    self.fail(
                        f"{s.fn}()",
                        f"takes {len(c.params)} argument(s), got {len(s.args)}",
                    )
                args = "".join(", " + self.expr(a, sc) for a in s.args)
                self.emit(f"pr_{s.fn}(m{args})")
            else:
                self.emit(self.call(ir.Call(s.fn, s.args), sc))
        elif isinstance(s, ir.If):
            self.if_(s, sc)
        elif isinstance(s, ir.DiffEq):
            if self.equation is None:
                self.fail("x' =", "a derivative outside a DERIVATIVE block")
            self.equation(self, s, sc)
        elif isinstance(s, ir.LinEq):
            self.fail("~", "an equation `~ a = b` inside if/else (not supported)")
        elif isinstance(s, (ir.Reaction, ir.Conserve, ir.Compartment)):
            if self.reaction is None:
                self.fail("~", "reactions belong in KINETIC blocks")
            self.reaction(self, s, sc)
        elif isinstance(s, ir.Solve):
            if self.solve is None:
                self.fail("SOLVE", "SOLVE is allowed in BREAKPOINT and INITIAL only")
            self.solve(self, s, sc)
        else:
            raise AssertionError(s)

    def net_send(self, s: ir.CallStmt, sc: Scope):
        """`net_send(delay, flag)`: the self-event of call site `k` is kept in
        `m._ev{k}_on` (1 where sent), `_t` (its time, ms) and `_f` (its flag),
        which if/else merge as any variable (see `send_names`)."""
        if self.sends is None:
            self.fail(
                "net_send()",
                "net_send is supported in NET_RECEIVE and in the INITIAL block "
                "of a point process with a NET_RECEIVE (not in a FUNCTION or "
                "PROCEDURE)",
            )
        k = self.sends
        self.sends += 1
        on, t, f = send_names(k)
        delay, flag = (self.expr(a, sc) for a in s.args)
        self.emit(f"m.{t} = m.t + {delay}")
        self.emit(f"m.{f} = {flag}")
        self.emit(f"m.{on} = 1.0")

    def event_call(self, s: ir.CallStmt, sc: Scope):
        """`net_event(t)` (a spike of this artificial cell, at `t` ms:
        `fire_names`) or `net_move(t)` (its pending self-event moved to `t`:
        `move_names`), kept per call site as `net_send`'s."""
        count = self.fires if s.fn == "net_event" else self.moves
        if count is None:
            self.fail(f"{s.fn}()", f"{s.fn} is supported in NET_RECEIVE only")
        if s.fn == "net_event":
            self.fires += 1
            on, t = fire_names(count)
        else:
            self.moves += 1
            on, t = move_names(count)
        self.emit(f"m.{t} = {self.expr(s.args[0], sc)}")
        self.emit(f"m.{on} = 1.0")

    def assign(self, s: ir.Assign, sc: Scope):
        t = s.target
        value = self.expr(s.value, sc)
        if t in sc.names:
            self.emit(f"l.{py(t)} = {value}")
            return
        if t in self.module.constants or t in ("v", "celsius", "diam", "area", "dt"):
            self.fail("assignment", f"{t} cannot be assigned")
        self.ref(t, sc)
        self.emit(f"m.{py(t)} = {value}")

    def if_(self, s: ir.If, sc: Scope):
        guard = guarded_singularity(self, s, sc)
        if guard is not None:
            self.out.extend(guard)
            return
        self.n_if += 1
        k = self.n_if
        self.emit(f"_c{k} = {self.expr(s.cond, sc)}  # if")
        self.emit(f"_s{k} = (m.copy(), l.copy())")
        self.stmts(s.body, sc)
        self.line = s.line
        self.emit(f"_t{k} = (m.copy(), l.copy())")
        self.emit(f"m.restore(_s{k}[0]); l.restore(_s{k}[1])  # else")
        self.stmts(s.orelse, sc)
        self.line = s.line
        self.emit(f"merge_into(_c{k}, (m, l), _t{k})")


def send_names(k: int) -> tuple[str, str, str]:
    """The `Vars` entries of NET_RECEIVE's `k`-th `net_send` call site: whether
    it sent, the self-event's time (ms) and its flag (no NMODL name starts
    with `_ev`)."""
    return f"_ev{k}_on", f"_ev{k}_t", f"_ev{k}_f"


def fire_names(k: int) -> tuple[str, str]:
    """The `Vars` entries of NET_RECEIVE's `k`-th `net_event` call site:
    whether it fired and the spike's time (ms)."""
    return f"_fire{k}_on", f"_fire{k}_t"


def move_names(k: int) -> tuple[str, str]:
    """The `Vars` entries of NET_RECEIVE's `k`-th `net_move` call site:
    whether it moved the pending self-event, and to which time (ms)."""
    return f"_move{k}_on", f"_move{k}_t"


def label_of(path: str) -> str:
    return pathlib.Path(path).name
