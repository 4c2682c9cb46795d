from ._base import AbstractStepping as AbstractStepping
from .adaptive import AdaptiveSteps as AdaptiveSteps
from .check import check_compatible as check_compatible
from .fixed import FixedSteps as FixedSteps
from .guard import guard as guard, NonFiniteGuard as NonFiniteGuard
