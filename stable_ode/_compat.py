"""Private names of the libraries we build on that have no public route, each with
its reason."""

# diffrax's sentinel for "take this root finder's rtol/atol/norm from the step-size
# controller": `diffeqsolve` fills them in only for solvers that are themselves
# `AbstractImplicitSolver`s, so a solver wrapped in `NonFiniteGuard` must be given
# them first, and fixed steps must see that they are missing.
from diffrax._root_finder import use_stepsize_tol as use_stepsize_tol
