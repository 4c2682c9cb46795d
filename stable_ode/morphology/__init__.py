"""Morphology: cell descriptions, NEURON's discretisation, axial coupling."""

from .._linear import (
    ChainTreeSolver as ChainTreeSolver,
    hines_schedule as hines_schedule,
    LevelTreeSolver as LevelTreeSolver,
    SequentialTreeSolver as SequentialTreeSolver,
    tree_plan as tree_plan,
    TreeLinearOperator as TreeLinearOperator,
    TreePlan as TreePlan,
    TreeSolver as TreeSolver,
)
from ._cell import Cell as Cell, Insert as Insert, Section as Section
from ._coupling import (
    AbstractCoupling as AbstractCoupling,
    DenseCoupling as DenseCoupling,
    NoCoupling as NoCoupling,
    TridiagonalCoupling as TridiagonalCoupling,
)
from ._geometry import n_compartments_d_lambda as n_compartments_d_lambda
from ._swc import load_swc as load_swc, save_swc as save_swc
from ._tree import TreeCoupling as TreeCoupling
