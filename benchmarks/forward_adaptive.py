"""The adaptive rows of `python -m benchmarks.forward`: our `CrankNicolson` with a
`diffrax.PIDController`, diffrax's generic solvers and NEURON's CVODE at one
tolerance, each with its spike-time error (`run_adaptive`, `print_adaptive`)."""

from ._models import build_neuron, build_ours, Case, DT
from .forward import _dtype, _fmt


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
