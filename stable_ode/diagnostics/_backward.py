"""The backward search of `diagnose`: the gradient one step at a time (a
reverse scan of per-step VJPs) and the first non-finite cotangent."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._model import MembraneModel, State
from .._term import MembraneTerm
from ._common import (
    _bad_jnp,
    _bad_np,
    _first_bad_state,
    _name_leaf,
    _params_at,
    _step,
)
from ._probes import kinetics_function, kinetics_values
from ._report import Diagnosis


def _recordings(model, ys: State):
    recs = model.layout.recordings
    if not recs:
        return {"v": ys.v}
    return {name: ys.v[:, i] for name, i in recs}


def _backward(model, solver, ts, y0_given, loss, n) -> Diagnosis:
    params, static = eqx.partition(model, eqx.is_inexact_array)

    def init(p):
        m = eqx.combine(p, static)
        return m.init_state() if y0_given is None else y0_given

    def step(p, y, k, ss):
        return _step(solver, eqx.combine(p, static), ts[k], ts[k + 1], y, ss)[:2]

    @jax.jit
    def forward(p):
        y0 = init(p)
        ss0 = solver.init(MembraneTerm(eqx.combine(p, static)), ts[0], ts[1], y0, None)

        def body(c, k):
            y, ss = c
            y1, ss1 = step(p, y, k, ss)
            return (y1, ss1), (y, ss)

        (yn, _), (ys, sss) = jax.lax.scan(body, (y0, ss0), jnp.arange(n))
        ys = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b[None]]), ys, yn)
        return ys, sss

    ys, sss = forward(params)

    def loss_of(ys):
        return loss(_recordings(model, ys))

    ct_ys = jax.grad(loss_of)(ys)
    take = lambda tree, k: jax.tree_util.tree_map(lambda a: a[k], tree)  # noqa: E731
    bad_loss = [
        bool(np.any(_bad_np(x, np.inf))) for x in jax.tree_util.tree_leaves(ct_ys)
    ]
    if any(bad_loss):
        v = np.asarray(ct_ys.v)
        bad = _bad_np(v, np.inf)
        k, c = (int(a[0]) for a in np.nonzero(bad)) if np.any(bad) else (0, 0)
        return Diagnosis(
            found=True,
            direction="backward",
            kind="non-finite",
            step=k,
            t0=float(ts[k]),
            t1=float(ts[k]),
            state="d loss/d v",
            compartment=c,
            location=model.layout.describe(c),
            value=float(v[k, c]),
            stage="loss",
            function="the loss function",
            inputs={"v [mV]": float(ys.v[k, c])},
            n_steps=n,
        )

    @jax.jit
    def backward(p, ys, sss, ct_ys):
        def body(carry, k):
            ct_next, acc = carry
            ct = jax.tree_util.tree_map(jnp.add, ct_next, take(ct_ys, k + 1))
            # Once a cotangent is bad, stop feeding it on (lineax's transposed
            # solve raises on non-finite input): only the first bad step matters.
            ok = ~_bad_jnp(ct, jnp.inf)
            ct = jax.tree_util.tree_map(
                lambda a: jnp.where(ok, a, jnp.zeros_like(a)), ct
            )
            _, vjp = jax.vjp(
                lambda p, y: step(p, y, k, take(sss, k))[0], p, take(ys, k)
            )
            ct_p, ct_y = vjp(ct)
            flags = (_bad_jnp(ct_y, jnp.inf) | ~ok, _bad_jnp(ct_p, jnp.inf))
            acc = jax.tree_util.tree_map(jnp.add, acc, ct_p)
            return (ct_y, acc), flags

        zero_y = jax.tree_util.tree_map(jnp.zeros_like, take(ys, 0))
        zero_p = jax.tree_util.tree_map(jnp.zeros_like, p)
        (ct_y0, acc), flags = jax.lax.scan(
            body, (zero_y, zero_p), jnp.arange(n - 1, -1, -1)
        )
        ct_y0 = jax.tree_util.tree_map(jnp.add, ct_y0, take(ct_ys, 0))
        _, vjp0 = jax.vjp(init, p)
        (ct_init,) = vjp0(ct_y0)
        return acc, ct_init, flags

    acc, ct_init, (flag_y, flag_p) = backward(params, ys, sss, ct_ys)
    flag = np.asarray(flag_y) | np.asarray(flag_p)  # in reverse step order
    grad = jax.tree_util.tree_map(jnp.add, acc, ct_init)
    if not np.any(flag):
        if any(np.any(_bad_np(x, np.inf)) for x in jax.tree_util.tree_leaves(ct_init)):
            return _name_cotangent(model, ct_init, None, -1, ts, n, "init_states")
        return Diagnosis(found=False, n_steps=n, gradient=grad)
    r = int(np.argmax(flag))
    k = n - 1 - r
    # Re-run that step's VJP to name the cotangent and the function.
    ct_next = jax.tree_util.tree_map(jnp.zeros_like, take(ys, 0))
    if r > 0:
        # cotangent flowing into step k: recompute the suffix (cheap, finite).
        def suffix(p):
            def body(ct, kk):
                ct = jax.tree_util.tree_map(jnp.add, ct, take(ct_ys, kk + 1))
                _, vjp = jax.vjp(
                    lambda y: step(p, y, kk, take(sss, kk))[0], take(ys, kk)
                )
                return vjp(ct)[0], None

            return jax.lax.scan(body, ct_next, jnp.arange(n - 1, k, -1))[0]

        ct_next = jax.jit(suffix)(params)
    ct = jax.tree_util.tree_map(jnp.add, ct_next, take(ct_ys, k + 1))
    _, vjp = jax.vjp(lambda p, y: step(p, y, k, take(sss, k))[0], params, take(ys, k))
    ct_p, ct_y = vjp(ct)
    d = _name_cotangent(model, ct_p, ct_y, k, ts, n, None)
    blame = _blame_derivative(model, take(ys, k), take(ys, k + 1))
    if blame is not None:
        stage, mechanism, function, inputs, culprit_location = blame
        d = dataclasses.replace(
            d,
            stage=stage,
            mechanism=mechanism,
            function=function,
            inputs=inputs,
            culprit_location=culprit_location,
        )
    return d


def _name_cotangent(model, ct_p, ct_y, k, ts, n, stage) -> Diagnosis:
    state = parameter = location = None
    comp = value = None
    if ct_y is not None:
        found = _first_bad_state(model, ct_y, np.inf)
        if found is not None:
            label, comp, value, _ = found
            state = f"d loss/d {label}"
    for path, x in jax.tree_util.tree_flatten_with_path(ct_p)[0]:
        bad = _bad_np(x, np.inf).ravel()
        if np.any(bad):
            j = int(np.argmax(bad))
            parameter, pcomp = _name_leaf(model, path, j)
            if pcomp is not None:
                parameter += f" at {model.layout.describe(pcomp)}"
            if value is None:
                value = float(np.asarray(x).ravel()[j])
            break
    if comp is not None:
        location = model.layout.describe(comp)
    return Diagnosis(
        found=True,
        direction="backward",
        kind="non-finite",
        step=k,
        t0=float(ts[max(k, 0)]),
        t1=float(ts[k + 1]) if k >= 0 else float(ts[0]),
        state=state,
        parameter=parameter,
        compartment=comp,
        location=location,
        value=value,
        stage=stage or "backward step",
        function=None,
        n_steps=n,
    )


def _blame_derivative(model: MembraneModel, y0: State, y1: State):
    """The first mechanism function whose derivative (what the backward pass
    multiplies cotangents by) is non-finite at the step's states."""
    n_mech = len(model.mechanisms)
    for y in (y0, y1):
        for group, gates in zip(model.mechanisms, y.groups[:n_mech], strict=True):
            mech = group.mechanism
            name = type(mech).__name__
            n = int(group.index.shape[0])
            v = y.v[group.index]
            env = group.environment(model)

            def kin(m, v, s, env=env):
                return kinetics_values(m.kinetics(v, s, env), s)

            def cur(m, v, s, env=env):
                return m.current(v, s, env)

            def lin(m, v, s, env=env):
                return jax.jvp(
                    lambda u: m.current(u, s, env), (v,), (jnp.ones_like(v),)
                )[1]

            checks = [
                ("kinetics", kinetics_function(mech), (kin, mech, v, gates)),
                ("current", f"{name}.current", (cur, mech, v, gates)),
                ("linearisation", f"jax.jvp of {name}.current", (lin, mech, v, gates)),
            ]
            for stage, func, (fn, *args) in checks:
                out, vjp = jax.vjp(fn, *args)
                cts = vjp(jax.tree_util.tree_map(jnp.ones_like, out))
                bad = np.zeros(n, bool)
                for x in jax.tree_util.tree_leaves(cts):
                    x = np.asarray(x)
                    if x.shape == (n,):
                        bad |= _bad_np(x, np.inf)
                    elif np.any(_bad_np(x, np.inf)):
                        bad |= True
                if np.any(bad):
                    j = int(np.argmax(bad))
                    comp = int(np.asarray(group.index)[j])
                    inputs = {
                        "v": float(v[j]),
                        **{g: float(x[j]) for g, x in gates.items()},
                    }
                    inputs.update(_params_at(mech, j, n))
                    return (
                        f"derivative of {stage}",
                        name,
                        func,
                        inputs,
                        model.layout.describe(comp),
                    )
    return None
