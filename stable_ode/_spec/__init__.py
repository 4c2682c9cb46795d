"""Model files (`stable_ode.model/1`, JSON or TOML) → objects.

`_schema.py` validates a parsed file into a typed `ModelSpec` (nothing built yet),
`_registry.py` maps names (mechanisms, synapse kinds, solvers, controllers) to
objects, and `_loader.py` builds the `MembraneModel` and the run settings
(`LoadedModel`).
"""

from ._demo import DEMO_MODEL as DEMO_MODEL
from ._errors import SpecError as SpecError
from ._loader import (
    build_spec as build_spec,
    connections_spec as connections_spec,
    load_spec as load_spec,
    LoadedModel as LoadedModel,
)
from ._registry import (
    make_controller as make_controller,
    MECHANISMS as MECHANISMS,
    resolve_mechanism as resolve_mechanism,
    resolve_solver as resolve_solver,
    resolve_synapse as resolve_synapse,
    SOLVERS as SOLVERS,
    SYNAPSES as SYNAPSES,
)
from ._schema import FORMAT as FORMAT, ModelSpec as ModelSpec, validate as validate
