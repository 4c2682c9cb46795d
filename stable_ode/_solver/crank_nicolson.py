from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx
import jax
import jax.numpy as jnp
import lineax as lx
from diffrax._local_interpolation import ThirdOrderHermitePolynomialInterpolation

from .._model import State
from .._term import membrane_term, MembraneTerm
from ._staggered import kinetics, near_edge, relax, state_rhs, voltage_step


_tmap = jax.tree_util.tree_map


class CrankNicolson(dfx.AbstractAdaptiveSolver):
    r"""Second-order Strang splitting: gates | Crank–Nicolson voltage | gates.

    Each step from `t0` to `t1 = t0 + dt`:

    1. gates: exact exponential update over `dt/2` for frozen `v0`;
    2. voltage: linearly implicit trapezoidal step (θ = 1/2) of the cable equation
       with the gates of step 1 frozen, the ionic current linearised exactly
       (`jax.jvp`), stimuli sampled at `t0 + dt/2`; one lineax structured solve;
    3. gates: exact exponential update over `dt/2` for frozen `v1`.

    Each sub-flow is integrated exactly (gates) or to second order (voltage), so
    the symmetric composition is order 2.

    **No ringing.** Crank–Nicolson is A- but not L-stable: stiff cable modes
    excited by a current step oscillate (NEURON's `secondorder=2` does). Here every
    step that starts at the initial time, at a stimulus edge, or right after a
    jump the step controller reports, takes θ = 1 (backward Euler, L-stable) for
    its voltage step instead — Rannacher's start-up. That is O(1) first-order steps
    per discontinuity, so the global order stays 2.

    **Error estimate:** the trapezoidal rule's local error `dt³/12·y'''`,
    estimated as `dt/3·(f0 - 2·f_mid + f1)` with `f_mid` at the cubic Hermite
    midpoint; O(dt³), no extra linear solve (the θ = 1 steps report
    `dt/2·(f1 - f0)` instead). **Interpolation:** cubic Hermite from `f0`, `f1`.
    """

    term_structure: ClassVar = MembraneTerm
    interpolation_cls: ClassVar[
        Callable[..., ThirdOrderHermitePolynomialInterpolation]
    ] = ThirdOrderHermitePolynomialInterpolation.from_k

    linear_solver: lx.AbstractLinearSolver | None = None
    startup: bool = True

    def order(self, terms):
        del terms
        return 2

    def error_order(self, terms):
        del terms
        return 3

    def init(self, terms, t0, t1, y0, args):
        del terms, t1, y0, args
        return jnp.asarray(t0)  # start time: the first step is a start-up step

    def step(self, terms, t0, t1, y0: State, args, solver_state, made_jump):
        del args
        term = membrane_term(terms)
        model = term.model
        dt = t1 - t0
        s = model.stimulus_density(0.5 * (t0 + t1))
        startup = self.startup & (
            made_jump
            | near_edge(model.stimuli.edges(), t0, t1)
            | (jnp.abs(t0 - solver_state) < 0.01 * dt)
        )
        theta = jnp.where(startup, 1.0, 0.5).astype(y0.v.dtype)
        kin0 = kinetics(model, y0.v)
        half = relax(kin0, y0, 0.5 * dt, y0.v)
        v1, _ = voltage_step(term, half, dt, s, theta, self.linear_solver)
        kin1 = kinetics(model, v1)
        y1 = relax(kin1, half, 0.5 * dt, v1)

        f0 = state_rhs(term, y0, s, kin=kin0)
        f1 = state_rhs(term, y1, s, kin=kin1)
        y_mid = _tmap(
            lambda a, b, fa, fb: 0.5 * (a + b) + dt / 8 * (fa - fb), y0, y1, f0, f1
        )
        fm = state_rhs(term, y_mid, s)
        curvature = _tmap(lambda a, m, b: dt / 3 * (a - 2 * m + b), f0, fm, f1)
        defect = _tmap(lambda a, b: 0.5 * dt * (b - a), f0, f1)
        y_error = _tmap(lambda c, d: jnp.where(startup, d, c), curvature, defect)
        k = _tmap(lambda a, b: jnp.stack([dt * a, dt * b]), f0, f1)
        dense_info = dict(y0=y0, y1=y1, k=k)
        return y1, y_error, dense_info, solver_state, dfx.RESULTS.successful

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


CrankNicolson.__init__.__doc__ = """**Arguments:**

- `linear_solver`: the lineax solver for the voltage system (default `None`: the
    coupling's own, `lx.Tridiagonal()` (LAPACK `gtsv`) for cables, `TreeSolver()`
    for branched cells; the reverse mode of either is one more solve).
- `startup`: take L-stable (θ = 1) voltage steps at the initial time and at
    stimulus edges (default `True`). `False` gives plain Crank–Nicolson, which rings
    after current steps as NEURON's `secondorder=2` does; for comparisons only.
"""
