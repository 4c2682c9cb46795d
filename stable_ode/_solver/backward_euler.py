from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx
import lineax as lx

from .._state import State
from .._term import membrane_term, MembraneTerm
from ._ordered import advance_in_order
from ._staggered import (
    filtered_error,
    state_rhs,
    trapezoid_residual,
    voltage_step,
)
from ._voltage import AbstractVoltageSolver


class BackwardEuler(AbstractVoltageSolver):
    r"""NEURON's default staggered backward Euler (`secondorder=0`).

    Each step from `t0` to `t1 = t0 + dt`:

    1. voltage: one linearly implicit backward Euler step of the cable equation
       with the gates frozen at `t0`, the ionic current linearised exactly at `v0`
       (`jax.jvp`; what an imported mechanism's `SOLVE`d block computes held,
       as NEURON does, see `Environment.v_solve`), stimuli sampled at
       `t0 + dt/2`; one structured linear solve
       through lineax (`lx.TridiagonalLinearOperator` + `lx.Tridiagonal()` for
       cables);
    2. states: each group's kinetics at the new `v1` (and the states of `t0`)
       update its states over `dt` (gates: exact exponential update), in
       NEURON's order (its `nrn_state` calls): the mechanisms that write a
       concentration (a calcium pool's `cai`) first, the last registered
       (`mechanism_type`) first, then the others; a mechanism reading a
       concentration sees the value its writer computed in this step when
       the writer comes before it (always, for a mechanism that writes no
       concentration itself). The ion currents a mechanism reads (a pool's
       `ica`) and the reversal potentials are those of the step's start
       (`v0`, the states of `t0`), as NEURON computes them before the voltage
       solve (`_solver/_ordered.py`). Without such a reader the order changes
       nothing.

    Unconditionally stable for the cable equation (L-stable voltage step); order 1.

    **Error estimate:** the step's residual against the trapezoidal rule,
    `y1 - y0 - dt/2·(f(y0) + f(y1))`, O(dt²): the true local error to leading
    order, staggering error included (for a plain implicit Euler step it is
    `dt/2·(f(y1) - f(y0))`, `diffrax.ImplicitEuler`'s estimate, which misses the
    staggering error of this step), filtered
    on stiff components (one more voltage solve; gates divided by `1 + z/2`,
    `z = rate·dt`, other states by their kinetics' filter; see
    `_staggered.filtered_error`). Cost per step: one right-hand
    side and one structured solve on top of the step. **Interpolation:** linear.

    Reference: Hines & Carnevale, *The NEURON Book* (2006), ch. 4.
    """

    term_structure: ClassVar = MembraneTerm
    interpolation_cls: ClassVar[Callable[..., dfx.LocalLinearInterpolation]] = (
        dfx.LocalLinearInterpolation
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
        v1, dv0, g = voltage_step(term, y0, dt, s, 1.0, self.linear_solver, hold=True)
        kin1, y1 = advance_in_order(model, v1, y0, dt)
        f0 = state_rhs(term, y0, s, dv=dv0)
        f1 = state_rhs(term, y1, s, kin=kin1)
        y_error = filtered_error(
            term,
            trapezoid_residual(y0, y1, f0, f1, dt),
            dt,
            g,
            kin1,
            y1,
            quadratic=False,
            linear_solver=self.linear_solver,
        )
        dense_info = dict(y0=y0, y1=y1)
        return y1, y_error, dense_info, solver_state, dfx.RESULTS.successful

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


BackwardEuler.__init__.__doc__ = """**Arguments:**

- `linear_solver`: the lineax solver for the voltage system (default `None`: the
    coupling's own, `lx.Tridiagonal()` (LAPACK `gtsv`) for cables, or `Thomas()`
    for a short one under a raised small-loop threshold, `TreeSolver()` for
    branched cells; the reverse mode of each is one more solve).
"""
