"""Recording a mechanism's state or `RANGE` variable as NEURON names it: `"m_hh"`
is the state `m` of the mechanism whose suffix is `hh`, in the recording site's
compartment; `"gna_hh"` its conductance (`AbstractMechanism.range_variables`),
evaluated from the sample's voltage and states; `"ca_cadifpmp[3]"` element 3
of an imported array (the state `"ca[3]"`)."""

import re

import jax
import numpy as np

from .mechanisms import HH, Passive


def neuron_suffix(mechanism) -> str:
    """The mechanism's NEURON suffix: its NMODL file's `SUFFIX`, `hh` and `pas` for
    the built-in `HH` and `Passive`, else its class name."""
    info = getattr(type(mechanism), "nmodl", None)
    if info is not None:
        return info.suffix
    return {HH: "hh", Passive: "pas"}.get(type(mechanism), type(mechanism).__name__)


def _split(variable: str) -> tuple[str, str]:
    """`"ca_cadifpmp[3]"` → `("ca_cadifpmp", "[3]")`; `"m_hh"` → `("m_hh", "")`."""
    m = re.fullmatch(r"(.*?)(\[\d+\])?", variable)
    return m.group(1), m.group(2) or ""


def is_state_variable(variable: str, groups) -> bool:
    """Whether `variable` has the form `STATE_SUFFIX` (or `STATE_SUFFIX[k]`) for
    one of the mechanism `groups`."""
    base = _split(variable)[0]
    return any(base.endswith("_" + neuron_suffix(g.mechanism)) for g in groups)


def range_names(model, g: int, states) -> list[str]:
    """The names of the `RANGE` variables of mechanism group `g` of `model` (at
    group states `states`, shapes suffice)."""

    def values(x):
        group = model.mechanisms[g]
        ions = model.ion_views() if group.uses_ions else None
        return group.range_variables(model, model.v_init, x, ions)

    return list(jax.eval_shape(values, states[g]))


def state_entries(model, recordings, index_of) -> list[tuple[str, int, str, int]]:
    """`(name, group, variable, entry)` of each recording of a mechanism state or
    `RANGE` variable, the form the model's point-process recordings take
    (`Layout.point_recordings`): `group` the mechanism group's position,
    `entry` the compartment's position in it. A `ValueError` naming the
    recording if the mechanism is not inserted in the site's compartment or has
    no such state or `RANGE` variable."""
    states = jax.eval_shape(model.init_state).groups
    out = []
    for rec in recordings:
        var, c = rec.variable, index_of(rec.site)
        base, index = _split(var)
        found = None
        for g, group in enumerate(model.mechanisms):
            suffix = neuron_suffix(group.mechanism)
            if not base.endswith("_" + suffix):
                continue
            state = base[: -len(suffix) - 1] + index
            here = np.nonzero(np.asarray(group.index) == c)[0]
            if not here.size:
                continue
            if state not in states[g] and state not in range_names(model, g, states):
                info = getattr(type(group.mechanism), "nmodl", None)
                why = {} if info is None else info.unrecordable
                if state in why:
                    raise ValueError(
                        f"recording {rec.name!r}: cannot record {state!r} of "
                        f"mechanism {suffix!r} ({info.path}): {why[state]}"
                    )
                raise ValueError(
                    f"recording {rec.name!r}: mechanism {suffix!r} has no state "
                    f"or RANGE variable {state!r} (its states: {sorted(states[g])}; "
                    f"its RANGE variables: {range_names(model, g, states)}; "
                    f"record them as '<name>_{suffix}')"
                )
            found = (rec.name, g, state, int(here[0]))
            break
        if found is None:
            raise ValueError(
                f"recording {rec.name!r}: no mechanism named by {var!r} (a state "
                "or RANGE variable and a suffix, as 'm_hh' or 'gna_hh') is "
                "inserted at "
                f"{model.layout.describe(c)}"
            )
        out.append(found)
    return out
