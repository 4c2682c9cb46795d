"""Recording a mechanism's state as NEURON names it: `"m_hh"` is the state `m` of
the mechanism whose suffix is `hh`, in the recording site's compartment."""

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


def is_state_variable(variable: str, groups) -> bool:
    """Whether `variable` has the form `STATE_SUFFIX` for one of the mechanism
    `groups`."""
    return any(variable.endswith("_" + neuron_suffix(g.mechanism)) for g in groups)


def state_entries(model, recordings, index_of) -> list[tuple[str, int, str, int]]:
    """`(name, group, state, entry)` of each recording of a mechanism state, the
    form the model's point-process recordings take (`Layout.point_recordings`):
    `group` the mechanism group's position, `entry` the compartment's position in
    it. A `ValueError` naming the recording if the mechanism is not inserted in
    the site's compartment or has no such state."""
    states = jax.eval_shape(model.init_state).groups
    out = []
    for rec in recordings:
        var, c = rec.variable, index_of(rec.site)
        found = None
        for g, group in enumerate(model.mechanisms):
            suffix = neuron_suffix(group.mechanism)
            if not var.endswith("_" + suffix):
                continue
            state = var[: -len(suffix) - 1]
            here = np.nonzero(np.asarray(group.index) == c)[0]
            if not here.size:
                continue
            if state not in states[g]:
                raise ValueError(
                    f"recording {rec.name!r}: mechanism {suffix!r} has no state "
                    f"{state!r} (its states: {sorted(states[g])}; "
                    f"record them as '<state>_{suffix}')"
                )
            found = (rec.name, g, state, int(here[0]))
            break
        if found is None:
            raise ValueError(
                f"recording {rec.name!r}: no mechanism named by {var!r} (a state "
                "and a suffix, as 'm_hh') is inserted at "
                f"{model.layout.describe(c)}"
            )
        out.append(found)
    return out
