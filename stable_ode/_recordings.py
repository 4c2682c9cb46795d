"""`Recordings`: a simulation's saved samples (and its recorded spike times) as a
read-only mapping from recording name to values, holding one array.

The compiled solve saves every recording into one array (one gather per step), and
every `SpikeRecording`'s spike times into another; the names are attached here,
outside it. A column is sliced only when it is looked up, so the number of
recordings adds no operation to the compiled solve, nor to a user's `jax.jit`
that returns a `Simulation`, its recordings or its spikes (XLA:CPU compiles every
output slice as a kernel of its own, so one output array per recording made
compile time grow with the number of recordings)."""

import functools
from collections.abc import Iterator, Mapping

import equinox as eqx
from jaxtyping import Array, Float


@functools.lru_cache(maxsize=64)
def _positions(names: tuple[str, ...]) -> dict[str, int]:
    return {name: j for j, name in enumerate(names)}


class Recordings(eqx.Module, Mapping):
    """Recording name → samples, as `simulate` returns them (`Simulation.recordings`;
    also `Simulation.spikes`: spike recording name → spike times, whose `saved`
    is `(..., nspike, nrec)`).

    A read-only `Mapping` (`rec["soma"]`, `rec.items()`, `dict(rec)`, `**rec`)
    whose values are columns of one array, `saved`. As a PyTree it is that one
    array (the names are static), so `jax.jit`, `jax.vmap` and `jax.grad` see a
    single leaf however many recordings there are; under `vmap` the batch axes
    come first and a value keeps them (`rec["soma"]` has shape `(batch, nsave)`).

    **Fields:**

    - `saved`: the samples, shape `(..., nsave, nrec)` (`(..., nsave, ncomp)`
      with `names=None`).
    - `names`: the recordings' names, one per column of `saved`; `None` for a
      model without named recordings, whose one entry `"v"` is every
      compartment's membrane potential, `saved` itself.
    """

    saved: Float[Array, "... nsave nrec"]
    names: tuple[str, ...] | None = eqx.field(static=True)

    def __getitem__(self, name: str) -> Float[Array, "... nsave"]:
        if self.names is None:
            if name != "v":
                raise KeyError(name)
            return self.saved
        return self.saved[..., _positions(self.names)[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(("v",) if self.names is None else self.names)

    def __len__(self) -> int:
        return 1 if self.names is None else len(self.names)

    def __contains__(self, name) -> bool:
        if self.names is None:
            return name == "v"
        return name in _positions(self.names)


Recordings.__init__.__doc__ = """**Arguments:** `saved` and `names`, as the fields."""
