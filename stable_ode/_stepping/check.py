"""Up-front checks that a solver can run on a `MembraneTerm` with given steps."""

import diffrax as dfx

from .._solver._wrapped import AbstractWrappedSolver
from .._term import MembraneTerm


def _inner(solver: dfx.AbstractSolver) -> dfx.AbstractSolver:
    while isinstance(solver, AbstractWrappedSolver):
        solver = solver.solver
    return solver


def check_terms(solver: dfx.AbstractSolver) -> None:
    """A `ValueError` unless `solver` takes a single ODE term such as a
    `MembraneTerm` (`diffrax.SemiImplicitEuler` wants a pair of terms,
    `diffrax.KenCarp4` an IMEX `MultiTerm`, `diffrax.ItoMilstein` a
    drift-and-diffusion `MultiTerm`)."""
    if not isinstance(solver, dfx.AbstractSolver):
        raise ValueError(
            f"solver must be a diffrax solver, got {type(solver).__name__}"
        )
    structure = solver.term_structure
    if not (isinstance(structure, type) and issubclass(MembraneTerm, structure)):
        name = type(_inner(solver)).__name__
        raise ValueError(
            f"solver={name}(...) cannot run a stable_ode model: it needs terms "
            f"of the form {structure}, and a model is one ODE term (a "
            "stable_ode.MembraneTerm). Use stable_ode.BackwardEuler(), "
            "CrankNicolson(), ExponentialEuler(), or a diffrax ODE solver such as "
            "diffrax.Tsit5() or diffrax.Kvaerno5()"
        )


def check_compatible(solver: dfx.AbstractSolver, stepping, dtype=None) -> None:
    """Check, before anything is compiled, that `solver` can run a model with
    `stepping` (a `stable_ode.FixedSteps` or `stable_ode.AdaptiveSteps`) in
    `dtype`.

    **Arguments:**

    - `solver`: a diffrax solver (or one of this package's).
    - `stepping`: the stepping object the solve would use.
    - `dtype`: the model's floating-point dtype (`None`: not checked against it).

    **Raises:** a `ValueError` that says what to change: a solver that wants other
    terms than one ODE term (`SemiImplicitEuler`, `KenCarp4`, `ItoMilstein`), an
    implicit solver that takes its tolerances from an adaptive controller run with
    fixed steps (`Kvaerno5` with `FixedSteps`), a solver without an error estimate
    with adaptive steps, or tolerances below the dtype's resolution.
    """
    stepping.check(solver, dtype)
