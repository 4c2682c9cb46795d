"""Structured linear solves for tree-shaped systems, shaped like lineax: graph
planning (`schedule.py`, `plan.py`), the operator, one solver per algorithm, and
`TreeSolver`, which chooses among them.

A branched cell's voltage system `diag(d) - θ·L` has the sparsity of the cell's
tree: NEURON solves it by Gaussian elimination from the leaves to the root and
back-substitution from the root to the leaves (Hines 1984), O(n), no fill-in, no
pivoting (the matrix is symmetric and diagonally dominant). The solvers here
differ in the order of that elimination: node by node (`SequentialTreeSolver`),
by levels of independent nodes (`LevelTreeSolver`), or chains between branch
points at once with a Schur complement on the branch points (`ChainTreeSolver`).
"""

from .auto import TreeSolver as TreeSolver
from .base import AbstractTreeSolver as AbstractTreeSolver
from .chains import ChainTreeSolver as ChainTreeSolver
from .cyclic import CyclicReduction as CyclicReduction
from .levels import LevelTreeSolver as LevelTreeSolver
from .operator import TreeLinearOperator as TreeLinearOperator
from .plan import (
    relabelled as relabelled,
    tree_plan as tree_plan,
    TreePlan as TreePlan,
)
from .schedule import centred_forest as centred_forest, hines_schedule as hines_schedule
from .sequential import SequentialTreeSolver as SequentialTreeSolver
from .thomas import Thomas as Thomas
