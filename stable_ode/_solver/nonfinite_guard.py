import diffrax as dfx
import equinox as eqx
import jax
import jax.numpy as jnp

from .._controller._bookkeeping import tree_all_finite


def _mask(bad, tree):
    return jax.tree_util.tree_map(
        lambda t: None if t is None else jnp.where(bad, jnp.zeros_like(t), t),
        tree,
        is_leaf=lambda x: x is None,
    )


def _raw_step(solver, terms, t0, t1, y0, args, solver_state, made_jump):
    return solver.step(terms, t0, t1, y0, args, solver_state, made_jump)


_step = eqx.filter_custom_jvp(_raw_step)


@_step.def_jvp
def _step_jvp(primals, tangents):
    # Decide on the primal values, then differentiate with both the tangents in and
    # the tangents out selected away: no `0·NaN` forms, in forward or reverse mode.
    out = _raw_step(*primals)
    bad = jax.lax.stop_gradient(~tree_all_finite(out[0], out[1]))
    out, t_out = eqx.filter_jvp(_raw_step, primals, _mask(bad, tangents))
    return out, _mask(bad, t_out)


class NonFiniteGuard(dfx.AbstractAdaptiveSolver):
    r"""Wraps a solver so that differentiating through a step that came out
    non-finite gives zero, not NaN.

    A step-size controller rejects a step whose state or error estimate is NaN or
    ±inf, and diffrax discards it with a `where`; but the cotangent of a discarded
    value is a zero that still flows back through the step, where `0·NaN = NaN`
    (and `0·inf = NaN`) poisons every gradient. This wrapper applies the "double
    where" in tangent space: for a step whose `y1` or `y_error` is not finite, the
    tangents into the step and out of it are both zeroed by a select, so no
    `0·NaN` product ever forms; finite steps are differentiated exactly as by the
    wrapped solver. Without autodiff it is the wrapped solver; under autodiff the
    primal step is evaluated twice (once to decide, once inside the JVP).

    Everything else (`order`, `error_order`, `init`, `func`, the interpolation and
    term structure) is the wrapped solver's. `stable_ode.simulate` wraps every
    explicit or structured solver in it; diffrax's implicit solvers (`Kvaerno5`, ...)
    are left unwrapped, as diffrax must see them to fill their root-finder
    tolerances.
    """

    solver: dfx.AbstractSolver

    @property
    def term_structure(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.solver.interpolation_cls

    def order(self, terms):
        return self.solver.order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        return _step(self.solver, terms, t0, t1, y0, args, solver_state, made_jump)

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)


NonFiniteGuard.__init__.__doc__ = """**Arguments:**

- `solver`: the solver to wrap (any diffrax solver, or one of this package's).
"""
