from ._bookkeeping import StepStats as StepStats
from .nonfinite_rejecting import (
    NonFiniteRejecting as NonFiniteRejecting,
    NonFiniteRejectingState as NonFiniteRejectingState,
)
from .safe_step_to import SafeStepTo as SafeStepTo, SafeStepToState as SafeStepToState
from .timing_tolerance import TimingTolerance as TimingTolerance
