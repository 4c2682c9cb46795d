"""Which JAX shardings the solves support: `jax.jit` sharding over a mesh whose
axes are `AxisType.Auto` (a `jax.sharding.Mesh`, or `jax.make_mesh(...,
axis_types=(AxisType.Auto,))`). Explicit axes and `jax.shard_map` (manual axes)
put the mesh into every array's type, which lineax's linear solves do not accept
yet (patrick-kidger/lineax#185: a vector's structure and its operator's then
differ by their sharding); this says so before the solve does."""

import equinox as eqx
import jax
from jax.sharding import AxisType

from ._errors import Unsupported


_UNSUPPORTED = (AxisType.Explicit, AxisType.Manual)


def check_sharding(**trees) -> None:
    """A `stable_ode._errors.Unsupported` (a `NotImplementedError`) naming the
    argument if an array in one of `trees` (name → pytree) is typed with
    explicit or manual (`shard_map`) mesh axes."""
    for name, tree in trees.items():
        for leaf in jax.tree.leaves(eqx.filter(tree, eqx.is_array)):
            mesh = getattr(jax.typeof(leaf).sharding, "mesh", None)
            kinds = [t for t in getattr(mesh, "axis_types", ()) if t in _UNSUPPORTED]
            if kinds:
                raise Unsupported(
                    f"simulate: `{name}` holds arrays sharded over mesh axes of type "
                    f"{kinds[0].name} ({dict(mesh.shape)}); the voltage solves run "
                    "through lineax, which does not support explicit or shard_map "
                    "sharding yet (patrick-kidger/lineax#185). Make the mesh with "
                    "`jax.make_mesh(shape, names, axis_types=(jax.sharding."
                    "AxisType.Auto,) * len(names))` (or `jax.sharding.Mesh`), put "
                    "the batch on it with `NamedSharding`, and let `jax.jit` shard "
                    "it (docs/adjoint.md)"
                )
