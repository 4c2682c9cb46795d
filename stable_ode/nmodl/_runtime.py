"""What generated mechanism code calls besides `stable_ode._math`.

Generated code keeps a mechanism's variables in two `Vars` records: `m` (its
parameters, states, ion variables, `ASSIGNED`s and NEURON's globals) and `l`
(the `LOCAL`s and arguments of the block or function being evaluated). An
`if`/`else` runs both branches on copies and merges them with `merge_into`: a
`jnp.where` per variable that differs, or the taken branch when the condition is
a Python bool (e.g. `if (i == 0)` in a function called as `alp(v, 0)`).
"""

import jax
import jax.numpy as jnp
import numpy as np

from .._math import safe_log


class Vars:
    """A mutable record of named values (arrays or Python floats)."""

    def __init__(self, **values):
        self.__dict__.update(values)

    def copy(self) -> "Vars":
        return Vars(**self.__dict__)

    def restore(self, other: "Vars") -> None:
        """Make `self` equal to `other` (in place)."""
        self.__dict__.clear()
        self.__dict__.update(other.__dict__)

    def __repr__(self):
        return f"Vars({', '.join(sorted(self.__dict__))})"


HELD_V = "@v_solve"
"""The `Vars` entry holding `Environment.v_solve` in `current` (a name no NMODL
variable can have)."""


def solve_assign(m: Vars, assign) -> None:
    """BREAKPOINT's `SOLVE b` in NEURON's schemes: the assignments of `b`
    (`assign`) on `m`, at `m.v`, or at the voltage held in `m` (`HELD_V`) when
    there is one. The value is the same (`BackwardEuler` holds the voltage it
    linearises at), but `di/dv` then holds what `b` computes, as NEURON's
    `nrn_cur` holds what its `nrn_state` computed."""
    held = getattr(m, HELD_V, None)
    if held is None:
        assign(m)
        return
    v = m.v
    m.v = held
    assign(m)
    m.v = v


def linear_solve(residual, m: Vars, names: tuple[str, ...]) -> tuple:
    """NMODL's `LINEAR` block: the values of the variables `names` of `m` that
    zero `residual(m)` (a tuple, one equation `lhs - rhs` per name, affine in
    them), per compartment. `A·x = b` is read off the residual by forward-mode
    derivatives at `x = 0` (exact for affine equations, as NEURON requires)
    and solved by LU, batched over compartments."""
    v = m.v
    k = len(names)

    def r(xs):
        t = m.copy()
        for name, x in zip(names, xs):
            setattr(t, name, x)
        return tuple(as_n(e, v) for e in residual(t))

    zero = tuple(jnp.zeros_like(v) for _ in names)
    r0 = r(zero)
    columns = []
    for j in range(k):
        e = tuple(jnp.ones_like(v) if i == j else jnp.zeros_like(v) for i in range(k))
        columns.append(jnp.stack(jax.jvp(r, (zero,), (e,))[1], -1))
    a = jnp.stack(columns, -1)  # (compartments, equation, unknown)
    x = jnp.linalg.solve(a, -jnp.stack(r0, -1)[..., None])[..., 0]
    return tuple(x[..., j] for j in range(k))


def select(cond, a, b):
    """`a` where `cond`, else `b`: statically when `cond` is a Python bool."""
    if isinstance(cond, (bool, np.bool_)):
        return a if cond else b
    return jnp.where(cond, a, b)


def merge_into(cond, current: tuple[Vars, ...], taken: tuple[Vars, ...]) -> None:
    """After an `if`: `current` holds the `else` branch's values and `taken` the
    `if` branch's; set each variable of `current` to `select(cond, taken,
    current)` in place (a variable set in one branch only keeps that value)."""
    for cur, then in zip(current, taken):
        for name, a in then.__dict__.items():
            b = cur.__dict__.get(name, a)
            if a is not b:
                cur.__dict__[name] = select(cond, a, b)


def as_n(x, v):
    """`x` as an array of `v`'s shape and dtype (a Python float becomes
    constant per compartment)."""
    return jnp.broadcast_to(jnp.asarray(x, v.dtype), v.shape)


def safe_sqrt(x):
    """`sqrt(x)` for `x > 0`, 0 elsewhere; gradient finite (0 for `x <= 0`)."""
    pos = x > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, x, jnp.ones_like(x))), 0.0)


def safe_log10(x):
    """`log10(x)` through `safe_log` (finite at and below 0)."""
    return safe_log(x) * (1 / np.log(10.0))


def power(a, b):
    """NMODL's `a^b` / `pow(a, b)` for a non-integer exponent: `a**b` where
    `a > 0`, `0` where `a == 0` and `b > 0`; NaN-free gradients (a negative
    base with a non-integer exponent, NaN in C, is 0 here)."""
    a = jnp.asarray(a)
    pos = a > 0
    safe = jnp.where(pos, a, jnp.ones_like(a))
    return jnp.where(pos, safe**b, 0.0)


def _is_number(x) -> bool:
    return isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(
        x, (bool, np.bool_)
    )


def typed(fn):
    """`fn` (a function of arrays) that also takes Python numbers: all-number
    arguments give a Python float (evaluated in float64, NumPy); otherwise the
    numbers take the dtype of the array arguments, so that a constant never
    promotes a float32 model to float64 (`safe_div(1.0, x)`)."""

    def wrapped(*args):
        if all(_is_number(a) for a in args):
            with jax.ensure_compile_time_eval():
                return float(np.asarray(fn(*(np.float64(a) for a in args))))
        dtype = jnp.result_type(*(a for a in args if not _is_number(a)))
        return fn(*(jnp.asarray(a, dtype) if _is_number(a) else a for a in args))

    wrapped.__name__ = getattr(fn, "__name__", "wrapped")
    wrapped.__doc__ = fn.__doc__
    return wrapped
