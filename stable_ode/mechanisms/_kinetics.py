"""How a state moves for a frozen membrane potential: kinetics as objects.

A mechanism's `kinetics(v, states, env)` returns one `AbstractKinetics` per
state, evaluated at the membrane potential `v` and the other states of the
stage. Each object knows

- `rhs(x)`: the right-hand side `dx/dt` (per ms) at the state value `x`, for
  vector-field solvers and error estimates;
- `update(x, dt)`: the step the stiff solvers of this package take over `dt`
  (ms) with everything but `x` frozen;
- `filter(r, dt, x, quadratic=...)`: the stiff error filter of a step's
  residual `r` (see `stable_ode._solver._staggered.filtered_error`).

`Relaxation` is a first-order relaxation `dx/dt = rate·(inf - x)` (every
Hodgkin–Huxley gate), updated exactly. `RateEquation` is any elementwise
`dx/dt = f(x)` (a concentration pool, a state with its own nonlinear
kinetics), updated by an exponential Rosenbrock–Euler step that is exact when
`f` is affine in `x`.
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._math import exprel, safe_div


class AbstractKinetics(eqx.Module):
    """How one state `x` (an array, one entry per compartment or synapse)
    moves over a step with the membrane potential and every other state frozen.

    Subclasses are final and implement `rhs`, `update` and `filter`. All three
    act elementwise: entry `k` of the result depends on entry `k` of `x` only.
    """

    @abc.abstractmethod
    def rhs(self, x: Float[Array, " n"]) -> Float[Array, " n"]:
        """`dx/dt` at the state value `x`, in the state's unit per ms."""

    @abc.abstractmethod
    def update(self, x: Float[Array, " n"], dt) -> Float[Array, " n"]:
        """The state after a step of `dt` ms from `x`."""

    @abc.abstractmethod
    def filter(
        self, r: Float[Array, " n"], dt, x: Float[Array, " n"], *, quadratic: bool
    ) -> Float[Array, " n"]:
        """The step residual `r` filtered on stiff components.

        **Arguments:**

        - `r`: the residual of a step (`y1 - y0 - ∫f`), the state's unit.
        - `dt`: the step, ms.
        - `x`: the state value at which the kinetics' stiffness is measured.
        - `quadratic`: `False` for a trapezoid residual (divide by `1 + z/2`),
          `True` for a Simpson residual at the Hermite midpoint (divide by
          `1 + z/2 + z²/12`), with `z = -dt·∂f/∂x ≥ 0` the stiffness.

        **Returns:** the filtered residual, the state's unit.
        """


def _divide(r, z, quadratic: bool):
    return r / (1 + 0.5 * z + (z * z / 12 if quadratic else 0))


class Relaxation(AbstractKinetics):
    """First-order relaxation at a given voltage: `dx/dt = rate·(inf - x)`.

    **Fields:**

    - `inf`: steady-state value (for a gate, dimensionless in [0, 1]).
    - `rate`: relaxation rate `1/tau`, 1/ms, non-negative.

    Storing the rate (not `tau`) keeps every update free of `inf·0`: the exact
    update for frozen voltage, `x + (inf - x)·(1 - exp(-rate·dt))`, is finite for
    every finite rate and `dt > 0`, and a convex combination of `x` and `inf`.
    As in NEURON's `cnexp`, `1 - exp(-z)` and not `-expm1(-z)`: the absolute
    error of the update is still a rounding of `|inf - x|`, and XLA:CPU
    vectorises `exp` but not `expm1` in float32.
    """

    inf: Float[Array, "*shape"]
    rate: Float[Array, "*shape"]

    def rhs(self, x):
        return self.rate * (self.inf - x)

    def update(self, x, dt):
        return x + (self.inf - x) * (1 - jnp.exp(-self.rate * dt))

    def filter(self, r, dt, x, *, quadratic: bool):
        del x
        return _divide(r, self.rate * dt, quadratic)


Gate = Relaxation
"""The former name of `Relaxation`, kept so that existing mechanisms work."""


class RateEquation(AbstractKinetics):
    r"""A general rate equation `dx/dt = f(x)`, with everything but `x` frozen.

    **Fields:**

    - `f`: a function from the state `x` (array) to `dx/dt` (same shape, the
      state's unit per ms), elementwise: entry `k` of `f(x)` depends on `x[k]`
      only (it may depend on anything else through its closure: the voltage,
      the mechanism's other states, the environment).

    **Update** (exponential Rosenbrock–Euler): with `f0 = f(x)` and the exact
    diagonal Jacobian `J = ∂f/∂x` at `x` (one `jax.jvp` along ones),

        x1 = x + dt·exprel(J·dt)·f0,       exprel(z) = (exp(z) - 1)/z.

    It is exact when `f` is affine in `x` (`f = a + J·x` relaxes to `-a/J` with
    rate `-J`), and on stiff decaying components (`J·dt → -∞`) it tends to the
    linearised steady state `x - f0/J` without overshooting it: the step is
    stable for every `dt`. With the exact Jacobian the step is of order 2 for
    the frozen stage (local error O(dt³)); the splitting solver around it sets
    the overall order. `exprel` is finite for every finite argument.

    **Error filter:** `z = max(-J·dt, 0)` at the given state (decaying
    components only; growing ones are not filtered).

    Reference: Hochbruck, Ostermann & Schweitzer, "Exponential Rosenbrock-type
    methods", SIAM J. Numer. Anal. 47 (2009).
    """

    f: Callable[[Float[Array, " n"]], Float[Array, " n"]]

    def _linearise(self, x):
        return jax.jvp(self.f, (x,), (jnp.ones_like(x),))

    def rhs(self, x):
        return self.f(x)

    def update(self, x, dt):
        f0, jac = self._linearise(x)
        return x + dt * exprel(jac * dt) * f0

    def filter(self, r, dt, x, *, quadratic: bool):
        _, jac = self._linearise(x)
        return _divide(r, jnp.maximum(-jac * dt, 0), quadratic)


def alpha_beta_gate(
    alpha: Float[ArrayLike, "*shape"],
    beta: Float[ArrayLike, "*shape"],
    scale: float | Float[ArrayLike, ""] = 1.0,
) -> Relaxation:
    """A gate from opening/closing rates `alpha`, `beta` (1/ms), times `scale` (q10).

    `inf = alpha / (alpha + beta)` and `rate = scale·(alpha + beta)`, with
    `inf = 0` if both rates underflow to 0 (the gate then does not move, so the
    value of `inf` is irrelevant). Never `1/(alpha+beta)` then multiplied back.
    """
    alpha = jnp.asarray(alpha)
    total = alpha + beta
    return Relaxation(inf=safe_div(alpha, total), rate=scale * total)


def inf_tau_gate(
    inf: Float[ArrayLike, "*shape"], tau: Float[ArrayLike, "*shape"]
) -> Relaxation:
    """A gate from its steady state `inf` and time constant `tau` (ms, > 0).

    A `tau` of exactly 0 (instantaneous gate) becomes the largest finite rate
    of the dtype's safe range.
    """
    inf = jnp.asarray(inf)
    tau = jnp.asarray(tau, inf.dtype)
    fastest = float(np.sqrt(np.finfo(inf.dtype).max))
    return Relaxation(inf=inf, rate=safe_div(jnp.ones_like(tau), tau, fill=fastest))


class Assigned(AbstractKinetics):
    """A state that each step sets to `value` (an NMODL `ASSIGNED` that
    `BREAKPOINT` keeps from step to step, as a running maximum): no rate,
    no error."""

    value: Float[Array, " n"]

    def rhs(self, x):
        return jnp.zeros_like(x)

    def update(self, x, dt):
        del dt
        return jnp.broadcast_to(self.value, jnp.shape(x)).astype(jnp.result_type(x))

    def filter(self, r, dt, x, *, quadratic: bool):
        del r, dt, quadratic
        return jnp.zeros_like(x)
