"""Forward-simulation speed against Jaxley (issue 2, "Performance").

    python -m benchmarks.forward [--quick] [--dtype float32|float64|both] [--profile]

Builds the same two models in stable_ode and in Jaxley (a benchmark-only
dependency, `pip install jaxley`):

- **compartment**: one HH compartment (length = diameter = 20 µm), 100 ms;
- **cable**: an unbranched HH cable, 1000 µm long, 2 µm diameter, 100
  compartments, 50 ms;

both with NEURON's `hh` at 6.3 °C (Jaxley's `HH` has no q10, ours is 1 there),
Ra = 100 Ω·cm, cm = 1 µF/cm², v_init = -65 mV with gates at steady state, a
0.1 nA step current from 5 ms for 40 ms (into the middle of the compartment,
into the 0 end of the cable), dt = 0.025 ms, recording the membrane potential
at every step (both ends of the cable). Both simulators are jitted with the
model parameters as arguments, run once to compile, then timed (median of
several calls, `jax.block_until_ready`), alternating calls between the two so
that they share the machine's noise. The voltage traces are compared
(`max |Δv|`) so that the timings compare the same computation.

Solvers: our `BackwardEuler` against Jaxley's default `bwd_euler` (NEURON's
staggered backward Euler in both; for one compartment the two produce the same
numbers to rounding), our `CrankNicolson` against Jaxley's `crank_nicolson`
(different second-order schemes: ours is a Strang splitting with L-stable
start-up steps, Jaxley's is NEURON's `secondorder=2`-like half-step), and our
`ExponentialEuler` against Jaxley's `bwd_euler` (Jaxley 0.14's `exp_euler`
fails on a single compartment; its `bwd_euler` skips the linear solve there,
so it is the same elementwise update).

x64 is a global JAX flag, and Jaxley picks its dtype from it, so each dtype
runs in its own subprocess (`--dtype both`, the default, starts one per dtype).
`--profile` adds a breakdown of where our solves spend their time (see
`benchmarks/README.md`).
"""

import argparse
import dataclasses
import os


DT = 0.025  # ms
RA = 100.0  # Ω·cm
CM = 1.0  # µF/cm²
V_INIT = -65.0  # mV
AMPLITUDE, DELAY, DURATION = 0.1, 5.0, 40.0  # nA, ms, ms


@dataclasses.dataclass(frozen=True)
class Case:
    """One benchmark geometry (µm, ms) and the solver pairs it is timed with."""

    name: str
    length: float
    diameter: float
    n_compartments: int
    t_max: float
    stim_position: float
    record_positions: tuple[float, ...]
    solvers: tuple[tuple[str, str], ...]  # (our solver class name, Jaxley solver)


COMPARTMENT = Case(
    name="HH compartment, 100 ms",
    length=20.0,
    diameter=20.0,
    n_compartments=1,
    t_max=100.0,
    stim_position=0.5,
    record_positions=(0.5,),
    solvers=(
        ("BackwardEuler", "bwd_euler"),
        ("CrankNicolson", "crank_nicolson"),
        ("ExponentialEuler", "bwd_euler"),
    ),
)
CABLE = Case(
    name="HH cable, 100 comp., 50 ms",
    length=1000.0,
    diameter=2.0,
    n_compartments=100,
    t_max=50.0,
    stim_position=0.0,
    record_positions=(0.0, 1.0),
    solvers=(("BackwardEuler", "bwd_euler"), ("CrankNicolson", "crank_nicolson")),
)


def build_ours(case: Case, dtype):
    """The stable_ode `MembraneModel` of `case`."""
    import stable_ode as so

    cell = so.Cell(
        "cell",
        [so.Section("sec", case.length, case.diameter, case.n_compartments)],
        [so.Insert(so.HH())],
        axial_resistivity=RA,
        capacitance=CM,
    )
    stim = so.StepCurrent(
        so.Site("cell", "sec", case.stim_position), AMPLITUDE, DELAY, DURATION
    )
    recs = [
        so.Recording(f"r{k}", so.Site("cell", "sec", x))
        for k, x in enumerate(case.record_positions)
    ]
    return so.build([cell], [stim], recs, celsius=6.3, v_init=V_INIT, dtype=dtype)


def build_jaxley(case: Case):
    """The Jaxley module of `case` (dtype follows JAX's x64 flag)."""
    import jaxley as jx
    from jaxley.channels import HH

    comp = jx.Compartment()
    module = comp if case.n_compartments == 1 else jx.Branch(comp, case.n_compartments)
    module.set("length", case.length / case.n_compartments)  # per compartment
    module.set("radius", case.diameter / 2)
    module.set("axial_resistivity", RA)
    module.set("capacitance", CM)
    module.insert(HH())
    module.set("v", V_INIT)
    module.init_states()

    def comp_at(x):
        # NEURON's sec(x): compartment min(floor(x·n), n-1), as stable_ode uses.
        k = min(int(x * case.n_compartments), case.n_compartments - 1)
        return module if case.n_compartments == 1 else module.comp(k)

    current = jx.step_current(DELAY, DURATION, AMPLITUDE, DT, case.t_max)
    comp_at(case.stim_position).stimulate(current, verbose=False)
    for x in case.record_positions:
        comp_at(x).record("v", verbose=False)
    return module


def run_case(case: Case, dtype_name: str, repeats: int, solvers=None) -> list[dict]:
    """Time every solver pair of `case` in this process's dtype.

    **Returns:** one dict per solver pair with times in ms and `max |Δv|` in mV.
    """
    import jax
    import jax.numpy as jnp
    import jaxley as jx

    import stable_ode as so

    from ._common import max_abs_diff, time_interleaved

    dtype = jnp.float64 if dtype_name == "float64" else jnp.float32
    model = build_ours(case, dtype)
    module = build_jaxley(case)
    params = module.get_parameters()
    names = [name for name, _ in model.layout.recordings]
    rows = []
    for ours_name, jaxley_solver in solvers or case.solvers:
        solver = getattr(so, ours_name)()

        @jax.jit
        def ours(m, solver=solver):
            sim = so.simulate(m, case.t_max, DT, solver=solver)
            return jnp.stack([sim.recordings[n] for n in names])

        @jax.jit
        def theirs(p, jaxley_solver=jaxley_solver):
            return jx.integrate(
                module, p, t_max=case.t_max, delta_t=DT, solver=jaxley_solver
            )

        (t_ours, v_ours), (t_jx, v_jx) = time_interleaved(
            [ours, theirs], [(model,), (params,)], repeats=repeats
        )
        assert v_ours.dtype == dtype and v_jx.dtype == dtype, (v_ours.dtype, v_jx.dtype)
        rows.append(
            dict(
                case=case.name,
                dtype=dtype_name,
                ours=ours_name,
                jaxley=jaxley_solver,
                ours_ms=1e3 * t_ours.median,
                jaxley_ms=1e3 * t_jx.median,
                ours_min_ms=1e3 * t_ours.min,
                jaxley_min_ms=1e3 * t_jx.min,
                ours_compile_s=t_ours.compile,
                jaxley_compile_s=t_jx.compile,
                max_dv=max_abs_diff(v_ours, v_jx),
                n_samples=(v_ours.shape[-1], v_jx.shape[-1]),
            )
        )
    return rows


def print_rows(rows: list[dict]) -> None:
    from ._common import format_table

    header = [
        "case", "dtype", "ours", "Jaxley", "ours ms", "Jaxley ms", "ratio",
        "ratio (min)", "max |Δv| mV", "compile s (ours/Jaxley)",
    ]  # fmt: skip
    body = [
        [
            r["case"],
            r["dtype"],
            r["ours"],
            r["jaxley"],
            f"{r['ours_ms']:.2f}",
            f"{r['jaxley_ms']:.2f}",
            f"{r['ours_ms'] / r['jaxley_ms']:.2f}",
            f"{r['ours_min_ms'] / r['jaxley_min_ms']:.2f}",
            f"{r['max_dv']:.2g}",
            f"{r['ours_compile_s']:.1f} / {r['jaxley_compile_s']:.1f}",
        ]
        for r in rows
    ]
    print(format_table(header, body), flush=True)


def run_dtype(dtype_name: str, quick: bool, profile: bool) -> None:
    import jax

    # Benchmark script, not library code: x64 is chosen per process.
    jax.config.update("jax_enable_x64", dtype_name == "float64")
    repeats = 3 if quick else 11
    print(
        f"# {dtype_name}: jax {jax.__version__}, {jax.default_backend()}, "
        f"{os.cpu_count()} CPUs, median of {repeats} calls after compilation",
        flush=True,
    )
    rows = []
    for case in (COMPARTMENT, CABLE):
        solvers = case.solvers[:1] if quick else None
        rows += run_case(case, dtype_name, repeats, solvers)
    print_rows(rows)
    if profile:
        for case in (COMPARTMENT, CABLE):
            profile_model(build_ours(case, _dtype(dtype_name)), case.t_max, DT, repeats)


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
        kin = term.model.gate_kinetics(y.v)
        gates = tuple(
            {k: x[k] + (kn[k].inf - x[k]) * -jnp.expm1(-kn[k].rate * dt) for k in x}
            for kn, x in zip(kin, y.gates, strict=True)
        )
        return so.State(v=y.v + eps_of(y) * gates[0]["m"].sum(), gates=gates)

    def eps_of(y):
        return jnp.asarray(1e-6, y.v.dtype)

    def current_piece(term, y, t):
        return so.State(v=y.v + eps_of(y) * term.model.ionic_current(y.v, y.gates),
                        gates=y.gates)  # fmt: skip

    def jvp_piece(term, y, t):
        i, g = term.linearised_current(y.v, y.gates)
        return so.State(v=y.v + eps_of(y) * (i + g), gates=y.gates)

    def stim_piece(term, y, t):
        return so.State(v=y.v + eps_of(y) * term.model.stimulus_density(t),
                        gates=y.gates)  # fmt: skip

    def axial_piece(term, y, t):
        return so.State(v=y.v + eps_of(y) * term.model.axial_density(y.v),
                        gates=y.gates)  # fmt: skip

    def solve_piece(term, y, t):
        c = term.model.coupling
        d = term.model.area * (1 / (1000 * dt) + 0.1 + 1e-3 * y.v)
        sol = lx.linear_solve(
            c.operator(d, 1.0), c.to_operator_order(y.v), lx.Tridiagonal(), throw=False
        )
        return so.State(v=c.from_operator_order(sol.value), gates=y.gates)

    def divide_piece(term, y, t):
        # The solve without a linear solver: exact for one compartment (no coupling).
        d = term.model.area * (1 / (1000 * dt) + 0.1 + 1e-3 * y.v)
        d = d + term.model.coupling.self_conductance()
        return so.State(v=y.v / d, gates=y.gates)

    def empty_piece(term, y, t):
        return so.State(v=y.v + eps_of(y), gates=y.gates)

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


def _dtype(name):
    import jax.numpy as jnp

    return jnp.float64 if name == "float64" else jnp.float32


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.forward", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="both"
    )
    parser.add_argument(
        "--quick", action="store_true", help="3 repeats, BackwardEuler only"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also break down where our solves spend their time",
    )
    args = parser.parse_args(argv)
    if args.dtype != "both":
        run_dtype(args.dtype, args.quick, args.profile)
        return
    from ._common import run_each_dtype

    run_each_dtype("forward", ["--quick"] * args.quick + ["--profile"] * args.profile)


if __name__ == "__main__":
    main()
