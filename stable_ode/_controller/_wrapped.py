"""The base of this package's adaptive controller wrappers."""

import diffrax as dfx
import equinox as eqx


class AbstractWrappedController(dfx.AbstractAdaptiveStepSizeController):
    """An adaptive controller around another (`controller`) whose `rtol`, `atol` and
    `norm` are the wrapped controller's (diffrax's implicit solvers read them for
    their root finders) and which `wrap`s it for the direction of integration."""

    controller: eqx.AbstractVar[dfx.AbstractAdaptiveStepSizeController]

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
