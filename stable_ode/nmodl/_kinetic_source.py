"""Python source of one `KINETIC` block: its reactions as one scheme.

Each reaction `~ L <-> R (kf, kb)` contributes the flux `kf·[L] - kb·[R]`
from its left side to its right (NMODL's mass action, `[L]` the product of the
left side's species to their coefficients). The block is linear in its states
when every side holds at most one state, with coefficient 1, no rate depends
on a state of the block, and it has no `COMPARTMENT` and reads no `f_flux` or
`b_flux`; the other species (ion concentrations such as `cai`, parameters)
multiply the rate. Then

- every reaction has one state on each side and there is no `<<` flux: a
  closed scheme, `stable_ode.MarkovScheme` (the `CONSERVE` total, if it is a
  number and covers every state, else the total the states start with);
- otherwise (fluxes `~ A << (f)`, species that are not states, a `CONSERVE`
  with a computed total): `LinearScheme`, `dx/dt = A·x + b`.

Any other block is a `NonlinearScheme`: the generated `deriv_B_flux(m)`
evaluates the block's statements in order at the states in `m` (the
assignments between reactions see `f_flux` and `b_flux`, the forward and
backward flux of the reaction before them, as NEURON's do) and returns each
state's `dx/dt` (its fluxes divided by its `COMPARTMENT` volume) and the
`CONSERVE` row, in amounts (`Σ w·volume·x = total`, as NEURON's `CONSERVE`
with `COMPARTMENT`s).

All take NEURON's `sparse` step, implicit Euler (Newton iterations for a
nonlinear scheme).
"""

from . import _ir as ir
from ._analysis import _exprs, names_in, StateDependence, walk
from ._codegen import Emitter, py, Scope


def scheme_states(module: ir.Module, blk: ir.Block) -> tuple[str, ...]:
    """The states that `blk`'s reactions and CONSERVE name, in STATE order."""
    names = set()
    for s in blk.body:
        if isinstance(s, ir.Reaction):
            names |= {n for n, _ in s.lhs + s.rhs}
        elif isinstance(s, ir.Conserve):
            names |= {n for n, _ in s.terms}
    return tuple(x for x in module.states if x in names)


class KineticSource:
    """Writes `deriv_B(m)` (the scheme, by the block's name) and
    `deriv_B_assign(m)` (the block's assignments only) for `KINETIC` block
    `blk` of `src` (a `_source.Source`)."""

    def __init__(self, src, blk: ir.Block):
        self.src, self.blk = src, blk
        self.module = src.module
        self.states = scheme_states(self.module, blk)
        if not self.states:
            src.fail(blk.line, "KINETIC", f"{blk.name} has no reaction of a STATE")
        self.index = {x: i for i, x in enumerate(self.states)}
        for q in walk(blk.body):
            if isinstance(q, ir.If):
                for r in walk(q.body + q.orelse):
                    if isinstance(r, (ir.Reaction, ir.Conserve, ir.Compartment)):
                        kind = "COMPARTMENT" if isinstance(r, ir.Compartment) else "~"
                        src.fail(r.line, kind, f"{kind} inside if/else")
        # nocmodl's test of a linear scheme: the reaction sides alone
        self.mass_action_linear = all(
            self.one_state(side)
            for q in blk.body
            if isinstance(q, ir.Reaction)
            for side in (q.lhs, q.rhs)
        )
        self.nonlinear = not self.mass_action_linear or self.needs_general()

    def one_state(self, side) -> bool:
        """Whether a reaction side holds at most one state, with coefficient 1."""
        states = [k for n, k in side if n in self.index]
        return len(states) <= 1 and all(k == 1 for k in states)

    def needs_general(self) -> bool:
        """Whether a block whose sides are linear needs the general scheme
        anyway: a `COMPARTMENT`, a read of `f_flux`/`b_flux`, or a rate (or
        `<<` flux) that depends on a state of the block."""
        dep = StateDependence(self.module, self.src.fx)
        for q in self.blk.body:
            for s in walk([q]):
                if isinstance(s, ir.Compartment):
                    return True
                if any(names_in(e) & {"f_flux", "b_flux"} for e in _exprs(s)):
                    return True
            if isinstance(q, ir.Reaction):
                for e in (q.kf, q.kb):
                    if e is not None and dep.of(e) & set(self.states):
                        return True
            dep.step(q)
        return False

    def fail(self, line, construct, problem):
        self.src.fail(line, construct, problem)

    def generate(self) -> list[str]:
        if self.nonlinear:
            return [self.flux_function(), *self.nonlinear_entries()]
        return [self.function(""), self.function("_assign")]

    # -- the general (nonlinear) scheme -------------------------------------

    def nonlinear_entries(self) -> list[str]:
        """`deriv_B(m)` (the scheme, evaluated at the variables in `m`) and
        `deriv_B_assign(m)`."""
        b, label = self.blk, self.src.label
        head = f'    """KINETIC {b.name} ({label}:{b.line})"""'
        scheme = (
            f"def deriv_{b.name}(m):\n{head}\n"
            f"    return {{{b.name!r}: nonlinear_scheme({self.states!r}, "
            f"deriv_{b.name}_flux, m.copy(), {self.row!r}, "
            f"{self.src.neuron_schemes!r}, {self.mass_action_linear!r})}}"
        )
        assign = (
            f"def deriv_{b.name}_assign(m):\n{head}\n"
            f"    deriv_{b.name}_flux(m)\n    return m"
        )
        self.src.forms.update({x: "nonlinear scheme (sparse)" for x in self.states})
        return [scheme, assign]

    def flux_function(self) -> str:
        """`deriv_B_flux(m, frozen=None)`: `(dxdt, conserve, rates)` at the
        states in `m` (mutated: the block's assignments), `conserve` `None`
        or `(weights, total)` (per state; amounts), `rates` every reaction's
        `kf` and `kb` and every `<<` flux as evaluated; with `frozen` (such a
        `rates`) those are taken from it instead (NEURON's Jacobian of the
        scheme treats them as constants)."""
        src, blk = self.src, self.blk
        em: Emitter = src.emitter()
        em.emit(f'"""KINETIC {blk.name} ({src.label}:{blk.line}): fluxes"""')
        em.emit("l = Vars()")
        k = len(self.states)
        for i in range(k):
            em.emit(f"_d{i} = 0.0; _v{i} = 1.0")
        self.n = self.n_rates = 0
        self.conserve = None
        self.row = None

        def reaction(em, s, sc):
            if isinstance(s, ir.Conserve):
                self.conserve_stmt(em, s, sc)
                self.row = max(self.index[n] for n, _ in s.terms)
            elif isinstance(s, ir.Compartment):
                self.compartment(em, s, sc)
            else:
                self.mass_action(em, s, sc)

        em.reaction = reaction
        sc = Scope({"f_flux", "b_flux"}, owner=blk.name)
        for q in blk.body:
            em.stmt(q, sc)
        em.line = blk.line
        # A COMPARTMENT volume is positive (0 is a division by zero in NEURON
        # too: non-finite here, a rejected step that `diagnose` names).
        dx = ", ".join(f"as_n(_d{i} / _v{i}, m.v)" for i in range(k))
        if self.conserve is None:
            conserve = "None"
        else:
            w = [0.0] * k
            for name, c in self.conserve.terms:
                w[self.index[name]] += c
            weights = ", ".join(f"as_n({w[i]!r} * _v{i}, m.v)" for i in range(k))
            conserve = f"(({weights},), _total)"
        rates = "".join(f"_q{j}, " for j in range(self.n_rates))
        em.emit(f"return ({dx},), {conserve}, ({rates})")
        return f"def deriv_{blk.name}_flux(m, frozen=None):\n" + "\n".join(em.out)

    def frozen_rate(self, em, expr, sc) -> str:
        """A temporary holding the rate (or flux) `expr`, or its frozen
        value."""
        j = self.n_rates
        self.n_rates += 1
        value = f"as_n({em.expr(expr, sc)}, m.v)"
        em.emit(f"_q{j} = {value} if frozen is None else frozen[{j}]")
        return f"_q{j}"

    def compartment(self, em, s: ir.Compartment, sc):
        self.n += 1
        temp = f"_vol{self.n}"
        em.emit(f"{temp} = as_n({em.expr(s.volume, sc)}, m.v)")
        for name in s.species:
            if name in self.index:
                em.emit(f"_v{self.index[name]} = {temp}")
            else:
                em.ref(name, sc)  # declared (an ion or a parameter)

    def mass_action(self, em, s: ir.Reaction, sc):
        """`l.f_flux`, `l.b_flux` of reaction `s`, and its net flux added to
        (taken from) the states of its right (left) side."""
        for name, _ in s.lhs + s.rhs:
            if name in self.module.states:
                self.src.state_lines.setdefault(name, (self.module.path, s.line))
            elif name not in self.index:
                em.ref(name, sc)
        self.n += 1
        n = self.n

        def flux(rate, species):
            code = self.frozen_rate(em, rate, sc)
            for name, c in species:
                x = em.expr(ir.Name(name), sc)
                code += f" * {x}" + (f" ** {c}" if c != 1 else "")
            return code

        em.emit(f"l.f_flux = {flux(s.kf, s.lhs if s.op != '<<' else ())}")
        if s.op == "<<":
            em.emit("l.b_flux = 0.0")
            i = self.index.get(s.lhs[0][0])
            if i is not None:
                em.emit(f"_d{i} = _d{i} + l.f_flux")
            return
        em.emit(f"l.b_flux = {flux(s.kb, s.rhs)}")
        em.emit(f"_r{n} = l.f_flux - l.b_flux")
        for side, sign in ((s.lhs, "-"), (s.rhs, "+")):
            for name, c in side:
                i = self.index.get(name)
                if i is not None:
                    term = f"_r{n}" if c == 1 else f"{c} * _r{n}"
                    em.emit(f"_d{i} = _d{i} {sign} {term}")

    # -- the linear schemes --------------------------------------------------

    def function(self, variant: str) -> str:
        src, blk = self.src, self.blk
        em: Emitter = src.emitter()
        em.emit(f'"""KINETIC {blk.name} ({src.label}:{blk.line})"""')
        em.emit("l = Vars()")
        self.n = 0
        self.entries: dict = {}  # (row, col) -> [(sign, temp)]
        self.sources: dict = {}  # row -> [(sign, temp)]
        self.conserve = None
        self.closed = True
        self.transitions: list = []  # (from, to, temp) for a closed scheme

        def reaction(em, s, sc):
            if variant == "_assign":
                return
            if isinstance(s, ir.Conserve):
                self.conserve_stmt(em, s, sc)
            else:
                self.reaction(em, s, sc)

        em.reaction = reaction
        sc = Scope(owner=blk.name)
        for q in blk.body:
            em.stmt(q, sc)
        if variant == "_assign":
            em.out.append("    return m")
        else:
            em.line = blk.line
            em.emit(f"return {{{blk.name!r}: {self.construct()}}}")
        return f"def deriv_{blk.name}{variant}(m):\n" + "\n".join(em.out)

    # -- statements --------------------------------------------------------

    def rate(self, em, expr, species, sc) -> str:
        """A temporary holding `expr` times the non-state species (a linear
        block: `is_nonlinear` sent the others to the general scheme)."""
        code = em.expr(expr, sc)
        for name, k in species:
            if name not in self.index:
                x = em.expr(ir.Name(name), sc)
                code = f"({code} * {x}" + (f" ** {k})" if k != 1 else ")")
        self.n += 1
        temp = f"_k{self.n}"
        em.emit(f"{temp} = as_n({code}, m.v)")
        return temp

    def reaction(self, em, s: ir.Reaction, sc):
        for name, _ in s.lhs + s.rhs:
            if name in self.module.states:
                self.src.state_lines.setdefault(name, (self.module.path, s.line))
        left = self.side(s.lhs)
        if s.op == "<<":
            self.closed = False
            temp = self.rate(em, s.kf, (), sc)
            self.sources.setdefault(self.index[left], []).append((1.0, temp))
            return
        right = self.side(s.rhs)
        kf = self.rate(em, s.kf, s.lhs, sc)
        kb = self.rate(em, s.kb, s.rhs, sc)
        if left is None or right is None:
            self.closed = False
        else:
            self.transitions += [(left, right, kf), (right, left, kb)]
        # flux kf·x_left - kb·x_right, out of the left state, into the right
        for temp, col, sign in ((kf, left, 1.0), (kb, right, -1.0)):
            for row, direction in ((left, -1.0), (right, 1.0)):
                if row is None:
                    continue
                r = self.index[row]
                if col is None:
                    self.sources.setdefault(r, []).append((sign * direction, temp))
                else:
                    key = (r, self.index[col])
                    self.entries.setdefault(key, []).append((sign * direction, temp))

    def side(self, species) -> str | None:
        """The one state of a reaction side of a linear block (`None`: no
        state)."""
        states = [n for n, _ in species if n in self.index]
        return states[0] if states else None

    def conserve_stmt(self, em, s: ir.Conserve, sc):
        if self.conserve is not None:
            self.fail(s.line, "CONSERVE", "one CONSERVE per KINETIC block")
        for name, _ in s.terms:
            if name not in self.index:
                self.fail(s.line, "CONSERVE", f"{name} is not a state of the scheme")
        em.emit(f"_total = as_n({em.expr(s.total, sc)}, m.v)")
        self.conserve = s

    # -- the scheme --------------------------------------------------------

    def construct(self) -> str:
        states = repr(self.states)
        c = self.conserve
        weights = None
        if c is not None:
            w = [0.0] * len(self.states)
            for name, k in c.terms:
                w[self.index[name]] += k
            weights = tuple(w)
        plain = c is None or (
            isinstance(c.total, ir.Num) and weights == (1.0,) * len(self.states)
        )
        if self.closed and plain and len(self.states) > 1:
            table = ", ".join(
                f"({self.index[a]}, {self.index[b]}, {t})"
                for a, b, t in self.transitions
            )
            total = None if c is None else c.total.value
            self.src.forms.update({x: "markov scheme (sparse)" for x in self.states})
            return f"markov_scheme({states}, ({table},), {total!r}, m.v)"
        self.src.forms.update({x: "linear scheme (sparse)" for x in self.states})
        entries = ", ".join(
            f"({r}, {col}, ({' + '.join(f'{sg!r} * {t}' for sg, t in terms)}))"
            for (r, col), terms in sorted(self.entries.items())
        )
        sources = ", ".join(
            f"({r}, ({' + '.join(f'{sg!r} * {t}' for sg, t in terms)}))"
            for r, terms in sorted(self.sources.items())
        )
        if c is None:
            conserve = "None"
        else:
            row = max(self.index[n] for n, _ in c.terms)
            conserve = f"({weights!r}, {row}, _total)"
        return (
            f"linear_scheme({states}, ({entries}{',' if entries else ''}), "
            f"({sources}{',' if sources else ''}), {conserve}, m.v)"
        )


def steady_state_code(module: ir.Module, blk: ir.Block) -> list[str]:
    """Statements for `SOLVE blk STEADYSTATE sparse` in INITIAL."""
    states = scheme_states(module, blk)
    xs = ", ".join(f"m.{py(x)}" for x in states)
    return [
        f"_k = deriv_{blk.name}(m)[{blk.name!r}]  # steady state",
        f"{xs}, = scheme_steady_state(_k, ({xs},), m.v)",
    ]
