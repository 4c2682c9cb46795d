"""Membrane mechanisms: the interface, kinetics objects and the built-in channels."""

from ._base import AbstractMechanism as AbstractMechanism
from ._env import Environment as Environment
from ._ions import (
    FARADAY as FARADAY,
    GAS_CONSTANT as GAS_CONSTANT,
    ghk as ghk,
    IonSetting as IonSetting,
    IonSpecies as IonSpecies,
    IonView as IonView,
    nernst as nernst,
    UseIon as UseIon,
)
from ._kinetics import (
    AbstractKinetics as AbstractKinetics,
    alpha_beta_gate as alpha_beta_gate,
    Assigned as Assigned,
    Gate as Gate,
    inf_tau_gate as inf_tau_gate,
    RateEquation as RateEquation,
    Relaxation as Relaxation,
)
from ._scheme import (
    AbstractCoupledKinetics as AbstractCoupledKinetics,
    MarkovScheme as MarkovScheme,
)
from .hh import HH as HH, hh_rates as hh_rates
from .passive import Passive as Passive
from .synapses import (
    AbstractSynapse as AbstractSynapse,
    GapJunction as GapJunction,
    IonotropicSynapse as IonotropicSynapse,
)
