"""The one place that makes a solver safe against non-finite steps: `NonFiniteGuard`
(zero, not NaN, derivatives through a rejected step) and `guard`, which puts it
around the solver a `simulate` call runs with."""

import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp

from .._compat import use_stepsize_tol
from .._misc import tree_all_finite
from .._solver._wrapped import _none, AbstractWrappedSolver


def _mask(bad, tree):
    return jax.tree_util.tree_map(
        lambda t: None if t is None else jnp.where(bad, jnp.zeros_like(t), t),
        tree,
        is_leaf=_none,
    )


# Jitted, so that a solve traces its step once (per static signature), not once
# per use: diffrax's two shape checks and its loop body, the guard's
# linearisation below, and a checkpointed loop's recomputation and backward pass
# each call the step, and under `jit` each call would otherwise trace the whole
# solver again in Python (eleven traces of the step for one checkpointed
# gradient). The call is inlined when XLA compiles the
# surrounding program: the same computation, bit for bit.
@eqx.filter_jit
def _raw_step(solver, terms, t0, t1, y0, args, solver_state, made_jump, check_error):
    del check_error
    return solver.step(terms, t0, t1, y0, args, solver_state, made_jump)


_step = eqx.filter_custom_jvp(_raw_step)


@_step.def_jvp
def _step_jvp(primals, tangents):
    # Decide on the primal values, then differentiate with both the tangents in and
    # the tangents out selected away: no `0·NaN` forms, in forward or reverse mode.
    # One linearisation gives the primal step and the linear map, so the step is
    # evaluated once.
    perturbed = jax.tree_util.tree_map(lambda t: t is not None, tangents, is_leaf=_none)
    dynamic, static = eqx.partition(primals, perturbed, is_leaf=_none)

    def step(d):
        out = _raw_step(*eqx.combine(d, static))
        return eqx.partition(out, eqx.is_inexact_array)

    out_dynamic, linear, out_static = jax.linearize(step, dynamic, has_aux=True)
    out = eqx.combine(out_dynamic, out_static)
    check_error = primals[-1]
    checked = (out[0], out[1]) if check_error else (out[0],)
    bad = jax.lax.stop_gradient(~tree_all_finite(*checked))
    t_out = linear(_mask(bad, eqx.filter(tangents, perturbed, is_leaf=_none)))
    return out, _mask(bad, t_out)


class NonFiniteGuard(AbstractWrappedSolver):
    r"""Wraps a solver so that differentiating through a step that came out
    non-finite gives zero, not NaN.

    A step-size controller rejects a step whose state or error estimate is NaN or
    ±inf, and diffrax discards it with a `where`; but the cotangent of a discarded
    value is a zero that still flows back through the step, where `0·NaN = NaN`
    (and `0·inf = NaN`) poisons every gradient. This wrapper applies the "double
    where" in tangent space: for a step whose `y1` (or, with `check_error`, its
    `y_error`) is not finite, the tangents into the step and out of it are both
    zeroed by a select, so no `0·NaN` product ever forms; finite steps are
    differentiated exactly as by the wrapped solver. Without autodiff it is the
    wrapped solver; under autodiff the step is linearised once (`jax.linearize`)
    and the decision is taken on its primal output. (The structured linear solves
    inside this package's solvers are linearised at a well-posed stand-in when
    their input is not finite, `stable_ode._misc.finite_linear_solve`, so that
    linearising a non-finite step does not raise in lineax.)

    Everything else (`order`, `error_order`, `init`, `func`, the interpolation and
    term structure) is the wrapped solver's. `stable_ode.simulate` puts it around
    every solver (see `stable_ode.guard`).
    """

    solver: dfx.AbstractSolver
    check_error: bool = eqx.field(static=True, default=True)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        return _step(
            self.solver,
            terms,
            t0,
            t1,
            y0,
            args,
            solver_state,
            made_jump,
            self.check_error,
        )


NonFiniteGuard.__init__.__doc__ = """**Arguments:**

- `solver`: the solver to wrap (any diffrax solver, or one of this package's).
- `check_error`: whether a non-finite error estimate makes a step "non-finite"
    (default `True`, as `stable_ode.NonFiniteRejecting` rejects such steps). Set it
    as the step-size controller does: with `SafeStepTo(check_error=False)` (fixed
    steps; `simulate`'s default) a step is kept whatever its error estimate, so its
    derivative must be kept too, and not looking at the estimate lets XLA skip
    computing it in the backward pass.
"""


def missing_tolerances(solver: dfx.AbstractSolver) -> tuple[str, ...]:
    """The root-finder tolerances (`"rtol"`, `"atol"`, `"norm"`) that an implicit
    diffrax `solver` leaves to the step-size controller (none for other solvers)."""
    if isinstance(solver, NonFiniteGuard):
        solver = solver.solver
    if not isinstance(solver, dfx.AbstractImplicitSolver):
        return ()
    return tuple(
        a
        for a in ("rtol", "atol", "norm")
        if getattr(solver.root_finder, a) is use_stepsize_tol
    )


def with_controller_tols(solver, controller):
    """`solver` with the root-finder tolerances it leaves to the step-size
    controller filled in from `controller`, as `diffrax.diffeqsolve` does; needed
    before wrapping it in `NonFiniteGuard`, which diffrax no longer recognises as
    implicit."""
    names = missing_tolerances(solver)
    if not names:
        return solver
    return eqx.tree_at(
        lambda s: tuple(getattr(s.root_finder, a) for a in names),
        solver,
        tuple(getattr(controller, a) for a in names),
    )


def guard(
    solver: dfx.AbstractSolver,
    controller: dfx.AbstractStepSizeController,
    *,
    check_error: bool,
) -> dfx.AbstractSolver:
    """The solver a solve with `controller` runs: `solver` inside a
    `NonFiniteGuard`.

    **Arguments:**

    - `solver`: any diffrax solver, or a `NonFiniteGuard` (its settings are kept,
        except that `check_error=False` is applied).
    - `controller`: the step-size controller the solve runs with. An implicit
        diffrax solver first gets the root-finder tolerances it leaves to an
        adaptive controller; with fixed steps it is left unwrapped (diffrax must
        see it, and fixed steps have no tolerances to give).
    - `check_error`: whether the controller rejects a non-finite error estimate
        (`False` for `SafeStepTo(check_error=False)`): the guard then looks at the
        new state only.

    **Returns:** the guarded solver.
    """
    adaptive = isinstance(controller, dfx.AbstractAdaptiveStepSizeController)
    if isinstance(solver, dfx.AbstractImplicitSolver):
        if not adaptive:
            return solver
        return NonFiniteGuard(with_controller_tols(solver, controller))
    if not isinstance(solver, NonFiniteGuard):
        solver = NonFiniteGuard(solver)
    if not check_error and solver.check_error:
        solver = NonFiniteGuard(solver.solver, check_error=False)
    return solver
