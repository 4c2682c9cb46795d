"""Morphology: cell descriptions, NEURON's discretisation, axial coupling."""

from ._cell import Cell as Cell, Insert as Insert, Section as Section
from ._coupling import (
    AbstractCoupling as AbstractCoupling,
    TridiagonalCoupling as TridiagonalCoupling,
)
