"""Forward and gradient timings at GPU sizes on whatever JAX device is present.

    python -m benchmarks.gpu [--size tiny|small|large] [--budget SECONDS]
                             [--dtype float32|float64|both] [--only KIND ...]
                             [--with-jaxley] [--shard] [--in-process] [--out FILE]

Cases (`--only` picks kinds; sizes for `small` / `large`; all BackwardEuler at
dt = 0.025 ms over `--t-max` = 50 ms, i.e. 2,000 fixed steps):

- **cable**: an unbranched HH cable, 1000 µm long, 2 µm diameter, of `--cable`
  = 100 / 10,000 compartments (the cable of `benchmarks/forward.py`, finer), a
  0.1 nA step from 5 ms for 40 ms into the 0 end, both ends recorded;
- **tree**: one HH cell whose `--tree` = 127 / 2,047 branches (80 µm × 2 µm, 4
  compartments each: 508 / 8,188 compartments) form a binary tree (Jaxley's
  `parents`, children at their parent's 1 end; `benchmarks/branched.py`'s cell,
  larger), the cable's step into the root's 0 end, the root's 0 end and a leaf's
  1 end recorded;
- **batch**: `jax.vmap` of `--batch` = 16 / 1,024 single HH compartments (20 µm ×
  20 µm), each with its own step amplitude (0 to 0.5 nA); with `--shard` and more
  than one device, the batch axis is split over all devices (`jax.sharding`);
- **network**: `--cells` = 100 / 1,000 HH point neurons, each sending
  `--syn-per-cell` = 10 graded `IonotropicSynapse`s (gmax = 5e-4 µS) to distinct
  random other cells (seed 0), a 0.1 nA step into the first 10 cells, every cell's
  voltage recorded (the whole voltage vector, saved as one array);
- **cable-grad**, **network-grad**: `jax.grad` through `simulate(...,
  adjoint=Checkpointing())` of the mean voltage at the cable's far end w.r.t.
  the three HH conductances (gnabar, gkbar, gl), and of the mean voltage of all
  cells w.r.t. every synapse's gmax and the shared gnabar.

`--with-jaxley` adds Jaxley's `bwd_euler` for cable, tree, cable-grad (Jaxley's
default, no checkpointing) and network, with the same models; skipped, saying so,
when `jaxley` is not installed. `--size tiny` is for the smoke test
(`tests/repo/test_gpu_script.py`); `--cable`, `--tree`, `--cells`, `--syn-per-cell`,
`--batch`, `--t-max`, `--repeats` override a size's numbers.

Measured for each case (float32 by default, `--dtype float64` or `both`; NEURON's
`hh` at 6.3 °C): the Python build time of the model; the compile time
(`jax.jit(...).lower(...).compile()`); the run time, median of up to `--repeats`
calls after one warm-up call, each waited on with `jax.block_until_ready` (fewer
when they are slow: the timed calls stop before `--time-per-case` seconds);
steps/s (fixed steps per second of run time) and compartment-steps/s (times the
compartments simulated, summed over a batch; synapses not counted); the device's
peak memory (`device.memory_stats()["peak_bytes_in_use"]`; the CPU has none: "—")
and XLA's working memory for one call (`compiled.memory_analysis()
.temp_size_in_bytes`); and a check that the run computed what it should: the
spike count (upward crossings of 0 mV at the recorded sites) or, for gradients,
that they are finite, and their norm.

The budget is hard. Every case runs in its own Python process (so its peak memory
is its own, and its dtype sets JAX's x64 flag, which Jaxley follows), and is killed
when `--budget` seconds since the start (or `--case-limit` for the case) have
passed; cases left are skipped, and the table says which. Order: dtype by dtype
(float32 first), cheapest first within a dtype (compartments × steps, gradients
×4). The parent process never imports JAX, so it holds no device memory.
`--in-process` runs the cases in this process instead (one JAX import, quicker for
tiny sizes; the budget is then checked only between cases, and the peak memory is
the process's so far). The exit code is 1 if a case failed (not if it was killed
or skipped for time).

On a GPU machine, JAX with its CUDA plugin (`pip install -U "jax[cuda12]"`, or
`"jax[cuda13]"` for a CUDA 13 driver), diffrax, equinox, lineax, optimistix and
jaxtyping must be importable (`pip install -e .` installs the rest); Jaxley is
optional. From the repository root (no install of stable_ode needed there), in
one short command with a hard time limit:

    PYTHONUNBUFFERED=1 python3 -m benchmarks.gpu --size large --dtype both \\
        --budget 400 --out gpu.md

It prints a markdown table (with date, JAX version, backend, device kind and
count) to stdout and, with `--out`, to a file. `--size small` takes about a
minute on a 2-core CPU (two with `--dtype both`). JAX preallocates 75 % of GPU
memory per process; the peak reported is what XLA's allocator used, not what it
reserved.
"""

import argparse
import dataclasses
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time

from ._gpu_cases import case_jaxley, case_ours, DT, KINDS
from ._gpu_report import format_results
from ._models import TREE_BRANCH


TREE_PER_BRANCH = TREE_BRANCH[2]
JAXLEY_KINDS = ("cable", "tree", "cable-grad", "network")

SIZES = {
    "tiny": dict(cable=8, tree=3, batch=4, cells=6, syn_per_cell=2, t_max=10.0),
    "small": dict(
        cable=100, tree=127, batch=16, cells=100, syn_per_cell=10, t_max=50.0
    ),
    "large": dict(
        cable=10_000, tree=2_047, batch=1_024, cells=1_000, syn_per_cell=10, t_max=50.0
    ),
}


@dataclasses.dataclass(frozen=True)
class Spec:
    """One case: what to build, in which dtype, with which implementation."""

    kind: str
    impl: str  # "stable_ode" or "jaxley"
    dtype: str  # "float32" or "float64"
    cable: int
    tree: int  # branches of 4 compartments
    batch: int
    cells: int
    syn_per_cell: int
    t_max: float
    repeats: int
    time_per_case: float
    shard: bool

    @property
    def n_steps(self) -> int:
        return round(self.t_max / DT)

    @property
    def n_compartments(self) -> int:
        """Compartments simulated at once (summed over a batch)."""
        return {
            "cable": self.cable,
            "tree": TREE_PER_BRANCH * self.tree,
            "batch": self.batch,
            "network": self.cells,
        }[self.kind.removesuffix("-grad")]

    @property
    def cost(self) -> float:
        """A rough relative cost, to run cheap cases first."""
        factor = 4.0 if self.kind.endswith("-grad") else 1.0
        factor *= 1.01 if self.impl == "jaxley" else 1.0  # ours first on ties
        return factor * self.n_compartments * self.n_steps

    @property
    def size_label(self) -> str:
        base = self.kind.removesuffix("-grad")
        if base == "cable":
            return f"{self.cable} comp."
        if base == "tree":
            return f"{self.tree} × {TREE_PER_BRANCH} comp."
        if base == "batch":
            return f"{self.batch} × 1 comp."
        return f"{self.cells} cells, {self.cells * self.syn_per_cell} syn."


def _mib(n) -> float | None:
    return None if n is None else n / 2**20


def run_case(spec: Spec, progress=None) -> dict:
    """Build, compile and time one case in this process (x64 set by its dtype).

    **Arguments:**

    - `spec`: the case.
    - `progress`: called with a dict of the measurements so far after each stage
      (so that a killed worker still tells how far it got), or `None`.

    **Returns:** a dict of measurements (seconds, ms, MiB; `None` where absent).
    """
    import jax

    jax.config.update("jax_enable_x64", spec.dtype == "float64")
    out = dict(dataclasses.asdict(spec))
    report = progress or (lambda d: None)

    if spec.impl == "jaxley":
        import jaxley  # noqa: F401  (its import is not part of the build time)
    start = time.perf_counter()
    make = case_jaxley if spec.impl == "jaxley" else case_ours
    fn, args, check = make(spec)
    out["build_s"] = time.perf_counter() - start
    report(dict(out, stage="built"))

    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    out["compile_s"] = time.perf_counter() - start
    report(dict(out, stage="compiled"))

    start = time.perf_counter()
    result = jax.block_until_ready(compiled(*args))
    out["first_s"] = time.perf_counter() - start
    runs = []
    while len(runs) < spec.repeats and (
        not runs or sum(runs) + runs[-1] <= spec.time_per_case
    ):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        runs.append(time.perf_counter() - start)
    median = statistics.median(runs)
    out.update(run_ms=1e3 * median, min_ms=1e3 * min(runs), n_runs=len(runs))
    out["steps_per_s"] = spec.n_steps / median
    out["comp_steps_per_s"] = spec.n_steps * spec.n_compartments / median
    out["check"] = check(result)
    if spec.kind == "batch":
        out["sharded_over"] = len(result.sharding.device_set)

    device = jax.devices()[0]
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    out["peak_mib"] = _mib((stats or {}).get("peak_bytes_in_use"))
    analysis = compiled.memory_analysis()
    out["xla_temp_mib"] = _mib(getattr(analysis, "temp_size_in_bytes", None))
    out.update(_environment())
    out["stage"] = "done"
    return out


def _environment() -> dict:
    import jax

    device = jax.devices()[0]
    return dict(
        jax_version=jax.__version__,
        backend=jax.default_backend(),
        device_kind=device.device_kind,
        device_count=jax.device_count(),
    )


def _worker(spec_json: str) -> None:
    """Run one case; print `PROGRESS {json}` lines and a final `RESULT {json}`."""

    def progress(d):
        print("PROGRESS " + json.dumps(d), flush=True)

    result = run_case(Spec(**json.loads(spec_json)), progress)
    print("RESULT " + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------
# The driver (never imports JAX when cases run in their own processes).


def _run_isolated(spec: Spec, timeout: float) -> dict:
    """Run `spec` in a fresh Python process, killed after `timeout` seconds."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.gpu",
        "--worker",
        json.dumps(dataclasses.asdict(spec)),
    ]
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, so a kill takes it all
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        timed_out = True
    last = dict(dataclasses.asdict(spec), stage="started")
    for line in stdout.splitlines():
        head, _, body = line.partition(" ")
        if head in ("PROGRESS", "RESULT"):
            last = json.loads(body)
    if timed_out:
        last["killed"] = f"killed at the time limit, {timeout:.0f} s ({last['stage']})"
    elif proc.returncode != 0 or last.get("stage") != "done":
        # The exception's own line (JAX adds notes after it), else the last line.
        lines = [x for x in stderr.splitlines() if x.strip()]
        errors = [x for x in lines if re.match(r"[\w.]*(Error|Exception)\b", x)]
        message = (errors or lines or ["no message"])[-1]
        last["error"] = f"exit code {proc.returncode}: {message}"
    return last


def _jaxley_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("jaxley") is not None


def make_specs(args) -> list[Spec]:
    """Every case the arguments ask for, cheapest first."""
    size = dict(SIZES[args.size])
    for key in size:
        if getattr(args, key) is not None:
            size[key] = getattr(args, key)
    dtypes = ["float32", "float64"] if args.dtype == "both" else [args.dtype]
    impls = ["stable_ode"] + (["jaxley"] if args.with_jaxley else [])
    specs = [
        Spec(
            kind=kind,
            impl=impl,
            dtype=dtype,
            repeats=args.repeats,
            time_per_case=args.time_per_case,
            shard=args.shard,
            **size,
        )
        for kind in args.only
        for impl in impls
        for dtype in dtypes
        if impl == "stable_ode" or kind in JAXLEY_KINDS
    ]
    return sorted(specs, key=lambda s: (dtypes.index(s.dtype), s.cost))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument(
        "--budget", type=float, default=600.0, help="seconds in all (hard)"
    )
    parser.add_argument(
        "--case-limit", type=float, default=None, help="seconds per case at most"
    )
    parser.add_argument(
        "--dtype", choices=["float32", "float64", "both"], default="float32"
    )
    parser.add_argument("--only", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--with-jaxley", action="store_true")
    parser.add_argument("--shard", action="store_true", help="shard the batch")
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--time-per-case", type=float, default=10.0)
    for key in ("cable", "tree", "batch", "cells", "syn_per_cell"):
        parser.add_argument("--" + key.replace("_", "-"), type=int, default=None)
    parser.add_argument("--t-max", type=float, default=None, help="ms")
    parser.add_argument("--out", default=None, help="also write the report here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        _worker(args.worker)
        return
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    if not args.budget > 0:
        parser.error(f"--budget must be > 0 s, got {args.budget}")

    start = time.perf_counter()
    notes = []
    if args.with_jaxley and not _jaxley_available():
        notes.append("Jaxley cases skipped: jaxley is not installed.")
        args.with_jaxley = False
    specs = make_specs(args)
    rows, env = [], {}
    for spec in specs:
        row = dict(
            dataclasses.asdict(spec),
            size_label=spec.size_label,
            n_steps=spec.n_steps,
        )
        remaining = args.budget - (time.perf_counter() - start)
        limit = (
            remaining if args.case_limit is None else min(remaining, args.case_limit)
        )
        if remaining < 1.0:
            row.update(stage="skipped", skipped="skipped: budget used up")
            rows.append(row)
            continue
        print(
            f"[{time.perf_counter() - start:6.1f} s] {spec.kind} {spec.impl} "
            f"{spec.dtype} ({spec.size_label}) ...",
            file=sys.stderr,
            flush=True,
        )
        if args.in_process:
            try:
                row.update(run_case(spec))
            except Exception as e:  # report it and go on with the next case
                row["error"] = f"{type(e).__name__}: {e}"
        else:
            row.update(_run_isolated(spec, limit))
        rows.append(row)
        # from the first case that reports each (a failed case reports none)
        for k in ("jax_version", "device_kind", "backend", "device_count"):
            if env.get(k) is None and row.get(k) is not None:
                env[k] = row[k]
    n_skipped = sum(r.get("stage") == "skipped" or "killed" in r for r in rows)
    if n_skipped:
        notes.append(
            f"{n_skipped} case(s) killed or skipped: the budget of {args.budget:g} s "
            "(or --case-limit) ran out."
        )
    for r in rows:
        if r.get("sharded_over") and (r["shard"] or r["device_count"] > 1):
            notes.append(
                f"{r['kind']} {r['dtype']}: output on {r['sharded_over']} of "
                f"{r['device_count']} device(s)"
                + ("" if r["shard"] else " (--shard not given)")
            )
    if not args.in_process:
        notes.append("Each case ran in its own process; peak memory is per case.")
    else:
        notes.append("In-process run: peak device memory is the process's so far.")
    header = dict(
        size=args.size,
        date=datetime.date.today().isoformat(),
        device=(
            f"{env.get('backend', '?')} device {env.get('device_kind', '?')} "
            f"× {env.get('device_count', '?')}"
        ),
        jax_version=env.get("jax_version", "?"),
        mode="in-process" if args.in_process else "one process per case",
        budget=args.budget,
        elapsed=time.perf_counter() - start,
        notes=notes,
    )
    text = format_results(rows, header)
    print(text, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if any("error" in r for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
