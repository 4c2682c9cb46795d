"""Front end: the statements of a `KINETIC` block (reactions, `COMPARTMENT`,
`CONSERVE`), read into the IR by the `_Reader`."""

from . import _ir as ir
from ._arrays import elements
from ._ast import node_type as _node


class KineticReading:
    """The `_Reader`'s methods for `KINETIC` statements."""

    def species(self, n, line) -> tuple[tuple[str, int], ...]:
        """`A + 2B` → `(("A", 1), ("B", 2))`."""
        t = _node(n)
        if t == "BinaryExpression" and n.op.eval() == "+":
            return self.species(n.lhs, line) + self.species(n.rhs, line)
        if t == "ReactVarName":
            k = 1 if n.value is None else n.value.eval()
            return ((self.species_name(n), int(k)),)
        self.fail(line, "~", f"species {self.nmodl.to_nmodl(n)!r}")

    def species_name(self, n) -> str:
        """The species of a `ReactVarName` (`ca`, `ca[i]`)."""
        var = n.name
        if _node(var) == "VarName" and _node(var.name) == "IndexedName":
            return self.indexed(var.name)
        name = var.get_node_name()
        if name in self.arrays:
            self.whole_array(name)
        return name

    def reaction(self, s) -> ir.Reaction:
        line = self.stmt_line(r"~")
        op = s.op.eval()
        if op not in ("<->", "<<"):
            self.fail(line, "~", f"reaction operator {op!r} is not supported")
        lhs = self.species(s.reaction1, line)
        kf = self.expr(s.expression1)
        if op == "<<":
            if len(lhs) != 1 or lhs[0][1] != 1:
                self.fail(line, "~ <<", "a flux into one species, ~ A << (flux)")
            out = ir.Reaction(op, lhs, (), kf, None, line)
        else:
            rhs = self.species(s.reaction2, line)
            out = ir.Reaction(op, lhs, rhs, kf, self.expr(s.expression2), line)
        self.seen_reaction = True
        self.cursor = line + 1
        return out

    def compartment(self, s) -> ir.Compartment:
        line = self.stmt_line(r"\bCOMPARTMENT\b")
        if s.index_name is not None:
            out = self.indexed_compartment(s, line)
            self.cursor = line + 1
            return out
        species = []
        for n in s.species:  # a whole array: each element
            name = n.get_node_name()
            size = self.arrays.get(name)
            species += [name] if size is None else elements(name, size)
        out = ir.Compartment(self.expr(s.volume), tuple(species), line)
        self.cursor = line + 1
        return out

    def conserve(self, s) -> ir.Conserve:
        line = self.stmt_line(r"\bCONSERVE\b")
        terms = []

        def walk(n):
            t = _node(n)
            if t == "BinaryExpression" and n.op.eval() == "+":
                walk(n.lhs)
                walk(n.rhs)
            elif t == "ReactVarName":
                k = 1.0 if n.value is None else float(n.value.eval())
                terms.append((self.species_name(n), k))
            else:
                self.fail(line, "CONSERVE", f"term {self.nmodl.to_nmodl(n)!r}")

        walk(s.react)
        return ir.Conserve(tuple(terms), self.expr(s.expr), line)
