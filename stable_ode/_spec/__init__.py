"""Model files (`stable_ode.model/1`, JSON or TOML) → objects.

`_schema.py` and `_cells.py` read a parsed file into the library's own objects
(`Cell`, `StepCurrent`, `Recording`, ...; a `ModelSpec`), which check their values;
`_reader.py` holds what only a file can get wrong (keys, types, the dtype's range,
`Limits`); `_registry.py` maps names (mechanisms, synapse and stimulus kinds,
solvers, controllers) to objects; `_loader.py` builds the `MembraneModel` and the
run settings (`LoadedModel`).
"""

from ._cells import SwcSource as SwcSource
from ._demo import DEMO_MODEL as DEMO_MODEL
from ._errors import SpecError as SpecError
from ._loader import (
    build_spec as build_spec,
    connections_spec as connections_spec,
    load_spec as load_spec,
    LoadedModel as LoadedModel,
)
from ._reader import LIMITS as LIMITS, Limits as Limits
from ._registry import (
    check_solver as check_solver,
    make_controller as make_controller,
    MECHANISMS as MECHANISMS,
    REGISTRY as REGISTRY,
    Registry as Registry,
    resolve_mechanism as resolve_mechanism,
    resolve_solver as resolve_solver,
    resolve_synapse as resolve_synapse,
    SOLVERS as SOLVERS,
    SYNAPSES as SYNAPSES,
)
from ._schema import FORMAT as FORMAT, ModelSpec as ModelSpec, validate as validate
