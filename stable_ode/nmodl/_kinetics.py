"""Kinetics for `SOLVE ... METHOD derivimplicit`: NEURON's implicit Euler.

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
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._math import safe_div
from ..mechanisms import AbstractKinetics


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
