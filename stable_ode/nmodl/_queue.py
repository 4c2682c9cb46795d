"""The self-event queue of a point process whose NET_RECEIVE runs in turn
(`stable_ode.nmodl._sequential`): `slots` events per instance, held in the
states `queue:t<k>` (ms, `EMPTY` when empty), `queue:flag<k>` and
`queue:src<k>` (which NetCon's weight vector), and `queue:last` (the slot of
the last self-event sent, which `net_move` moves; only for files that call
it)."""

import jax.numpy as jnp

from . import _runtime


EMPTY = 1e30
"""The time (ms) of an empty queue slot: finite, so the states stay finite."""
LAST = "queue:last"
"""The slot of each instance's last self-event sent (-1: none yet), which
`net_move` moves."""


def take_rows(x, rows):
    """`x[rows]`; `x` itself where `rows` is `None` (every instance, as in a
    pass over all of them: no gather)."""
    return x if rows is None else x[rows]


def put_rows(x, rows, value):
    """`x` with `x[rows]` set to `value` (in `x`'s dtype); `value` where `rows`
    is `None` (every instance: no scatter)."""
    if rows is None:
        return jnp.broadcast_to(value, x.shape).astype(x.dtype)
    return x.at[rows].set(value.astype(x.dtype))


def add_rows(x, rows, value):
    """`x` with `value` added at `rows` (`None`: every instance)."""
    if rows is None:
        return x + value.astype(x.dtype)
    return x.at[rows].add(value.astype(x.dtype))


def queue_keys(k: int) -> tuple[str, str, str]:
    return f"queue:t{k}", f"queue:flag{k}", f"queue:src{k}"


def move(states, slots, rows, moved, t):
    """`states` with the self-event that each instance of `rows` (`None`: all)
    sent last moved to time `t` (ms) where `moved` (NEURON's `net_move`); and
    whether one had none pending (NEURON stops with an error there)."""
    out = dict(states)
    last = take_rows(states[LAST], rows).astype(jnp.int32)
    found = jnp.zeros_like(moved)
    for k in range(slots):
        tk = queue_keys(k)[0]
        old = take_rows(out[tk], rows)
        here = moved & (last == k) & (old < 0.5 * EMPTY)
        found = found | here
        out[tk] = put_rows(out[tk], rows, jnp.where(here, t, old))
    return out, jnp.any(moved & ~found)


def enqueue(states, slots, rows, sent, t, flag, src, like):
    """`states` with a self-event at time `t` with `flag` from NetCon `src`
    queued at each instance of `rows` (`None`: all) where `sent` (in its
    first empty slot); and whether a queue was full."""
    t = _runtime.as_n(t, like)
    flag = _runtime.as_n(flag, like)
    times = jnp.stack(
        [take_rows(states[queue_keys(k)[0]], rows) for k in range(slots)], 1
    )
    empty = times >= 0.5 * EMPTY
    first = jnp.argmax(empty, axis=1)
    room = jnp.any(empty, axis=1)
    full = sent & ~room
    out = dict(states)
    for k in range(slots):
        tk, fk, sk = queue_keys(k)
        put = sent & room & (first == k)
        s = src.astype(out[sk].dtype)
        for key, new in ((tk, t), (fk, flag), (sk, s)):
            out[key] = put_rows(
                out[key], rows, jnp.where(put, new, take_rows(out[key], rows))
            )
        if LAST in out:  # (for net_move)
            x = out[LAST]
            out[LAST] = put_rows(x, rows, jnp.where(put, float(k), take_rows(x, rows)))
    return out, jnp.any(full)
