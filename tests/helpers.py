"""Shared test helpers: small models, tolerance checks, finite differences."""

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import stable_ode as so
from stable_ode import spike_times as spike_times  # re-exported for the tests


ALL_SOLVERS = (so.ExponentialEuler(), so.BackwardEuler(), so.CrankNicolson())
CABLE_SOLVERS = (so.BackwardEuler(), so.CrankNicolson())


def tree_allclose(x, y, *, rtol=1e-5, atol=1e-8):
    return eqx.tree_equal(x, y, typematch=True, rtol=rtol, atol=atol) is True


def hh_compartment(
    *,
    diameter=20.0,
    amplitude=0.1,
    delay=5.0,
    duration=40.0,
    dtype=jnp.float64,
    celsius=6.3,
    v_init=-65.0,
):
    """A single HH compartment (length = diameter) with a step current."""
    cell = so.Cell(
        "cell",
        [so.Section("soma", diameter, diameter, 1)],
        [so.Insert(so.HH())],
    )
    site = so.Site("cell", "soma", 0.5)
    return so.build(
        [cell],
        [so.StepCurrent(site, amplitude, delay, duration)],
        [so.Recording("soma", site)],
        celsius=celsius,
        v_init=v_init,
        dtype=dtype,
    )


def hh_cable(
    *,
    n=10,
    length=200.0,
    diameter=2.0,
    amplitude=0.2,
    delay=1.0,
    duration=20.0,
    dtype=jnp.float64,
    ra=100.0,
):
    """An HH cable with a step current at its 0 end, recorded at both ends."""
    cell = so.Cell(
        "cable",
        [so.Section("axon", length, diameter, n)],
        [so.Insert(so.HH())],
        axial_resistivity=ra,
    )
    return so.build(
        [cell],
        [so.StepCurrent(so.Site("cable", "axon", 0.0), amplitude, delay, duration)],
        [
            so.Recording("start", so.Site("cable", "axon", 0.0)),
            so.Recording("end", so.Site("cable", "axon", 1.0)),
        ],
        dtype=dtype,
    )


def tridiagonal_system(n, seed, symmetric, dtype=jnp.float64):
    """A random strictly diagonally dominant tridiagonal system, as the voltage
    system: `(diagonal, lower, upper, rhs)` with non-positive off-diagonals."""
    rng = np.random.default_rng(seed)
    lower = -rng.uniform(0.0, 1.0, n - 1)
    upper = lower.copy() if symmetric else -rng.uniform(0.0, 1.0, n - 1)
    diag = rng.uniform(0.1, 1.0, n)
    diag = diag + np.concatenate([[0.0], -lower]) + np.concatenate([-upper, [0.0]])
    rhs = rng.normal(size=n)
    return [jnp.asarray(x, dtype) for x in (diag, lower, upper, rhs)]


def finite_difference_grad(f, x, eps=1e-6):
    """Central differences of scalar `f` at array `x` (float64)."""
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps * max(1.0, abs(x[i]))
        g[i] = (float(f(jnp.asarray(x + e))) - float(f(jnp.asarray(x - e)))) / (
            2 * e[i]
        )
    return g


# Instruction sets without fused multiply-add, for `XLA_FLAGS=--xla_cpu_max_isa=...`.
NO_FMA_ISAS = ("SSE4_2", "AVX")


def fma_off(xla_flags: str | None = None) -> bool:
    """Whether `xla_flags` (default: this process's `XLA_FLAGS`) limit XLA:CPU to an
    instruction set without FMA (`--xla_cpu_max_isa=AVX` or `SSE4_2`), as
    `test_adjoint.test_float32_exact_without_fma` runs the float32 gradient tests.
    Then a float32 computation rounds the same wherever XLA fuses it."""
    if xla_flags is None:
        xla_flags = os.environ.get("XLA_FLAGS", "")
    for flag in xla_flags.split():
        name, _, value = flag.partition("=")
        if name == "--xla_cpu_max_isa" and value.upper() in NO_FMA_ISAS:
            return True
    return False


def set_key(path, value):
    """An edit of a parsed model file that sets the entry at key `path` (a
    sequence of keys and indices) to `value`."""

    def edit(raw):
        *head, last = path
        node = raw
        for k in head:
            node = node[k]
        node[last] = value

    return edit


def passive_input_resistance(model, index: int) -> float:
    """Steady-state `ΔV/I` at compartment `index` of a model with `pas` alone
    (its one mechanism group), MΩ."""
    n = model.n_compartments
    lap = np.asarray(jax.jacfwd(model.coupling.current)(np.zeros(n)))
    (group,) = model.mechanisms
    idx = np.asarray(group.index)
    system = -lap
    system[idx, idx] += np.asarray(group.mechanism.g) * np.asarray(model.area)[idx]
    e = np.zeros(n)
    e[index] = 1.0
    return float(np.linalg.solve(system, e)[index]) * 1e-6
