"""Building blocks shared by the staggered solvers: the state update through
each group's kinetics objects, the linearly implicit voltage step, and the error
estimates.

Voltage step (θ-method on the linearised membrane equation, states frozen), with
`Δ = v1 - v0`, area `a` (cm²), capacitance `c` (µF/cm²), ionic current `i` and
its derivative `G = di/dv` at `v0`, stimulus density `s` and Laplacian `L` (S):

    (a·c/(1000·dt) + θ·a·G)·Δ − θ·L·Δ = a·(−i + s) + L·v0

θ = 1 is NEURON's backward Euler (`secondorder=0`); θ = 1/2 is Crank–Nicolson.
The matrix is tridiagonal for cables (or a tree for branched cells) and is solved
through lineax.

Error estimates (`filtered_error`): the residual of a step against a quadrature of
the full right-hand side `f`, `r = y1 − y0 − ∫f` (trapezoid for first-order steps,
Simpson on the cubic Hermite interpolant for second-order ones), is the step's
true local error `e` to leading order — splitting and linearisation errors
included — multiplied by `(I − dt·J/2 + …)` for the Jacobian `J`. On stiff
components that factor is large, so `r` is filtered (Shampine's remedy for
implicit methods): the voltage through one more solve with the θ = 1/2 voltage
matrix, each other state by its kinetics' own `filter` (for a gate, a division
by `1 + z/2 (+ z²/12)` with `z = rate·dt`).

Every group of states (`MembraneModel.groups`: mechanisms, synapses) is handled
the same way: its kinetics objects (`AbstractKinetics`), evaluated at the stage's
voltage and states, update, differentiate and filter its states.
"""

import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float

from .._misc import finite_linear_solve
from .._state import group_states, State
from .._term import kinetics_rhs, MembraneTerm
from ..mechanisms._scheme import map_kinetics


_tmap = jax.tree_util.tree_map


def _per_state(fn, kinetics, *trees):
    """`fn(kinetics[g][k], trees[0][g][k], ...)` for every state `k` of every
    group `g`, as per-group dicts."""
    return group_states(
        map_kinetics(fn, kin, *ts) for kin, *ts in zip(kinetics, *trees)
    )


def advance(kin, y: State, dt, v) -> State:
    """Every group's states of `y` after `dt` with kinetics `kin` frozen
    (`AbstractKinetics.update`), with the voltage set to `v`.

    For a gate (`Relaxation`) the update is exact:
    `x1 = x0 + (inf - x0)·(1 - exp(-rate·dt))`, finite for every finite rate ≥ 0
    and dt > 0 (no `inf·0`, no `0/0`), and a convex combination of `x0` and `inf`.
    """
    return State(v=v, groups=_per_state(lambda k, x: k.update(x, dt), kin, y.groups))


def _linearised(term: MembraneTerm, y: State, s, linear_solver, hold=False):
    """What both voltage steps start from: the model, its coupling, `v0`, the
    ionic current's `g = di/dv` at `v0` (S/cm²; with `hold`, NEURON's, see
    `MembraneTerm.linearised_current`), the right-hand side
    `area·(s - i(v0)) + coupling current` (mA) and the linear solver (the
    coupling's own for `None`)."""
    m = term.model
    v0 = y.v
    i0, g = term.linearised_current(v0, y.groups, hold)
    c = m.coupling
    if linear_solver is None:
        linear_solver = c.default_solver()
    rhs = m.area * (s - i0) + c.current(v0)  # mA
    return m, c, v0, g, rhs, linear_solver


def voltage_step(
    term: MembraneTerm,
    y: State,
    dt,
    s: Float[Array, " ncomp"],
    theta,
    linear_solver: lx.AbstractLinearSolver | None,
    hold: bool = False,
) -> tuple[Float[Array, " ncomp"], Float[Array, " ncomp"], Float[Array, " ncomp"]]:
    """One linearly implicit θ-step of the voltage equation from `y.v`, with the
    group states of `y` frozen.

    **Returns:** `(v1, dvdt0, g)` with `dvdt0` the right-hand side at `v0` (mV/ms,
    reused by error estimates) and `g = di/dv` at `v0` (S/cm², reused by
    `filtered_error`). The structured solvers cannot fail on a finite
    system; a singular or non-finite one shows as a non-finite `v1`, which the
    step controller rejects — so the lineax result is not threaded through.
    `linear_solver=None`
    uses the coupling's own (`coupling.default_solver()`). `hold`: `di/dv` as
    NEURON's (`MembraneTerm.linearised_current`).
    """
    m, c, v0, g, rhs, linear_solver = _linearised(term, y, s, linear_solver, hold)
    d = m.area * (m.capacitance / (1000 * dt) + theta * g)  # S
    sol = finite_linear_solve(c, theta, d, c.to_operator_order(rhs), linear_solver)
    delta = c.from_operator_order(sol)
    dvdt0 = 1000 * rhs / (m.area * m.capacitance)
    return v0 + delta, dvdt0, g


TR_BDF2_GAMMA = 2 - 2**0.5
"""TR-BDF2's stage fraction γ = 2 − √2: both stages then share one matrix, and the
method is L-stable and second order (Bank et al. 1985; Hosea & Shampine 1996)."""


def tr_bdf2_voltage_step(
    term: MembraneTerm,
    y: State,
    dt,
    s: Float[Array, " ncomp"],
    linear_solver: lx.AbstractLinearSolver | None,
) -> tuple[Float[Array, " ncomp"], Float[Array, " ncomp"]]:
    """One linearly implicit TR-BDF2 step of the voltage equation from `y.v` over
    `dt` ms, the group states of `y` frozen and the ionic current linearised at
    `v0` (as `voltage_step`): a trapezoidal stage to `t0 + γ·dt`, then BDF2 through
    `v0`, `v_γ` to `t0 + dt` (γ = `TR_BDF2_GAMMA`). Both stages solve with the
    matrix of `voltage_step` for `γ·dt` and θ = 1/2:

        stage 1:  M·Δγ = r0
        stage 2:  M·Δ  = r0/2 + a·c/(1000·γ·dt)·Δγ/(γ·(2 − γ))

    with `r0` the right-hand side of `voltage_step` (mA). L-stable (stiff modes
    are damped to zero, no ringing) and second order: the step for the first
    step after a discontinuity.

    **Returns:** `(v1, g)`, `g = di/dv` at `v0` (S/cm²).
    """
    m, c, v0, g, rhs, linear_solver = _linearised(term, y, s, linear_solver)
    gamma = TR_BDF2_GAMMA
    scale = m.area * m.capacitance / (1000 * gamma * dt)  # S
    d = scale + 0.5 * m.area * g  # S
    d1 = c.from_operator_order(
        finite_linear_solve(c, 0.5, d, c.to_operator_order(rhs), linear_solver)
    )
    rhs2 = 0.5 * rhs + scale * d1 / (gamma * (2 - gamma))
    delta = finite_linear_solve(c, 0.5, d, c.to_operator_order(rhs2), linear_solver)
    return v0 + c.from_operator_order(delta), g


def state_rhs(term: MembraneTerm, y: State, s, kin=None, dv=None) -> State:
    """Full right-hand side at `y` with stimulus density `s` held fixed; `kin`
    (kinetics, `MembraneModel.kinetics`) and `dv` (voltage right-hand side) if
    already known. Each state's `rhs` is taken from `kin` at its own value in
    `y`: where `kin` was evaluated at other states (those of the start of the
    stage), that is the kinetics' frozen-stage right-hand side."""
    m = term.model
    if kin is None:
        kin = m.kinetics(y.v, y.groups)
    if dv is None:
        dv = (1000 / m.capacitance) * (
            s - m.ionic_current(y.v, y.groups) + m.axial_density(y.v)
        )
    return State(v=dv, groups=kinetics_rhs(kin, y.groups))


def trapezoid_defect(f0: State, f1: State, dt) -> State:
    """`dt/2·(f1 - f0)`: the first-order methods' local error estimate, O(dt²)."""
    return jax.tree_util.tree_map(lambda a, b: 0.5 * dt * (b - a), f0, f1)


def trapezoid_residual(y0: State, y1: State, f0: State, f1: State, dt) -> State:
    """`y1 - y0 - dt/2·(f0 + f1)`: a first-order step's local error to leading
    order, O(dt²) (unfiltered)."""
    return _tmap(lambda a, b, fa, fb: (b - a) - 0.5 * dt * (fa + fb), y0, y1, f0, f1)


def hermite_midpoint(y0: State, y1: State, f0: State, f1: State, dt) -> State:
    """The cubic Hermite interpolant of `(y0, f0)`, `(y1, f1)` at `t0 + dt/2`."""
    return _tmap(
        lambda a, b, fa, fb: 0.5 * (a + b) + dt / 8 * (fa - fb), y0, y1, f0, f1
    )


def simpson_residual(y0: State, y1: State, f0: State, fm: State, f1: State, dt):
    """`y1 - y0 - dt/6·(f0 + 4·fm + f1)` with `fm` the right-hand side at the
    Hermite midpoint: any step's local error to leading order, up to O(dt⁴)
    (unfiltered). For the exact trapezoidal rule it equals
    `dt/3·(f0 - 2·fm + f1) ≈ dt³/12·y‴`; for the split, linearised step it also
    holds the splitting error, which dominates the gates' error."""
    return _tmap(
        lambda a, b, fa, fm_, fb: (b - a) - dt / 6 * (fa + 4 * fm_ + fb),
        y0,
        y1,
        f0,
        fm,
        f1,
    )


def filtered_error(
    term: MembraneTerm,
    residual: State,
    dt,
    g: Float[Array, " ncomp"],
    kin,
    y: State,
    *,
    quadratic: bool,
    linear_solver: lx.AbstractLinearSolver | None,
) -> State:
    """Local error estimate from a step's `residual` (`trapezoid_residual` or
    `simpson_residual`), filtered on stiff components.

    Voltage: `(I − dt/2·J)⁻¹·r_v`, with `J` the voltage Jacobian for frozen states
    (ionic conductance `g` (S/cm²) and axial coupling): one more solve with the
    θ = 1/2 voltage matrix. Every other state through its kinetics in `kin`,
    `AbstractKinetics.filter` at its value in `y` (where the kinetics were
    evaluated): for a gate `r / (1 + z/2)` (trapezoid residual) or
    `r / (1 + z/2 + z²/12)` (`quadratic`, Simpson residual at the Hermite
    midpoint), `z = rate·dt`: the amplification of a stiff component's error in
    its residual. Non-stiff components are left as
    they are; stiff ones, whose errors the step damps, are not over-reported (an
    unfiltered residual grows like `z·e` there and would force steps far below
    what accuracy needs).
    """
    m = term.model
    c = m.coupling
    if linear_solver is None:
        linear_solver = c.default_solver()
    scale = m.area * m.capacitance / (1000 * dt)  # S
    sol = finite_linear_solve(
        c,
        0.5,
        scale + 0.5 * m.area * g,
        c.to_operator_order(scale * residual.v),
        linear_solver,
    )
    groups = _per_state(
        lambda k, r, x: k.filter(r, dt, x, quadratic=quadratic),
        kin,
        residual.groups,
        y.groups,
    )
    return State(v=c.from_operator_order(sol), groups=groups)


def edge_inside(edges: Float[Array, " nedge"], t0, t1):
    """`(inside, t_edge)`: whether a stimulus edge lies strictly inside the step,
    more than 1% of it from either end, and the first such edge (`t1` if none).
    Edges within 1% of an end count as at that end (`near_edge`)."""
    if edges.shape[0] == 0:
        return jnp.asarray(False), jnp.asarray(t1)
    tol = 0.01 * (t1 - t0)
    hit = (edges >= t0 + tol) & (edges < t1 - tol)
    return jnp.any(hit), jnp.min(jnp.where(hit, edges, t1))


def near_edge(edges: Float[Array, " nedge"], t0, t1) -> Float[Array, ""]:
    """Whether a stimulus edge lies in `[t0, t1)` (to 1% of the step)."""
    if edges.shape[0] == 0:
        return jnp.asarray(False)
    tol = 0.01 * (t1 - t0)
    return jnp.any((edges >= t0 - tol) & (edges < t1 - tol))
