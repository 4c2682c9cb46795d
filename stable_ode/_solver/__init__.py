from .backward_euler import BackwardEuler as BackwardEuler
from .crank_nicolson import CrankNicolson as CrankNicolson
from .exponential_euler import ExponentialEuler as ExponentialEuler
