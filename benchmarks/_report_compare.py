"""The tables of `results.md` that set rows against other rows: float32 against
float64 within a run, and this run against another run's `results.json` (a
folder next to `results.md` that holds one, e.g. `small_loops/`)."""

from ._report import _g, _ms, _ratio, FIXED


def _fixed_key(r: dict) -> tuple | None:
    if r["benchmark"] in FIXED:
        return (r["benchmark"], r["case"], r["ours"])
    if r["benchmark"] == "forward_adaptive":
        return ("forward (adaptive)", r["case"], r["method"])
    return None


def _ours_ms(r: dict):
    return r.get("ours_ms", r.get("ms"))


def dtype_table(rows: list[dict]) -> list[str]:
    """float32 against float64, for every row measured in both dtypes."""
    by_key: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        key = _fixed_key(r)
        if key is not None:
            by_key.setdefault(key, {})[r["dtype"]] = r
    pairs = [(k, d) for k, d in by_key.items() if {"float32", "float64"} <= set(d)]
    if not pairs:
        return []
    out = [
        "## float32 against float64",
        "",
        "| benchmark | case | solver | ours f64 ms | ours f32 ms | f32 / f64 | "
        "Jaxley f64 ms | Jaxley f32 ms | f32 / f64 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (bench, case, solver), d in pairs:
        a, b = d["float64"], d["float32"]
        out.append(
            f"| {bench} | {case} | {solver} | {_ms(_ours_ms(a))} | "
            f"{_ms(_ours_ms(b))} | {_ratio(_ours_ms(b), _ours_ms(a))} | "
            f"{_ms(a.get('jaxley_ms'))} | {_ms(b.get('jaxley_ms'))} | "
            f"{_ratio(b.get('jaxley_ms'), a.get('jaxley_ms'))} |"
        )
    out.append("")
    return out


def _compared(rows: list[dict]) -> dict[tuple, tuple]:
    """`key -> (ours ms, ours / Jaxley, ours / NEURON)` for every row of `rows`
    that another run can be set against: the fixed-step and adaptive rows, and the
    interleaved gradients (against the better Jaxley configuration of that run)."""
    out = {}
    for r in rows:
        key = _fixed_key(r)
        if key is not None:
            ms = _ours_ms(r)
            jax_ms, nrn_ms = r.get("jaxley_ms"), r.get("neuron_ms")
            out[key + (r["dtype"],)] = (
                ms,
                ms / jax_ms if jax_ms else None,
                ms / nrn_ms if nrn_ms else None,
            )
    grad = [
        r
        for r in rows
        if r["benchmark"] == "gradient" and r.get("kind") == "interleaved"
    ]
    for model in dict.fromkeys(r.get("model", "cable") for r in grad):  # in order
        inter = [r for r in grad if r.get("model", "cable") == model]
        best = min((r["ms"] for r in inter if r["impl"] == "jaxley"), default=None)
        for r in inter:
            if r["impl"] != "jaxley":
                key = ("gradient", model, f"{r['impl']}, {r['adjoint']}", "float64")
                out[key] = (r["ms"], r["ms"] / best if best else None, None)
    return out


def comparison_table(rows: list[dict], other: list[dict], label: str) -> list[str]:
    """Our times in `rows` against the same rows measured under `label` (another
    run's `results.json`, e.g. a different XLA flag or older code): our time in
    each, and our ratio to Jaxley and NEURON in each (measured in the same process
    as ours, so less exposed to the machine's state than the times)."""
    mine, theirs = _compared(rows), _compared(other)
    pairs = [(k, mine[k], theirs[k]) for k in mine if k in theirs]
    if not pairs:
        return []
    out = [
        f"## This run against one with {label}",
        "",
        "Median ms per solve (gradients: per gradient) in both runs, ratio = that "
        "run / this; then ours / Jaxley and ours / NEURON in this run and in that "
        "one (gradients: against that run's better Jaxley configuration).",
        "",
        "| benchmark | case | method | dtype | this run ms | that run ms | ratio "
        "| ours / Jaxley: this | that | ours / NEURON: this | that |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (bench, case, solver, dtype), a, b in pairs:
        out.append(
            f"| {bench} | {case} | {solver} | {dtype} | {_ms(a[0])} | {_ms(b[0])} | "
            f"{_ratio(b[0], a[0])} | {_g(a[1], '.2f')} | {_g(b[1], '.2f')} | "
            f"{_g(a[2], '.2f')} | {_g(b[2], '.2f')} |"
        )
    out.append("")
    return out
