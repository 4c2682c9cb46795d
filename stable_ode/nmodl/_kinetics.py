"""Kinetics for `SOLVE ... METHOD derivimplicit` and `METHOD sparse`: NEURON's
implicit Euler.

NEURON (`secondorder = 0`) advances a `derivimplicit` block by implicit Euler on
its states, `x1 = x0 + dt·f(x1)`, at the new voltage. These kinetics take that
step, so that our `BackwardEuler` (which updates states at the new voltage, as
NEURON does) reproduces NEURON's numbers, not just its limit as dt → 0:

- `ImplicitRelaxation`: an equation affine in its state, `dx/dt = rate·(inf -
  x)`; the step `x1 = (x0 + dt·rate·inf)/(1 + dt·rate)` (exact for implicit
  Euler, L-stable, a convex combination of `x0` and `inf`).
- `ImplicitRateEquation`: any `dx/dt = f(x)`, by Newton iterations on `x1 - x0
  - dt·f(x1) = 0` from `x0` (a fixed number, so the step is jit- and
  grad-friendly; quadratic convergence makes the last ones changes of rounding).

Both are first order in dt (as NEURON's). With `load_nmodl(...,
neuron_schemes=False)` `derivimplicit` states get the exact `Relaxation` or the
exponential `RateEquation` instead.

`KINETIC` blocks (`METHOD sparse`) become a `MarkovScheme` (closed schemes),
a `LinearScheme` (`dx/dt = A·x + b`) or a `NonlinearScheme` (any other),
built by `markov_scheme`, `linear_scheme` and `nonlinear_scheme` from the
generated code (`_kinetic_source.py`).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float

from .._linear.blocks import RowBlocks
from .._math import safe_div
from ..mechanisms import AbstractCoupledKinetics, AbstractKinetics, MarkovScheme
from ..mechanisms._scheme import _solve_batched as solve_batched
from ._codegen import py


NEWTON_ITERATIONS = 8


def _divide(r, z, quadratic: bool):
    return r / (1 + 0.5 * z + (z * z / 12 if quadratic else 0))


class ImplicitRelaxation(AbstractKinetics):
    """`dx/dt = rate·(inf - x)`, stepped by implicit Euler (NEURON's
    `derivimplicit`). **Fields:** `inf` (the state's unit), `rate` (1/ms, ≥ 0)."""

    inf: Float[Array, "*shape"]
    rate: Float[Array, "*shape"]

    def rhs(self, x):
        return self.rate * (self.inf - x)

    def update(self, x, dt):
        z = self.rate * dt
        return (x + z * self.inf) / (1 + z)

    def filter(self, r, dt, x, *, quadratic: bool):
        del x
        return _divide(r, self.rate * dt, quadratic)


class ImplicitRateEquation(AbstractKinetics):
    """`dx/dt = f(x)` (elementwise), stepped by implicit Euler through
    `NEWTON_ITERATIONS` Newton iterations from `x` (NEURON's `derivimplicit`).
    **Fields:** `f` as for `RateEquation`."""

    f: Callable[[Float[Array, " n"]], Float[Array, " n"]]

    def _linearise(self, x):
        return jax.jvp(self.f, (x,), (jnp.ones_like(x),))

    def rhs(self, x):
        return self.f(x)

    def update(self, x, dt):
        y = x
        for _ in range(NEWTON_ITERATIONS):
            fy, jac = self._linearise(y)
            residual = y - x - dt * fy
            y = y - safe_div(residual, 1 - dt * jac)
        return y

    def filter(self, r, dt, x, *, quadratic: bool):
        _, jac = self._linearise(x)
        return _divide(r, jnp.maximum(-jac * dt, 0), quadratic)


# -- KINETIC blocks (METHOD sparse) ----------------------------------------------


def _filtered(a, rs, dt, quadratic: bool) -> tuple[Array, ...]:
    """`(I - dt/2·A (+ dt²/12·A²))⁻¹·r` per compartment (`a`: `(n, k, k)`)."""
    eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
    m = eye - 0.5 * dt * a
    if quadratic:
        m = m + (dt * dt / 12) * (a @ a)
    r = solve_batched(m, jnp.stack(rs, axis=-1))
    return tuple(r[..., i] for i in range(a.shape[-1]))


def _jacobian(fn, x):
    """`(fn(x), J)` for `fn` mapping `(n, k)` to `(n, k)` with compartments
    independent: `J[c, i, j] = ∂fn(x)[c, i]/∂x[c, j]`, from `k` forward-mode
    derivatives (batched)."""
    k = x.shape[-1]
    y, lin = jax.linearize(fn, x)
    basis = jnp.broadcast_to(jnp.eye(k, dtype=x.dtype)[:, None, :], (k,) + x.shape)
    return y, jnp.transpose(jax.vmap(lin)(basis), (1, 2, 0))


class LinearScheme(AbstractCoupledKinetics):
    r"""A kinetic scheme linear in its `k` states with sources: `dx/dt = A·x + b`
    (a `KINETIC` block with `~ A << (flux)` terms, species that are not states,
    or a `CONSERVE` whose total is computed).

    **Fields:** `states` (static), `generator` `A` of shape `(n, k, k)` (1/ms;
    `A[c, i, j]`: the rate at which state `j` feeds state `i`), `source` `b`
    of shape `(n, k)` (state units/ms), and `conserve`: `None` or `(weights,
    row, total)`: NEURON's `CONSERVE w·x = total` (`total` per compartment),
    which replaces the equation of state `row` (the last state it names).

    **Update:** NEURON's `sparse` for a linear scheme: implicit Euler, `(I -
    dt·A)·x1 = x0 + dt·b` with row `row` replaced by `w·x1 = total`, one small
    dense LU solve per compartment (lineax, batched). L-stable. Populations are
    not clipped (a negative source can drive one below 0, as in NEURON).

    **Error filter:** as `MarkovScheme`'s, `(I - dt/2·A (+ dt²/12·A²))⁻¹·r`.
    """

    states: tuple[str, ...] = eqx.field(static=True)
    generator: Float[Array, "n k k"]
    source: Float[Array, "n k"]
    conserve: tuple | None = None

    def _replace(self, m, y):
        if self.conserve is None:
            return m, y
        weights, row, total = self.conserve
        w = jnp.broadcast_to(jnp.asarray(weights, m.dtype), m.shape[:-1])
        return m.at[..., row, :].set(w), y.at[..., row].set(total)

    def rhs(self, xs):
        x = jnp.stack(xs, axis=-1)
        dx = jnp.einsum("cij,cj->ci", self.generator, x) + self.source
        return tuple(dx[..., i] for i in range(len(self.states)))

    def update(self, xs, dt):
        x0 = jnp.stack(xs, axis=-1)
        a = self.generator
        eye = jnp.broadcast_to(jnp.eye(len(self.states), dtype=a.dtype), a.shape)
        m, y = self._replace(eye - dt * a, x0 + dt * self.source)
        x1 = solve_batched(m, y)
        return tuple(x1[..., i] for i in range(len(self.states)))

    def filter(self, rs, dt, xs, *, quadratic: bool):
        del xs
        return _filtered(self.generator, rs, dt, quadratic)

    def steady_state(self, xs) -> tuple[Array, ...]:
        """`A·x + b = 0` (with the `CONSERVE` row): `SOLVE ... STEADYSTATE
        sparse`."""
        del xs
        m, y = self._replace(self.generator, -self.source)
        x = solve_batched(m, y)
        return tuple(x[..., i] for i in range(len(self.states)))


STEADY_DT = 1e9
"""The step (ms) of `SOLVE ... STEADYSTATE sparse` for a nonlinear scheme:
NEURON's `_ss_sparse`, implicit Euler steps of 1e9 ms."""
NEURON_CONVERGE = 1e-6
"""NEURON's `sparse` stops iterating once its updates sum to at most this
(`CONVERGE` of its `errcodes.hpp`; in the states' units)."""
STEADY_TRIES = 7
"""`_ss_sparse`'s single iterations before its converged one (`NIT`)."""
STEADY_ITERATIONS = 21
"""The iterations of a steady state's converged step: NEURON's most (its
`sparse` gives up after 21, `MAXSTEPS`), here the first converged ones
for a start far from the steady state."""
STEADY_DTS_FLOAT32 = (1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6)
"""The steps (ms) of the steady state in float32, which cannot hold NEURON's
1e9 ms step: in `I - dt·A` the identity, which keeps the totals no
`CONSERVE` fixes, falls below float32's rounding of `dt·A` (the matrix is
singular there). Each is iterated by Newton's method from where the last
ended."""


class NonlinearScheme(AbstractCoupledKinetics):
    r"""A `KINETIC` block in general form, `dx/dt = F(x)`: mass action with
    any stoichiometry (`~ ca + B <-> CaB`), rates that depend on the block's
    states, `COMPARTMENT` volumes (`volume·dx/dt` = the fluxes) and
    `f_flux`/`b_flux`; the generated `deriv_B_flux` evaluates the block.

    **Fields:** `states` (static); `flux`, the generated `deriv_B_flux(m,
    frozen)`, returning `(dxdt, conserve, rates)` at the states in `m`;
    `m0`, the block's variables (a `Vars` record) at which it is evaluated;
    `row` (static): `None`, or the state whose equation NEURON's `CONSERVE`
    replaces (the last it names), `conserve` being `(weights, total)` with
    `Σ weights·x = total` in amounts (each weight the coefficient times the
    state's volume); `neuron` (static): NEURON's iteration, or an exact one;
    `linear` (static): whether every reaction has at most one state on each
    side, with coefficient 1 (nocmodl's linear scheme, whatever its rates and
    `<<` fluxes depend on).

    **Update:** implicit Euler, `x1 = x0 + dt·F(x1)` (the `CONSERVE` row in
    place of one equation), by Newton iterations from `x0`, each one small
    dense LU solve per compartment (its `k × k` Jacobian from `k`
    forward-mode derivatives, batched), states that an iteration makes
    negative set to 0 (as NEURON). L-stable; first order in dt (as NEURON's).

    - `neuron=True` (`load_nmodl`'s default): NEURON's `sparse`: the Jacobian
      of the mass action with every rate and `<<` flux held at its value
      (nocmodl's matrix), and the iterations stop once their updates sum to
      at most `NEURON_CONVERGE` (each compartment on its own; NEURON
      allows 21, here `NEWTON_ITERATIONS`). A step whose first update is
      below that is a single linearised step, with state-dependent rates
      and fluxes taken at `x0`, as NEURON's. A `linear` scheme takes that
      single iteration always, without setting negative states to 0
      (nocmodl passes `linflag` to `sparse` for it): its state-dependent
      rates and `<<` fluxes are explicit, as in NEURON.
    - `neuron=False`: Newton's method (the exact Jacobian) to rounding, at
      most `NEWTON_ITERATIONS` iterations, through optimistix
      (`newton_solve`).

    **Error filter:** as `LinearScheme`'s, with `A` the Jacobian of `F` at
    the step's states.
    """

    states: tuple[str, ...] = eqx.field(static=True)
    flux: Callable
    m0: object
    row: int | None = eqx.field(static=True)
    neuron: bool = eqx.field(static=True, default=True)
    linear: bool = eqx.field(static=True, default=False)

    def _f(self, x, frozen=None):
        """`(F(x), conserve, rates)` for `x` of shape `(n, k)`."""
        m = self.m0.copy()
        for i, name in enumerate(self.states):
            setattr(m, py(name), x[..., i])
        dx, conserve, rates = self.flux(m, frozen)
        return jnp.stack(dx, axis=-1), conserve, rates

    def _residual(self, x, x0, dt, frozen=None):
        """`x - x0 - dt·F(x)` with the `CONSERVE` row."""
        fx, conserve, _ = self._f(x, frozen)
        r = x - x0 - dt * fx
        if self.row is None:
            return r
        weights, total = conserve
        w = jnp.stack(weights, axis=-1)
        return r.at[..., self.row].set(jnp.sum(w * x, axis=-1) - total)

    def _newton_update(self, x, x0, dt, exact: bool):
        """The Newton update at `x` of the step from `x0` (`(n, k)`)."""
        frozen = None if exact else self._f(x)[2]
        r, jac = _jacobian(lambda y: self._residual(y, x0, dt, frozen), x)
        return -solve_batched(jac, r)

    def _implicit_euler(self, x0, dt, iterations=NEWTON_ITERATIONS, exact=None):
        """`x1` of the implicit Euler step of `dt` from `x0` (`exact`: by
        Newton's method, `newton_solve`; default: unless `neuron`)."""
        exact = not self.neuron if exact is None else exact
        if exact:
            return newton_solve(lambda x: self._residual(x, x0, dt), x0, iterations)

        def iteration(carry, _):
            x, done = carry
            delta = self._newton_update(x, x0, dt, exact)
            new = jnp.maximum(x + delta, 0)
            x = jnp.where(done[..., None], x, new)
            done = done | (jnp.sum(jnp.abs(delta), axis=-1) <= NEURON_CONVERGE)
            return (x, done), None

        done = jnp.zeros(x0.shape[:-1], bool)
        (x, _), _ = jax.lax.scan(iteration, (x0, done), None, iterations)
        return x

    def rhs(self, xs):
        fx, _, _ = self._f(jnp.stack(xs, axis=-1))
        return tuple(fx[..., i] for i in range(len(self.states)))

    def update(self, xs, dt):
        x0 = jnp.stack(xs, axis=-1)
        if self.neuron and self.linear:  # NEURON's one iteration (`linflag`)
            x1 = x0 + self._newton_update(x0, x0, dt, exact=False)
            return tuple(x1[..., i] for i in range(len(self.states)))
        x1 = self._implicit_euler(x0, dt)
        return tuple(x1[..., i] for i in range(len(self.states)))

    def filter(self, rs, dt, xs, *, quadratic: bool):
        _, a = _jacobian(lambda y: self._f(y)[0], jnp.stack(xs, axis=-1))
        return _filtered(a, rs, dt, quadratic)

    def steady_state(self, xs) -> tuple[Array, ...]:
        """`SOLVE ... STEADYSTATE sparse`: implicit Euler steps of `STEADY_DT`
        ms from `xs` (so amounts that no `CONSERVE` fixes keep the totals
        the states start with). With `neuron` (and not `linear`: that is one
        step iterated), NEURON's `_ss_sparse`: up to
        `STEADY_TRIES` single Newton iterations, each a step from where the
        last one ended, setting states below -1e-6 to 0, until one leaves
        none there; then a step iterated to convergence. Otherwise one step
        iterated by Newton's method. In float32 (not NEURON's), the steps
        `STEADY_DTS_FLOAT32`, by Newton's method."""
        x = jnp.stack(xs, axis=-1)
        if x.dtype != jnp.float64:

            def implicit(x, dt):
                return self._implicit_euler(x, dt, STEADY_ITERATIONS, exact=True), None

            dts = jnp.asarray(STEADY_DTS_FLOAT32, x.dtype)
            x, _ = jax.lax.scan(implicit, x, dts)
            return tuple(x[..., i] for i in range(len(self.states)))
        if self.neuron and not self.linear:

            def single(carry, _):
                x, passed = carry
                new = x + self._newton_update(x, x, STEADY_DT, exact=False)
                negative = new < -1e-6
                new = jnp.where(negative, 0.0, new)
                x = jnp.where(passed[..., None], x, new)
                return (x, passed | ~jnp.any(negative, axis=-1)), None

            passed = jnp.zeros(x.shape[:-1], bool)
            (x, _), _ = jax.lax.scan(single, (x, passed), None, STEADY_TRIES)
        x = self._implicit_euler(x, STEADY_DT, STEADY_ITERATIONS)
        return tuple(x[..., i] for i in range(len(self.states)))


def newton_solve(residual, x0, max_steps: int):
    """The root of `residual` (`(n, k)` → `(n, k)`, compartments independent)
    near `x0` by optimistix's `Newton`: each iteration's linear system solved
    per compartment (`RowBlocks`), iterates kept non-negative (`lower` = 0,
    as NEURON sets negative states to 0), at most `max_steps` iterations,
    stopping once the update and the residual are below 100 units in the
    last place. Its derivative is the implicit function theorem's (the root's,
    not the iterations'); an iteration that goes non-finite leaves the
    states non-finite, and the step is rejected."""
    tol = 100 * float(jnp.finfo(x0.dtype).eps)
    solver = optx.Newton(rtol=tol, atol=tol, linear_solver=RowBlocks())
    sol = optx.root_find(
        lambda x, _: residual(x),
        solver,
        x0,
        options={"lower": jnp.zeros_like(x0)},
        max_steps=max_steps,
        throw=False,
    )
    return sol.value


def nonlinear_scheme(states, flux, m0, row, neuron, linear) -> NonlinearScheme:
    """A `NonlinearScheme` of the generated `flux` at the variables `m0`."""
    return NonlinearScheme(states, flux, m0, row, neuron, linear)


def markov_scheme(states, transitions, total, v) -> MarkovScheme:
    """A closed `KINETIC` scheme: `transitions` lists `(i, j, rate)` (the rate
    from state `i` to state `j`, 1/ms, summed where a pair repeats)."""
    k = len(states)
    z = jnp.zeros_like(v)
    rates = [[z] * k for _ in range(k)]
    for i, j, r in transitions:
        rates[i][j] = rates[i][j] + r
    return MarkovScheme(states, tuple(tuple(row) for row in rates), total)


def linear_scheme(states, entries, sources, conserve, v) -> LinearScheme:
    """A `LinearScheme` from `(row, col, value)` entries of `A` and `(row,
    value)` entries of `b` (summed where they repeat)."""
    k = len(states)
    a = jnp.zeros(v.shape + (k, k), v.dtype)
    for i, j, value in entries:
        a = a.at[..., i, j].add(value)
    b = jnp.zeros(v.shape + (k,), v.dtype)
    for i, value in sources:
        b = b.at[..., i].add(value)
    return LinearScheme(states, a, b, conserve)


def scheme_steady_state(kin, xs, v) -> tuple[Array, ...]:
    """The steady state of a `KINETIC` block's scheme (NEURON's `STEADYSTATE
    sparse`): a closed scheme's keeps the total of `xs` unless the scheme
    conserves a given total. `v` (mV) gives the shape and dtype."""
    xs = tuple(jnp.broadcast_to(jnp.asarray(x, v.dtype), v.shape) for x in xs)
    if isinstance(kin, (LinearScheme, NonlinearScheme)):
        return kin.steady_state(xs)
    x = kin.steady_state(v)
    if kin.total is not None:
        return x
    total = sum(xs[1:], xs[0])
    return tuple(p * total for p in x)
