"""stable_ode: neuron membrane dynamics in JAX that do not go NaN.

Models are diffrax terms (`MembraneTerm`), the stiff solvers are diffrax solvers
(`ExponentialEuler`, `BackwardEuler`, `CrankNicolson`), and `simulate` wires them
into `diffrax.diffeqsolve` with good defaults.
"""

# First: Ctrl-C while the command line imports JAX (see the module).
from . import _early_interrupt as _early_interrupt  # noqa: I001
from . import mechanisms as mechanisms, morphology as morphology
from ._analysis import spike_times as spike_times
from ._build import build as build
from ._math import (
    exp_bound as exp_bound,
    exprel as exprel,
    safe_div as safe_div,
    safe_exp as safe_exp,
    safe_log as safe_log,
    vtrap as vtrap,
    x_over_expm1 as x_over_expm1,
)
from ._model import (
    MechanismGroup as MechanismGroup,
    MembraneModel as MembraneModel,
    Recording as Recording,
    State as State,
)
from ._network import Connections as Connections, SynapseGroup as SynapseGroup
from ._neuron_import import (
    from_neuron as from_neuron,
    FromNeuronError as FromNeuronError,
)
from ._shape_plot import animate_shape as animate_shape, plot_shape as plot_shape
from ._simulate import simulate as simulate, Simulation as Simulation
from ._solver import (
    BackwardEuler as BackwardEuler,
    CrankNicolson as CrankNicolson,
    ExponentialEuler as ExponentialEuler,
)
from ._spec import (
    load_spec as load_spec,
    LoadedModel as LoadedModel,
    ModelSpec as ModelSpec,
    SpecError as SpecError,
)
from ._stimulus import (
    Site as Site,
    StepCurrent as StepCurrent,
    TraceCurrent as TraceCurrent,
)
from ._term import MembraneTerm as MembraneTerm
from ._trainable import Trainable as Trainable
from .mechanisms import (
    AbstractCoupledKinetics as AbstractCoupledKinetics,
    AbstractKinetics as AbstractKinetics,
    AbstractMechanism as AbstractMechanism,
    alpha_beta_gate as alpha_beta_gate,
    Environment as Environment,
    FARADAY as FARADAY,
    GAS_CONSTANT as GAS_CONSTANT,
    Gate as Gate,
    ghk as ghk,
    HH as HH,
    inf_tau_gate as inf_tau_gate,
    IonSetting as IonSetting,
    IonSpecies as IonSpecies,
    IonView as IonView,
    MarkovScheme as MarkovScheme,
    nernst as nernst,
    Passive as Passive,
    RateEquation as RateEquation,
    Relaxation as Relaxation,
    UseIon as UseIon,
)
from .mechanisms.synapses import (
    AbstractSynapse as AbstractSynapse,
    GapJunction as GapJunction,
    IonotropicSynapse as IonotropicSynapse,
)
from .morphology import (
    Cell as Cell,
    Distance as Distance,
    Insert as Insert,
    load_morphology as load_morphology,
    load_swc as load_swc,
    MorphologyError as MorphologyError,
    MorphologyInfo as MorphologyInfo,
    MorphologySection as MorphologySection,
    point_site as point_site,
    point_sites as point_sites,
    Properties as Properties,
    read_morphology as read_morphology,
    save_swc as save_swc,
    Section as Section,
)
from .nmodl import load_nmodl as load_nmodl


__version__ = "0.1.0"
from . import transforms as transforms
from ._adjoint import (
    Checkpointing as Checkpointing,
    gradient_check as gradient_check,
    GradientCheck as GradientCheck,
)
from ._controller import (
    NonFiniteRejecting as NonFiniteRejecting,
    SafeStepTo as SafeStepTo,
    StepStats as StepStats,
    TimingTolerance as TimingTolerance,
)
from ._results import RESULTS as RESULTS
from ._stepping import (
    AbstractStepping as AbstractStepping,
    AdaptiveSteps as AdaptiveSteps,
    check_compatible as check_compatible,
    FixedSteps as FixedSteps,
    guard as guard,
    NonFiniteGuard as NonFiniteGuard,
)
from ._xla import (
    set_cpu_concurrent_schedule as set_cpu_concurrent_schedule,
    set_cpu_small_loop_bytes as set_cpu_small_loop_bytes,
)
from .diagnostics import diagnose as diagnose, Diagnosis as Diagnosis
from .events import (  # events: point processes and NetCons
    AlphaSynapse as AlphaSynapse,
    Exp2Syn as Exp2Syn,
    ExpSyn as ExpSyn,
    IClamp as IClamp,
    NetCon as NetCon,
    NetStim as NetStim,
    PointRecording as PointRecording,
    SEClamp as SEClamp,
    SpikeRecording as SpikeRecording,
    SpikeTimes as SpikeTimes,
    VClamp as VClamp,
)
