"""A solver wrapper whose reverse-mode primal is the plain step, so that a
checkpointed backward sweep recomputes the forward pass bit for bit."""

import diffrax as dfx
import equinox as eqx
import jax

from ._wrapped import _none, AbstractWrappedSolver


def _plain_step(arrays, static):
    solver, terms, t0, t1, y0, args, solver_state, made_jump = eqx.combine(
        arrays, static
    )
    return solver.step(terms, t0, t1, y0, args, solver_state, made_jump)


_step = eqx.filter_custom_vjp(_plain_step)


@_step.def_fwd
def _step_fwd(perturbed, arrays, static):
    del perturbed
    # The primal is the plain step, compiled as in the forward loop; the backward
    # rule needs nothing but the inputs.
    return _plain_step(arrays, static), None


@_step.def_bwd
def _step_bwd(residuals, grad_out, perturbed, arrays, static):
    del residuals
    # Differentiate only the outputs that have a cotangent (`None` for the others)
    # with respect to the inputs that are perturbed: the rest, e.g. an error
    # estimate that nothing downstream differentiates, or the cotangent of a model
    # parameter nobody asked for, is then dead code in the backward sweep, as it is
    # without this wrapper.
    wanted = jax.tree_util.tree_map(lambda g: g is not None, grad_out, is_leaf=_none)
    diff, nondiff = eqx.partition(arrays, perturbed)

    def step(d):
        out = _plain_step(eqx.combine(d, nondiff), static)
        return eqx.filter(out, wanted, is_leaf=_none)

    # A weakly typed integer among the inputs (diffrax's `WrapTerm.direction`)
    # reaches this rule without its weak type, and diffrax's strict dtype promotion
    # would refuse `int64 · float64`. Standard promotion takes an integer to the
    # other operand's float type (int64 · float32 is float32), the type the weak
    # integer gave: the same computation.
    with jax.numpy_dtype_promotion("standard"):
        _, vjp = eqx.filter_vjp(step, diff)
        (grad,) = vjp(eqx.filter(grad_out, wanted, is_leaf=_none))
    return grad


class ExactRecompute(AbstractWrappedSolver):
    """Wraps a solver so that, in reverse mode, a step's primal value is computed by
    the plain step and its derivative separately.

    Why: a checkpointed backward sweep (`diffrax.RecursiveCheckpointAdjoint`,
    `jax.checkpoint`) recomputes the forward states from a checkpoint. Without this
    wrapper it recomputes them as the primal half of `jax.vjp` of the step, a
    differently compiled computation: XLA:CPU contracts multiply-adds into FMA
    instructions differently there, and float32 states drift from the forward
    pass by a few ulps. With it, the recomputation runs the
    same step as the forward loop (a `custom_vjp` whose forward rule is the step
    itself and whose residuals are the step's inputs), and every recomputed state
    is bit-identical to the forward pass (tested, with FMA). The backward rule
    linearises the step again from those inputs: one more evaluation of the step
    per step of the backward sweep.

    `stable_ode.Checkpointing` puts it around the solver whenever it recomputes
    (fewer checkpoints than steps, or nested `levels`); there is nothing to gain
    from using it directly. It blocks forward mode (`jax.jvp`), as every
    `custom_vjp` does.
    """

    solver: dfx.AbstractSolver

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        inputs = (self.solver, terms, t0, t1, y0, args, solver_state, made_jump)
        arrays, static = eqx.partition(inputs, eqx.is_array)
        return _step(arrays, static)
