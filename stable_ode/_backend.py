"""Which floating-point dtypes a solve can be compiled in on JAX's default backend.

XLA:TPU's compiler rejects `jnp.nextafter` in float64 ("Binary op ... with
different element types: s32[] and u32[]", seen with JAX 0.10.2 on a TPU v5e), and
diffrax's `diffeqsolve` calls it in every solve: it computes `t1` less 100 ULPs,
and `ConstantStepSize` nudges `dt0` up by one ULP. Every float64 solve on a TPU
would stop in the compiler with that message; `check_backend` says so up front,
before anything is traced. XLA:TPU emulates float64 in any case (float32's
exponent range: `1e300` overflows), so float32 is the dtype to use there."""

import functools

import jax
import jax.numpy as jnp

from ._errors import Unsupported


@functools.cache
def _nextafter_compiles(backend: str, dtype_name: str) -> bool:
    """Whether `backend` (the platform of JAX's default device, the cache key)
    compiles `jnp.nextafter` in `dtype_name`: tried once per process and platform
    (a scalar program, compiled for the default device, not run)."""
    del backend
    x = jax.ShapeDtypeStruct((), jnp.dtype(dtype_name))
    try:
        jax.jit(lambda t: jnp.nextafter(t, -jnp.inf)).lower(x).compile()
    except jax.errors.JaxRuntimeError:
        return False
    return True


def _platform() -> str:
    """The platform a solve compiles for: the device of `jax.default_device(...)`
    where one is set, else JAX's default backend."""
    device = jax.config.jax_default_device
    if device is None:
        return jax.default_backend()
    return device if isinstance(device, str) else device.platform


def check_backend(dtype) -> None:
    """A `stable_ode._errors.Unsupported` (a `NotImplementedError`) if the
    platform the solve compiles for (JAX's default device) cannot compile it in
    `dtype` (the model's floating-point dtype): float64 where the compiler
    rejects `jnp.nextafter`, as XLA:TPU's does. Nothing is tried on the CPU,
    whose compiler takes every dtype."""
    backend = _platform()
    dtype = jnp.dtype(dtype)
    if backend == "cpu" or dtype != jnp.float64:
        return
    if not _nextafter_compiles(backend, dtype.name):
        raise Unsupported(
            f"simulate: a float64 model cannot be compiled on this {backend} "
            "backend: its compiler rejects `jnp.nextafter` in float64, which "
            "diffrax's diffeqsolve uses in every solve (XLA:TPU also emulates "
            "float64, with float32's exponent range). Use float32 "
            "(`stable_ode.build(..., dtype=jnp.float32)`; in a model file "
            '`"integration": {"dtype": "float32"}`), or run the float64 model on '
            "the CPU (`JAX_PLATFORMS=cpu`, or `with jax.default_device(jax."
            "devices('cpu')[0]): ...`; see docs/performance.md, 'On a TPU')"
        )
