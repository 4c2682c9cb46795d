from collections.abc import Callable
from typing import ClassVar

import diffrax as dfx
import jax
import jax.numpy as jnp
import lineax as lx

from .._state import State
from .._term import membrane_term, MembraneTerm
from ._staggered import (
    advance,
    edge_inside,
    filtered_error,
    hermite_midpoint,
    near_edge,
    simpson_residual,
    state_rhs,
    tr_bdf2_voltage_step,
    voltage_step,
)
from ._voltage import AbstractVoltageSolver


_tmap = jax.tree_util.tree_map


class CrankNicolson(AbstractVoltageSolver):
    r"""Second-order Strang splitting: states | Crank–Nicolson voltage | states.

    Each step from `t0` to `t1 = t0 + dt`:

    1. states: each group's kinetics update its states over `dt/2` for frozen
       `v0` (gates: exact exponential update);
    2. voltage: linearly implicit trapezoidal step (θ = 1/2) of the cable equation
       with the states of step 1 frozen, the ionic current linearised exactly
       (`jax.jvp`), stimuli sampled at `t0 + dt/2`; one lineax structured solve;
    3. states: as in step 1, over `dt/2` for frozen `v1`.

    In steps 1 and 3 every group is advanced from the states of the half
    step's start, the concentrations that mechanisms read included: not in
    NEURON's order of state updates, which `BackwardEuler` follows to agree
    with NEURON's `secondorder = 0` to rounding.

    Each sub-flow is integrated exactly (gates) or to second order (voltage), so
    the symmetric composition is order 2.

    **No ringing, second order through discontinuities.** Crank–Nicolson is
    A- but not L-stable: stiff cable modes excited by a current step oscillate
    (NEURON's `secondorder=2` does). Here every step that starts at the initial
    time, at a stimulus edge, or right after a jump the step controller
    reports, and the step after a step that held a stimulus edge, is two
    TR-BDF2 voltage steps of `dt/2` instead (L-stable and second order,
    `_staggered.tr_bdf2_voltage_step`), and a fixed step with a stimulus edge
    inside it is split at the edge (one TR-BDF2 step to it, two over the rest),
    so the error through an edge, on or off the grid, is O(dt²) without
    ringing. Smooth steps are the θ = 1/2 step. With `tr_bdf2=False` those
    start-up steps are one backward Euler (θ = 1) step each, Rannacher's
    start-up: O(1) first-order steps per discontinuity, so the global order
    stays 2, but the error at an edge is backward Euler's.

    **Voltage clamps.** A clamp's level changes are edges as a stimulus's
    (`MembraneModel.edges`), and a step split at one samples the clamp's
    level in each part (`MembraneModel.sample_inputs`). While a clamp is on
    (`MembraneModel.stiff`) every step is a start-up step: its series
    resistance makes the clamped compartment's mode stiff (`τ = rs·C`, about
    a microsecond), which θ = 1/2 steps leave ringing at an amplification
    near −1 per step, while TR-BDF2 damps it and stays second order.

    **Error estimate:** the step's residual against Simpson's rule on the cubic
    Hermite interpolant, `y1 - y0 - dt/6·(f0 + 4·f_mid + f1)` — the true local
    error to leading order, splitting and linearisation errors included (the
    trapezoidal rule's own error `dt³/12·y‴` alone misses the splitting error,
    which dominates the gates') — filtered on stiff components (one more voltage
    solve; gates divided by `1 + z/2 + z²/12`, `z = rate·dt`, other states by
    their kinetics' filter; see `_staggered.filtered_error`). O(dt³); O(dt²) on
    backward Euler start-up steps, whose true error it also estimates. Cost per step:
    one right-hand side and one structured solve on top of the step.
    **Interpolation:** cubic Hermite from `f0`, `f1`.

    Reference for TR-BDF2: Bank et al., *IEEE Trans. Electron Devices* 32 (1985);
    Hosea & Shampine, *Appl. Numer. Math.* 20 (1996).

    **Adaptive use:** `diffrax.PIDController(rtol=tol, atol=tol)` with `tol`
    from about 1e-4 to 1e-6; see `docs/solvers.md`, "Fixed or adaptive steps".
    """

    term_structure: ClassVar = MembraneTerm
    interpolation_cls: ClassVar[
        Callable[..., dfx.ThirdOrderHermitePolynomialInterpolation]
    ] = dfx.ThirdOrderHermitePolynomialInterpolation.from_k

    linear_solver: lx.AbstractLinearSolver | None = None
    startup: bool = True
    tr_bdf2: bool = True

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
        edges = model.edges()
        startup = self.startup & (
            made_jump
            | near_edge(edges, t0, t1)
            | (jnp.abs(t0 - solver_state) < 0.01 * dt)
        )
        kin0 = model.kinetics(y0.v, y0.groups)
        half = advance(kin0, y0, 0.5 * dt, y0.v)
        startup = startup | (self.startup & model.stiff(half.groups))
        if self.tr_bdf2 and self.startup:
            v1, g = self._edge_voltage(term, half, t0, t1, s, startup, edges)
        else:
            theta = jnp.where(startup, 1.0, 0.5).astype(y0.v.dtype)
            v1, _, g = voltage_step(term, half, dt, s, theta, self.linear_solver)
        kin1 = model.kinetics(v1, half.groups)
        y1 = advance(kin1, half, 0.5 * dt, v1)

        f0 = state_rhs(term, y0, s, kin=kin0)
        f1 = state_rhs(term, y1, s, kin=kin1)
        y_mid = hermite_midpoint(y0, y1, f0, f1, dt)
        kin_mid = model.kinetics(y_mid.v, y_mid.groups)
        fm = state_rhs(term, y_mid, s, kin=kin_mid)
        residual = simpson_residual(y0, y1, f0, fm, f1, dt)
        y_error = filtered_error(
            term,
            residual,
            dt,
            g,
            kin_mid,
            y_mid,
            quadratic=True,
            linear_solver=self.linear_solver,
        )
        k = _tmap(lambda a, b: jnp.stack([dt * a, dt * b]), f0, f1)
        dense_info = dict(y0=y0, y1=y1, k=k)
        return y1, y_error, dense_info, solver_state, dfx.RESULTS.successful

    def _edge_voltage(self, term, half: State, t0, t1, s, startup, edges):
        """The voltage step with `tr_bdf2`. Returns `(v1, g)`, `g = di/dv` at
        `v0` (S/cm²).

        - a smooth step: θ = 1/2 (as without `tr_bdf2`, bit for bit);
        - a start-up step (an edge, a jump or the initial time at `t0`), and the
          step after one that held an edge: two TR-BDF2 steps of `dt/2`;
        - a step with an edge `t_e` inside it: one TR-BDF2 step over
          `[t0, t_e]`, then two over the halves of `[t_e, t1]`.

        Each TR-BDF2 step samples the stimulus at its own middle.
        """
        model = term.model
        dt = t1 - t0
        ls = self.linear_solver
        inside, te = edge_inside(edges, t0, t1)
        # The split branch is only taken with an edge inside; otherwise its
        # (discarded, under `vmap`) first part is kept well posed.
        te = jnp.where(inside, te, 0.5 * (t0 + t1))

        def tr_bdf2(v, a, b):
            m = 0.5 * (a + b)
            y = State(v=v, groups=model.sample_inputs(m, half.groups))
            s_ab = model.stimulus_density(m)
            return tr_bdf2_voltage_step(term, y, b - a, s_ab, ls)

        def halves(v, a, b):
            m = 0.5 * (a + b)
            vm, g = tr_bdf2(v, a, m)
            return tr_bdf2(vm, m, b)[0], g

        def smooth():
            v1, _, g = voltage_step(term, half, dt, s, 0.5, ls)
            return v1, g

        def whole():
            return halves(half.v, t0, t1)

        def split():
            ve, g = tr_bdf2(half.v, t0, te)
            return halves(ve, te, t1)[0], g

        after = near_edge(edges, t0 - dt, t0)
        index = jnp.where(inside, 2, jnp.where(startup | after, 1, 0))
        return jax.lax.switch(index, (smooth, whole, split))

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


CrankNicolson.__init__.__doc__ = """**Arguments:**

- `linear_solver`: the lineax solver for the voltage system (default `None`: the
    coupling's own, `lx.Tridiagonal()` (LAPACK `gtsv`) for cables, or `Thomas()`
    for a short one under a raised small-loop threshold, `TreeSolver()` for
    branched cells; the reverse mode of each is one more solve).
- `startup`: take L-stable (θ = 1) voltage steps at the initial time and at
    stimulus edges (default `True`). `False` gives plain Crank–Nicolson, which rings
    after current steps as NEURON's `secondorder=2` does; for comparisons only.
- `tr_bdf2`: with `startup`, take those steps, and the step after one that held
    a stimulus edge, as two TR-BDF2 steps of `dt/2` (L-stable and second order)
    instead of one backward Euler step, and split a fixed step that holds a
    stimulus edge inside it at the edge, so that the scheme stays second order
    through discontinuities (default `True`). `False` gives Rannacher's
    backward Euler start-up steps, with the stimulus sampled at the step's
    middle: first order at each edge, the scheme of versions before TR-BDF2
    became the default.
"""
