"""An NMODL mechanism's recordable `RANGE` variables (NEURON's
`seg.<name>_<suffix>`) that are not states: which there are, and in which of
NEURON's phases each is computed.

A recording evaluates them from the sample's voltage, states and ions, by
running `BREAKPOINT` (which runs the assignments of its `SOLVE`d blocks first,
as the current sees them). NEURON computes them in two phases of its step:

- `"current"`: assigned in `BREAKPOINT` itself (`ihcn = gIh·(v - ehcn)`),
  which NEURON evaluates in `nrn_cur` at the start of the step, so that its
  sample after step k+1 is the value at the states and voltage of sample k:
  ours at k;
- `"state"`: assigned in a `SOLVE`d `DERIVATIVE` or `KINETIC` block
  (`rates(v)` setting `minf`), which NEURON evaluates in `nrn_state` at the
  step's new voltage: for values of `v`, the ions and the parameters, the
  same sample as ours (a value that reads the states sees NEURON's states
  before their update);
- `"constant"`: a `PARAMETER`, or an `ASSIGNED` that `INITIAL` computes from
  the parameters, `celsius` and the geometry.

An `ASSIGNED` that only `INITIAL` computes from the voltage or the states is
not recordable: NEURON keeps its initial value, which is not kept here.
"""

from . import _ir as ir
from ._analysis import _exprs, calls_in, effects, walk


def _written(module: ir.Module, body, fx, solved: bool) -> set[str]:
    """The mechanism-level names `body` assigns, through the procedures and
    functions it calls; with `solved`, through its `SOLVE`d blocks too."""
    out, local = set(), set()
    for s in walk(body):
        if isinstance(s, ir.Local):
            local |= set(s.names)
        elif isinstance(s, ir.Assign):
            out.add(s.target)
        elif isinstance(s, ir.CallStmt) and s.fn in fx:
            out |= fx[s.fn][1]
        elif isinstance(s, ir.Solve) and solved and s.block in module.derivatives:
            out |= _written(module, module.derivatives[s.block].body, fx, False)
        for e in _exprs(s):
            for c in calls_in(e) & set(fx):
                out |= fx[c][1]
    return out - local


def range_phases(module: ir.Module, derived: set[str]) -> tuple[dict, dict]:
    """`(phases, refused)`: each recordable `RANGE` variable that is not a state
    or an ion variable (the file's `RANGE` names and `NONSPECIFIC_CURRENT`s, in
    order) → its phase (`"current"`, `"state"` or `"constant"`, see the module
    docstring); each refused one → why. `derived`: the names `INITIAL` computes
    from values that do not change during a run."""
    fx = effects(module)
    ion_vars = {x for ion in module.ions for x in ion.read + ion.write}
    names = dict.fromkeys(module.range_names + module.nonspecific)
    bp = module.breakpoint.body if module.breakpoint else ()
    solves = [s for s in bp if isinstance(s, ir.Solve)]
    in_state = set()
    for s in solves:
        if s.block in module.derivatives:
            in_state |= _written(module, module.derivatives[s.block].body, fx, False)
    in_current = _written(module, bp, fx, False)
    in_initial = (
        _written(module, module.initial.body, fx, True) if module.initial else set()
    )
    phases, refused = {}, {}
    for x in names:
        if x in module.states or x in ion_vars:
            continue
        if x not in module.parameters and x not in module.assigned:
            continue
        if x in in_state:
            phases[x] = "state"
        elif x in in_current:
            phases[x] = "current"
        elif x in in_initial and x not in derived:
            refused[x] = (
                "only INITIAL computes it, from the voltage or the states (NEURON "
                "keeps that initial value, which is not kept here)"
            )
        else:
            phases[x] = "constant"
    return phases, refused
