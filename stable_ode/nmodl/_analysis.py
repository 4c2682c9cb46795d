"""What reads and writes what: callables' effects, and which names of a
DERIVATIVE block depend on which state (for `_symbolic.equation_form`)."""

from . import _ir as ir


def names_in(e: ir.Expr) -> set[str]:
    if isinstance(e, ir.Name):
        return {e.id}
    if isinstance(e, ir.Num):
        return set()
    if isinstance(e, ir.Unary):
        return names_in(e.operand)
    if isinstance(e, ir.BinOp):
        return names_in(e.lhs) | names_in(e.rhs)
    return set().union(*(names_in(a) for a in e.args)) if e.args else set()


def calls_in(e: ir.Expr) -> set[str]:
    """The names of the functions `e` calls."""
    return {c.fn for c in _calls(e)}


def _exprs(s):
    if isinstance(s, ir.Assign):
        return [s.value]
    if isinstance(s, (ir.CallStmt,)):
        return [ir.Call(s.fn, s.args)]
    if isinstance(s, ir.DiffEq):
        return [s.rhs]
    if isinstance(s, ir.If):
        return [s.cond]
    if isinstance(s, ir.Reaction):
        species = [ir.Name(n) for n, _ in s.lhs + s.rhs]
        return [s.kf] + ([s.kb] if s.kb is not None else []) + species
    if isinstance(s, ir.Conserve):
        return [s.total] + [ir.Name(n) for n, _ in s.terms]
    if isinstance(s, ir.Compartment):
        return [s.volume]
    if isinstance(s, ir.LinEq):
        return [s.lhs, s.rhs]
    return []


def statement_reads(s, fx) -> set[str]:
    """The names statement `s` reads, with those the callables it calls read
    (`fx`: `effects(module)`)."""
    names: set[str] = set()
    for e in _exprs(s):
        names |= names_in(e)
        for fn in calls_in(e) & set(fx):
            names |= fx[fn][0]
    if isinstance(s, ir.CallStmt) and s.fn in fx:
        names |= fx[s.fn][0]
    return names


def walk(body):
    for s in body:
        yield s
        if isinstance(s, ir.If):
            yield from walk(s.body)
            yield from walk(s.orelse)


def effects(module: ir.Module) -> dict[str, tuple[set[str], set[str]]]:
    """For every callable: `(reads, writes)`, the mechanism-level names it reads
    and assigns, through the callables it calls too."""
    direct = {}
    for name, c in module.callables.items():
        local = set(c.params) | {name}
        for s in walk(c.body):
            if isinstance(s, ir.Local):
                local |= set(s.names)
        reads, writes, calls = set(), set(), set()
        for s in walk(c.body):
            for e in _exprs(s):
                reads |= names_in(e) - local
                calls |= calls_in(e)
            if isinstance(s, ir.Assign) and s.target not in local:
                writes.add(s.target)
        direct[name] = (reads, writes, calls & set(module.callables))
    out = {}
    for name in direct:
        reads, writes, seen, todo = set(), set(), set(), [name]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            r, w, c = direct[f]
            reads |= r
            writes |= w
            todo += list(c)
        out[name] = (reads, writes)
    return out


def expand(e: ir.Expr, subst: dict) -> ir.Expr:
    """`e` with the names in `subst` replaced by their expressions."""
    if isinstance(e, ir.Name):
        return subst.get(e.id, e)
    if isinstance(e, ir.Unary):
        return ir.Unary(e.op, expand(e.operand, subst))
    if isinstance(e, ir.BinOp):
        return ir.BinOp(e.op, expand(e.lhs, subst), expand(e.rhs, subst))
    if isinstance(e, ir.Call):
        return ir.Call(e.fn, tuple(expand(a, subst) for a in e.args))
    return e


class StateDependence:
    """Walks a DERIVATIVE block's top-level statements in order, tracking which
    names depend on which states: `subst` (plain assignments, expandable) and
    `opaque` (set by `if`s or procedures: not expandable)."""

    def __init__(self, module: ir.Module, fx):
        self.states = set(module.states)
        self.fx = fx
        self.deps: dict[str, set[str]] = {}
        self.subst: dict[str, ir.Expr] = {}
        self.opaque: set[str] = set()

    def of(self, e: ir.Expr) -> set[str]:
        out = set()
        for n in names_in(e):
            out |= {n} & self.states
            out |= self.deps.get(n, set())
        for f in calls_in(e):
            if f in self.fx:
                for n in self.fx[f][0]:
                    out |= {n} & self.states
                    out |= self.deps.get(n, set())
        return out

    def step(self, s: ir.Stmt):
        if isinstance(s, ir.Assign):
            d = self.of(s.value)
            self.deps[s.target] = d
            self.opaque.discard(s.target)
            if d:
                self.subst[s.target] = expand(s.value, self.subst)
            else:
                self.subst.pop(s.target, None)
        elif isinstance(s, (ir.If, ir.CallStmt)):
            d = set().union(*(self.of(e) for st in walk([s]) for e in _exprs(st)))
            targets = set()
            for st in walk([s]):
                if isinstance(st, ir.Assign):
                    targets.add(st.target)
                if isinstance(st, ir.CallStmt) and st.fn in self.fx:
                    targets |= self.fx[st.fn][1]
            for t in targets:
                self.deps[t] = self.deps.get(t, set()) | d
                self.subst.pop(t, None)
                if self.deps[t]:
                    self.opaque.add(t)


def _exposed(body, local, fx_exposed, written, on_read):
    """Walk `body` in order: `on_read(name, line)` for each read of a
    mechanism-level name not in `written` (updated in place with writes)."""
    for s in body:
        line = getattr(s, "line", None)
        if isinstance(s, ir.Local):
            local |= set(s.names)
            continue
        for e in _exprs(s):
            for n in names_in(e) - local:
                if n not in written:
                    on_read(n, line)
            for f in calls_in(e):
                if f in fx_exposed:
                    for n in fx_exposed[f][0] - written:
                        on_read(n, line)
                    written |= fx_exposed[f][1]
        if isinstance(s, ir.Assign) and s.target not in local:
            written.add(s.target)
        if isinstance(s, ir.If):
            before = set(written)
            w1, w2 = set(before), set(before)
            _exposed(s.body, set(local), fx_exposed, w1, on_read)
            _exposed(s.orelse, set(local), fx_exposed, w2, on_read)
            written |= w1 | w2


def exposed_reads(module: ir.Module, fx) -> dict[str, tuple[set[str], set[str]]]:
    """For every callable: `(reads before its own writes, writes)`, over
    mechanism-level names, through the callables it calls."""
    out: dict[str, tuple[set[str], set[str]]] = {}

    def visit(name, stack=()):
        if name in out:
            return out[name]
        if name in stack:
            return set(), set()
        c = module.callables[name]
        local = set(c.params) | {name}
        for callee in _callees(c.body) & set(module.callables):
            visit(callee, stack + (name,))
        reads: set[str] = set()
        _exposed(c.body, local, out, set(), lambda n, line: reads.add(n))
        out[name] = (reads, fx[name][1])
        return out[name]

    for name in module.callables:
        visit(name)
    return out


def _callees(body) -> set[str]:
    out = set()
    for s in walk(body):
        for e in _exprs(s):
            out |= calls_in(e)
    return out


def check_reads(module: ir.Module, body, exposed, written, fail) -> None:
    """`fail(name, line)` for each `ASSIGNED` name `body` reads before anything
    computes it (`written`: computed before `body` runs)."""
    watched = set(module.assigned) - set(module.statics)

    def on_read(n, line):
        if n in watched:
            fail(n, line)

    _exposed(body, set(), exposed, set(written), on_read)


def early_reads(body, exposed, written) -> set[str]:
    """The mechanism-level names `body` reads before anything in it computes
    them (`written`: computed before `body` runs)."""
    out: set[str] = set()
    _exposed(body, set(), exposed, set(written), lambda n, line: out.add(n))
    return out


class Sources:
    """Which mechanism-level names each value depends on (data and control
    flow), walking statements in order: `of[name]` after the statements so
    far; a name not yet assigned is its own source. Callables are summarised
    per written name (`summaries`), their parameters as `"#k"`."""

    def __init__(self, summaries: dict, params=()):
        self.summaries = summaries
        self.of: dict[str, set[str]] = {p: {f"#{k}"} for k, p in enumerate(params)}

    def expr(self, e: ir.Expr) -> set[str]:
        out = set()
        for n in names_in(e):
            out |= self.of.get(n, {n})
        for call in _calls(e):
            out |= self.call(call.fn, call.args).get(call.fn, set())
        return out

    def call(self, fn: str, args) -> dict[str, set[str]]:
        """What a call of `fn` with `args` assigns: name → its sources here."""
        summary = self.summaries.get(fn)
        if summary is None:  # a built-in: only its arguments
            return {fn: set().union(*(self.expr(a) for a in args))}
        actual = [self.expr(a) for a in args]
        out = {}
        for name, srcs in summary.items():
            mapped = set()
            for s in srcs:
                if s.startswith("#"):
                    k = int(s[1:])
                    mapped |= actual[k] if k < len(actual) else set()
                else:
                    mapped |= self.of.get(s, {s})
            out[name] = mapped
        return out

    def walk(self, body, control=frozenset()):
        for s in body:
            if isinstance(s, ir.Local):
                for n in s.names:
                    self.of[n] = set(control)
            elif isinstance(s, ir.Assign):
                self.of[s.target] = self.expr(s.value) | control
            elif isinstance(s, ir.CallStmt):
                for name, srcs in self.call(s.fn, s.args).items():
                    if name != s.fn:
                        self.of[name] = srcs | control
            elif isinstance(s, ir.If):
                inner = control | self.expr(s.cond)
                before = {k: set(v) for k, v in self.of.items()}
                self.walk(s.body, inner)
                taken = self.of
                self.of = {k: set(v) for k, v in before.items()}
                self.walk(s.orelse, inner)
                other = self.of
                # A name either branch assigns: either branch's value (the old
                # one, or the name itself, where a branch leaves it alone).
                old = {k: before.get(k, {k}) for k in taken.keys() | other.keys()}
                self.of = {k: taken.get(k, old[k]) | other.get(k, old[k]) for k in old}
            # DiffEq, Reaction, Conserve, LinEq, Solve: in no callable, and an INITIAL
            # holding a SOLVE is not walked (`Source.check_initial_reads`).


def _calls(e: ir.Expr) -> list[ir.Call]:
    if isinstance(e, ir.Call):
        return [e] + [c for a in e.args for c in _calls(a)]
    if isinstance(e, ir.Unary):
        return _calls(e.operand)
    if isinstance(e, ir.BinOp):
        return _calls(e.lhs) + _calls(e.rhs)
    return []


def summaries(module: ir.Module) -> dict[str, dict[str, set[str]]]:
    """For every callable: each mechanism-level name it assigns (and, for a
    FUNCTION, its own name: the value it returns) → the mechanism-level names
    and parameters (`"#k"`) that value depends on. A recursive callable is
    summarised as depending on everything it reads."""
    out: dict[str, dict[str, set[str]]] = {}
    fx = effects(module)

    def visit(name, stack=()):
        if name in out:
            return
        c = module.callables[name]
        if name in stack:
            reads, writes = fx[name]
            every = set(reads) | {f"#{k}" for k in range(len(c.params))}
            out[name] = {w: set(every) for w in writes | {name}}
            return
        for callee in _callees(c.body) & set(module.callables):
            visit(callee, stack + (name,))
        local = set(c.params) | {name}
        for s in walk(c.body):
            if isinstance(s, ir.Local):
                local |= set(s.names)
        src = Sources(out, c.params)
        src.walk(c.body)
        written = {n for n in src.of if n not in local or n == name}
        written -= set(c.params)
        out.setdefault(name, {n: src.of[n] for n in written})

    for name in module.callables:
        visit(name)
    return out


def stale_initial_reads(module: ir.Module, kept) -> dict[str, set[str]]:
    """`INITIAL`'s reads of `ASSIGNED`s before it computes them (NEURON's value
    left by another block, or 0 on the first run) that reach what it leaves
    behind: each name of `kept` (the states, the values it derives once) →
    the stale `ASSIGNED`s its value depends on (only names that have any)."""
    if module.initial is None:
        return {}
    watched = set(module.assigned) - set(module.statics)
    src = Sources(summaries(module))
    src.walk(module.initial.body)
    out = {}
    for name in kept:
        if name in src.of:
            stale = src.of[name] & watched
            if stale:
                out[name] = stale
    return out
