"""Morphology: cell descriptions, NEURON's discretisation, axial coupling."""

from ._cell import Cell as Cell, Insert as Insert, Section as Section
from ._coupling import (
    AbstractCoupling as AbstractCoupling,
    DenseCoupling as DenseCoupling,
    NoCoupling as NoCoupling,
    TridiagonalCoupling as TridiagonalCoupling,
)
from ._swc import load_swc as load_swc, save_swc as save_swc
from ._tree import (
    hines_schedule as hines_schedule,
    TreeCoupling as TreeCoupling,
    TreeLinearOperator as TreeLinearOperator,
    TreeSolver as TreeSolver,
)
