"""Events: NEURON's point processes at a site, and NetCons from spike-time
lists, `NetStim`s or a compartment's voltage crossing a threshold, delivered
at their exact arrival times. See `docs/events.md`."""

from ._build import PointRecording as PointRecording
from ._netcon import NetCon as NetCon, NetStim as NetStim, SpikeTimes as SpikeTimes
from ._processes import (
    AlphaSynapse as AlphaSynapse,
    Exp2Syn as Exp2Syn,
    ExpSyn as ExpSyn,
    IClamp as IClamp,
    POINT_PROCESS_KINDS as POINT_PROCESS_KINDS,
    SEClamp as SEClamp,
    VClamp as VClamp,
)
from ._sources import SpikeRecording as SpikeRecording
