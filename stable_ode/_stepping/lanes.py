"""Small float64 models stepped with their compartments padded to whole CPU
vectors.

XLA:CPU compiles an elementwise kernel into a loop over the array's last
dimension, which LLVM vectorises only if the loop has at least 16 iterations or
a whole number of vectors (LLVM's "tiny trip count" rule). A float64 vector of
the CPU holds 4 numbers, so the rate functions of a model of 5–15
compartments (a soma and a short dendrite), or of a `vmap` batch of such
models, run one number at a time when the count is not a multiple of 4 — an
`exp` then costs several times more per compartment than in a model of 12 or
16 compartments. (float32 kernels of these sizes are vectorised with masked
tails; there padding costs more than it saves, measured.)

`padded_compartments(model)` says when to pad and to how many compartments;
`pad(model, y0, n)` appends copies of the last compartment, decoupled from
the rest (no axial conductance to it, no stimulus on it), to every
per-compartment array and to every mechanism group that covers all
compartments; `unpad_state` drops them again. The real
compartments' equations and their arithmetic are unchanged: the voltage
system gains rows of its own (zero off-diagonals), and every rate and gate
update is elementwise. Fixed steps only: an adaptive step size depends on an
error norm over all states, which the copies would change.

Models with synapses or point processes are not padded. Their currents are
scattered into the compartments, and at the padded size XLA fused those
scatters differently, so that other multiply-adds became fused multiply-adds
(FMA): a three-cell network with a synapse moved by 1e-14 mV, and by nothing
on a CPU without FMA (measured). For models of mechanisms alone the padded
runs compared equal bit for bit (`tests/solvers/test_lanes.py`, and the
imported-channel benchmark cell).
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from .._group import MechanismGroup
from .._model import MembraneModel, State
from .._state import group_states
from ..morphology._coupling import NoCoupling, TridiagonalCoupling


LANES = 4  # float64s in one AVX2 register (32 bytes)
TINY_TRIP_COUNT = 16  # LLVM's: shorter loops are vectorised only without a tail


def padded_compartments(model: MembraneModel) -> int | None:
    """The number of compartments to step `model` with on this backend, or
    `None` to step it as it is: on the CPU, a float64 model of 2–15
    compartments whose count is not a multiple of 4, coupled as a cable
    (`TridiagonalCoupling`) or not at all (`NoCoupling`), with mechanisms
    only (no synapses or point processes), is padded to the next multiple
    of 4."""
    if jax.default_backend() != "cpu" or model.dtype != jnp.float64:
        return None
    n = model.n_compartments
    if not 2 <= n < TINY_TRIP_COUNT or n % LANES == 0:
        return None
    if not isinstance(model.coupling, (TridiagonalCoupling, NoCoupling)):
        return None
    if model.synapses or model.point_processes:
        return None  # see the module docstring
    return -(-n // LANES) * LANES


def _extend(x, n: int, to: int):
    """`x` with its leading axis of length `n` extended to `to` by copies of
    its last entry; `x` unchanged if it is not such an array."""
    if not (eqx.is_array(x) and x.ndim >= 1 and x.shape[0] == n):
        return x
    x = jnp.asarray(x)
    return jnp.concatenate([x, jnp.repeat(x[-1:], to - n, axis=0)])


def _padded(group, n: int) -> bool:
    """Whether `group` is padded with the compartments: a mechanism group
    over all `n` of them, in order."""
    return isinstance(group, MechanismGroup) and group.span == (0, n)


def _coupling(coupling, n: int, to: int):
    if isinstance(coupling, NoCoupling):
        return NoCoupling(to, coupling.dtype)
    extra = jnp.zeros((to - n,), coupling.g.dtype)
    order = inverse = None
    if coupling.order is not None:
        tail = jnp.arange(n, to, dtype=coupling.order.dtype)
        order = jnp.concatenate([coupling.order, tail])
        inverse = jnp.concatenate([coupling.inverse_order, tail])
    return TridiagonalCoupling(jnp.concatenate([coupling.g, extra]), order, inverse)


def _group(group: MechanismGroup, n: int, to: int) -> MechanismGroup:
    return MechanismGroup(
        mechanism=jax.tree.map(lambda x: _extend(x, n, to), group.mechanism),
        index=jnp.arange(to, dtype=jnp.asarray(group.index).dtype),
        sections=group.sections,
        span=(0, to),
    )


def pad_state(model: MembraneModel, y: State, to: int) -> State:
    """`y`, a state of `model`, with its voltages and the states of the padded
    groups extended to `to` compartments."""
    n = model.n_compartments
    groups = group_states(
        jax.tree.map(lambda x: _extend(x, n, to), states) if _padded(g, n) else states
        for g, states in zip(model.groups, y.groups)
    )
    return State(v=_extend(y.v, n, to), groups=groups)


def unpad_state(model: MembraneModel, y: State, axis: int = 0) -> State:
    """`y`, a state of `model` padded by `pad` (its compartments along `axis`),
    without the copies."""
    n = model.n_compartments

    def cut(x):
        return jax.lax.slice_in_dim(x, 0, n, axis=axis)

    groups = group_states(
        jax.tree.map(cut, states) if _padded(g, n) else states
        for g, states in zip(model.groups, y.groups)
    )
    return State(v=cut(y.v), groups=groups)


def pad(model: MembraneModel, y0: State, to: int) -> tuple[MembraneModel, State]:
    """`model` and its state `y0` with `to - n` copies of the last of its `n`
    compartments appended (see the module docstring)."""
    n = model.n_compartments

    def ext(x):
        return _extend(x, n, to)

    ions = tuple(
        dataclasses.replace(
            ion,
            inside=ext(ion.inside),
            outside=ext(ion.outside),
            reversal=ext(ion.reversal),
            nernst=ext(ion.nernst),
        )
        for ion in model.ions
    )
    padded = dataclasses.replace(
        model,
        area=ext(model.area),
        diameter=ext(model.diameter),
        length=ext(model.length),
        capacitance=ext(model.capacitance),
        v_init=ext(model.v_init),
        coupling=_coupling(model.coupling, n, to),
        mechanisms=tuple(
            _group(g, n, to) if _padded(g, n) else g for g in model.mechanisms
        ),
        ions=ions,
    )
    return padded, pad_state(model, y0, to)


def unpad_saved(recorder, saved, n: int):
    """The saved samples of a padded run as the unpadded run saves them: only
    a recorder of every compartment (`Recorder.index is None`) saves the
    copies, in its last columns."""
    if recorder.index is not None:
        return saved
    return saved[..., :n]


def unpad_outcome(model: MembraneModel, recorder, out):
    """A stepping `Outcome` of the padded `model` as the unpadded run gives it:
    its saved samples, final state and solution without the copies."""
    n = model.n_compartments
    sol = out.solution
    if sol is not None:
        saved, final = sol.ys
        ys = (unpad_saved(recorder, saved, n), unpad_state(model, final, axis=1))
        sol = eqx.tree_at(lambda s: s.ys, sol, ys)
    return dataclasses.replace(
        out,
        saved=unpad_saved(recorder, out.saved, n),
        final_state=unpad_state(model, out.final_state),
        solution=sol,
    )


def on_lanes(solve, model: MembraneModel, y0: State, *args):
    """`solve(model, y0, *args)` (a `FixedSteps` solve whose last argument is
    the `Recorder`, returning an `Outcome` or `(Outcome, ok)`) run on `model`
    padded where `padded_compartments` says so, its outcome without the
    copies."""
    to = padded_compartments(model)
    if to is None:
        return solve(model, y0, *args)
    out = solve(*pad(model, y0, to), *args)
    recorder = args[-1]
    if isinstance(out, tuple):
        return (unpad_outcome(model, recorder, out[0]), *out[1:])
    return unpad_outcome(model, recorder, out)
