"""Timing, table and row helpers shared by the benchmarks (JAX is imported only
by the functions that time, so that a driver process can use the rest).

Every timed function is jitted and run once to compile (the compile time is
reported separately); then it is called `repeats` times, each call waited on
with `jax.block_until_ready`, and the median wall time is the headline number
(the minimum is kept too: on a shared machine it is the least noisy estimate of
what the code costs).
"""

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Timing:
    """Wall times of one jitted function, seconds.

    **Fields:**

    - `compile`: the first call (trace + compile + one run).
    - `runs`: every timed call after the first.
    """

    compile: float
    runs: tuple[float, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.runs))

    @property
    def min(self) -> float:
        return float(np.min(self.runs))


def time_jitted(fn: Callable, *args, repeats: int = 11) -> tuple[Timing, object]:
    """Time `fn(*args)` after a first, compiling call.

    **Arguments:**

    - `fn`: a jitted function (`jax.jit(...)`).
    - `args`: its arguments (the same for every call).
    - `repeats`: number of timed calls (≥ 1).

    **Returns:** `(timing, output of the first call)`.
    """
    import jax

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    compile_time = time.perf_counter() - start
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        runs.append(time.perf_counter() - start)
    return Timing(compile=compile_time, runs=tuple(runs)), out


def time_interleaved(
    fns: Sequence[Callable], args: Sequence[tuple], *, repeats: int = 11
) -> list[tuple[Timing, object]]:
    """Time several jitted functions, alternating calls so they share machine noise.

    Each function is compiled (first call) in turn; then the timed calls go round
    robin, `fns[0], fns[1], ..., fns[0], ...`, so a burst of load from other
    processes hits all of them alike.

    **Arguments:**

    - `fns`: jitted functions.
    - `args`: one argument tuple per function.
    - `repeats`: timed calls per function.

    **Returns:** one `(timing, output of the first call)` per function.
    """
    import jax

    if len(fns) != len(args):
        raise ValueError(f"{len(fns)} functions but {len(args)} argument tuples")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    compile_times, outs = [], []
    for fn, a in zip(fns, args, strict=True):
        start = time.perf_counter()
        outs.append(jax.block_until_ready(fn(*a)))
        compile_times.append(time.perf_counter() - start)
    runs: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for k, (fn, a) in enumerate(zip(fns, args, strict=True)):
            start = time.perf_counter()
            jax.block_until_ready(fn(*a))
            runs[k].append(time.perf_counter() - start)
    return [
        (Timing(compile=c, runs=tuple(r)), o)
        for c, r, o in zip(compile_times, runs, outs, strict=True)
    ]


def max_abs_diff(a, b) -> float:
    """`max |a - b|` over the common leading length of two traces (same shape
    otherwise), as a Python float."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    n = min(a.shape[-1], b.shape[-1])
    return float(np.max(np.abs(a[..., :n] - b[..., :n])))


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-markdown table with columns padded to equal width."""
    cols = [list(header)] + [list(r) for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]

    def line(r):
        return (
            "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
        )

    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cols[0]), sep] + [line(r) for r in cols[1:]])


def loop_kernels(jitted: Callable, *args) -> list[int]:
    """Kernels (thunks) per iteration of every `while` loop in the compiled program.

    Counts the operations XLA leaves in each compiled while-loop body once fusion is
    done (fusions, copies, custom calls, nested loops, ...; not parameters, tuples,
    constants or bitcasts). On the CPU each costs a dispatch (more on a loaded
    machine), so for small models the count, not the arithmetic, sets the time per
    step. Deterministic, unlike a timing on a shared machine.

    **Arguments:** a jitted function and its arguments.

    **Returns:** one count per while loop, in the order they appear in the HLO text.
    """
    import re

    text = jitted.lower(*args).compile().as_text()
    computations = {}
    for block in text.split("\n\n"):
        head = block.strip().split("\n", 1)[0]
        match = re.match(r"(?:ENTRY )?%?([\w.\-]+) ", head)
        if match:
            computations[match.group(1)] = block
    free = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast"}
    counts = []
    for block in computations.values():
        for body in re.findall(r"while\(.*?body=%?([\w.\-]+)", block):
            ops = re.findall(r"= [^ ]+ ([\w-]+)\(", computations.get(body, ""))
            counts.append(sum(op not in free for op in ops))
    return counts


def run_each_dtype(
    module: str, flags: list[str], dtypes: Sequence[str] = ("float64", "float32")
) -> None:
    """Run `python -m benchmarks.<module> --dtype D <flags>` for each dtype (float64,
    then float32 by default), each in its own process (JAX's x64 flag is global, and
    Jaxley takes its dtype from it)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for dtype_name in dtypes:
        cmd = [sys.executable, "-m", f"benchmarks.{module}", "--dtype", dtype_name]
        subprocess.run(cmd + flags, cwd=root, check=True)


def have_jaxley() -> bool:
    """Whether Jaxley (a benchmark-only dependency) can be imported here; without
    it the benchmarks leave out the Jaxley columns."""
    try:
        import jaxley  # noqa: F401
    except ImportError:
        return False
    return True


RESULTS_ENV = "BENCHMARKS_JSON"


def emit(benchmark: str, rows: Sequence[dict]) -> None:
    """Append `rows` (JSON-able dicts) to the file named by `$BENCHMARKS_JSON`, one
    JSON object per line tagged with `benchmark`; nothing if the variable is unset.

    `python -m benchmarks` sets it, so that it can put the rows of every
    benchmark and dtype process side by side (float32/float64 table, plots).
    """
    import json
    import os

    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    with open(path, "a") as f:
        for row in rows:
            f.write(json.dumps(dict(row, benchmark=benchmark), default=float) + "\n")


def spike_error(got: Sequence[np.ndarray], ref: Sequence[np.ndarray]) -> float:
    """Largest |Δt| (ms) between matching spikes of several traces; `inf` if a
    trace has a different number of spikes than its reference."""
    import math

    if len(got) != len(ref) or any(len(a) != len(b) for a, b in zip(got, ref)):
        return math.inf
    return float(
        max(
            (np.max(np.abs(a - b), initial=0.0) for a, b in zip(got, ref, strict=True)),
            default=0.0,
        )
    )
