"""Axial coupling between compartments: the structured part of the voltage system.

A coupling knows the conductance Laplacian `L` of the compartments (S), with
`(L v)_i = sum_j g_ij (v_j - v_i)` the axial current into compartment `i` (mA for
`v` in mV). The implicit voltage step needs solves with `diag(d) - theta·L`, which
is symmetric; each coupling returns it as a lineax operator of its structure.
"""

import abc

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
from jaxtyping import Array, Float, Int

from .._custom_types import Conductance, Current, Voltage


class AbstractCoupling(eqx.Module):
    """Interface for axial coupling structures."""

    @abc.abstractmethod
    def current(self, v: Voltage) -> Current:
        """Axial current into each compartment, mA (`L v`)."""

    @abc.abstractmethod
    def self_conductance(self) -> Conductance:
        """`sum_j g_ij` for each compartment `i` (minus the diagonal of `L`), S."""

    @abc.abstractmethod
    def operator(
        self, d: Float[Array, " ncomp"], theta: Float[Array, ""] | float
    ) -> lx.AbstractLinearOperator:
        """The operator `diag(d) - theta·L`, in this coupling's ordering."""

    @abc.abstractmethod
    def to_operator_order(self, x: Float[Array, " ncomp"]) -> Float[Array, " ncomp"]:
        """Permute a compartment vector into the operator's ordering."""

    @abc.abstractmethod
    def from_operator_order(self, x: Float[Array, " ncomp"]) -> Float[Array, " ncomp"]:
        """Inverse of `to_operator_order`."""

    @abc.abstractmethod
    def default_solver(self) -> lx.AbstractLinearSolver:
        """The lineax solver for `operator` that solvers use by default."""


class TridiagonalCoupling(AbstractCoupling):
    """Compartments on paths (cables, unbranched cells, several cells in a row).

    **Fields:**

    - `g`: conductance between the `k`-th and `(k+1)`-th compartment of the
      operator ordering, S; zero between cells. Shape `(ncomp - 1,)`.
    - `order`: the operator ordering (compartment index of each row), or `None`
      for the identity.
    """

    g: Float[Array, " ncomp-1"]
    order: Int[Array, " ncomp"] | None
    inverse_order: Int[Array, " ncomp"] | None

    def _laplacian_diag(self):
        zero = jnp.zeros((1,), self.g.dtype)
        return jnp.concatenate([zero, self.g]) + jnp.concatenate([self.g, zero])

    def self_conductance(self):
        return self.from_operator_order(self._laplacian_diag())

    def current(self, v):
        u = self.to_operator_order(v)
        if u.shape[0] == 1:
            return jnp.zeros_like(v)
        flow = self.g * (u[1:] - u[:-1])  # from k+1 into k
        out = jnp.zeros_like(u).at[:-1].add(flow).at[1:].add(-flow)
        return self.from_operator_order(out)

    def operator(self, d, theta):
        d = self.to_operator_order(d)
        off = -theta * self.g
        return lx.TridiagonalLinearOperator(
            d + theta * self._laplacian_diag(), off, off
        )

    def to_operator_order(self, x):
        return x if self.order is None else x[self.order]

    def from_operator_order(self, x):
        return x if self.inverse_order is None else x[self.inverse_order]

    def default_solver(self):
        """`lx.Tridiagonal()` (LAPACK `gtsv`, cuSPARSE on CUDA GPUs); on a TPU,
        where JAX's tridiagonal solve is a loop over the rows,
        `CyclicReduction()` (`stable_ode._linear.cyclic`); on the CPU, for a
        short cable under a raised small-loop threshold
        (`set_cpu_small_loop_bytes`), `Thomas()` (`stable_ode._linear.thomas`:
        the same elimination without a library call, so that XLA can compile
        the step loop into one function)."""
        backend = jax.default_backend()
        if backend == "tpu":
            from .._linear.cyclic import CyclicReduction

            return CyclicReduction()
        if backend == "cpu":
            from .._linear.thomas import Thomas, use_thomas
            from .._xla import small_loop_bytes

            if use_thomas(self.g.shape[0] + 1, self.g.dtype, small_loop_bytes()):
                return Thomas()
        return lx.Tridiagonal()


class NoCoupling(AbstractCoupling):
    """Isolated compartments (point neurons): `L = 0`.

    The voltage system is diagonal, solved by one division per compartment
    (`lx.DiagonalLinearOperator` + `lx.Diagonal(well_posed=True)`) instead of a
    LAPACK call, without lineax's check for near-zero entries (a reduction over all
    compartments, per step): the diagonal is `cm/(θ·dt)` plus the linearised
    membrane conductance, positive for every built-in mechanism. Should a user
    mechanism's negative slope conductance cancel it, the division gives a huge
    or non-finite voltage (a non-finite one is rejected and retried with a
    shorter step, i.e. a larger `cm/(θ·dt)`); lineax's check would instead have
    set that compartment's update to zero without a word.
    """

    ncomp: int = eqx.field(static=True)
    dtype: str = eqx.field(static=True)

    def current(self, v):
        return jnp.zeros_like(v)

    def self_conductance(self):
        return jnp.zeros((self.ncomp,), self.dtype)

    def operator(self, d, theta):
        del theta
        return lx.DiagonalLinearOperator(d)

    def to_operator_order(self, x):
        return x

    def from_operator_order(self, x):
        return x

    def default_solver(self):
        return lx.Diagonal(well_posed=True)


class DenseCoupling(AbstractCoupling):
    """Any compartment graph, as a dense Laplacian (S), solved by LU.

    Used only when gap junctions close a cycle, which neither the tridiagonal nor
    the tree solve can represent; costs O(n²) memory and O(n³) per step, so it
    suits small networks. Junction nodes are eliminated exactly (star–mesh).
    """

    laplacian: Float[Array, "ncomp ncomp"]

    def current(self, v):
        return self.laplacian @ v

    def self_conductance(self):
        return -jnp.diagonal(self.laplacian)

    def operator(self, d, theta):
        return lx.MatrixLinearOperator(jnp.diag(d) - theta * self.laplacian)

    def to_operator_order(self, x):
        return x

    def from_operator_order(self, x):
        return x

    def default_solver(self):
        return lx.LU()


def dense_coupling(n: int, edges, junctions, dtype) -> DenseCoupling:
    """`DenseCoupling` of compartments joined by `edges` `(i, j, g)` and
    membrane-less `junctions` (lists of `(i, g)`), conductances in S."""
    lap = np.zeros((n, n))

    def add(i, j, g):
        lap[i, j] += g
        lap[j, i] += g
        lap[i, i] -= g
        lap[j, j] -= g

    for i, j, g in edges:
        add(i, j, g)
    for members in junctions:
        total = sum(g for _, g in members)
        for a, (i, gi) in enumerate(members):
            for j, gj in members[a + 1 :]:
                add(i, j, gi * gj / total)
    return DenseCoupling(laplacian=jnp.asarray(lap, dtype))
