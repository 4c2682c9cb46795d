"""Where our fixed-step solve spends its time: `python -m benchmarks.forward
--profile` (`profile_model`, on the compartment and the cable of
`benchmarks/forward.py`), per step and per piece of the step."""


def profile_model(model, t_max: float, dt: float, repeats: int) -> None:
    """Where our `BackwardEuler` solve of `model` spends its time.

    Times, per step (µs), with the same model, dtype and number of steps:

    - the solve as `simulate` runs it, and `diffeqsolve` with various `SaveAt`s and
      step-size controllers (`StepTo` on the exact grid, `ConstantStepSize`);
    - `BackwardEuler.step` in a hand-written `lax.scan` (no diffrax), with its
      error estimate unused (XLA may drop it) or consumed (so it must be computed),
      and a diffrax solve through a wrapper whose `step` returns no error at all;
    - the pieces of the step, each alone in a `lax.scan` whose carry depends on
      the piece's output (so nothing is hoisted out of the loop): gate kinetics
      plus the exact gate update, the ionic current, its `jax.jvp`
      linearisation, the stimulus, the axial current, the tridiagonal solve, and
      an empty loop.
    """
    import diffrax as dfx
    import jax
    import jax.numpy as jnp
    import lineax as lx

    import stable_ode as so

    from ._common import format_table, loop_kernels, time_interleaved

    n = round(t_max / dt)
    dtype = model.dtype
    solver = so.BackwardEuler()
    grid = dt * jnp.arange(n + 1, dtype=dtype)
    rec = [i for _, i in model.layout.recordings]

    def save_fn(t, y, args):
        del t, args
        return y.v[jnp.asarray(rec)]

    def solve(m, saveat, controller="stepto", solver=solver):
        max_steps = n if controller in ("stepto", "constant") else n + 1000
        if controller == "constant":
            kw = dict(dt0=dt, stepsize_controller=dfx.ConstantStepSize())
        elif controller == "stepto":
            kw = dict(dt0=None, stepsize_controller=dfx.StepTo(ts=grid))
        else:
            kw = dict(dt0=None, stepsize_controller=controller)
        sol = dfx.diffeqsolve(
            so.MembraneTerm(m), solver, 0.0, t_max, y0=m.init_state(), saveat=saveat,
            max_steps=max_steps, **kw,
        )  # fmt: skip
        return sol.ys

    def scan_step(m, keep_error):
        term = so.MembraneTerm(m)

        def body(carry, k):
            y, acc = carry
            t0 = dt * k
            y1, err, _, _, _ = solver.step(term, t0, t0 + dt, y, None, None, False)
            if keep_error:
                acc = acc + jnp.sum(jnp.abs(err.v))
            return (y1, acc), y1.v[jnp.asarray(rec)]

        init = (m.init_state(), jnp.zeros((), dtype))
        (_, acc), vs = jax.lax.scan(body, init, jnp.arange(n, dtype=dtype))
        return vs, acc

    def scan_piece(m, piece):
        term = so.MembraneTerm(m)
        y0 = m.init_state()

        def body(y, k):
            return piece(term, y, dt * k), None

        return jax.lax.scan(body, y0, jnp.arange(n, dtype=dtype))[0].v

    def gates_piece(term, y, t):
        kin = term.model.kinetics(y.v, y.groups)
        groups = tuple(
            {k: x[k] + (kn[k].inf - x[k]) * -jnp.expm1(-kn[k].rate * dt) for k in x}
            for kn, x in zip(kin, y.groups, strict=True)
        )
        return so.State(v=y.v + eps_of(y) * groups[0]["m"].sum(), groups=groups)

    def eps_of(y):
        return jnp.asarray(1e-6, y.v.dtype)

    def current_piece(term, y, t):
        return so.State(v=y.v + eps_of(y) * term.model.ionic_current(y.v, y.groups),
                        groups=y.groups)  # fmt: skip

    def jvp_piece(term, y, t):
        i, g = term.linearised_current(y.v, y.groups)
        return so.State(v=y.v + eps_of(y) * (i + g), groups=y.groups)

    def stim_piece(term, y, t):
        return so.State(v=y.v + eps_of(y) * term.model.stimulus_density(t),
                        groups=y.groups)  # fmt: skip

    def axial_piece(term, y, t):
        return so.State(v=y.v + eps_of(y) * term.model.axial_density(y.v),
                        groups=y.groups)  # fmt: skip

    def solve_piece(term, y, t):
        c = term.model.coupling
        d = term.model.area * (1 / (1000 * dt) + 0.1 + 1e-3 * y.v)
        sol = lx.linear_solve(
            c.operator(d, 1.0), c.to_operator_order(y.v), lx.Tridiagonal(), throw=False
        )
        return so.State(v=c.from_operator_order(sol.value), groups=y.groups)

    def divide_piece(term, y, t):
        # The solve without a linear solver: exact for one compartment (no coupling).
        d = term.model.area * (1 / (1000 * dt) + 0.1 + 1e-3 * y.v)
        d = d + term.model.coupling.self_conductance()
        return so.State(v=y.v / d, groups=y.groups)

    def empty_piece(term, y, t):
        return so.State(v=y.v + eps_of(y), groups=y.groups)

    class Strip(dfx.AbstractSolver):
        """`BackwardEuler` whose `step` returns no error estimate and/or always
        reports success (so diffrax need not carry the linear solve's result)."""

        inner: so.BackwardEuler
        no_error: bool
        no_result: bool
        term_structure = so.MembraneTerm
        interpolation_cls = so.BackwardEuler.interpolation_cls

        def order(self, terms):
            return self.inner.order(terms)

        def init(self, terms, t0, t1, y0, args):
            return self.inner.init(terms, t0, t1, y0, args)

        def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
            y1, err, dense, state, result = self.inner.step(
                terms, t0, t1, y0, args, solver_state, made_jump
            )
            if self.no_error:
                err = None
            if self.no_result:
                result = dfx.RESULTS.successful
            return y1, err, dense, state, result

        def func(self, terms, t0, y0, args):
            return self.inner.func(terms, t0, y0, args)

    steps = dfx.SaveAt(steps=True, fn=save_fn)
    t0_steps = dfx.SaveAt(t0=True, steps=True, fn=save_fn)
    cases = {
        "simulate(BackwardEuler)": lambda m: (
            so.simulate(m, t_max, dt, solver=solver).recordings
        ),
        "simulate(BackwardEuler, throw=False)": lambda m: (
            so.simulate(m, t_max, dt, solver=solver, throw=False).recordings
        ),
    }
    safe_step_to, guard = _safe_step_to(), _nonfinite_guard()
    if safe_step_to is not None and guard is not None:
        cases["diffeqsolve NonFiniteGuard(BE), SafeStepTo, SaveAt(t0, steps, fn)"] = (
            lambda m: solve(m, t0_steps, safe_step_to(grid), guard(solver))
        )
    if safe_step_to is not None:
        cases["diffeqsolve SafeStepTo, SaveAt(t0, steps, fn)"] = lambda m: solve(
            m, t0_steps, safe_step_to(grid)
        )
    cases |= {
        "diffeqsolve StepTo, SaveAt(t0, steps, fn)": lambda m: solve(m, t0_steps),
        "diffeqsolve StepTo, SaveAt(steps, fn)": lambda m: solve(m, steps),
        "diffeqsolve StepTo, SaveAt(t1)": lambda m: solve(m, dfx.SaveAt(t1=True)),
        "diffeqsolve ConstantStepSize, SaveAt(steps, fn)": lambda m: solve(
            m, steps, "constant"
        ),
        "diffeqsolve StepTo, SaveAt(steps, fn), step returns no error": (
            lambda m: solve(m, steps, solver=Strip(solver, True, False))
        ),
        "diffeqsolve StepTo, SaveAt(steps, fn), step returns no result": (
            lambda m: solve(m, steps, solver=Strip(solver, False, True))
        ),
        "lax.scan of BackwardEuler.step, error unused": lambda m: scan_step(m, False)[
            0
        ],
        "lax.scan of BackwardEuler.step, error consumed": lambda m: scan_step(m, True),
        "piece: gate kinetics + exact gate update": lambda m: scan_piece(
            m, gates_piece
        ),
        "piece: ionic current": lambda m: scan_piece(m, current_piece),
        "piece: ionic current + jvp linearisation": lambda m: scan_piece(m, jvp_piece),
        "piece: stimulus density": lambda m: scan_piece(m, stim_piece),
        "piece: axial current": lambda m: scan_piece(m, axial_piece),
        "piece: tridiagonal solve (lineax, LAPACK gtsv)": lambda m: scan_piece(
            m, solve_piece
        ),
        "piece: diagonal division instead of the solve": lambda m: scan_piece(
            m, divide_piece
        ),
        "piece: empty loop (v + eps)": lambda m: scan_piece(m, empty_piece),
    }
    fns = [jax.jit(f) for f in cases.values()]
    timed = time_interleaved(fns, [(model,)] * len(fns), repeats=repeats)
    rows = [
        [
            name,
            f"{1e6 * t.median / n:.2f}",
            f"{1e6 * t.min / n:.2f}",
            "+".join(str(k) for k in loop_kernels(fn, model)),
        ]
        for (name, fn), (t, _) in zip(zip(cases, fns, strict=True), timed, strict=True)
    ]
    print(
        f"\n# profile: {model.n_compartments} compartments, {n} steps, {dtype}: "
        "µs per step, and kernels per iteration of each while loop",
        flush=True,
    )
    header = ["what", "median µs/step", "min µs/step", "loop kernels"]
    print(format_table(header, rows), flush=True)


def _safe_step_to():
    """`stable_ode`'s safe fixed-step controller class, if this version has one."""
    import stable_ode as so

    if hasattr(so, "SafeStepTo"):
        return so.SafeStepTo
    try:
        from stable_ode._controller import SafeStepTo
    except ImportError:
        return None
    return SafeStepTo


def _nonfinite_guard():
    """`stable_ode`'s non-finite-guarding solver wrapper, if this version has one."""
    import stable_ode as so

    if hasattr(so, "NonFiniteGuard"):
        return so.NonFiniteGuard
    try:
        from stable_ode._solver.nonfinite_guard import NonFiniteGuard
    except ImportError:
        return None
    return NonFiniteGuard
