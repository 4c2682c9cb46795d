"""`TreeSolver`: picks a tree solver from the operator's static facts, as
`lx.AutoLinearSolver` picks a dense or structured one."""

from typing import Any

import equinox as eqx
import jax
import lineax as lx

from .base import AbstractTreeSolver, check_tree_operator
from .chains import ChainTreeSolver
from .levels import LevelTreeSolver
from .sequential import SequentialTreeSolver


class TreeSolver(lx.AbstractLinearSolver):
    """Automatically chooses an exact solver for a `TreeLinearOperator`, once, when
    the solve is traced (in `init`), from facts that are static there:

    - the operator has no `plan`: `LevelTreeSolver()`;
    - the default backend is the CPU (and the tree has at most
      `sequential_limit` nodes, if one is given): `SequentialTreeSolver()` (two
      compiled loops; on an accelerator every node would be a kernel launch).
      On the CPU it was the fastest of the three at every size measured
      (`benchmarks/tree_orders.py`: binary trees of 508 to 16,380 nodes of
      4-node sections; also with 64-node sections, and up to 32,764 nodes);
    - otherwise: `ChainTreeSolver()` (a fixed number of kernels per solve).

    All three are exact; they differ only in rounding. `select_solver` tells which
    one a given operator gets. `TreeCoupling.default_solver()` returns a
    `TreeSolver()`; pass one of the three directly to fix the algorithm.
    """

    sequential_limit: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        k = self.sequential_limit
        is_int = isinstance(k, int) and not isinstance(k, bool)
        if not (k is None or (is_int and k >= 0)):
            raise ValueError(
                f"TreeSolver(sequential_limit={self.sequential_limit!r}) must be "
                "None or an int >= 0"
            )

    def select_solver(self, operator: lx.AbstractLinearOperator) -> AbstractTreeSolver:
        """The solver `TreeSolver` uses for `operator`.

        **Arguments:**

        - `operator`: a `TreeLinearOperator`.

        **Returns:** a `SequentialTreeSolver`, `ChainTreeSolver` or
        `LevelTreeSolver`.
        """
        operator = check_tree_operator(self, operator)
        if operator.plan is None:
            return LevelTreeSolver()
        (n,) = operator.diagonal.shape
        limit = self.sequential_limit
        if jax.default_backend() == "cpu" and (limit is None or n <= limit):
            return SequentialTreeSolver()
        return ChainTreeSolver()

    def init(self, operator: lx.AbstractLinearOperator, options: dict[str, Any]):
        solver = self.select_solver(operator)
        return solver, solver.init(operator, options)

    def compute(self, state, vector, options: dict[str, Any]):
        solver, state = state
        return solver.compute(state, vector, options)

    def transpose(self, state, options: dict[str, Any]):
        solver, state = state
        state, options = solver.transpose(state, options)
        return (solver, state), options

    def conj(self, state, options: dict[str, Any]):
        solver, state = state
        state, options = solver.conj(state, options)
        return (solver, state), options

    def assume_full_rank(self):
        return True


TreeSolver.__init__.__doc__ = """**Arguments:**

- `sequential_limit`: the most nodes solved by `SequentialTreeSolver` on the CPU,
  larger trees getting `ChainTreeSolver`; `None` (default): no limit.
"""
