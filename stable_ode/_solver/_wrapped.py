"""The base of this package's solver wrappers."""

import diffrax as dfx
import equinox as eqx


class AbstractWrappedSolver(dfx.AbstractAdaptiveSolver):
    """A solver around another (`solver`) whose `order`, `error_order`,
    `strong_order`, `init`, `func`, interpolation and term structure are the wrapped
    solver's; subclasses change `step`."""

    solver: eqx.AbstractVar[dfx.AbstractSolver]

    @property
    def term_structure(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.solver.interpolation_cls

    def order(self, terms):
        return self.solver.order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)


def _none(x) -> bool:
    """`is_leaf` for trees with `None` leaves (symbolic zeros, missing tangents)."""
    return x is None
