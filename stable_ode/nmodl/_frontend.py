"""Front end: NEURON's NMODL parser (`neuron.nmodl`) → the importer's IR.

The parse is NEURON's own (`NmodlDriver`, the maintained NMODL framework that
ships in NEURON's wheel); this module only walks its AST. Every construct it does
not translate is an `NmodlError` naming the file, the line and the construct.
"""

import math
import pathlib
import re

from . import _ir as ir
from ._arrays import ArrayReading, elements
from ._ast import node_type as _node
from ._errors import Locator, NmodlError
from ._kinetic_reading import KineticReading


NEURON_GLOBALS = ("v", "celsius", "diam", "area", "dt", "t")
"""Names NEURON provides to every mechanism (when a file declares them in
`PARAMETER` or `ASSIGNED` they still mean NEURON's)."""

BUILTIN_CONSTANTS = {"PI": math.pi}

# Unit factors `NAME = (u1) (u2)` by (u1, u2): NEURON 9's `nrnunits.lib` values
# (2019 SI: e = 1.602176634e-19 C, N_A = 6.02214076e23 /mol, k = 1.380649e-23 J/K).
_E, _NA, _K = 1.602176634e-19, 6.02214076e23, 1.380649e-23
_COULOMB = {"coulomb": 1.0, "coulombs": 1.0, "coul": 1.0, "kilocoulombs": 1e-3}
_UNIT_FACTORS = {("faraday", c): _E * _NA * f for c, f in _COULOMB.items()}
_UNIT_FACTORS |= {("e", c): _E * f for c, f in _COULOMB.items()}
_UNIT_FACTORS |= {
    ("k-mole", "joule/degC"): _K * _NA,
    ("k-mole", "joule/K"): _K * _NA,
    ("k", "joule/degC"): _K,
    ("k", "joule/K"): _K,
    ("pi", "1"): math.pi,
}

# Blocks and statements the importer does not translate, by AST class.
_UNSUPPORTED = {
    "NetReceiveBlock": ("NET_RECEIVE", "events are not supported in a SUFFIX file"),
    "Verbatim": ("VERBATIM", "C code cannot be translated"),
    "NonLinearBlock": ("NONLINEAR", "NONLINEAR blocks are not supported"),
    "DiscreteBlock": ("DISCRETE", "DISCRETE blocks are not supported"),
    "FunctionTableBlock": ("FUNCTION_TABLE", "FUNCTION_TABLE is not supported"),
    "BeforeBlock": ("BEFORE", "BEFORE blocks are not supported"),
    "AfterBlock": ("AFTER", "AFTER blocks are not supported"),
    "ConstructorBlock": ("CONSTRUCTOR", "CONSTRUCTOR blocks are not supported"),
    "DestructorBlock": ("DESTRUCTOR", "DESTRUCTOR blocks are not supported"),
    "Include": ("INCLUDE", "INCLUDE is not supported"),
    "LongitudinalDiffusionBlock": ("LONGITUDINAL_DIFFUSION", "not supported"),
    "Pointer": ("POINTER", "POINTER variables are not supported"),
    "BbcorePointer": ("BBCOREPOINTER", "BBCOREPOINTER is not supported"),
    "External": ("EXTERNAL", "EXTERNAL variables are not supported"),
    "RandomVarList": ("RANDOM", "random numbers are not supported"),
    "WhileStatement": ("while", "while loops are not supported"),
    "ReactionStatement": ("~", "reactions belong in KINETIC blocks"),
    "Conserve": ("CONSERVE", "CONSERVE belongs in KINETIC blocks"),
    "Compartment": ("COMPARTMENT", "COMPARTMENT belongs in KINETIC blocks"),
    "LonDiffuse": ("LONGITUDINAL_DIFFUSION", "not supported"),
    "LagStatement": ("LAG", "LAG is not supported"),
    "WatchStatement": ("WATCH", "WATCH belongs to point processes"),
    "ForNetcon": ("FOR_NETCONS", "FOR_NETCONS belongs to point processes"),
}
_KEYWORD_OF_NODE = {
    "NeuronBlock": r"\bNEURON\b",
    "UnitBlock": r"\bUNITS\b",
    "ParamBlock": r"\bPARAMETER\b",
    "ConstantBlock": r"\bCONSTANT\b",
    "AssignedBlock": r"\bASSIGNED\b",
    "StateBlock": r"\bSTATE\b",
    "InitialBlock": r"\bINITIAL\b",
    "BreakpointBlock": r"\bBREAKPOINT\b",
    "IndependentBlock": r"\bINDEPENDENT\b",
    "LocalListStatement": r"^\s*LOCAL\b",
}
RANDOM_FUNCTIONS = {
    "normrand",
    "exprand",
    "unirand",
    "scop_random",
    "erand",
    "set_seed",
    "random_negexp",
    "random_normal",
    "random_uniform",
    "random_setseq",
}
EVENT_FUNCTIONS = {
    "net_send",
    "net_event",
    "net_move",
    "state_discontinuity",
    "at_time",
    "nrn_pointing",
}


def import_nmodl():
    """NEURON's NMODL framework, or one clear error naming the extra."""
    try:
        from neuron import nmodl
        from neuron.nmodl import ast
    except ImportError as e:
        raise ImportError(
            "load_nmodl parses .mod files with NEURON's NMODL framework, which is "
            "not installed: pip install stable_ode[nmodl] (or pip install "
            f"'neuron>=9.0'); the import failed with: {e}"
        ) from None
    return nmodl, ast


class _Reader(ArrayReading, KineticReading):
    """Walks one file's AST; `self.loc` finds lines, `self.cursor` is where the
    next statement of the current block is searched from."""

    def __init__(self, path: pathlib.Path, text: str, nmodl, ast):
        self.path, self.nmodl, self.ast = path, nmodl, ast
        self.loc = Locator(text)
        self.cursor = 1
        self.in_kinetic = False  # reading a KINETIC block: reactions allowed
        self.seen_reaction = False  # a reaction read in this KINETIC block
        self.arrays: dict[str, int] = {}  # array name -> size
        self.env: dict[str, int] = {}  # FROM loop variable -> its value now

    def fail(self, line, construct, problem):
        raise NmodlError(self.path, line, construct, problem)

    def stmt_line(self, pattern: str) -> int:
        line = self.loc.find(pattern, self.cursor)
        if line is not None:
            self.cursor = line
            return line
        return self.cursor

    def block_line(self, pattern: str) -> int:
        line = self.loc.find(pattern) or 1
        self.cursor = line
        return line

    # -- expressions -----------------------------------------------------------

    def expr(self, n) -> ir.Expr:
        t = _node(n)
        if t in ("WrappedExpression", "ParenExpression"):
            return self.expr(n.expression)
        if t == "BinaryExpression":
            op = n.op.eval()
            if op == "=":
                self.fail(self.cursor, "=", "an assignment inside an expression")
            return ir.BinOp(op, self.expr(n.lhs), self.expr(n.rhs))
        if t == "UnaryExpression":
            op = self.nmodl.to_nmodl(n.op).strip()
            return ir.Unary(op, self.expr(n.expression))
        if t in ("Double", "Integer", "Float"):
            return ir.Num(float(n.eval()))
        if t == "DoubleUnit":
            return self.expr(n.value)
        if t == "VarName":
            if _node(n.name) == "IndexedName":
                return ir.Name(self.indexed(n.name))
            if n.index is not None:
                self.fail(self.cursor, "@", f"{self.nmodl.to_nmodl(n)!r}")
            if _node(n.name) == "PrimeName":
                self.fail(
                    self.cursor,
                    "derivative",
                    f"{self.nmodl.to_nmodl(n)} read in an expression is not supported",
                )
            return self.name(n.name.get_node_name())
        if t == "Name":
            return self.name(n.get_node_name())
        if t == "FunctionCall":
            name = n.name.get_node_name()
            if name in RANDOM_FUNCTIONS:
                self.fail(self.cursor, f"{name}()", "random numbers are not supported")
            if name == "printf":
                self.fail(
                    self.cursor,
                    "printf()",
                    "printing from a .mod file is not supported (it changes no "
                    "number: remove the call)",
                )
            if name in EVENT_FUNCTIONS:
                self.fail(
                    self.cursor,
                    f"{name}()",
                    "is not supported (as a value; net_send(delay, flag) and "
                    "state_discontinuity(x, value) are, as statements in "
                    "NET_RECEIVE)"
                    if name in ("net_send", "state_discontinuity")
                    else "is not supported yet (of the event functions, "
                    "net_send is, in NET_RECEIVE)",
                )
            return ir.Call(name, tuple(self.expr(a) for a in n.arguments))
        self.fail(self.cursor, t, f"expression {self.nmodl.to_nmodl(n)!r}")

    def event_statement(self, name, e, line):
        """`net_send(delay, flag)` (a self-event, `ir.CallStmt`; where it may
        stand is checked with the NET_RECEIVE block) or
        `state_discontinuity(x, value)` (NEURON: `x = value`)."""
        args = list(e.arguments)
        if len(args) != 2:
            self.fail(line, f"{name}()", f"takes 2 arguments, got {len(args)}")
        if name == "net_send":
            return ir.CallStmt(name, tuple(self.expr(a) for a in args), line)
        target = self.expr(args[0])
        if not isinstance(target, ir.Name):
            self.fail(line, f"{name}()", "its first argument must be a variable")
        return ir.Assign(target.id, self.expr(args[1]), line)

    def name(self, name: str) -> ir.Expr:
        if name in self.env:
            return ir.Num(float(self.env[name]))
        if name in self.arrays:
            self.whole_array(name)
        if name in ("f_flux", "b_flux"):
            if not self.in_kinetic:
                self.fail(
                    self.cursor, name, "f_flux and b_flux belong in KINETIC blocks"
                )
            if not self.seen_reaction:
                self.fail(
                    self.cursor,
                    name,
                    f"{name} is the flux of the previous reaction, and no "
                    "reaction comes before it",
                )
        return ir.Name(name)

    # -- statements ------------------------------------------------------------

    def unsupported(self, n, line=None):
        t = _node(n)
        construct, problem = _UNSUPPORTED[t]
        if line is None:
            keyword = re.escape(construct.strip("~")) if construct != "~" else "~"
            line = (
                self.loc.find(
                    r"\b" + keyword if keyword[0].isalpha() else keyword, self.cursor
                )
                or self.cursor
            )
        self.fail(line, construct, problem)

    def stmts(self, block) -> tuple[ir.Stmt, ...]:
        out = []
        for s in block.statements:
            r = self.stmt(s)
            if isinstance(r, list):  # unrolled: a FROM loop, an indexed COMPARTMENT
                out.extend(r)
            elif r is not None:
                out.append(r)
        return tuple(out)

    def stmt(self, s):
        t = _node(s)
        if t in (
            "UnitState",
            "LineComment",
            "BlockComment",
            "MutexLock",
            "MutexUnlock",
            "TableStatement",
        ):
            if t == "TableStatement":
                self.stmt_line(r"\bTABLE\b")
                self.has_table = True
            return None
        if t in ("ReactionStatement", "Conserve", "Compartment") and self.in_kinetic:
            if t == "ReactionStatement":
                return self.reaction(s)
            return self.conserve(s) if t == "Conserve" else self.compartment(s)
        if t in _UNSUPPORTED:
            self.unsupported(s)
        if t == "FromStatement":
            return self.from_loop(s)
        if t == "ProtectStatement":
            return self.expression_statement(s.expression)
        if t == "LocalListStatement":
            line = self.stmt_line(r"\bLOCAL\b")
            names = []
            for var in s.variables:
                name = var.name.get_node_name()
                if _node(var.name) == "IndexedName":
                    size = self.const_int(var.name.length, f"the size of {name}")
                    self.arrays[name] = size
                    names.extend(elements(name, size))
                else:
                    self.arrays.pop(name, None)
                    names.append(name)
            return ir.Local(tuple(names), line)
        if t == "IfStatement":
            return self.if_statement(s)
        if t == "ExpressionStatement":
            return self.expression_statement(s.expression)
        self.fail(self.cursor, t, f"statement {self.nmodl.to_nmodl(s)!r}")

    def if_statement(self, s):
        line = self.stmt_line(r"\bif\s*\(")
        cond = self.expr(s.condition)
        body = self.stmts(s.statement_block)
        chain = []  # `else if`s, read in file order so that lines come in order
        for e in s.elseifs:
            chain.append(
                (
                    self.stmt_line(r"\bif\s*\("),
                    self.expr(e.condition),
                    self.stmts(e.statement_block),
                )
            )
        orelse = self.stmts(s.elses.statement_block) if s.elses is not None else ()
        for e_line, e_cond, e_body in reversed(chain):
            orelse = (ir.If(e_cond, e_body, orelse, e_line),)
        return ir.If(cond, body, orelse, line)

    def expression_statement(self, e):
        while _node(e) in ("WrappedExpression", "ParenExpression"):
            e = e.expression
        t = _node(e)
        if t == "DiffEqExpression":
            be = e.expression
            prime = be.lhs.name if _node(be.lhs) == "VarName" else be.lhs
            base = prime.name if _node(prime) == "IndexedName" else prime
            state = base.value.eval() if _node(base) == "PrimeName" else None
            line = self.stmt_line(rf"\b{re.escape(str(state))}\s*'")
            if _node(prime) == "IndexedName":
                self.fail(line, "DERIVATIVE", "equations of array states x'[i]")
            if _node(prime) != "PrimeName" or int(prime.order.eval()) != 1:
                self.fail(line, "DERIVATIVE", "only first-order equations x' = ...")
            return ir.DiffEq(state, self.expr(be.rhs), line)
        if t == "LinEquation":
            line = self.stmt_line(r"~")  # (NMODL parses these in LINEAR only)
            self.cursor = line + 1
            return ir.LinEq(self.expr(e.lhs), self.expr(e.rhs), line)
        if t == "SolveBlock":
            line = self.stmt_line(r"\bSOLVE\b")
            method = e.method.get_node_name() if e.method is not None else None
            steady = (
                e.steadystate.get_node_name() if e.steadystate is not None else None
            )
            return ir.Solve(e.block_name.get_node_name(), method, steady, line)
        if t == "BinaryExpression" and e.op.eval() == "=":
            lhs = e.lhs
            if _node(lhs) == "VarName" and _node(lhs.name) == "PrimeName":
                name = lhs.name.value.eval()
                line = self.stmt_line(rf"\b{re.escape(name)}\s*'")
                self.fail(line, "x' =", "a derivative outside a DERIVATIVE block")
            name = lhs.name.get_node_name() if _node(lhs) == "VarName" else None
            indexed = name is not None and _node(lhs.name) == "IndexedName"
            line = self.stmt_line(
                rf"\b{re.escape(str(name))}\s*" + (r"\[" if indexed else r"=(?!=)")
            )
            if name is None or (_node(lhs) == "VarName" and lhs.index is not None):
                self.fail(line, "assignment", f"to {self.nmodl.to_nmodl(lhs)!r}")
            if name in self.env:
                self.fail(line, "assignment", f"to the FROM loop variable {name}")
            if indexed:
                name = self.indexed(lhs.name)
            elif name in self.arrays:
                self.whole_array(name)
            return ir.Assign(name, self.expr(e.rhs), line)
        if t == "FunctionCall":
            name = e.name.get_node_name()
            line = self.stmt_line(rf"\b{re.escape(name)}\s*\(")
            if name in ("net_send", "state_discontinuity"):
                return self.event_statement(name, e, line)
            if name in ("net_event", "net_move"):  # (where: checked with NET_RECEIVE)
                if len(e.arguments) != 1:
                    self.fail(line, f"{name}()", "takes 1 argument (a time, ms)")
                return ir.CallStmt(name, (self.expr(e.arguments[0]),), line)
            if name == "at_time":  # a time where the inputs jump (`_clock`)
                if len(e.arguments) != 1:
                    self.fail(line, "at_time()", "takes 1 argument")
                return ir.CallStmt(name, (self.expr(e.arguments[0]),), line)
            call = self.expr(e)
            return ir.CallStmt(name, call.args, line)
        if t in _UNSUPPORTED:
            self.unsupported(e)
        self.fail(self.cursor, t, f"statement {self.nmodl.to_nmodl(e)!r}")
