"""Code generation for NMODL's `LINEAR` blocks, solved in `INITIAL`."""

from . import _ir as ir
from ._analysis import names_in
from ._codegen import Emitter, py, Scope


def linear_code(module: ir.Module, em: Emitter, blk: ir.Block, sc: Scope, fail):
    """`SOLVE b` of `LINEAR b` in INITIAL, written into `em`: the block's other
    statements, then its equations solved for its unknowns (the STATEs they
    name, in declaration order) per compartment (`_runtime.linear_solve`).
    `fail(line, construct, problem)` raises the file's error."""
    eqs = [q for q in blk.body if isinstance(q, ir.LinEq)]
    named = set().union(*(names_in(q.lhs) | names_in(q.rhs) for q in eqs))
    unknowns = [x for x in module.states if x in named]
    if len(eqs) != len(unknowns):
        fail(
            blk.line,
            "LINEAR",
            f"{blk.name} has {len(eqs)} equations in {len(unknowns)} "
            f"unknowns ({', '.join(unknowns)}): it needs as many of each",
        )
    em.stmts(tuple(q for q in blk.body if not isinstance(q, ir.LinEq)), sc)
    residuals = ", ".join(f"{em.expr(q.lhs, sc)} - ({em.expr(q.rhs, sc)})" for q in eqs)
    em.line = blk.line
    em.emit(f"_r = lambda m: ({residuals},)  # LINEAR {blk.name}")
    names = ", ".join(repr(py(x)) for x in unknowns)
    xs = ", ".join(f"m.{py(x)}" for x in unknowns)
    em.emit(f"{xs}, = linear_solve(_r, m, ({names},))")
