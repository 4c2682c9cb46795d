"""Building blocks shared by the staggered solvers: the exact gate update, the
linearly implicit voltage step, and the error estimates.

Voltage step (θ-method on the linearised membrane equation, gates frozen), with
`Δ = v1 - v0`, area `a` (cm²), capacitance `c` (µF/cm²), ionic current `i` and
its derivative `G = di/dv` at `v0`, stimulus density `s` and Laplacian `L` (S):

    (a·c/(1000·dt) + θ·a·G)·Δ − θ·L·Δ = a·(−i + s) + L·v0

θ = 1 is NEURON's backward Euler (`secondorder=0`); θ = 1/2 is Crank–Nicolson.
The matrix is tridiagonal for cables (or a tree for branched cells) and is solved
through lineax.
"""

import jax
import jax.numpy as jnp
import lineax as lx
from jaxtyping import Array, Float

from .._model import State
from .._term import MembraneTerm


def gate_step(kinetics, gates, dt):
    """Exact update of every gate over `dt` for frozen kinetics.

    `x1 = x0 + (inf - x0)·(1 - exp(-rate·dt))`, computed with `expm1`: finite for
    every finite rate ≥ 0 and dt > 0 (no `inf·0`, no `0/0`).
    """
    return tuple(
        {k: x[k] + (kin[k].inf - x[k]) * -jnp.expm1(-kin[k].rate * dt) for k in x}
        for kin, x in zip(kinetics, gates)
    )


def gate_rhs(kinetics, gates):
    """`rate·(inf - x)` for every gate, 1/ms."""
    return tuple(
        {k: kin[k].rate * (kin[k].inf - x[k]) for k in x}
        for kin, x in zip(kinetics, gates)
    )


def voltage_step(
    term: MembraneTerm,
    v0: Float[Array, " ncomp"],
    gates,
    dt,
    s: Float[Array, " ncomp"],
    theta,
    linear_solver: lx.AbstractLinearSolver | None,
) -> tuple[Float[Array, " ncomp"], Float[Array, " ncomp"]]:
    """One linearly implicit θ-step of the voltage equation with frozen `gates`.

    **Returns:** `(v1, dvdt0)` with `dvdt0` the right-hand side at `v0` (mV/ms,
    reused by error estimates). The structured solvers cannot fail on a finite
    system; a singular or non-finite one shows as a non-finite `v1`, which the
    step controller rejects — so the lineax result is not threaded through
    (measured: 6 fewer kernels per step). `linear_solver=None`
    uses the coupling's own (`coupling.default_solver()`).
    """
    m = term.model
    i0, g = term.linearised_current(v0, gates)
    c = m.coupling
    if linear_solver is None:
        linear_solver = c.default_solver()
    rhs = m.area * (s - i0) + c.current(v0)  # mA
    d = m.area * (m.capacitance / (1000 * dt) + theta * g)  # S
    sol = lx.linear_solve(
        c.operator(d, theta),
        c.to_operator_order(rhs),
        linear_solver,
        throw=False,
    )
    delta = c.from_operator_order(sol.value)
    dvdt0 = 1000 * rhs / (m.area * m.capacitance)
    return v0 + delta, dvdt0


def dvdt(term: MembraneTerm, v, gates, s) -> Float[Array, " ncomp"]:
    """Voltage right-hand side (mV/ms) with a given stimulus density `s`."""
    m = term.model
    return (1000 / m.capacitance) * (s - m.ionic_current(v, gates) + m.axial_density(v))


def state_rhs(term: MembraneTerm, y: State, s) -> State:
    """Full right-hand side at `y` with stimulus density `s` held fixed."""
    kin = term.model.gate_kinetics(y.v)
    return State(v=dvdt(term, y.v, y.gates, s), gates=gate_rhs(kin, y.gates))


def trapezoid_defect(f0: State, f1: State, dt) -> State:
    """`dt/2·(f1 - f0)`: the first-order methods' local error estimate, O(dt²)."""
    return jax.tree_util.tree_map(lambda a, b: 0.5 * dt * (b - a), f0, f1)


def near_edge(edges: Float[Array, " nedge"], t0, t1) -> Float[Array, ""]:
    """Whether a stimulus edge lies in `[t0, t1)` (to 1% of the step)."""
    if edges.shape[0] == 0:
        return jnp.asarray(False)
    tol = 0.01 * (t1 - t0)
    return jnp.any((edges >= t0 - tol) & (edges < t1 - tol))
