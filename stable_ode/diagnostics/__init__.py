"""Diagnose mode: find the first non-finite value of a solve (or of its gradient)
and name the state, compartment, mechanism and function that produced it."""

from ._diagnose import diagnose as diagnose, diagnose_spec as diagnose_spec
from ._report import (
    Diagnosis as Diagnosis,
    Direction as Direction,
    Kind as Kind,
    Stage as Stage,
)
