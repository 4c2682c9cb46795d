from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx
import lineax as lx
from diffrax._local_interpolation import LocalLinearInterpolation

from .._model import State
from .._term import membrane_term, MembraneTerm
from ._staggered import kinetics, relax, state_rhs, trapezoid_defect, voltage_step


class BackwardEuler(dfx.AbstractAdaptiveSolver):
    r"""NEURON's default staggered backward Euler (`secondorder=0`).

    Each step from `t0` to `t1 = t0 + dt`:

    1. voltage: one linearly implicit backward Euler step of the cable equation
       with the gates frozen at `t0`, the ionic current linearised exactly at `v0`
       (`jax.jvp`), stimuli sampled at `t0 + dt/2`; one structured linear solve
       through lineax (`lx.TridiagonalLinearOperator` + `lx.Tridiagonal()` for
       cables);
    2. gates: exact exponential update over `dt` with the kinetics at the new `v1`.

    Unconditionally stable for the cable equation (L-stable voltage step); order 1.

    **Error estimate:** `dt/2·(f(y1) - f(y0))`, the difference to the trapezoidal
    rule (as `diffrax.ImplicitEuler`), O(dt²) — one extra evaluation of the
    right-hand side, no extra linear solve. **Interpolation:** linear.

    Reference: Hines & Carnevale, *The NEURON Book* (2006), ch. 4.
    """

    term_structure: ClassVar = MembraneTerm
    interpolation_cls: ClassVar[Callable[..., LocalLinearInterpolation]] = (
        LocalLinearInterpolation
    )

    linear_solver: lx.AbstractLinearSolver | None = None

    def order(self, terms):
        del terms
        return 1

    def error_order(self, terms):
        del terms
        return 2

    def init(self, terms, t0, t1, y0, args):
        del terms, t0, t1, y0, args
        return None

    def step(self, terms, t0, t1, y0: State, args, solver_state, made_jump):
        del args, made_jump
        term = membrane_term(terms)
        model = term.model
        dt = t1 - t0
        s = model.stimulus_density(0.5 * (t0 + t1))
        v1, dv0 = voltage_step(term, y0, dt, s, 1.0, self.linear_solver)
        y1 = relax(kinetics(model, v1), y0, dt, v1)
        f0 = state_rhs(term, y0, s, dv=dv0)
        y_error = trapezoid_defect(f0, state_rhs(term, y1, s), dt)
        dense_info = dict(y0=y0, y1=y1)
        return y1, y_error, dense_info, solver_state, dfx.RESULTS.successful

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


BackwardEuler.__init__.__doc__ = """**Arguments:**

- `linear_solver`: the lineax solver for the voltage system (default `None`: the
    coupling's own, `lx.Tridiagonal()` (LAPACK `gtsv`) for cables, `TreeSolver()`
    for branched cells; the reverse mode of either is one more solve).
"""
