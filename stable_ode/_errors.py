"""`InvalidArgument`: a constructor's `ValueError` that names the argument at fault;
`Unsupported`: a setting this machine or a dependency cannot run."""

import math


class InvalidArgument(ValueError):
    """A `ValueError` raised when an object is built with a bad argument.

    It names the argument by a key path relative to the constructor's arguments
    (`"length"`, `"sections[2].parent"`, `"mechanisms[0].sections[1]"`), so that a
    caller building the object from a file can report the file's own key path:
    the model-file reader prefixes it with where the object's entry sits.

    **Arguments:**

    - `owner`: what was being built, for the message (e.g. `"Section 'dend'"`).
    - `argument`: the key path of the offending argument.
    - `problem`: what is wrong with it (e.g. `"must be > 0, got -5.0"`).
    """

    def __init__(self, owner: str, argument: str, problem: str):
        self.owner = owner
        self.argument = argument
        self.problem = problem
        # "Section 'd': length must be > 0, got -5.0"; "Cell 'c': sections[2].parent:
        # parent 'x' is not a section of this cell"
        sep = " " if problem.startswith("must") else ": "
        super().__init__(f"{owner}: {argument}{sep}{problem}")

    def __reduce__(self):
        return type(self), (self.owner, self.argument, self.problem)


class Unsupported(NotImplementedError):
    """A setting that is valid but that the machine or a dependency cannot run
    (float64 on a TPU, explicit mesh axes through lineax), raised before
    anything is traced, with what to use instead. The command line reports it
    as a usage error (exit 2); any other `NotImplementedError` stays an
    unexpected one."""


def concrete_number(x) -> bool:
    """Whether `x` is a plain Python or NumPy real number (not an array or a tracer),
    so that a constructor can check its value."""
    import numbers

    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def check_number(owner: str, argument: str, x, *, gt=None, ge=None) -> None:
    """A concrete number `x` must be finite and `> gt` / `>= ge`, else an
    `InvalidArgument` naming `owner` and `argument` (arrays and tracers, e.g.
    values being trained, are not checked)."""
    if not concrete_number(x):
        return
    if not math.isfinite(x):
        raise InvalidArgument(owner, argument, f"must be finite, got {x!r}")
    if gt is not None and not x > gt:
        raise InvalidArgument(owner, argument, f"must be > {gt}, got {x!r}")
    if ge is not None and not x >= ge:
        raise InvalidArgument(owner, argument, f"must be >= {ge}, got {x!r}")
