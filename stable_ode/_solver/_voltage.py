"""The base of this package's solvers whose voltage step is a structured solve."""

import diffrax as dfx
import equinox as eqx
import lineax as lx


class AbstractVoltageSolver(dfx.AbstractAdaptiveSolver):
    """A staggered solver whose voltage step is a linear solve with the model's
    coupling operator (`_staggered.voltage_step`).

    `linear_solver`: the lineax solver of that system; `None` uses the coupling's
    own (`coupling.default_solver()`: `lx.Tridiagonal()` or, for a short one
    under a raised small-loop threshold, `Thomas()` for cables, the tree
    chooser for branched cells). Tools that instrument the solve (`diagnose`)
    reach it through this field.
    """

    linear_solver: eqx.AbstractVar[lx.AbstractLinearSolver | None]
