"""The run-time failure of a solve as one short error: raised from a host callback
inside the compiled solve, and re-raised without XLA's wrapping at the Python
boundary of an un-jitted `simulate` call."""

import contextlib
import re

import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np

from .._results import RESULTS


_MARK = "stable_ode.simulate stopped"
_NAMES = {int(item._value): name for name, item in RESULTS._name_to_item.items()}


def failure_message(code: int, t: float, batch: str = "") -> str:
    """The one-paragraph error for result `code` with last good time `t` (ms)."""
    message = " ".join(RESULTS._index_to_message[code].split())  # one line
    return (
        f"{_MARK} at t = {t:.9g} ms{batch}, the last good time: result "
        f"`{_NAMES.get(code, code)}`: {message} Run "
        "stable_ode.diagnose on the same model and settings to find the first "
        "non-finite value (time, state, compartment, mechanism)."
    )


def raise_if_failed(x, result: RESULTS, t_fail):
    """As `result.error_if(x, result != successful)`, with the failure time (ms) in
    the message: the failure time is only known at run time, so the message is made
    in the host callback. Works under `jit` and `vmap` (raises if any batch member
    failed) and with sharded batches; transparent to autodiff."""

    def check(code, t):
        code, t = np.asarray(code), np.asarray(t)
        bad = code != 0
        if np.any(bad):
            i = int(np.argmax(bad.reshape(-1)))
            where = np.broadcast_to(t, code.shape).reshape(-1)[i]
            batch = f" (batch member {i} of {code.size})" if code.ndim else ""
            c = int(code.reshape(-1)[i])
            raise RuntimeError(failure_message(c, float(where), batch))
        return np.zeros(code.shape, np.int32)

    @jax.custom_jvp
    def checked(x, code, t):
        # Only the codes and times go to the host, and only when some solve failed:
        # `unvmap_any` keeps the `cond` a real branch under `vmap`. The callback's
        # (zero) result is added to `x` so that `x` is not returned before the
        # check has run.
        def fail():
            zero = jax.pure_callback(
                check,
                jax.ShapeDtypeStruct((), jnp.int32),
                code,
                t,
                vmap_method="broadcast_all",
            )
            return jax.tree_util.tree_map(lambda a: a + zero.astype(a.dtype), x)

        return jax.lax.cond(eqxi.unvmap_any(code != 0), fail, lambda: x)

    @checked.defjvp
    def _(primals, tangents):
        x, code, t = primals
        tx, _, _ = tangents
        return checked(x, code, t), tx

    code = jax.lax.stop_gradient(result._value).astype(jnp.int32)
    return checked(x, code, jax.lax.stop_gradient(t_fail))


@contextlib.contextmanager
def reraise_short():
    """Turn XLA's long `JaxRuntimeError` around our callback's error into the
    callback's own `RuntimeError`, one paragraph."""
    try:
        yield
    except jax.errors.JaxRuntimeError as e:
        found = re.search(rf"{re.escape(_MARK)}[^\n]*", str(e))
        if found is None:
            raise
        raise RuntimeError(found.group(0)) from None
