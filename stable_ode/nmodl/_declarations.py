"""Front end, file level: one `.mod` file → one `_ir.Module` (its NEURON,
UNITS, PARAMETER, CONSTANT, ASSIGNED and STATE declarations and its blocks)."""

import pathlib
import re

from . import _ir as ir
from ._arrays import elements
from ._errors import NmodlError
from ._frontend import (
    _KEYWORD_OF_NODE,
    _node,
    _Reader,
    _UNIT_FACTORS,
    _UNSUPPORTED,
    BUILTIN_CONSTANTS,
    import_nmodl,
    NEURON_GLOBALS,
)


def _number(n) -> float:
    return float(n.eval()) if _node(n) != "DoubleUnit" else float(n.value.eval())


def _unit(nmodl, u) -> str:
    return nmodl.to_nmodl(u).strip().strip("()").replace(" ", "")


def read_mod(path: pathlib.Path) -> ir.Module:
    """Parse `path` with NEURON's NMODL driver and translate it to the IR."""
    nmodl, ast = import_nmodl()
    text = path.read_text()
    try:
        program = nmodl.NmodlDriver().parse_string(text)
    except RuntimeError as e:
        msg = str(e)
        m = re.search(r"Location : (\d+)", msg)
        raise NmodlError(
            path, int(m.group(1)) if m else None, "syntax", msg.splitlines()[0]
        ) from None
    r = _Reader(path, text, nmodl, ast)
    r.has_table = False
    d = dict(
        suffix=None,
        title="",
        ions=[],
        nonspecific=[],
        electrode=[],
        after_solves=[],
        artificial=False,
        range_names=[],
        global_names=[],
        statics=[],
        parameters={},
        constants=dict(BUILTIN_CONSTANTS),
        assigned=[],
        states=[],
        state_start={},
        callables={},
        initial=None,
        breakpoint=None,
        derivatives={},
        lines={},
        point_process=False,
        net_receive=None,
        net_receive_initial=None,
    )
    _array_sizes(r, program)
    for b in program.blocks:
        t = _node(b)
        if t in (
            "Model",
            "BlockComment",
            "LineComment",
            "IndependentBlock",
            "UnitState",
        ):
            if t == "Model":
                d["title"] = b.title.eval().strip() if hasattr(b, "title") else ""
            continue
        if t == "NetReceiveBlock" and d["point_process"]:
            _net_receive(r, b, d)
            continue
        if t in _UNSUPPORTED:
            r.cursor = 1
            r.unsupported(b)
        if t == "Define":
            continue  # DEFINE macros are expanded by the parser
        line = r.block_line(_KEYWORD_OF_NODE.get(t, r"$^"))
        if t == "NeuronBlock":
            _neuron_block(r, b, d)
        elif t == "UnitBlock":
            for u in b.definitions:
                if _node(u) != "FactorDef":
                    continue
                name = u.name.get_node_name()
                uline = r.stmt_line(rf"\b{re.escape(name)}\s*=")
                d["lines"][name] = uline
                if u.value is not None:
                    d["constants"][name] = _number(u.value)
                    continue
                key = (_unit(nmodl, u.unit1), _unit(nmodl, u.unit2))
                scale = 1.0
                prefixed = re.fullmatch(r"([0-9.]+(?:e[-+]?[0-9]+)?)(\D.*)", key[1])
                if prefixed and (key[0], prefixed.group(2)) in _UNIT_FACTORS:
                    scale = float(prefixed.group(1))  # (faraday) (10000coulomb)
                    key = (key[0], prefixed.group(2))
                if u.gt is not None or key not in _UNIT_FACTORS:
                    r.fail(
                        uline,
                        "UNITS",
                        f"unit factor {name} = ({key[0]}) "
                        f"({key[1]}) is not known; write its value instead "
                        f"(known: {sorted(_UNIT_FACTORS)})",
                    )
                d["constants"][name] = _UNIT_FACTORS[key] / scale
        elif t == "ParamBlock":
            for p in b.statements:
                name = p.name.get_node_name()
                d["lines"][name] = r.stmt_line(rf"\b{re.escape(name)}\b")
                if name in r.arrays:
                    r.fail(
                        d["lines"][name],
                        "array",
                        f"{name}: PARAMETER arrays are not supported (an "
                        "ASSIGNED array set in INITIAL is)",
                    )
                value = 0.0 if p.value is None else _number(p.value)
                d["parameters"][name] = value
        elif t == "LocalListStatement":  # file-level LOCAL: a module variable
            for var in b.variables:
                names = _declared(r, var.name.get_node_name())
                d["assigned"] += names
                d["statics"] += names
        elif t == "ConstantBlock":
            for c in b.statements:
                if _node(c) != "ConstantStatement":
                    continue
                name = c.constant.name.get_node_name()
                d["lines"][name] = r.stmt_line(rf"\b{re.escape(name)}\s*=")
                d["constants"][name] = _number(c.constant.value)
        elif t in ("AssignedBlock", "StateBlock"):
            for a in b.definitions:
                name = a.name.get_node_name()
                aline = r.stmt_line(rf"\b{re.escape(name)}\b")
                names = _declared(r, name)
                for x in [name] + names:
                    d["lines"].setdefault(x, aline)
                (d["states"] if t == "StateBlock" else d["assigned"]).extend(names)
        elif t in ("InitialBlock", "BreakpointBlock"):
            kind = "INITIAL" if t == "InitialBlock" else "BREAKPOINT"
            body = r.stmts(b.statement_block)
            d["initial" if kind == "INITIAL" else "breakpoint"] = ir.Block(
                kind, kind, body, line
            )
        elif t in ("DerivativeBlock", "KineticBlock"):
            kind = "DERIVATIVE" if t == "DerivativeBlock" else "KINETIC"
            name = b.name.get_node_name()
            line = r.block_line(rf"\b{kind}\s+{re.escape(name)}\b")
            r.in_kinetic, r.seen_reaction = kind == "KINETIC", False
            body = r.stmts(b.statement_block)
            r.in_kinetic = False
            d["derivatives"][name] = ir.Block(kind, name, body, line)
            d["lines"][name] = line
        elif t == "LinearBlock":
            name = b.name.get_node_name()
            line = r.block_line(rf"\bLINEAR\s+{re.escape(name)}\b")
            if b.solvefor:
                r.fail(
                    line,
                    "SOLVEFOR",
                    "SOLVEFOR on a LINEAR block is not supported (its unknowns "
                    "are the STATEs its equations name)",
                )
            body = r.stmts(b.statement_block)
            d["derivatives"][name] = ir.Block("LINEAR", name, body, line)
            d["lines"][name] = line
        elif t in ("FunctionBlock", "ProcedureBlock"):
            kind = "FUNCTION" if t == "FunctionBlock" else "PROCEDURE"
            name = b.name.get_node_name()
            line = r.block_line(rf"\b{kind}\s+{re.escape(name)}\b")
            r.has_table = False
            params = []
            for a in b.parameters:
                params.append(a.name.get_node_name())
            body = r.stmts(b.statement_block)
            d["callables"][name] = ir.Callable(
                kind, name, tuple(params), body, line, r.has_table
            )
            d["lines"][name] = line
        else:
            r.fail(line, t, "this block is not supported")
    if d["suffix"] is None:
        raise NmodlError(path, None, "NEURON", "no SUFFIX: not a density mechanism")
    _electrode(r, d)
    _finish(r, d)
    return ir.Module(path=str(path), **{k: _freeze(v) for k, v in d.items()})


def _array_sizes(r: _Reader, program) -> None:
    """Every file-level array's size into `r.arrays` (before any block is read,
    since a block may come before the declaration it uses)."""
    for b in program.blocks:
        t = _node(b)
        if t in ("StateBlock", "AssignedBlock"):
            for a in b.definitions:
                if a.length is not None:
                    r.arrays[a.name.get_node_name()] = int(a.length.eval())
        elif t == "ParamBlock":
            for p in b.statements:
                if _node(p.name) == "IndexedName":
                    r.arrays[p.name.get_node_name()] = int(p.name.length.eval())
        elif t == "LocalListStatement":
            for var in b.variables:
                if _node(var.name) == "IndexedName":
                    r.arrays[var.name.get_node_name()] = int(var.name.length.eval())


def _declared(r: _Reader, name: str) -> list[str]:
    """The variables a declaration of `name` makes: its elements if it is an
    array."""
    size = r.arrays.get(name)
    return [name] if size is None else elements(name, size)


def _freeze(v):
    return tuple(v) if isinstance(v, list) else v


def _electrode(r: _Reader, d) -> None:
    """`ELECTRODE_CURRENT` belongs to a point process; `SOLVE proc METHOD
    after_cvode` (svclmp.mod's) solves a PROCEDURE without arguments in a point
    process's BREAKPOINT."""
    if d["electrode"] and not d["point_process"]:
        r.fail(
            d["lines"]["ELECTRODE_CURRENT"],
            "ELECTRODE_CURRENT",
            "an electrode current in a SUFFIX file is not supported (it is in a "
            "POINT_PROCESS: a current injected at a site)",
        )
    bp = d["breakpoint"]
    for s in bp.body if bp is not None else ():
        if not (isinstance(s, ir.Solve) and s.method == "after_cvode"):
            continue
        c = d["callables"].get(s.block)
        if not d["point_process"] or c is None or c.kind != "PROCEDURE" or c.params:
            r.fail(
                s.line,
                "SOLVE",
                f"METHOD after_cvode solves a PROCEDURE without arguments in a "
                f"POINT_PROCESS; {s.block} is not one here",
            )
        d["after_solves"].append(s.block)


def _neuron_block(r: _Reader, b, d):
    nmodl = r.nmodl
    for s in b.statement_block.statements:
        t = _node(s)
        if t in _UNSUPPORTED:
            r.unsupported(s)
        if t == "Suffix":
            kind = s.type.get_node_name()
            name = s.name.get_node_name()
            line = r.stmt_line(rf"\b{kind}\b")
            if kind not in ("SUFFIX", "POINT_PROCESS", "ARTIFICIAL_CELL"):
                r.fail(line, kind, f"{name}: {kind} is not supported")
            d["suffix"] = name
            d["point_process"] = kind in ("POINT_PROCESS", "ARTIFICIAL_CELL")
            d["artificial"] = kind == "ARTIFICIAL_CELL"
            d["lines"]["SUFFIX"] = line
        elif t == "Useion":
            ion = s.name.get_node_name()
            line = r.stmt_line(rf"\bUSEION\s+{re.escape(ion)}\b")
            valence = None
            if s.valence is not None:
                z = float(s.valence.value.eval())
                if z != int(z) or z == 0:
                    r.fail(
                        line,
                        "VALENCE",
                        f"ion {ion}: valence must be a non-zero integer, got {z}",
                    )
                valence = int(z)
            read = tuple(x.name.get_node_name() for x in s.readlist)
            write = tuple(x.name.get_node_name() for x in s.writelist)
            allowed = {f"e{ion}", f"{ion}i", f"{ion}o", f"i{ion}"}
            for name in read + write:
                if name not in allowed:
                    r.fail(
                        line,
                        "USEION",
                        f"{name} is not a variable of ion {ion} ({sorted(allowed)})",
                    )
            if f"e{ion}" in write:
                r.fail(line, "USEION", f"writing e{ion} is not supported")
            d["ions"].append(ir.Ion(ion, read, write, valence, line))
        elif t == "Nonspecific":
            r.stmt_line(r"\bNONSPECIFIC_CURRENT\b")
            d["nonspecific"] += [c.name.get_node_name() for c in s.currents]
        elif t == "ElectrodeCurrent":
            line = r.stmt_line(r"\bELECTRODE_CURRENT\b")
            d["lines"]["ELECTRODE_CURRENT"] = line
            d["electrode"] += [c.name.get_node_name() for c in s.currents]
        elif t == "Range":
            for x in s.variables:
                d["range_names"] += _declared(r, x.name.get_node_name())
        elif t == "Global":
            for x in s.variables:
                d["global_names"] += _declared(r, x.name.get_node_name())
        elif t in ("ThreadSafe", "LineComment", "BlockComment", "OntologyStatement"):
            continue
        else:
            line = r.stmt_line(r"\S")
            r.fail(
                line,
                t,
                f"{nmodl.to_nmodl(s).strip()!r} in the NEURON block is not supported",
            )


def _net_receive(r: _Reader, b, d):
    """`NET_RECEIVE(weight, a1, ...) {...}` of a point process: a
    PROCEDURE-like block over its arguments (the NetCon's weight, then its
    weight vector's other elements, kept per NetCon), and the statements of an
    `INITIAL` block inside it (run for each NetCon at initialisation)."""
    import types

    line = r.block_line(r"\bNET_RECEIVE\b")
    params = tuple(a.name.get_node_name() for a in b.parameters)
    if not params:
        r.fail(line, "NET_RECEIVE", "NET_RECEIVE needs an argument (the weight)")
    body, initial = [], None
    for s in b.statement_block.statements:
        e = s.expression if _node(s) == "ExpressionStatement" else None
        if e is not None and _node(e) == "InitialBlock":
            i_line = r.stmt_line(r"\bINITIAL\b")
            stmts = r.stmts(e.statement_block)
            initial = ir.Block("INITIAL", "NET_RECEIVE", stmts, i_line)
            continue
        body.extend(r.stmts(types.SimpleNamespace(statements=[s])))
    body = tuple(body)
    d["net_receive"] = ir.Callable("PROCEDURE", "NET_RECEIVE", params, body, line)
    d["net_receive_initial"] = initial
    d["lines"]["NET_RECEIVE"] = line


def _finish(r: _Reader, d):
    """Sort declarations: ion variables and NEURON globals are not parameters."""
    ion_vars = {x for ion in d["ions"] for x in ion.read + ion.write}
    for name in sorted(ion_vars & set(d["constants"])):
        r.fail(
            d["lines"].get(name),
            "CONSTANT",
            f"{name} is a USEION variable and a CONSTANT (NEURON's nrnivmodl "
            "refuses it too: 'can not be re-declared in a CONSTANT block')",
        )
    for name in list(d["parameters"]):
        if name in ion_vars or name in NEURON_GLOBALS:
            del d["parameters"][name]
    d["assigned"] = [
        a for a in d["assigned"] if a not in ion_vars and a not in NEURON_GLOBALS
    ]
    for s in d["states"]:
        start = d["parameters"].pop(f"{s}0", None)
        d["state_start"][s] = 0.0 if start is None else start
    for name in d["states"]:
        if name in d["parameters"] or name in d["assigned"]:
            r.fail(d["lines"].get(name), "STATE", f"{name} is declared twice")
