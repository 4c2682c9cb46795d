"""Private names of diffrax, equinox and lineax that stable_ode needs, in one
place, each with its reason; `None` where a release no longer has it, and the
caller falls back on public API."""

# diffrax's sentinel for "take this root finder's rtol/atol/norm from the step-size
# controller": `diffeqsolve` fills them in only for solvers that are themselves
# `AbstractImplicitSolver`s, so a solver wrapped in `NonFiniteGuard` must be given
# them first, and fixed steps must see that they are missing.
from diffrax._root_finder import use_stepsize_tol as use_stepsize_tol


try:
    # equinox's loop rewriting (output buffers, vmap, the step bound), which its
    # bounded `while_loop` uses internally: `Checkpointing(levels=...)` builds its
    # nested checkpointed scans from it. No public equivalent exists.
    from equinox.internal._loop.common import common_rewrite, fixed_asarray
except ImportError:  # without it, `levels` fall back on the binomial scheme
    common_rewrite = fixed_asarray = None

__all__ = ["common_rewrite", "fixed_asarray", "use_stepsize_tol"]
