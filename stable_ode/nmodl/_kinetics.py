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

`KINETIC` blocks (`METHOD sparse`) become a `MarkovScheme` (closed schemes) or
a `LinearScheme` (`dx/dt = A·x + b`), built by `markov_scheme` and
`linear_scheme` from the generated code (`_kinetic_source.py`).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._math import safe_div
from ..mechanisms import AbstractCoupledKinetics, AbstractKinetics, MarkovScheme
from ..mechanisms._scheme import _solve_batched as solve_batched


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
        a = self.generator
        eye = jnp.broadcast_to(jnp.eye(len(self.states), dtype=a.dtype), a.shape)
        m = eye - 0.5 * dt * a
        if quadratic:
            m = m + (dt * dt / 12) * (a @ a)
        r = solve_batched(m, jnp.stack(rs, axis=-1))
        return tuple(r[..., i] for i in range(len(self.states)))

    def steady_state(self, xs) -> tuple[Array, ...]:
        """`A·x + b = 0` (with the `CONSERVE` row): `SOLVE ... STEADYSTATE
        sparse`."""
        del xs
        m, y = self._replace(self.generator, -self.source)
        x = solve_batched(m, y)
        return tuple(x[..., i] for i in range(len(self.states)))


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
    if isinstance(kin, LinearScheme):
        return kin.steady_state(xs)
    x = kin.steady_state(v)
    if kin.total is not None:
        return x
    total = sum(xs[1:], xs[0])
    return tuple(p * total for p in x)
