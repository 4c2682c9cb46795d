"""Forward-simulation speed against Jaxley.

    python -m benchmarks.forward [--quick | --smoke] [--dtype float32|float64|both]
                                 [--profile]

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
so it is the same elementwise update). Rows without a suffix are `simulate`'s
default (`optimistic=None`: a plain `diffrax.StepTo` run first, the safe solve
only if that went non-finite; gradients through the safe solve alone). Rows
`BackwardEuler+safe` (and the batch's `vmap of BackwardEuler+safe`) are
`simulate(..., optimistic=False)`: the safe fixed-step loop (`SafeStepTo`, a
finiteness test and retry bookkeeping at every step) alone.

Next to Jaxley, in the same interleaved timing: NEURON 9's fixed step
(`benchmarks/_neuron.py`: `h.finitialize` + `ParallelContext.psolve`, `secondorder=0`
for our `BackwardEuler` and `ExponentialEuler`, the same scheme as ours and
Jaxley's `bwd_euler`, and `secondorder=2` for our `CrankNicolson`), always
float64, recording `v` at every step.

- **batch**: 64 HH compartments with `gnabar` evenly spaced in 0.08–0.16 S/cm²,
  100 ms: ours `jax.vmap` of `simulate` over `gnabar`, Jaxley `jax.vmap` of
  `jx.integrate` over its trainable `HH_gNa`, NEURON the 64 cells in one
  simulation.
- **adaptive**: the compartment (and, in the full run, the cable) with adaptive
  steps at one tolerance: our `CrankNicolson` with `diffrax.PIDController`,
  diffrax's generic `Kvaerno5` and `Tsit5` (compartment only) through `simulate`
  with the same controller, NEURON's CVODE at `atol` = the tolerance; with each
  run's spike-time error against CVODE at atol 1e-8 (equal tolerances are not
  equal accuracy; `benchmarks/work_precision.py` compares at equal accuracy).

Jaxley and NEURON are benchmark-only dependencies: without them their columns
are left out. x64 is a global JAX flag, and Jaxley picks its dtype from it, so
each dtype runs in its own subprocess (`--dtype both`, the default, starts one
per dtype). `--quick`: 3 timed calls, `BackwardEuler` (default and safe)
only, adaptive on the
compartment only; `--smoke`: 10 ms, 4-way batch, 1 call (a test). Each process
appends its rows to `$BENCHMARKS_JSON` if set (`python -m benchmarks` does).
`--profile` adds a breakdown of where our solves spend their time (see
`benchmarks/README.md`, "forward").
"""

import argparse
import dataclasses
import os

from ._models import (
    build_jaxley,
    build_neuron,
    build_ours,
    CABLE,
    Case,
    CM,
    COMPARTMENT,
    describe,
    DT,
    RA,
    V_INIT,
)


# NEURON's fixed-step scheme for each of our fixed-step solvers.
NEURON_SCHEME = {"BackwardEuler": 0, "CrankNicolson": 2, "ExponentialEuler": 0}


def compare(
    case_name: str,
    dtype_name: str,
    ours_name: str,
    ours,
    ours_args: tuple,
    jaxley=None,
    neuron=None,
    repeats: int = 11,
) -> dict:
    """Time `ours(*ours_args)` interleaved with its peers; one table row.

    **Arguments:**

    - `case_name`, `dtype_name`, `ours_name`: labels.
    - `ours`: a jitted function returning the recorded voltages (mV).
    - `jaxley`: `None`, or `(label, jitted function, argument tuple)`.
    - `neuron`: `None`, or `(label, function of no arguments)` (a NEURON run).
    - `repeats`: timed calls of each.

    **Returns:** a dict with the times (ms: median, minimum; compile s) of each,
    and `max |Δv|` (mV) of each peer's voltages against ours (`None` where a peer
    is absent).
    """
    from ._common import max_abs_diff, time_interleaved

    fns, args = [ours], [ours_args]
    if jaxley is not None:
        fns.append(jaxley[1])
        args.append(jaxley[2])
    if neuron is not None:
        fns.append(neuron[1])
        args.append(())
    timed = time_interleaved(fns, args, repeats=repeats)
    t_ours, v_ours = timed[0]
    row = dict(
        case=case_name,
        dtype=dtype_name,
        ours=ours_name,
        ours_ms=1e3 * t_ours.median,
        ours_min_ms=1e3 * t_ours.min,
        ours_compile_s=t_ours.compile,
        jaxley=None,
        neuron=None,
    )
    rest = timed[1:]
    for key, peer in (("jaxley", jaxley), ("neuron", neuron)):
        if peer is None:
            continue
        (t, v), rest = rest[0], rest[1:]
        if key == "jaxley":
            assert v.dtype == v_ours.dtype, (v.dtype, v_ours.dtype)
        row |= {
            key: peer[0],
            f"{key}_ms": 1e3 * t.median,
            f"{key}_min_ms": 1e3 * t.min,
            f"{key}_compile_s": t.compile,
            f"{key}_max_dv": max_abs_diff(v_ours, v),
        }
    # the pre-NEURON name of Jaxley's `max |Δv|`
    row["max_dv"] = row.get("jaxley_max_dv")
    return row


def run_case(case: Case, dtype_name: str, repeats: int, solvers=None) -> list[dict]:
    """Time every solver pair of `case` in this process's dtype: ours, Jaxley (if
    installed) and NEURON's fixed step (if installed), calls interleaved.

    **Returns:** one dict per solver pair (`compare`'s).
    """
    import jax
    import jax.numpy as jnp

    import stable_ode as so

    from ._common import have_jaxley

    dtype = _dtype(dtype_name)
    model = build_ours(case, dtype)
    names = [name for name, _ in model.layout.recordings]
    module = build_jaxley(case) if have_jaxley() else None
    nrn = build_neuron(case)
    rows = []
    try:
        for ours_name, jaxley_solver in solvers or case.solvers:
            # "Solver+safe": `simulate(..., optimistic=False)` (the safe loop only)
            solver_name, *options = ours_name.split("+")
            solver = getattr(so, solver_name)()
            optimistic = False if "safe" in options else None

            @jax.jit
            def ours(m, solver=solver, optimistic=optimistic):
                sim = so.simulate(
                    m, case.t_max, DT, solver=solver, optimistic=optimistic
                )
                return jnp.stack([sim.recordings[n] for n in names])

            jaxley = None
            if module is not None:
                import jaxley as jx

                @jax.jit
                def theirs(p, jaxley_solver=jaxley_solver):
                    return jx.integrate(
                        module, p, t_max=case.t_max, delta_t=DT, solver=jaxley_solver
                    )

                jaxley = (jaxley_solver, theirs, (module.get_parameters(),))
            neuron = None
            if nrn is not None:
                scheme = NEURON_SCHEME[solver_name]
                neuron = (
                    f"fixed, secondorder={scheme}",
                    lambda scheme=scheme: nrn.run(secondorder=scheme),
                )
            rows.append(
                compare(
                    case.name,
                    dtype_name,
                    ours_name,
                    ours,
                    (model,),
                    jaxley,
                    neuron,
                    repeats,
                )  # fmt: skip
            )
    finally:
        if nrn is not None:
            nrn.close()
    return rows


GNA_RANGE = (0.08, 0.16)  # S/cm², the batch's gnabar values (evenly spaced)


def run_batch(
    case: Case,
    n_batch: int,
    dtype_name: str,
    repeats: int,
    optimistic: bool | None = None,
) -> dict:
    """`n_batch` copies of `case` with `gnabar` evenly spaced over `GNA_RANGE`, all
    at once: ours `jax.vmap` of `simulate` over `gnabar`, Jaxley `jax.vmap` of
    `jx.integrate` over its `HH_gNa` parameter (`make_trainable`), NEURON all the
    cells in one simulation (`secondorder=0`). BackwardEuler / `bwd_euler`.

    **Returns:** one row (`compare`'s).
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import stable_ode as so

    from ._common import have_jaxley
    from ._neuron import have_neuron, NeuronModel

    dtype = _dtype(dtype_name)
    gna = np.linspace(*GNA_RANGE, n_batch)
    model = build_ours(case, dtype)
    names = [name for name, _ in model.layout.recordings]
    n = model.n_compartments

    @jax.jit
    def ours(m, g):
        def one(gi):
            mi = eqx.tree_at(
                lambda m: m.mechanisms[0].mechanism.gnabar, m, jnp.full(n, gi)
            )
            sim = so.simulate(
                mi, case.t_max, DT, solver=so.BackwardEuler(), optimistic=optimistic
            )
            return jnp.stack([sim.recordings[k] for k in names])

        return jax.vmap(one)(g)

    jaxley = None
    if have_jaxley():
        jaxley = ("vmap of bwd_euler", jaxley_batch(case), (jnp.asarray(gna, dtype),))
    nrn, neuron = None, None
    if have_neuron():
        cells, stims, recs = [], [], []
        for k, g in enumerate(gna):
            (cell,), (stim,), rk = describe(case)
            cell = so.Cell(
                f"c{k}", cell.sections, [so.Insert(so.HH(gnabar=float(g)))],
                axial_resistivity=RA, capacitance=CM,
            )  # fmt: skip
            cells.append(cell)
            site = so.Site(f"c{k}", "sec", stim.site.position)
            stims.append(
                so.StepCurrent(site, stim.amplitude, stim.delay, stim.duration)
            )
            recs += [
                so.Recording(f"{r.name}_{k}", so.Site(f"c{k}", "sec", r.site.position))
                for r in rk
            ]
        nrn = NeuronModel(
            cells, stims, recs, t_stop=case.t_max, dt=DT, celsius=6.3, v_init=V_INIT
        )
        n_rec = len(names)
        neuron = (
            f"{n_batch} cells, secondorder=0",
            lambda: nrn.run(0).reshape(n_batch, n_rec, -1),
        )
    try:
        return compare(
            f"{n_batch}× {case.name}, vmap over gNa", dtype_name,
            "vmap of BackwardEuler" + "+safe" * (optimistic is False), ours,
            (model, jnp.asarray(gna, dtype)),
            jaxley, neuron, repeats,
        )  # fmt: skip
    finally:
        if nrn is not None:
            nrn.close()


def jaxley_batch(case: Case):
    """Jaxley's `jax.vmap` of `jx.integrate` (`bwd_euler`) over the `HH_gNa` of
    `case` (made trainable): a jitted function of the batch of `gnabar` values."""
    import jax
    import jaxley as jx

    module = build_jaxley(case)
    module.make_trainable("HH_gNa", verbose=False)

    @jax.jit
    def theirs(g):
        def one(gi):
            return jx.integrate(
                module,
                params=[{"HH_gNa": gi[None]}],
                t_max=case.t_max,
                delta_t=DT,
                solver="bwd_euler",
            )

        return jax.vmap(one)(g)

    return theirs


def run_adaptive(
    case: Case, dtype_name: str, tol: float, methods: tuple[str, ...], repeats: int
) -> list[dict]:
    """Adaptive step size, all at `rtol = atol = tol`: ours (`CrankNicolson` with
    `diffrax.PIDController`), diffrax's generic solvers through `simulate`
    (`Kvaerno5`, `Tsit5`), NEURON's CVODE (`atol = tol`, `rtol = 0`); calls
    interleaved, every solver saving `v` every `DT`.

    Equal tolerances are not equal accuracy, so each row also has its spike-time
    error (ms; largest |Δt| over all spikes, linearly interpolated on the `DT`
    grid, so differences below ~1e-3 ms are not resolved) against NEURON's CVODE
    at atol 1e-8; the work-precision benchmark compares at equal accuracy.

    **Returns:** one dict per method, with `ratio` = its time / ours.
    """
    import diffrax as dfx
    import jax
    import jax.numpy as jnp
    import numpy as np

    import stable_ode as so

    from ._common import spike_error, time_interleaved

    model = build_ours(case, _dtype(dtype_name))
    names = [name for name, _ in model.layout.recordings]
    solvers = {
        "ours CrankNicolson": so.CrankNicolson(),
        "diffrax Kvaerno5": dfx.Kvaerno5(),
        "diffrax Tsit5": dfx.Tsit5(),
    }
    labels, fns = [], []
    for label in methods:
        if label not in solvers:
            continue

        # the model is closed over: adaptive `simulate` needs concrete stimulus
        # edges (its controller's jump times)
        @jax.jit
        def fn(solver=solvers[label]):
            sim = so.simulate(
                model, case.t_max, DT, solver=solver, save_dt=DT,
                controller=dfx.PIDController(rtol=tol, atol=tol),
            )  # fmt: skip
            v = jnp.stack([sim.recordings[n] for n in names])
            return sim.ts, v, sim.stats["num_steps"]

        labels.append(label)
        fns.append(fn)
    nrn = build_neuron(case) if "NEURON CVODE" in methods else None
    ref = None
    if nrn is not None:
        v_ref = nrn.run(cvode_atol=1e-8)
        t_ref = DT * np.arange(v_ref.shape[-1])
        ref = [so.spike_times(t_ref, v) for v in v_ref]

        def cvode():
            v = nrn.run(cvode_atol=tol)
            return DT * np.arange(v.shape[-1]), v, nrn.steps

        labels.append("NEURON CVODE")
        fns.append(cvode)
    try:
        timed = time_interleaved(fns, [()] * len(fns), repeats=repeats)
    finally:
        if nrn is not None:
            nrn.close()
    rows = []
    for label, (t, (ts, v, steps)) in zip(labels, timed, strict=True):
        err = None
        if ref is not None:
            err = spike_error([so.spike_times(ts, x) for x in np.asarray(v)], ref)
        rows.append(
            dict(
                case=case.name,
                dtype=dtype_name,
                method=label,
                tol=tol,
                steps=int(steps),
                ms=1e3 * t.median,
                min_ms=1e3 * t.min,
                compile_s=t.compile,
                spike_error_ms=err,
                spikes=len(so.spike_times(ts, np.asarray(v)[0])),
            )  # fmt: skip
        )
    base = next((r["ms"] for r in rows if r["method"].startswith("ours")), None)
    for r in rows:
        r["ratio"] = None if base is None else r["ms"] / base
    return rows


def _fmt(x, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def print_rows(rows: list[dict]) -> None:
    """Print fixed-step rows (`compare`'s): ours, Jaxley and NEURON side by side;
    ratios are ours / peer's."""
    from ._common import format_table

    header = [
        "case", "dtype", "ours", "Jaxley", "ours ms", "Jaxley ms", "ratio",
        "ratio (min)", "max |Δv| mV", "compile s (ours/Jaxley)",
        "NEURON", "NEURON ms", "ratio (NEURON)", "max |Δv| NEURON",
    ]  # fmt: skip
    body = []
    for r in rows:
        jx_ms, nrn_ms = r.get("jaxley_ms"), r.get("neuron_ms")
        body.append(
            [
                r["case"],
                r["dtype"],
                r["ours"],
                r["jaxley"] or "—",
                f"{r['ours_ms']:.2f}",
                _fmt(jx_ms, ".2f"),
                _fmt(jx_ms and r["ours_ms"] / jx_ms, ".2f"),
                _fmt(jx_ms and r["ours_min_ms"] / r["jaxley_min_ms"], ".2f"),
                _fmt(r.get("jaxley_max_dv"), ".2g"),
                f"{r['ours_compile_s']:.1f} / "
                + _fmt(r.get("jaxley_compile_s"), ".1f"),
                r["neuron"] or "—",
                _fmt(nrn_ms, ".2f"),
                _fmt(nrn_ms and r["ours_ms"] / nrn_ms, ".2f"),
                _fmt(r.get("neuron_max_dv"), ".2g"),
            ]
        )
    print(format_table(header, body), flush=True)


def print_adaptive(rows: list[dict]) -> None:
    """Print `run_adaptive`'s rows."""
    from ._common import format_table

    header = [
        "case", "dtype", "method", "tol", "steps", "ms", "min ms",
        "ratio (to ours)", "spike error ms", "compile s",
    ]  # fmt: skip
    body = [
        [
            r["case"],
            r["dtype"],
            r["method"],
            f"{r['tol']:g}",
            str(r["steps"]),
            f"{r['ms']:.2f}",
            f"{r['min_ms']:.2f}",
            _fmt(r["ratio"], ".2f"),
            _fmt(r["spike_error_ms"], ".2g"),
            f"{r['compile_s']:.1f}",
        ]  # fmt: skip
        for r in rows
    ]
    print(format_table(header, body), flush=True)


def plan(mode: str):
    """What `run_dtype` measures in `mode` ("full", "quick", "smoke"): the fixed-step
    cases with their solver pairs, the batch, the adaptive comparison, repeats."""
    if mode == "smoke":
        comp = dataclasses.replace(
            COMPARTMENT, name="HH compartment, 10 ms", t_max=10.0
        )
        return dict(
            cases=[(comp, comp.solvers[:1])],
            batch=(comp, 4),
            adaptive=[(comp, 1e-3, ("ours CrankNicolson", "NEURON CVODE"))],
            repeats=1,
        )
    quick = mode == "quick"
    every = ("ours CrankNicolson", "diffrax Kvaerno5", "diffrax Tsit5", "NEURON CVODE")
    adaptive = [(COMPARTMENT, 1e-4, every)]
    if not quick:
        # Kvaerno5 on the cable: tens of seconds per solve (work_precision.py)
        adaptive.append((CABLE, 1e-3, every[:2] + every[3:]))
    return dict(
        cases=[
            (c, c.solvers[:2] if quick else c.solvers) for c in (COMPARTMENT, CABLE)
        ],
        batch=(COMPARTMENT, 64),
        adaptive=adaptive,
        repeats=3 if quick else 11,
    )


def run_dtype(dtype_name: str, mode: str, profile: bool) -> None:
    import jax

    from ._common import emit, have_jaxley
    from ._neuron import have_neuron

    # Benchmark script, not library code: x64 is chosen per process.
    jax.config.update("jax_enable_x64", dtype_name == "float64")
    p = plan(mode)
    repeats = p["repeats"]
    print(
        f"# {dtype_name}: jax {jax.__version__}, {jax.default_backend()}, "
        f"{os.cpu_count()} CPUs, median of {repeats} calls after compilation"
        + ("" if have_jaxley() else "; Jaxley not installed")
        + ("" if have_neuron() else "; NEURON not installed"),
        flush=True,
    )
    rows = []
    for case, solvers in p["cases"]:
        rows += run_case(case, dtype_name, repeats, solvers)
    rows.append(run_batch(*p["batch"], dtype_name, repeats))
    if mode != "smoke":
        rows.append(run_batch(*p["batch"], dtype_name, repeats, optimistic=False))
    print_rows(rows)
    emit("forward", rows)
    adaptive = []
    for case, tol, methods in p["adaptive"]:
        adaptive += run_adaptive(case, dtype_name, tol, methods, repeats)
    print("\n# adaptive step size (same tolerance; ratio = time / ours)", flush=True)
    print_adaptive(adaptive)
    emit("forward_adaptive", adaptive)
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
        "--smoke", action="store_true", help="tiny models, 1 repeat (a test)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also break down where our solves spend their time",
    )
    args = parser.parse_args(argv)
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    if args.dtype != "both":
        run_dtype(args.dtype, mode, args.profile)
        return
    from ._common import run_each_dtype

    flags = ["--quick"] * args.quick + ["--smoke"] * args.smoke
    run_each_dtype("forward", flags + ["--profile"] * args.profile)


if __name__ == "__main__":
    main()
