"""Which `ASSIGNED`s the blocks of a mechanism read before computing them,
and what the generated code does about each (`Source`'s read checks):
an error, a value carried from BREAKPOINT into a SOLVEd block, or a value
kept from step to step."""

from . import _ir as ir
from ._analysis import (
    check_reads,
    early_reads,
    exposed_reads,
    Sources,
    stale_initial_reads,
    summaries,
    walk,
)
from ._point_analysis import event_held


# The statements of DERIVATIVE and KINETIC blocks that are equations, not
# assignments.
KINETIC_ONLY = (ir.DiffEq, ir.Reaction, ir.Conserve, ir.Compartment)


class ReadChecks:
    """The read checks of `stable_ode.nmodl._source.Source` (which provides
    `module`, `fx`, `solved`, `derived`, `carried`, `persistent`, `fail`)."""

    def check_reads(self):
        """An `ASSIGNED` read before the block computes it would be NEURON's
        value left by another block: not reproduced, so an error."""
        mod = self.module
        exposed = exposed_reads(mod, self.fx)

        def fail(kind):
            def f(name, line):
                self.fail(
                    line,
                    "ASSIGNED",
                    f"{kind} reads {name} before computing "
                    "it (NEURON would read the value another block left "
                    "there; stable_ode evaluates each block on its own)",
                )

            return f

        self.carried = self.carried_names(exposed)
        held = event_held(mod)  # NET_RECEIVE's, kept between events
        for blk in self.solved:
            check_reads(
                mod,
                blk.body,
                exposed,
                set(self.derived) | self.carried | held,
                fail(f"{blk.kind} {blk.name}"),
            )
        if mod.initial is not None:
            self.check_initial_reads(exposed, fail("INITIAL"))
        if mod.breakpoint is not None:
            body = self.breakpoint_body()
            early: dict[str, int | None] = {}
            check_reads(
                mod,
                body,
                exposed,
                set(self.derived) | held,
                lambda n, line: early.setdefault(n, line),
            )
            self.persistent = self.persistent_names(early, body)
            for name, line in early.items():
                if name not in self.persistent:
                    fail("BREAKPOINT")(name, line)

    def persistent_names(self, early: dict, body) -> set[str]:
        """Of the `ASSIGNED`s BREAKPOINT reads before computing them (`early`),
        those it keeps from step to step, as NEURON keeps every `ASSIGNED`'s
        value (dbbs' `Cav2_3`: `if (g > gmax) {gmax = g}`): in a density
        mechanism, assigned in BREAKPOINT outside its SOLVEd blocks, by no
        other block but INITIAL, and from values that do not depend on `v`
        (NEURON's BREAKPOINT runs at the step's start, ours after the
        voltage update)."""
        mod = self.module
        if mod.point_process:
            return set()
        own = {s.target for s in walk(mod.breakpoint.body) if isinstance(s, ir.Assign)}
        solved = set()
        for blk in self.solved:
            solved |= {s.target for s in walk(blk.body) if isinstance(s, ir.Assign)}
        src = Sources(summaries(mod))
        src.walk(body)
        ion_vars = {x for ion in mod.ions for x in ion.read + ion.write}
        return {
            x
            for x in early
            if x in own
            and x not in solved | ion_vars | self.carried
            and "v" not in src.of.get(x, {x})
        }

    def carried_names(self, exposed) -> set[str]:
        """The `ASSIGNED`s (and ion currents written, not read) that
        BREAKPOINT computes outside its SOLVEd blocks and a SOLVEd block reads
        before computing them (capmpr.mod's `ipump_last = ipump`, `ica =
        ipump`). NEURON's block reads the value that this step's current
        evaluation left there, which `kinetics` reproduces by evaluating
        BREAKPOINT first at the step's states; only values that do not depend
        on `v` (NEURON's are at the voltage of the step's start), and only in
        density mechanisms: otherwise such a read stays an error."""
        mod = self.module
        if mod.breakpoint is None or mod.point_process:
            return set()
        # A current the file writes but does not READ is its own variable too
        # (capmpr.mod's `ica`, read in its KINETIC block as BREAKPOINT set it).
        own = {
            x
            for ion in mod.ions
            for x in ion.write
            if x == f"i{ion.name}" and x not in ion.read
        }
        watched = (set(mod.assigned) - set(mod.statics)) | own
        read = set()
        for blk in self.solved:
            read |= early_reads(blk.body, exposed, set(self.derived))
        body = self.breakpoint_body()
        src = Sources(summaries(mod))
        src.walk(body)
        assigned = {s.target for s in walk(body) if isinstance(s, ir.Assign)}
        return {x for x in assigned & watched & read if "v" not in src.of.get(x, {x})}

    def breakpoint_body(self) -> list:
        """BREAKPOINT's statements with each `SOLVE b` replaced by the
        assignments of `b` (what the currents see of it)."""
        mod = self.module
        body = []
        for s in mod.breakpoint.body:
            if isinstance(s, ir.Solve) and s.block in mod.derivatives:
                body += [
                    q
                    for q in mod.derivatives[s.block].body
                    if not isinstance(q, KINETIC_ONLY)
                ]
            else:
                body.append(s)
        return body

    def check_initial_reads(self, exposed, fail):
        """`INITIAL` may read an `ASSIGNED` before computing it (NEURON reads
        0 there on the first run, and the previous run's value after) if
        nothing it leaves behind depends on that value: the states it
        initialises and the values it derives once (dbbs' `Cav3_1` computes
        `taum` from `qt` before setting `qt`, and sets only `m = minf`).
        Generated code reads 0 there. With a `SOLVE ... STEADYSTATE` in it,
        every such read is an error."""
        mod = self.module
        first: dict[str, int | None] = {}
        check_reads(
            mod,
            mod.initial.body,
            exposed,
            set(),
            lambda n, line: first.setdefault(n, line),
        )
        if not first:
            return
        if any(isinstance(s, ir.Solve) for s in walk(mod.initial.body)):
            name, line = next(iter(first.items()))
            fail(name, line)
        kept = set(mod.states) | set(self.derived)
        for target, stale in sorted(stale_initial_reads(mod, kept).items()):
            name = min(stale, key=lambda n: first.get(n) or 0)
            fail(f"{name} (on which {target} depends)", first.get(name))
