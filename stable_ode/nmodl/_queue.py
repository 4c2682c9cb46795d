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


def queue_keys(k: int) -> tuple[str, str, str]:
    return f"queue:t{k}", f"queue:flag{k}", f"queue:src{k}"


def move(states, slots, rows, moved, t):
    """`states` with the self-event that each instance of `rows` sent last
    moved to time `t` (ms) where `moved` (NEURON's `net_move`); and whether
    one had none pending (NEURON stops with an error there)."""
    out = dict(states)
    last = states[LAST][rows].astype(jnp.int32)
    found = jnp.zeros_like(moved)
    for k in range(slots):
        tk = queue_keys(k)[0]
        here = moved & (last == k) & (out[tk][rows] < 0.5 * EMPTY)
        found = found | here
        dt = out[tk].dtype
        out[tk] = out[tk].at[rows].set(jnp.where(here, t, out[tk][rows]).astype(dt))
    return out, jnp.any(moved & ~found)


def enqueue(states, slots, rows, sent, t, flag, src, like):
    """`states` with a self-event at time `t` with `flag` from NetCon `src`
    queued at each instance of `rows` where `sent` (in its first empty slot);
    and whether a queue was full."""
    t = _runtime.as_n(t, like)
    flag = _runtime.as_n(flag, like)
    times = jnp.stack([states[queue_keys(k)[0]][rows] for k in range(slots)], 1)
    empty = times >= 0.5 * EMPTY
    first = jnp.argmax(empty, axis=1)
    full = sent & ~jnp.any(empty, axis=1)
    out = dict(states)
    for k in range(slots):
        tk, fk, sk = queue_keys(k)
        put = sent & jnp.any(empty, axis=1) & (first == k)
        dt = out[tk].dtype
        out[tk] = out[tk].at[rows].set(jnp.where(put, t, out[tk][rows]).astype(dt))
        out[fk] = out[fk].at[rows].set(jnp.where(put, flag, out[fk][rows]).astype(dt))
        s = src.astype(dt)
        out[sk] = out[sk].at[rows].set(jnp.where(put, s, out[sk][rows]))
        if LAST in out:  # (for net_move)
            x = out[LAST]
            out[LAST] = x.at[rows].set(
                jnp.where(put, float(k), x[rows]).astype(x.dtype)
            )
    return out, jnp.any(full)
