"""The tree solve's elimination orders against each other on the CPU.

Binary trees of sections with four compartments each (508, 2,044, 4,092 and
16,380 compartments; the first three as in the branched benchmarks), in the
Hines ordering that `tree_coupling` gives a cell. Each solver runs `SOLVES`
solves in one jitted loop (each solve's result feeds the next right-hand side,
as in a time-stepping loop); the calls are interleaved and the median of
`REPEATS` is taken. Prints the time per solve of each solver, its ratio to
`SequentialTreeSolver`, and which one `TreeSolver()` picks.

Run: `python -m benchmarks.tree_orders` (a minute or two; `--quick` for smaller
sizes).
"""

import argparse

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import lineax as lx  # noqa: E402
import numpy as np  # noqa: E402

from benchmarks._common import format_table, time_interleaved  # noqa: E402
from stable_ode.morphology import (  # noqa: E402
    ChainTreeSolver,
    LevelTreeSolver,
    SequentialTreeSolver,
    TreeSolver,
)
from stable_ode.morphology._tree import tree_coupling  # noqa: E402


SOLVES = 100
REPEATS = 7
PER_SECTION = 4


def binary_tree_edges(depth: int, per_section: int = PER_SECTION):
    """Compartment edges `(i, j, g)` of a binary tree of `2^(depth+1) - 1` sections
    of `per_section` compartments; returns `(n_compartments, edges)`."""
    n_sections = 2 ** (depth + 1) - 1
    edges = []
    for s in range(n_sections):
        first = s * per_section
        edges += [(first + k, first + k + 1, 1.0) for k in range(per_section - 1)]
        if s > 0:
            parent_last = ((s - 1) // 2) * per_section + per_section - 1
            edges.append((parent_last, first, 1.0))
    return n_sections * per_section, edges


def make_loop(solver, coupling, dtype):
    def loop(d, b):
        op = coupling.operator(d, jnp.asarray(0.5, dtype))

        def body(_, x):
            return lx.linear_solve(op, b + 1e-3 * x, solver).value

        return jax.lax.fori_loop(0, SOLVES, body, jnp.zeros_like(b))

    return jax.jit(loop)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small trees only")
    args = parser.parse_args(argv)
    depths = (3, 5) if args.quick else (6, 8, 9, 11)
    solvers = dict(
        sequential=SequentialTreeSolver(),
        levels=LevelTreeSolver(),
        chains=ChainTreeSolver(),
    )
    rows = []
    for dtype in (jnp.float32, jnp.float64):
        for depth in depths:
            n, edges = binary_tree_edges(depth)
            coupling = tree_coupling(n, edges, [], dtype)
            rng = np.random.default_rng(0)
            d = jnp.asarray(rng.uniform(1.0, 2.0, n), dtype)
            b = jnp.asarray(rng.normal(size=n), dtype)
            fns = [make_loop(s, coupling, dtype) for s in solvers.values()]
            timed = time_interleaved(fns, [(d, b)] * len(fns), repeats=REPEATS)
            us = [1e6 * t.median / SOLVES for t, _ in timed]
            ref = np.asarray(timed[0][1], np.float64)
            for (_, out), name in zip(timed[1:], list(solvers)[1:], strict=True):
                err = np.max(np.abs(np.asarray(out, np.float64) - ref))
                tol = 1e-3 if dtype == jnp.float32 else 1e-9
                if not err <= tol * max(1.0, float(np.max(np.abs(ref)))):
                    raise AssertionError(f"{name} differs from sequential by {err}")
            op = coupling.operator(d, 0.5)
            pick = type(TreeSolver().select_solver(op)).__name__
            rows.append(
                [jnp.dtype(dtype).name, str(n)]
                + [f"{u:.2f}" for u in us]
                + [f"{u / us[0]:.2f}" for u in us[1:]]
                + [pick]
            )
    header = (
        ["dtype", "nodes"]
        + [f"{k} µs/solve" for k in solvers]
        + [f"{k}/sequential" for k in list(solvers)[1:]]
        + ["TreeSolver() picks"]
    )
    print(format_table(header, rows))


if __name__ == "__main__":
    main()
