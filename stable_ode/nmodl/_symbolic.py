"""Symbolic analysis (sympy): the form of each state equation, and removable
singularities.

- `equation_form`: is `x' = E` affine in `x` (`E = a - rate·x`, everything else
  frozen)? Then it is a `Relaxation` to `inf = a/rate` (NEURON's `cnexp` takes
  the exact exponential step of exactly that form), and when `rate = c/T` the
  time constant `T/c` is kept so that the rate is formed as `inf_tau_gate` forms
  it. Otherwise the state gets a `RateEquation`.
- `singular_ratio`: for `N/(exp(u) - 1)`, the factor `N/u` when it is finite at
  `u = 0`, so that the quotient can be written `(N/u)·x_over_expm1(u)`.
"""

import dataclasses

import sympy as sp

from . import _ir as ir


def to_sympy(e: ir.Expr, name_of, calls: dict):
    """`e` as a sympy expression. `name_of(id)` gives a `Name`'s sympy value;
    calls whose value `name_of` cannot see through become opaque symbols,
    recorded in `calls` (symbol → the `ir.Call`), unless `opaque_call` returns
    an expression."""
    if isinstance(e, ir.Num):
        # Exact binary rationals, so that `0.32*u/(u/4)` cancels to 1.28 (and
        # converts back to the correctly rounded float).
        return sp.Rational(e.value)
    if isinstance(e, ir.Name):
        return name_of(e.id)
    if isinstance(e, ir.Unary):
        if e.op == "-":
            return -to_sympy(e.operand, name_of, calls)
        raise _NotAlgebraic
    if isinstance(e, ir.BinOp):
        a, b = to_sympy(e.lhs, name_of, calls), to_sympy(e.rhs, name_of, calls)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if e.op == "/":
            return a / b
        if e.op == "^":
            return a**b
        raise _NotAlgebraic
    if isinstance(e, ir.Call):
        args = [to_sympy(a, name_of, calls) for a in e.args]
        if e.fn == "exp" and len(args) == 1:
            return sp.exp(args[0])
        if e.fn == "pow" and len(args) == 2:
            return args[0] ** args[1]
        for sym, (call, _) in calls.items():
            if call == e:
                return sym
        sym = sp.Symbol(f"_call{len(calls)}")
        calls[sym] = (e, args)
        return sym
    raise _NotAlgebraic


class _NotAlgebraic(Exception):
    pass


def from_sympy(s, symbol_ir: dict) -> ir.Expr:
    """A sympy expression back to IR; `symbol_ir` maps symbols to IR."""
    if s in symbol_ir:
        return symbol_ir[s]
    if s.is_Symbol:
        return ir.Name(s.name)
    if s.is_Number:
        return ir.Num(float(s))
    if s.func == sp.exp:
        return ir.Call("exp", (from_sympy(s.args[0], symbol_ir),))
    if s.is_Add:
        terms = list(s.as_ordered_terms())
        out = from_sympy(terms[0], symbol_ir)
        for t in terms[1:]:
            if t.could_extract_minus_sign():
                out = ir.BinOp("-", out, from_sympy(-t, symbol_ir))
            else:
                out = ir.BinOp("+", out, from_sympy(t, symbol_ir))
        return out
    if s.is_Mul or s.is_Pow:
        if s.could_extract_minus_sign() and s.is_Mul:
            return ir.Unary("-", from_sympy(-s, symbol_ir))
        num, den = sp.fraction(s)
        if den != 1:
            return ir.BinOp("/", from_sympy(num, symbol_ir), from_sympy(den, symbol_ir))
        if s.is_Pow:
            return ir.BinOp(
                "^", from_sympy(s.base, symbol_ir), from_sympy(s.exp, symbol_ir)
            )
        factors = [from_sympy(f, symbol_ir) for f in s.as_ordered_factors()]
        out = factors[0]
        for f in factors[1:]:
            out = ir.BinOp("*", out, f)
        return out
    raise _NotAlgebraic


@dataclasses.dataclass(frozen=True)
class Form:
    """`kind`: `"relaxation"` (with `inf`, and `tau` or `rate`) or `"rate"`."""

    kind: str
    inf: ir.Expr | None = None
    rate: ir.Expr | None = None
    tau: ir.Expr | None = None


RATE = Form("rate")


def equation_form(eq: ir.DiffEq, substitutions: dict, depends_on_state) -> Form:
    """The form of `eq`.

    **Arguments:**

    - `substitutions`: name → IR of the names assigned earlier in the block from
      expressions that depend on the state (expanded into the equation).
    - `depends_on_state(name)`: whether a name not in `substitutions` depends on
      the state by a route that cannot be expanded (then: `"rate"`).
    """
    x = sp.Symbol(f"_state_{eq.state}")
    calls: dict = {}
    opaque = []

    def name_of(n):
        if n == eq.state:
            return x
        if n in substitutions:
            return to_sympy(substitutions[n], name_of, calls)
        if depends_on_state(n):
            opaque.append(n)
        return sp.Symbol(n)

    try:
        e = to_sympy(eq.rhs, name_of, calls)
    except _NotAlgebraic:
        return RATE
    if opaque or any(x in args.free_symbols for _, args in _call_args(calls)):
        return RATE
    b = sp.diff(e, x)
    if b == 0 or sp.simplify(sp.diff(b, x)) != 0:
        return RATE
    rate = sp.cancel(-b)
    a = e.subs(x, 0)
    inf = sp.cancel(a / rate)
    symbol_ir = {s: call for s, (call, _) in calls.items()}
    try:
        inf_ir = from_sympy(inf, symbol_ir)
        num, den = sp.fraction(rate)
        if den != 1 and not num.free_symbols:
            return Form("relaxation", inf=inf_ir, tau=from_sympy(den / num, symbol_ir))
        return Form("relaxation", inf=inf_ir, rate=from_sympy(rate, symbol_ir))
    except _NotAlgebraic:
        return RATE


def _call_args(calls):
    for sym, (_, args) in calls.items():
        yield sym, sp.Tuple(*args)


def singular_ratio(numerator: ir.Expr, u: ir.Expr) -> ir.Expr | None:
    """`numerator/u` as IR when it is finite at `u = 0` (its denominator, after
    cancelling, shares no variable with `u`), else `None`."""
    calls: dict = {}
    try:
        n = to_sympy(numerator, sp.Symbol, calls)
        su = to_sympy(u, sp.Symbol, calls)
    except _NotAlgebraic:
        return None
    if su.is_Number:
        return None
    ratio = sp.cancel(n / su)
    _, den = sp.fraction(ratio)
    if den.free_symbols & su.free_symbols:
        return None
    symbol_ir = {s: call for s, (call, _) in calls.items()}
    try:
        return from_sympy(ratio, symbol_ir)
    except _NotAlgebraic:
        return None
