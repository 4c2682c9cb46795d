"""Kinetic schemes: several states of one mechanism that move together.

A Markov channel model (NMODL's `KINETIC` block with `~ C <-> O (a, b)`) moves
the populations `x` of its states by `dx/dt = A·x`, where `A` is the generator
of the scheme: `A[j, i]` is the rate from state `i` to state `j` (i ≠ j) and
each column sums to zero, so the total population is conserved. A mechanism
returns such a scheme from `kinetics` as one entry that names its states:

    def kinetics(self, v, states, env):
        a, b = ..., ...
        return {"na": MarkovScheme(("c", "o", "i"), rates)}

`map_kinetics` applies a function to every kinetics of a mechanism, a single
state's (`AbstractKinetics`) or several states' at once
(`AbstractCoupledKinetics`), so that the term, the solvers and diagnostics
treat both alike.
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg
from jaxtyping import Array, Float


class AbstractCoupledKinetics(eqx.Module):
    """How several states of one group move together, with the membrane
    potential and every other state frozen: the coupled counterpart of
    `AbstractKinetics`. `states` names them; `rhs`, `update` and `filter` take
    and return tuples of arrays in that order (one entry per compartment each).
    """

    states: eqx.AbstractVar[tuple[str, ...]]

    @abc.abstractmethod
    def rhs(self, xs: tuple[Array, ...]) -> tuple[Array, ...]:
        """`dx/dt` of every state at the values `xs`, per ms."""

    @abc.abstractmethod
    def update(self, xs: tuple[Array, ...], dt) -> tuple[Array, ...]:
        """The states after a step of `dt` ms from `xs`."""

    @abc.abstractmethod
    def filter(
        self, rs: tuple[Array, ...], dt, xs: tuple[Array, ...], *, quadratic: bool
    ) -> tuple[Array, ...]:
        """The step residuals `rs` filtered on stiff components (see
        `AbstractKinetics.filter`)."""


def _solve_batched(
    matrix: Float[Array, "n k k"], b: Float[Array, "n k"], fill: float = jnp.nan
):
    """`matrix[c]⁻¹·b[c]` for every compartment `c`: small dense systems, LU
    (`jax.scipy.linalg`, the factorisation and solve of lineax's `LU`), batched
    by `vmap`; `fill` (default NaN) in the compartments whose system is not
    finite.

    Safe to differentiate inside a step that will be rejected: a compartment
    whose system is not finite is solved as `I·x = 0` and its solution set to
    NaN (the double `where`), so its derivative is zero, not `0·NaN`; and no
    derivative raises (lineax's tangent and transposed solves raise on
    non-finite input, whatever `throw`, and a rejected step's NaN states give
    NaN cotangents to finite systems too: here they are carried as NaN, as any
    other operation carries them, for the step's guard to select away)."""
    ok = jnp.all(jnp.isfinite(matrix), axis=(-2, -1)) & jnp.all(
        jnp.isfinite(b), axis=-1
    )
    eye = jnp.eye(matrix.shape[-1], dtype=matrix.dtype)
    m = jnp.where(ok[:, None, None], matrix, eye)
    y = jnp.where(ok[:, None], b, jnp.zeros_like(b))

    def one(m, y):
        return jax.scipy.linalg.lu_solve(jax.scipy.linalg.lu_factor(m), y)

    return jnp.where(ok[:, None], jax.vmap(one)(m, y), fill)


class MarkovScheme(AbstractCoupledKinetics):
    r"""A linear kinetic scheme over `k` states: `dx/dt = A·x`.

    **Fields:**

    - `states`: the names of the scheme's states, in order (static).
    - `rates`: `rates[i][j]`, the transition rate from state `i` to state `j`,
      1/ms, ≥ 0, each an array with one entry per compartment (or a scalar);
      the diagonal `rates[i][i]` is ignored. NMODL's `~ A <-> B (kf, kb)` is
      `rates[A][B] = kf`, `rates[B][A] = kb`.
    - `total`: the conserved total population (NMODL's `CONSERVE`; 1 for
      probabilities), or `None` to conserve whatever total the states start
      with.

    **Update:** implicit Euler, `(I - dt·A)·x1 = x0`, one small dense LU
    solve per compartment: L-stable for any `dt`, and, since
    `I - dt·A` is a nonsingular M-matrix, its solution is non-negative; it is
    then clipped at 0 against rounding and scaled to the total (`total`, or
    the total of `x0`), so populations stay non-negative and conserved to
    rounding over any number of steps. This is NEURON's `sparse` method on a
    linear scheme (one Newton iteration of implicit Euler is exact).

    **Error filter:** `(I - dt/2·A)⁻¹·r` for a trapezoid residual,
    `(I - dt/2·A + dt²/12·A²)⁻¹·r` for a Simpson residual: a gate's
    `1 + z/2 (+ z²/12)` with the scheme's generator in place of `-rate`.
    """

    states: tuple[str, ...] = eqx.field(static=True)
    rates: tuple[tuple[Float[Array, "*n"] | float, ...], ...]
    total: float | None = eqx.field(static=True, default=1.0)

    def __check_init__(self):
        k = len(self.states)
        if k < 2 or len(set(self.states)) != k:
            raise ValueError(
                f"MarkovScheme: states must be two or more distinct names, got "
                f"{self.states!r}"
            )
        if len(self.rates) != k or any(len(row) != k for row in self.rates):
            raise ValueError(
                f"MarkovScheme: rates must be a {k}×{k} table (rates[i][j] from "
                f"state i to state j) for states {self.states!r}"
            )

    def generator(self, like: Array) -> Float[Array, "n k k"]:
        """`A` per compartment, shape `(n, k, k)`: `A[c, j, i]` the rate from
        state `i` to state `j`, the diagonal minus the total rate out."""
        k = len(self.states)
        zero = jnp.zeros_like(like)
        out = [[zero] * k for _ in range(k)]
        for i in range(k):
            leave = zero
            for j in range(k):
                if i != j:
                    r = jnp.broadcast_to(
                        jnp.asarray(self.rates[i][j], like.dtype), like.shape
                    )
                    out[j][i] = r
                    leave = leave + r
            out[i][i] = -leave
        return jnp.stack([jnp.stack(row, axis=-1) for row in out], axis=-2)

    def _stack(self, xs):
        return jnp.stack(xs, axis=-1)

    def _unstack(self, x):
        return tuple(x[..., i] for i in range(len(self.states)))

    def rhs(self, xs):
        x = self._stack(xs)
        a = self.generator(xs[0])
        return self._unstack(jnp.einsum("cji,ci->cj", a, x))

    def update(self, xs, dt):
        x0 = self._stack(xs)
        a = self.generator(xs[0])
        eye = jnp.broadcast_to(jnp.eye(len(self.states), dtype=a.dtype), a.shape)
        x1 = jnp.maximum(_solve_batched(eye - dt * a, x0), 0)
        target = jnp.sum(x0, axis=-1) if self.total is None else self.total
        total = jnp.sum(x1, axis=-1)
        ok = total > 0
        scale = jnp.where(ok, target / jnp.where(ok, total, 1), 1)
        return self._unstack(x1 * scale[..., None])

    def filter(self, rs, dt, xs, *, quadratic: bool):
        a = self.generator(xs[0])
        eye = jnp.broadcast_to(jnp.eye(len(self.states), dtype=a.dtype), a.shape)
        m = eye - 0.5 * dt * a
        if quadratic:
            m = m + (dt * dt / 12) * (a @ a)
        return self._unstack(_solve_batched(m, self._stack(rs)))

    def steady_state(self, like: Array) -> tuple[Array, ...]:
        """The populations at which `A·x = 0` with the total `total` (1 if
        `None`): NMODL's `SOLVE scheme STEADYSTATE sparse`, for initial states.
        (With the last row of `A` replaced by the conservation law.)"""
        a = self.generator(like)
        k = len(self.states)
        a = a.at[..., k - 1, :].set(1.0)
        total = 1.0 if self.total is None else self.total
        b = jnp.zeros(like.shape + (k,), a.dtype).at[..., k - 1].set(total)
        return self._unstack(jnp.maximum(_solve_batched(a, b), 0))


def map_kinetics(fn: Callable, kinetics: dict, *trees: dict) -> dict:
    """`fn(kin, *values)` for every entry `kin` of a mechanism's `kinetics`,
    by state name: `values` are the entries of `trees` (dicts by state name)
    for that state, or for an `AbstractCoupledKinetics` the tuples of its
    states' entries (its result a tuple, spread back over its states)."""
    out = {}
    for key, kin in kinetics.items():
        if isinstance(kin, AbstractCoupledKinetics):
            result = fn(kin, *(tuple(t[s] for s in kin.states) for t in trees))
            out.update(zip(kin.states, result))
        else:
            out[key] = fn(kin, *(t[key] for t in trees))
    return out


def kinetics_state_names(kinetics: dict) -> list[str]:
    """The names of the states that a mechanism's `kinetics` move."""
    names = []
    for key, kin in kinetics.items():
        if isinstance(kin, AbstractCoupledKinetics):
            names.extend(kin.states)
        else:
            names.append(key)
    return names
