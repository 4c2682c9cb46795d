"""The state of a membrane model: the voltage and one dict of states per group."""

import equinox as eqx
from jaxtyping import Array, Float


class State(eqx.Module):
    """The state of a membrane model.

    **Fields:**

    - `v`: membrane potential per compartment, mV, shape `(ncomp,)`.
    - `groups`: one dict per state group, in `MembraneModel.groups` order (the
      mechanism groups, then the synapse groups), mapping each state's name to
      its values, shape `(n_group,)` (gates dimensionless in [0, 1]; other
      states in their mechanism's unit, e.g. mM).

    `groups` is `{}` rather than `()` when there are no groups (see
    `group_states`).
    """

    v: Float[Array, " ncomp"]
    groups: tuple[dict[str, Float[Array, " n"]], ...] | dict = eqx.field(
        default_factory=dict
    )


def group_states(per_group) -> tuple | dict:
    """Per-group states as a tuple, or `{}` when there are no groups.

    (An empty tuple is a singleton; equinox's buffer rewriting inside diffrax's
    implicit Runge–Kutta solvers cannot tell its occurrences apart and fails with
    "Only arrays can be treated as buffers". A fresh `{}` has no such problem.)
    """
    out = tuple(per_group)
    return out if out else {}
