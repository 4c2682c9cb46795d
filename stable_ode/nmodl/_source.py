"""Python source of one mechanism: its FUNCTIONs and PROCEDUREs, each
DERIVATIVE block (kinetics, right-hand sides, assignments), INITIAL and
BREAKPOINT, as plain functions of a `Vars` record `m`."""

from . import _ir as ir
from ._analysis import (
    calls_in,
    effects,
    expand,
    names_in,
    StateDependence,
    statement_reads,
    walk,
)
from ._clock import clock_times_code
from ._codegen import (
    Emitter,
    fire_names,
    label_of,
    move_names,
    py,
    Scope,
    send_names,
)
from ._errors import NmodlError
from ._frontend import NEURON_GLOBALS
from ._kinetic_source import KineticSource, scheme_states, steady_state_code
from ._linear_source import linear_code
from ._source_reads import KINETIC_ONLY, ReadChecks
from ._symbolic import equation_form


METHODS = ("cnexp", "derivimplicit", "euler", "sparse")


class Source(ReadChecks):
    """Generates the source; `self.state_lines` maps each state to the
    `(file, line)` of its equation."""

    def __init__(self, module: ir.Module, neuron_schemes: bool = True):
        self.module = module
        self.neuron_schemes = neuron_schemes
        self.label = label_of(module.path)
        ion_vars = {x for ion in module.ions for x in ion.read + ion.write}
        self.known = (
            set(module.parameters)
            | set(module.assigned)
            | set(module.states)
            | ion_vars
            | set(NEURON_GLOBALS)
        )
        self.fx = effects(module)
        self.state_lines: dict[str, tuple[str, int]] = {}
        self.forms: dict[str, str] = {}
        self.chunks: list[str] = []
        self.solved: list[ir.Block] = []
        self.methods: dict[str, str] = {}
        # Values INITIAL computes that the other blocks read (a point process's
        # `factor`): recomputed from the parameters (see `_point.py`).
        self.derived: set[str] = set()
        # ASSIGNEDs the SOLVEd blocks read as the BREAKPOINT left them
        # (`carried_names`).
        self.carried: set[str] = set()
        # ASSIGNEDs BREAKPOINT reads before computing them (a running maximum,
        # `persistent_names`): kept between steps as states.
        self.persistent: set[str] = set()

    def fail(self, line, construct, problem):
        raise NmodlError(self.module.path, line, construct, problem)

    def emitter(self) -> Emitter:
        em = Emitter(self.module, self.known, self.label)
        em.solve = self.solve
        em.clock = self.module.point_process  # `t` (see `check_clock`)
        return em

    def generate(self) -> str:
        mod = self.module
        for c in mod.callables.values():
            self.callable(c)
        if mod.net_receive is not None:
            self.callable(mod.net_receive)
        bp = mod.breakpoint
        if bp is not None:
            for s in bp.body:
                if isinstance(s, ir.Solve) and s.method != "after_cvode":
                    self.solved.append(self.solved_block(s))
        self.check_clock()
        solved_states = set()
        for blk in self.solved:
            if blk.kind == "KINETIC":
                self.chunks += KineticSource(self, blk).generate()
                solved_states |= set(scheme_states(mod, blk))
                continue
            self.derivative(blk)
            solved_states |= {s.state for s in blk.body if isinstance(s, ir.DiffEq)}
        for s in mod.states:
            if s not in solved_states:
                self.fail(
                    mod.lines.get(s),
                    "STATE",
                    f"{s} has no equation in a DERIVATIVE or KINETIC block "
                    "solved by BREAKPOINT",
                )
        self.check_reads()
        entries = [(mod.initial, "initial"), (bp, "breakpoint")]
        if self.derived:  # INITIAL without its steady-state solves
            entries.append((mod.initial, "initial_derived"))
        for blk, name in entries:
            em = self.emitter()
            if name == "initial_derived":
                em.solve = lambda em, s, sc: None
            if name.startswith("initial") and mod.net_receive is not None:
                em.sends = 0  # self-events from INITIAL (at t = 0)
            if blk is not None:
                em.emit(f'"""{blk.kind} ({self.label}:{blk.line})"""')
            em.emit("l = Vars()")
            start = len(em.out)
            if blk is not None:
                em.stmts(blk.body, Scope(owner=blk.kind))
            if em.sends:  # none sent unless net_send runs
                names0 = [x for k in range(em.sends) for x in send_names(k)]
                em.out[start:start] = [f"    m.{x} = 0.0" for x in names0]
            if name == "initial":
                self.chunks.append(f"N_INITIAL_SENDS = {em.sends or 0}")
            self.chunks.append(f"def {name}(m):\n" + "\n".join(em.out))
        if mod.point_process:
            self.chunks.append(clock_times_code(mod, self.known, self.derived))
        if mod.after_solves:  # run after the step (NEURON's nrn_state)
            calls = "\n".join(f"    pr_{py(b)}(m)" for b in mod.after_solves)
            self.chunks.append(f"def after_solve(m):\n{calls}")
        return "\n\n\n".join(self.chunks) + "\n"

    def check_clock(self):
        """`t` may be read by a point process's BREAKPOINT, INITIAL and
        NET_RECEIVE (and the FUNCTIONs and PROCEDUREs they call), not by the
        blocks its states' kinetics come from, nor by a density mechanism."""
        mod = self.module
        blocks = list(self.solved)
        if not mod.point_process:
            blocks += [b for b in (mod.initial, mod.breakpoint) if b is not None]
        for blk in blocks:
            for q in walk(blk.body):
                if "t" in statement_reads(q, self.fx):
                    where = (
                        f"{blk.kind} {blk.name}'s rates (kinetics are evaluated "
                        "for a frozen time)"
                        if blk in self.solved
                        else "a density mechanism (a POINT_PROCESS may read it in "
                        "BREAKPOINT)"
                    )
                    self.fail(q.line, "t", f"t is not available to {where}")

    def solved_block(self, s: ir.Solve) -> ir.Block:
        blk = self.module.derivatives.get(s.block)
        if blk is None:
            self.fail(
                s.line,
                "SOLVE",
                f"{s.block} is not a DERIVATIVE or KINETIC block of this file",
            )
        if blk.kind == "LINEAR":
            self.fail(
                s.line,
                "SOLVE",
                f"LINEAR {blk.name} solved in BREAKPOINT (a LINEAR block is "
                f"supported in INITIAL: SOLVE {blk.name})",
            )
        if s.method not in METHODS:
            self.fail(
                s.line,
                "SOLVE",
                f"METHOD {s.method} is not supported (supported: {', '.join(METHODS)})",
            )
        if (s.method == "sparse") != (blk.kind == "KINETIC"):
            self.fail(
                s.line,
                "SOLVE",
                f"METHOD {s.method} for {blk.kind} {blk.name} (KINETIC blocks take "
                "METHOD sparse, DERIVATIVE blocks cnexp, derivimplicit or euler)",
            )
        self.methods[blk.name] = s.method
        return blk

    def solve(self, em: Emitter, s: ir.Solve, sc: Scope):
        if s.method == "after_cvode":
            return  # `after_solve`, after the step
        if s.steadystate is None and em.equation is None and s.method is not None:
            # BREAKPOINT: the states are advanced by the solver; here the block's
            # assignments only, so that the currents see what it computes (in
            # NEURON's schemes, held in `BackwardEuler`'s di/dv, as NEURON's).
            if self.neuron_schemes:
                em.emit(f"solve_assign(m, deriv_{s.block}_assign)")
            else:
                em.emit(f"deriv_{s.block}_assign(m)")
            return
        blk = self.module.derivatives.get(s.block)
        if s.steadystate is None and blk is not None and blk.kind == "LINEAR":
            linear_code(self.module, em, blk, sc, self.fail)
            return
        if s.steadystate is None:
            self.fail(s.line, "SOLVE", "SOLVE in INITIAL without STEADYSTATE")
        if blk is None:
            self.fail(
                s.line,
                "SOLVE STEADYSTATE",
                f"{s.block} is not a DERIVATIVE or KINETIC block of this file",
            )
        if blk.kind == "KINETIC":
            for code in steady_state_code(self.module, blk):
                em.emit(code)
            return
        eqs = [q for q in blk.body if isinstance(q, ir.DiffEq)]
        dep = StateDependence(self.module, self.fx)
        for q in blk.body:
            if isinstance(q, ir.DiffEq) and self.form(q, dep).kind != "relaxation":
                self.fail(
                    s.line,
                    "SOLVE STEADYSTATE",
                    f"state {q.state}'s equation "
                    "is not linear in it; its steady state is not supported",
                )
            dep.step(q)
        em.emit(f"_k = deriv_{s.block}(m)  # steady state")
        for q in eqs:
            em.emit(f"m.{py(q.state)} = _k[{q.state!r}].inf")

    def callable(self, c: ir.Callable):
        em = self.emitter()
        receive = c is self.module.net_receive
        em.event_time = receive
        names = set(c.params) | ({c.name} if c.kind == "FUNCTION" else set())
        args = ", ".join(py(p) for p in c.params)
        if receive:  # NET_RECEIVE's implicit argument: 0 for a NetCon's event
            names.add("flag")
            args += ", flag=0.0"
            em.sends = em.fires = em.moves = 0
        sc = Scope(names, c.name)
        prefix = "fn_" if c.kind == "FUNCTION" else "pr_"
        em.emit(
            f'"""{c.kind} {c.name}({", ".join(c.params)}) ({self.label}:{c.line})"""'
        )
        init = [f"{py(p)}={py(p)}" for p in c.params]
        if c.kind == "FUNCTION":
            init.append(f"{py(c.name)}=0.0")
        if receive:
            init.append("flag=flag")
        em.emit(f"l = Vars({', '.join(init)})")
        start = len(em.out)
        em.stmts(c.body, sc)
        if receive:  # self-events, spikes, moves: none unless their call runs
            names0 = [x for k in range(em.sends) for x in send_names(k)]
            names0 += [x for k in range(em.fires) for x in fire_names(k)]
            names0 += [x for k in range(em.moves) for x in move_names(k)]
            em.out[start:start] = [f"    m.{x} = 0.0" for x in names0]
            self.chunks.append(f"N_SENDS = {em.sends}")
            self.chunks.append(f"N_FIRES = {em.fires}")
            self.chunks.append(f"N_MOVES = {em.moves}")
        if c.kind == "FUNCTION":
            em.out.append(f"    return l.{py(c.name)}")
        if receive:  # its arguments' new values: the NetCon's weight vector
            em.out.append("    return l")
        sig = f"m, {args}" if args else "m"
        self.chunks.append(f"def {prefix}{c.name}({sig}):\n" + "\n".join(em.out))
        blk = self.module.net_receive_initial
        if receive and blk is not None:
            em = self.emitter()
            em.event_time = True
            em.emit(f'"""NET_RECEIVE\'s INITIAL ({self.label}:{blk.line})"""')
            em.emit(f"l = Vars({', '.join(init)})")
            em.stmts(blk.body, Scope(set(c.params), "INITIAL"))
            em.out.append("    return l")
            self.chunks.append(f"def net_receive_initial({sig}):\n" + "\n".join(em.out))

    def form(self, q: ir.DiffEq, dep: StateDependence):
        rhs = expand(q.rhs, dep.subst)
        if any(q.state in self.fx.get(f, (set(),))[0] for f in calls_in(rhs)):
            from ._symbolic import RATE

            return RATE
        return equation_form(
            q,
            dep.subst,
            lambda n: n in dep.opaque and q.state in dep.deps.get(n, set()),
        )

    def direct_only(self, q: ir.DiffEq, dep: StateDependence) -> bool:
        """Whether `q`'s right-hand side depends on its state only directly
        (not through variables computed from it, nor through a function)."""

        for n in names_in(q.rhs) - {q.state}:
            if q.state in dep.deps.get(n, set()):
                return False
        return not any(q.state in self.fx.get(f, (set(),))[0] for f in calls_in(q.rhs))

    def derivative(self, blk: ir.Block):
        """Three functions: `deriv_B(m)` (kinetics by state), `deriv_B_rhs(m)`
        (dx/dt by state) and `deriv_B_assign(m)` (the assignments only)."""
        for q in blk.body:
            if isinstance(q, ir.If):
                for s in _walk_eqs(q):
                    self.fail(s.line, "x' =", "an equation inside if/else")
        for variant in ("", "_rhs", "_assign"):
            em = self.emitter()
            em.emit(f'"""DERIVATIVE {blk.name} ({self.label}:{blk.line})"""')
            em.emit("l = Vars()")
            em.emit("m0 = m.copy()" if variant == "" else "out = {}")
            if variant == "":
                em.emit("out = {}")
            dep = StateDependence(self.module, self.fx)

            def equation(em, q, sc, variant=variant, dep=dep):
                if variant == "_assign":
                    return
                if q.state not in self.module.states:
                    em.fail("x' =", f"{q.state} is not a STATE")
                self.state_lines[q.state] = (self.module.path, q.line)
                if variant == "_rhs":
                    em.emit(f"out[{q.state!r}] = {em.expr(q.rhs, sc)}")
                    return
                f = self.form(q, dep)
                implicit = (
                    self.neuron_schemes
                    and self.methods.get(blk.name) == "derivimplicit"
                )
                kind = f.kind if f.tau is None else "relaxation(tau)"
                self.forms[q.state] = ("implicit " if implicit else "") + kind
                wrap = "implicit_relaxation(" if implicit else "("
                if f.kind == "relaxation" and f.tau is not None:
                    em.emit(
                        f"out[{q.state!r}] = {wrap}inf_tau_gate(as_n("
                        f"{em.expr(f.inf, sc)}, m.v), as_n({em.expr(f.tau, sc)}"
                        ", m.v)))"
                    )
                elif f.kind == "relaxation":
                    em.emit(
                        f"out[{q.state!r}] = {wrap}Relaxation(inf=as_n("
                        f"{em.expr(f.inf, sc)}, m.v), rate=as_n("
                        f"{em.expr(f.rate, sc)}, m.v)))"
                    )
                elif self.direct_only(q, dep):
                    # x enters only directly: re-evaluate this expression alone
                    cls = "ImplicitRateEquation" if implicit else "RateEquation"
                    em.emit(
                        f"out[{q.state!r}] = {cls}(f=functools.partial("
                        f"equation_rhs, lambda m, l: {em.expr(q.rhs, sc)}, "
                        f"m.copy(), l.copy(), {py(q.state)!r}))"
                    )
                else:
                    cls = "ImplicitRateEquation" if implicit else "RateEquation"
                    em.emit(
                        f"out[{q.state!r}] = {cls}(f=functools.partial("
                        f"rate_rhs, deriv_{blk.name}_rhs, m0, {q.state!r}))"
                    )

            em.equation = equation
            sc = Scope(owner=blk.name)
            for q in blk.body:
                em.stmt(q, sc)
                if variant == "":
                    dep.step(q)
            em.out.append("    return out" if variant != "_assign" else "    return m")
            self.chunks.append(
                f"def deriv_{blk.name}{variant}(m):\n" + "\n".join(em.out)
            )


def _walk_eqs(s):
    for b in (s.body, s.orelse):
        for q in b:
            if isinstance(q, KINETIC_ONLY):
                yield q
            elif isinstance(q, ir.If):
                yield from _walk_eqs(q)
