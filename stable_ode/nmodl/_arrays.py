"""Front end: NMODL arrays, unrolled at import.

An array `x[N]` (a `STATE`, `ASSIGNED` or `LOCAL` whose size is a number or a
`DEFINE`) becomes `N` scalar variables `x[0]`, ..., `x[N-1]`, and every use of
it names one element: its index must be an integer constant once the `FROM`
loops around it are unrolled (`FROM i = 0 TO N-2 {~ x[i] <-> x[i+1] (...)}`
becomes `N-1` reactions). NEURON names the elements the same way
(`x_suffix[0]`). An index that depends on a run-time value (dbbs'
`tspike[fi]`) is an `NmodlError`.
"""

from . import _ir as ir


MAX_UNROLLED = 10_000
"""The most iterations a `FROM` loop may unroll to (an error beyond)."""


def element(name: str, k: int) -> str:
    """The name of element `k` of the array `name`: `"x[3]"`."""
    return f"{name}[{k}]"


def elements(name: str, size: int) -> list[str]:
    """The names of the elements of the array `name` of `size`."""
    return [element(name, k) for k in range(size)]


def _fold(e) -> float | None:
    """The value of an expression of numbers, or `None`."""
    if isinstance(e, ir.Num):
        return e.value
    if isinstance(e, ir.Unary) and e.op == "-":
        x = _fold(e.operand)
        return None if x is None else -x
    if isinstance(e, ir.BinOp) and e.op in ("+", "-", "*", "/"):
        a, b = _fold(e.lhs), _fold(e.rhs)
        if a is None or b is None or (e.op == "/" and b == 0):
            return None
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / (b or 1)}[e.op]
    return None


class ArrayReading:
    """The `_Reader`'s array methods: `arrays` (name → size) and `env` (the
    value of each enclosing `FROM` loop's variable)."""

    arrays: dict[str, int]
    env: dict[str, int]

    def const_int(self, n, what: str) -> int:
        """The value of the AST expression `n`, an integer constant (numbers,
        `DEFINE`s and enclosing loop variables)."""
        e = self.expr(n)
        value = _fold(e)
        if value is None or value != int(value):
            self.fail(
                self.cursor,
                "array",
                f"{what} is {self.nmodl.to_nmodl(n)!r}, which is not an integer "
                "constant (arrays are unrolled at import: an index or a FROM "
                "bound may use numbers, DEFINEs and FROM loop variables only)",
            )
        return int(value)

    def indexed(self, n) -> str:
        """The element an `IndexedName` (`x[i+1]`) names."""
        base = n.name.get_node_name()
        size = self.arrays.get(base)
        if size is None:
            self.fail(self.cursor, "array", f"{base}[...]: {base} is not an array")
        k = self.const_int(n.length, f"the index of {base}")
        if not 0 <= k < size:
            self.fail(
                self.cursor,
                "array",
                f"{element(base, k)}: index out of range ({base} has {size} elements)",
            )
        return element(base, k)

    def whole_array(self, name: str):
        """An array named without an index in an expression: an error."""
        self.fail(
            self.cursor,
            "array",
            f"{name} is an array of {self.arrays[name]} elements, used without "
            "an index",
        )

    def from_loop(self, s) -> list:
        """`FROM i = a TO b [BY c] {body}`: the body once per value of `i`."""
        line = self.stmt_line(r"\bFROM\b")
        var = s.name.get_node_name()
        if var in self.env:
            self.fail(line, "FROM", f"loop variable {var} is already in use")
        lo = self.const_int(getattr(s, "from"), "FROM's start")
        hi = self.const_int(s.to, "FROM's end")
        by = 1 if s.increment is None else self.const_int(s.increment, "BY")
        if by <= 0:
            self.fail(line, "FROM", f"BY {by}: the step must be positive")
        values = range(lo, hi + 1, by)
        if len(values) > MAX_UNROLLED:
            self.fail(
                line,
                "FROM",
                f"{len(values)} iterations: loops are unrolled at import, at "
                f"most {MAX_UNROLLED}",
            )
        out = []
        for k in values:
            self.env[var] = k
            self.cursor = line
            out.extend(self.stmts(s.statement_block))
        del self.env[var]
        return out

    def indexed_compartment(self, s, line) -> list[ir.Compartment]:
        """`COMPARTMENT i, volume {x y}`: each element `x[i]` in `volume` (at
        that `i`)."""
        var = s.index_name.get_node_name()
        out = []
        for species in s.species:
            name = species.get_node_name()
            if name not in self.arrays:
                self.fail(
                    line,
                    "COMPARTMENT",
                    f"COMPARTMENT {var}, ... {{{name}}}: {name} is not an array",
                )
            for k in range(self.arrays[name]):
                self.env[var] = k
                out.append(
                    ir.Compartment(self.expr(s.volume), (element(name, k),), line)
                )
        self.env.pop(var, None)
        return out
