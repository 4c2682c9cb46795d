"""Choosing which parameters are trained.

Parameters live in a `MembraneModel` as one array per mechanism field, with one
entry per compartment (or per synapse). `Trainable` selects some of them — per
mechanism, per section, per synapse group — and ties entries together where
asked (one value shared by a whole section, say), so that training code sees
only a small tuple of arrays:

    spec = (so.Trainable()
            .mechanism(so.HH, "gnabar", per="section")          # one value per section
            .mechanism(so.Passive, "g", sections=[("cell", "dend")])  # one shared value
            .synapses("IonotropicSynapse", "gmax", per="synapse"))
    params = spec.init(model)               # tuple of arrays, the trained values
    loss = lambda p: simulate(spec.apply(model, p), ...)
    grads = jax.grad(loss)(params)          # same structure as params

`apply` writes the values into the selected entries; everything else stays as
in `model` (and receives no gradient).
"""

import dataclasses
from collections.abc import Sequence
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._model import MembraneModel
from .mechanisms import AbstractMechanism


def _field_names(module) -> set[str]:
    return {f.name for f in dataclasses.fields(module)}


def _where(sel: "_Selection", gi: int):
    """The accessor of the selected field in mechanism or synapse group `gi`."""
    if sel.kind == "mechanism":
        return lambda m: getattr(m.mechanisms[gi].mechanism, sel.name)
    return lambda m: getattr(m.synapses[gi].synapse, sel.name)


class _Selection(eqx.Module):
    kind: Literal["mechanism", "synapse"] = eqx.field(static=True)
    target: type | str = eqx.field(static=True)
    name: str = eqx.field(static=True)
    sections: tuple[tuple[str, str], ...] | None = eqx.field(static=True)
    per: str = eqx.field(static=True)


class Trainable(eqx.Module):
    """A selection of trainable parameters (see the module docstring).

    Each call to `mechanism` / `synapses` adds one entry; `init(model)` returns
    one array per entry and `apply(model, params)` writes them back.
    """

    selections: tuple[_Selection, ...] = ()

    def mechanism(
        self,
        mechanism: type[AbstractMechanism],
        name: str,
        *,
        sections: Sequence[tuple[str, str]] | None = None,
        per: Literal["all", "section", "compartment"] = "all",
    ) -> "Trainable":
        """Train field `name` of every inserted `mechanism` (a class), restricted
        to `sections` (`(cell, section)` pairs; default all), with one value for
        all selected compartments (`per="all"`), one per section, or one per
        compartment."""
        if per not in ("all", "section", "compartment"):
            raise ValueError(
                f"per must be 'all', 'section' or 'compartment', got {per!r}"
            )
        secs = None if sections is None else tuple(tuple(s) for s in sections)
        sel = _Selection("mechanism", mechanism, name, secs, per)
        return Trainable(self.selections + (sel,))

    def synapses(
        self,
        group: str,
        name: str,
        *,
        per: Literal["all", "synapse"] = "synapse",
    ) -> "Trainable":
        """Train field `name` of the synapse group(s) named `group` (the
        `Connections` name, default the synapse class name), one value per
        synapse or one shared value."""
        if per not in ("all", "synapse"):
            raise ValueError(f"per must be 'all' or 'synapse', got {per!r}")
        return Trainable(
            self.selections + (_Selection("synapse", group, name, None, per),)
        )

    def _slots(self, model: MembraneModel, sel: _Selection):
        """`[(group index, entry indices, tie labels)]` for one selection."""
        out = []
        if sel.kind == "mechanism":
            for gi, group in enumerate(model.mechanisms):
                if not isinstance(group.mechanism, sel.target):
                    continue
                if sel.name not in _field_names(group.mechanism):
                    raise ValueError(
                        f"{sel.target.__name__} has no parameter {sel.name!r}"
                    )
                comps = np.asarray(group.index)
                where = [
                    (
                        model.layout.compartments[c].cell,
                        model.layout.compartments[c].section,
                    )
                    for c in comps
                ]
                keep = [
                    k
                    for k, w in enumerate(where)
                    if sel.sections is None or w in sel.sections
                ]
                labels = {
                    "all": [0] * len(keep),
                    "section": [where[k] for k in keep],
                    "compartment": [int(comps[k]) for k in keep],
                }[sel.per]
                out.append((gi, np.asarray(keep, int), labels))
            what = sel.target.__name__
        else:
            for gi, group in enumerate(model.synapses):
                if group.name != sel.target:
                    continue
                if sel.name not in _field_names(group.synapse):
                    raise ValueError(
                        f"synapse group {sel.target!r} has no parameter {sel.name!r}"
                    )
                n = group.pre.shape[0]
                labels = [0] * n if sel.per == "all" else [(gi, k) for k in range(n)]
                out.append((gi, np.arange(n), labels))
            what = f"synapse group {sel.target!r}"
        if not any(len(k) for _, k, _ in out):
            raise ValueError(
                f"Trainable: no {what} entries match {sel.name!r} / {sel.sections}"
            )
        # Tie labels across groups into value indices.
        order: dict = {}
        slots = []
        for gi, keep, labels in out:
            tie = np.asarray([order.setdefault(lab, len(order)) for lab in labels], int)
            slots.append((gi, keep, tie))
        return slots, len(order)

    def _leaf(self, model, sel, gi):
        return _where(sel, gi)(model)

    def init(self, model: MembraneModel) -> tuple:
        """The current values of the selected parameters (tied entries averaged)."""
        params = []
        for sel in self.selections:
            slots, n = self._slots(model, sel)
            total = np.zeros(n)
            count = np.zeros(n)
            for gi, keep, tie in slots:
                np.add.at(total, tie, np.asarray(self._leaf(model, sel, gi))[keep])
                np.add.at(count, tie, 1)
            params.append(jnp.asarray(total / count, model.dtype))
        return tuple(params)

    def apply(self, model: MembraneModel, params: Sequence) -> MembraneModel:
        """`model` with the selected entries replaced by `params` (differentiable)."""
        if len(params) != len(self.selections):
            raise ValueError(
                f"expected {len(self.selections)} parameter arrays, got {len(params)}"
            )
        for sel, p in zip(self.selections, params):
            slots, n = self._slots(model, sel)
            if p.shape != (n,):
                raise ValueError(
                    f"parameter {sel.name!r}: expected shape ({n},), got {p.shape}"
                )
            for gi, keep, tie in slots:
                leaf = self._leaf(model, sel, gi)
                new = leaf.at[keep].set(p[tie].astype(leaf.dtype))
                model = eqx.tree_at(_where(sel, gi), model, new)
        return model
