"""Python source of one `KINETIC` block: its reactions as one linear scheme.

Each reaction `~ L <-> R (kf, kb)` contributes the flux `kf·[L] - kb·[R]`
from its left side to its right (NMODL's mass action, `[L]` the product of the
left side's species to their coefficients). The block is linear in its states
when every side holds at most one state, with coefficient 1, and no rate
depends on a state of the block; the other species (ion concentrations such as
`cai`, parameters) multiply the rate. Then

- every reaction has one state on each side and there is no `<<` flux: a
  closed scheme, `stable_ode.MarkovScheme` (the `CONSERVE` total, if it is a
  number and covers every state, else the total the states start with);
- otherwise (fluxes `~ A << (f)`, species that are not states, a `CONSERVE`
  with a computed total): `LinearScheme`, `dx/dt = A·x + b`.

Both take NEURON's `sparse` step for a linear scheme, implicit Euler. A
nonlinear scheme (two states on one side, `~ 2A <-> B`, a rate that depends on
a state of the block) and `COMPARTMENT` are one `NmodlError` each.
"""

from . import _ir as ir
from ._analysis import StateDependence, walk
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
                    if isinstance(r, (ir.Reaction, ir.Conserve)):
                        src.fail(r.line, "~", "a reaction inside if/else")

    def fail(self, line, construct, problem):
        self.src.fail(line, construct, problem)

    def generate(self) -> list[str]:
        return [self.function(""), self.function("_assign")]

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
        dep = StateDependence(self.module, src.fx)

        def reaction(em, s, sc):
            if variant == "_assign":
                return
            if isinstance(s, ir.Conserve):
                self.conserve_stmt(em, s, sc)
            else:
                self.reaction(em, s, sc, dep)

        em.reaction = reaction
        sc = Scope(owner=blk.name)
        for q in blk.body:
            em.stmt(q, sc)
            dep.step(q)
        if variant == "_assign":
            em.out.append("    return m")
        else:
            em.line = blk.line
            em.emit(f"return {{{blk.name!r}: {self.construct()}}}")
        return f"def deriv_{blk.name}{variant}(m):\n" + "\n".join(em.out)

    # -- statements --------------------------------------------------------

    def rate(self, em, expr, species, sc, line, dep) -> str:
        """A temporary holding `expr` times the non-state species."""
        bad = dep.of(expr) & set(self.states)
        if bad:
            self.fail(
                line,
                "~",
                f"a rate depends on the scheme's state {sorted(bad)[0]}: the "
                "scheme is nonlinear (not supported yet)",
            )
        code = em.expr(expr, sc)
        for name, k in species:
            if name not in self.index:
                x = em.expr(ir.Name(name), sc)
                code = f"({code} * {x}" + (f" ** {k})" if k != 1 else ")")
        self.n += 1
        temp = f"_k{self.n}"
        em.emit(f"{temp} = as_n({code}, m.v)")
        return temp

    def reaction(self, em, s: ir.Reaction, sc, dep):
        for name, _ in s.lhs + s.rhs:
            if name in self.module.states:
                self.src.state_lines.setdefault(name, (self.module.path, s.line))
        left = self.side(s.lhs, s.line)
        if s.op == "<<":
            self.closed = False
            temp = self.rate(em, s.kf, (), sc, s.line, dep)
            self.sources.setdefault(self.index[left], []).append((1.0, temp))
            return
        right = self.side(s.rhs, s.line)
        kf = self.rate(em, s.kf, s.lhs, sc, s.line, dep)
        kb = self.rate(em, s.kb, s.rhs, sc, s.line, dep)
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

    def side(self, species, line) -> str | None:
        """The one state of a reaction side (`None`: no state)."""
        states = [(n, k) for n, k in species if n in self.index]
        if len(states) > 1 or any(k != 1 for _, k in states):
            text = " + ".join(f"{k if k != 1 else ''}{n}" for n, k in species)
            self.fail(
                line,
                "~",
                f"{text}: a reaction side with more than one state (or a "
                "stoichiometric coefficient) makes the scheme nonlinear in its "
                "states (not supported yet)",
            )
        return states[0][0] if states else None

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
