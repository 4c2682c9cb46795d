"""Mechanism class factory: one `AbstractMechanism` subclass per `SUFFIX`.

The class's fields are the file's `PARAMETER`s (defaults from the file; one value
per compartment after `build`, trainable like `HH`'s). Its `kinetics`, `current`
and `init_states` call the generated functions of `_source.py`, compiled once
per class; the generated source is registered with `linecache`, so a traceback
through it shows the generated line and its `# file:line` comment.
"""

import functools
import itertools
import keyword
import linecache
from typing import ClassVar

import jax
import jax.numpy as jnp
import jax.scipy.special
from jaxtyping import ArrayLike, Float

from .. import _math
from ..mechanisms import AbstractMechanism, Assigned, RateEquation, Relaxation
from ..mechanisms._kinetics import inf_tau_gate
from . import _ir as ir, _runtime
from ._codegen import label_of, py
from ._errors import NmodlError
from ._kinetics import (
    ImplicitRateEquation,
    ImplicitRelaxation,
    linear_scheme,
    markov_scheme,
    nonlinear_scheme,
    scheme_steady_state,
)
from ._point_analysis import derived_names
from ._ranges import range_phases
from ._runtime import typed
from ._source import Source


_counter = itertools.count()
_RESERVED = {
    "kinetics",
    "current",
    "init_states",
    "range_variables",
    "gates",
    "ions",
    "nmodl",
    "concentration_states",
}


def _land(a, b):
    if isinstance(a, bool) and isinstance(b, bool):
        return a and b
    return jnp.logical_and(a, b)


def _lor(a, b):
    if isinstance(a, bool) and isinstance(b, bool):
        return a or b
    return jnp.logical_or(a, b)


def _lnot(a):
    return (not a) if isinstance(a, bool) else jnp.logical_not(a)


def rate_rhs(rhs_fn, m0, name, x):
    """`dx/dt` of state `name` at value `x`, everything else as in `m0`."""
    m = m0.copy()
    setattr(m, py(name), x)
    return rhs_fn(m)[name]


def equation_rhs(expression, m0, l0, name, x):
    """`expression(m, l)` with state `name` set to `x` (a copy of `m0`)."""
    m = m0.copy()
    setattr(m, name, x)
    return expression(m, l0)


_GLOBALS = dict(
    jnp=jnp,
    jax=jax,
    functools=functools,
    Vars=_runtime.Vars,
    merge_into=_runtime.merge_into,
    solve_assign=_runtime.solve_assign,
    linear_solve=_runtime.linear_solve,
    select=_runtime.select,
    as_n=_runtime.as_n,
    safe_sqrt=typed(_runtime.safe_sqrt),
    safe_log10=typed(_runtime.safe_log10),
    power=typed(_runtime.power),
    safe_exp=typed(_math.safe_exp),
    safe_div=typed(_math.safe_div),
    safe_log=typed(_math.safe_log),
    x_over_expm1=typed(_math.x_over_expm1),
    Relaxation=Relaxation,
    RateEquation=RateEquation,
    inf_tau_gate=inf_tau_gate,
    implicit_relaxation=lambda k: ImplicitRelaxation(inf=k.inf, rate=k.rate),
    ImplicitRateEquation=ImplicitRateEquation,
    markov_scheme=markov_scheme,
    linear_scheme=linear_scheme,
    nonlinear_scheme=nonlinear_scheme,
    scheme_steady_state=scheme_steady_state,
    land=_land,
    lor=_lor,
    lnot=_lnot,
    rate_rhs=rate_rhs,
    equation_rhs=equation_rhs,
    fabs=typed(jnp.abs),
    sin=typed(jnp.sin),
    cos=typed(jnp.cos),
    tan=typed(jnp.tan),
    tanh=typed(jnp.tanh),
    sinh=typed(jnp.sinh),
    cosh=typed(jnp.cosh),
    atan=typed(jnp.arctan),
    floor=typed(jnp.floor),
    ceil=typed(jnp.ceil),
    erf=typed(jax.scipy.special.erf),
    erfc=typed(jax.scipy.special.erfc),
    fmin=typed(jnp.minimum),
    fmax=typed(jnp.maximum),
    atan2=typed(jnp.arctan2),
)


def compile_source(source: str, filename: str) -> dict:
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    namespace = dict(_GLOBALS)
    exec(compile(source, filename, "exec"), namespace)
    return namespace


class NmodlInfo:
    """What a generated class knows about its `.mod` file (`cls.nmodl`).

    - `path`, `suffix`, `title`; `source`: the generated Python;
    - `parameters`: field name → NMODL name; `state_lines`: state → `(file,
      line)` of its equation (for diagnostics); `forms`: state → how it is
      integrated (`"relaxation"`, `"relaxation(tau)"` or `"rate"`);
    - `methods`: the `SOLVE ... METHOD`s of its BREAKPOINT;
    - `tables`: the names of the FUNCTIONs/PROCEDUREs with a `TABLE` (computed
      exactly here; NEURON users set `usetable_<suffix> = 0` to compare);
    - `ranges`: each recordable `RANGE` variable that is not a state → the
      phase of NEURON's step that computes it (`"current"`, `"state"`,
      `"constant"`; see `stable_ode/nmodl/_ranges.py`); `unrecordable`: the
      others → why.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def __repr__(self):
        return f"NmodlInfo({self.suffix!r} from {self.path!r})"


def _field_name(path, line, name):
    if keyword.iskeyword(name) or name in _RESERVED:
        return name + "_"
    if name.startswith("_"):
        raise NmodlError(
            path, line, "PARAMETER", f"{name}: names starting with _ are not supported"
        )
    return name


def make_class(module: ir.Module, neuron_schemes: bool = True):
    """The mechanism class for `module` (`neuron_schemes`: see `load_nmodl`)."""
    src = Source(module, neuron_schemes)
    src.derived = derived_names(module)
    source = src.generate()
    filename = f"<nmodl {label_of(module.path)}:{module.suffix} #{next(_counter)}>"
    ns = compile_source(source, filename)
    fields = {
        _field_name(module.path, module.lines.get(p), p): p for p in module.parameters
    }
    ions = _use_ions(module)
    if module.point_process:
        from ._point_analysis import check_point_ions

        check_point_ions(module)
    writes_conc = {
        x
        for ion in module.ions
        for x in ion.write
        if x in (f"{ion.name}i", f"{ion.name}o")
    }
    held = {}  # a written concentration that a solved block sets to a state
    for x in writes_conc:
        if x in module.states:
            continue
        held[x] = copied_state(module, src.solved, x)
        if held[x] is None:
            raise NmodlError(
                module.path,
                module.lines.get(x),
                "USEION",
                f"writes {x} but neither declares STATE {x} nor sets it to a "
                f"state (`{x} = <state>`) in its solved KINETIC block (not supported)",
            )
    writes_conc -= set(held)
    read_map = {}
    for ion in module.ions:
        for x in ion.read + ion.write:
            if x in module.states:
                continue
            attr = {
                f"e{ion.name}": "reversal",
                f"{ion.name}i": "inside",
                f"{ion.name}o": "outside",
                f"i{ion.name}": "current",
            }[x]
            read_map[x] = (ion.name, attr, x in ion.read)
    uses_area = "area" in source

    def _vars(self, v, states, env):
        values = {p: getattr(self, f) for f, p in fields.items()}
        values |= {a: 0.0 for a in module.assigned}
        for x, (ion, attr, read) in read_map.items():
            values[x] = getattr(env.ion(ion), attr) if read else 0.0
        values |= states
        values |= dict(v=v, celsius=env.celsius, diam=env.diam)
        if uses_area:
            values["area"] = None if env.area is None else env.area * 1e8
        m = _runtime.Vars(**{py(k): val for k, val in values.items()})
        if src.derived:  # values INITIAL computes from the parameters
            m0 = m.copy()
            ns["initial_derived"](m0)
            for k in src.derived:
                setattr(m, py(k), getattr(m0, py(k)))
        return m

    derivs = [ns[f"deriv_{b.name}"] for b in src.solved]

    carried = [py(x) for x in sorted(src.carried)]
    persistent = sorted(src.persistent)

    def kinetics(self, v, states, env):
        left = {}
        if carried or persistent:  # the values this step's BREAKPOINT leaves
            after = _vars(self, v, states, env)
            ns["breakpoint"](after)
            left = {x: getattr(after, x) for x in carried}
        out = {}
        for d in derivs:
            m = _vars(self, v, states, env)
            for x, value in left.items():
                setattr(m, x, value)
            out |= d(m)
        for x in persistent:  # kept from step to step, as BREAKPOINT left it
            out[x] = Assigned(_runtime.as_n(getattr(after, py(x)), v))
        return out

    written = [
        (ion.name, f"i{ion.name}") for ion in module.ions if f"i{ion.name}" in ion.write
    ]

    def current(self, v, states, env):
        m = _vars(self, v, states, env)
        setattr(m, _runtime.HELD_V, getattr(env, "v_solve", None))
        ns["breakpoint"](m)
        i = [_runtime.as_n(getattr(m, py(x)), v) for x in module.nonspecific]
        nonspecific = sum(i[1:], i[0]) if i else None
        if not written:
            return nonspecific if nonspecific is not None else jnp.zeros_like(v)
        out = {ion: _runtime.as_n(getattr(m, py(x)), v) for ion, x in written}
        if nonspecific is not None:
            out["nonspecific"] = nonspecific
        return out

    def init_states(self, v, env):
        start = {s: module.state_start[s] for s in module.states}
        for x in writes_conc:
            ion = x[:-1]
            start[x] = getattr(env.ion(ion), "inside" if x.endswith("i") else "outside")
        m = _vars(self, v, start, env)
        for x in held:  # INITIAL sees the ion's concentration (cabpump's `ca[i] = cai`)
            side = "inside" if x.endswith("i") else "outside"
            setattr(m, py(x), getattr(env.ion(x[:-1]), side))
        ns["initial"](m)
        kept = (*module.states, *persistent)
        return {s: _runtime.as_n(getattr(m, py(s)), v) for s in kept}

    phases, refused = range_phases(module, src.derived)
    phases = {x: p for x, p in phases.items() if x not in src.persistent}

    def range_variables(self, v, states, env):
        m = _vars(self, v, states, env)
        ns["breakpoint"](m)
        return {x: _runtime.as_n(getattr(m, py(x)), v) for x in phases}

    info = NmodlInfo(
        path=module.path,
        suffix=module.suffix,
        title=module.title,
        source=source,
        filename=filename,
        parameters=dict(fields),
        state_lines=dict(src.state_lines),
        forms=dict(src.forms),
        methods=tuple(
            s.method
            for s in (module.breakpoint.body if module.breakpoint else ())
            if isinstance(s, ir.Solve)
        ),
        tables=tuple(n for n, c in module.callables.items() if c.has_table),
        ranges=phases,
        unrecordable=refused,
        functions=ns,
    )
    if module.point_process:
        from ._point_class import make_point_class

        return make_point_class(module, fields, ns, derivs, info, _use_ions)
    namespace = {
        "__annotations__": {f: Float[ArrayLike, "*n"] for f in fields},
        **{f: module.parameters[p] for f, p in fields.items()},
        "__doc__": _docstring(module, fields, src),
        "__module__": "stable_ode.nmodl.generated",
        "kinetics": kinetics,
        "current": current,
        "init_states": init_states,
        "range_variables": range_variables,
        "nmodl": info,
    }
    if ions:
        namespace["ions"] = ions
        namespace["__annotations__"]["ions"] = ClassVar[tuple]
    if held:
        namespace["concentration_states"] = dict(held)
        namespace["__annotations__"]["concentration_states"] = ClassVar[dict]
    name = py(module.suffix) if module.suffix.isidentifier() else "mechanism"
    return type(name, (AbstractMechanism,), namespace)


def copied_state(module: ir.Module, blocks, name: str) -> str | None:
    """The state that the last top-level statement of the solved `KINETIC`
    `blocks` assigning `name` copies (`cai = ca`: cdp5.mod's pool, whose ion
    concentration is its state `ca`; NEURON evaluates the block once more
    after its last iteration, so the copy is of the new state), or `None`."""
    found = None
    for blk in blocks:
        if blk.kind != "KINETIC":
            # a DERIVATIVE block's assignments run before NEURON's update of
            # its states, so its copy lags a step: not reproduced
            continue
        for s in blk.body:
            if isinstance(s, ir.Assign) and s.target == name:
                v = s.value
                ok = isinstance(v, ir.Name) and v.id in module.states
                found = v.id if ok else None
    return found


def _use_ions(module: ir.Module):
    if not module.ions:
        return ()
    try:
        from ..mechanisms import UseIon
    except ImportError:
        return tuple(module.ions)  # before the ion model: kept for reference
    return tuple(
        UseIon(ion.name, read=ion.read, write=ion.write, valence=ion.valence)
        for ion in module.ions
    )


def _docstring(module: ir.Module, fields, src: Source) -> str:
    params = ", ".join(f"`{f}` = {module.parameters[p]}" for f, p in fields.items())
    return (
        f"NMODL mechanism `{module.suffix}` imported from `{module.path}`"
        + (f" ({module.title})" if module.title else "")
        + f".\n\n**Fields** (the file's PARAMETERs and defaults, NEURON's units): "
        f"{params or 'none'}.\n\nStates: {', '.join(module.states) or 'none'} "
        f"({', '.join(f'{k}: {v}' for k, v in src.forms.items())}). "
        "See `cls.nmodl.source` for the generated code."
    )
