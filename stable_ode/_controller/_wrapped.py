"""The base of this package's adaptive controller wrappers."""

from collections.abc import Callable

import diffrax as dfx
import equinox as eqx
from jaxtyping import PyTree


class AbstractWrappedController(dfx.AbstractAdaptiveStepSizeController):
    """An adaptive controller around another (`controller`, checked to be adaptive)
    whose `rtol`, `atol` and `norm` are the wrapped controller's (diffrax's implicit
    solvers read them for their root finders), which `wrap`s it for the direction
    of integration and, unless a subclass says otherwise, `init`s it."""

    controller: eqx.AbstractVar[dfx.AbstractAdaptiveStepSizeController]

    def __check_init__(self):
        if not isinstance(self.controller, dfx.AbstractAdaptiveStepSizeController):
            raise ValueError(
                f"{type(self).__name__} wraps an adaptive controller (e.g. "
                "diffrax.PIDController(rtol=0, atol=1e-5)), got "
                f"{type(self.controller).__name__}; for fixed steps use "
                "stable_ode.SafeStepTo"
            )

    @property
    def rtol(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.controller.rtol

    @property
    def atol(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.controller.atol

    @property
    def norm(self):  # pyright: ignore[reportIncompatibleVariableOverride]
        return self.controller.norm

    def wrap(self, direction):
        return eqx.tree_at(
            lambda c: c.controller, self, self.controller.wrap(direction)
        )

    def init(
        self,
        terms: PyTree[dfx.AbstractTerm],
        t0,
        t1,
        y0,
        dt0,
        args,
        func: Callable,
        error_order,
    ):
        return self.controller.init(terms, t0, t1, y0, dt0, args, func, error_order)
