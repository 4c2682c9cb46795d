"""The model's ions as arrays (`MembraneModel.ions`): built from the mechanisms'
`UseIon`s and the user's settings, and evaluated at a stage's states.

See `stable_ode.mechanisms._ions` for NEURON's rules this implements.
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._errors import InvalidArgument
from ._group import ion_uses
from .mechanisms._ions import (
    ion_defaults,
    ion_value_problems,
    ion_variable,
    IonSpecies,
    IonView,
    KNOWN_VALENCE,
    nernst,
    UseIon,
)


class BuiltIon(eqx.Module):
    """One ion of a model, over all compartments.

    **Fields:** `inside`, `outside` (mM): the initial concentrations (the
    constant ones where no mechanism writes them); `reversal` (mV): the fixed
    reversal potential (used where `nernst` is 0); `nernst` (int, 1 where the
    reversal follows Nernst); static: `name`, `valence`, `writes_inside` /
    `writes_outside` (`(group, state)` pairs of the mechanism groups writing a
    concentration), `current_groups` (groups writing `i<ion>`).
    """

    inside: Float[Array, " ncomp"]
    outside: Float[Array, " ncomp"]
    reversal: Float[Array, " ncomp"]
    nernst: Int[Array, " ncomp"]
    name: str = eqx.field(static=True)
    valence: int = eqx.field(static=True)
    writes_inside: tuple[tuple[int, str], ...] = eqx.field(static=True)
    writes_outside: tuple[tuple[int, str], ...] = eqx.field(static=True)
    current_groups: tuple[int, ...] = eqx.field(static=True)
    any_nernst: bool = eqx.field(static=True)

    def reversal_at(self, inside, outside, fixed, celsius):
        """The reversal potential (mV) with concentrations `inside`/`outside`
        (mM): Nernst at `celsius` (°C) where it follows Nernst, else `fixed`."""
        if not self.any_nernst:
            return fixed
        e = nernst(inside, outside, self.valence, celsius)
        return jnp.where(self.nernst != 0, e, fixed)


def _check_use(mech_name: str, k: int, use) -> UseIon:
    where = f"mechanism {mech_name}: ions[{k}]"
    if not isinstance(use, UseIon):
        raise ValueError(f"{where}: expected a UseIon, got {use!r}")
    ion = use.ion
    if not (isinstance(ion, str) and ion.isidentifier()):
        raise ValueError(f"{where}: ion name must be an identifier, got {ion!r}")
    readable = {f"e{ion}", f"{ion}i", f"{ion}o", f"i{ion}"}
    writable = {f"i{ion}", f"{ion}i", f"{ion}o"}
    for what, names, ok in (
        ("read", use.read, readable),
        ("write", use.write, writable),
    ):
        if isinstance(names, str):
            raise ValueError(f"{where}: {what} must be a tuple of names, got {names!r}")
        for name in names:
            if name not in ok:
                extra = (
                    " (writing a reversal potential is not supported)"
                    if what == "write" and name == f"e{ion}"
                    else ""
                )
                raise ValueError(
                    f"{where}: cannot {what} {name!r} of ion {ion!r}{extra}; "
                    f"{what} takes {sorted(ok)}"
                )
    if use.valence is not None and (
        not isinstance(use.valence, int) or isinstance(use.valence, bool)
    ):
        raise ValueError(f"{where}: valence must be an integer, got {use.valence!r}")
    if use.valence == 0:
        raise ValueError(f"{where}: valence must be non-zero")
    return use


def _check_species(name: str, sp) -> IonSpecies:
    where = f"build: ions[{name!r}]"
    if not isinstance(sp, IonSpecies):
        raise ValueError(f"{where}: expected an IonSpecies, got {sp!r}")
    problems = ion_value_problems(sp)
    if problems:
        key, problem = problems[0]
        raise InvalidArgument(where, key, problem)
    v = sp.valence
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v == 0):
        raise InvalidArgument(
            where, "valence", f"must be a non-zero integer, got {v!r}"
        )
    return sp


def build_ions(cells, offsets, groups, settings, n: int, dtype) -> tuple[BuiltIon, ...]:
    """The model's ions from the mechanism groups `groups` (their `UseIon`s),
    the model-level `settings` (`{name: IonSpecies}`) and the cells' `ions`
    (`IonSetting`s); `offsets[cell][section]` is a section's first compartment.
    A `ValueError` naming the mechanism, ion or setting at fault."""
    settings = dict(settings or {})
    for name, sp in settings.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(
                f"build: ions: ion names must be identifiers, got {name!r}"
            )
        _check_species(name, sp)
    uses: dict[str, list] = {}
    for g, group in enumerate(groups):
        mech = getattr(group, "mechanism", None)
        mname = type(mech).__name__ if mech is not None else group.name
        for k, use in enumerate(ion_uses(group)):
            uses.setdefault(_check_use(mname, k, use).ion, []).append((g, mname, use))
    cell_settings = [
        (cell, m, st)
        for cell in cells
        for m, st in enumerate(getattr(cell, "ions", ()))
    ]
    names = list(uses)
    for name in list(settings) + [st.ion for _, _, st in cell_settings]:
        if name not in names:
            names.append(name)
    out = []
    for name in names:
        sp = settings.get(name, IonSpecies())
        valences = {(m, u.valence) for _, m, u in uses.get(name, ()) if u.valence}
        vals = {v for _, v in valences}
        if sp.valence is not None:
            vals.add(sp.valence)
        if len(vals) > 1:
            raise ValueError(
                f"ion {name!r}: conflicting valences {sorted(vals)} (mechanisms "
                f"{sorted(valences)}, ions[{name!r}].valence={sp.valence})"
            )
        valence = vals.pop() if vals else KNOWN_VALENCE.get(name)
        if valence is None:
            who = sorted({m for _, m, _ in uses.get(name, ())})
            raise ValueError(
                f"ion {name!r} (used by {who or 'the ion settings'}) has no valence: "
                f"give it in the UseIon (valence=...) or in build(ions={{{name!r}: "
                "IonSpecies(valence=...)}})"
            )
        ci0, co0, e0 = ion_defaults(name)
        inside = np.full(n, sp.inside if sp.inside is not None else ci0)
        outside = np.full(n, sp.outside if sp.outside is not None else co0)
        reversal = np.full(n, sp.reversal if sp.reversal is not None else e0)
        fixed = np.full(n, sp.reversal is not None)
        for cell, _m, st in cell_settings:
            if st.ion != name:
                continue
            secs = (
                st.sections
                if st.sections is not None
                else [s.name for s in cell.sections]
            )
            for s in secs:
                a = offsets[cell.name][s]
                b = a + cell.section(s).n_compartments
                for arr, x in ((inside, st.inside), (outside, st.outside)):
                    if x is not None:
                        arr[a:b] = x
                if st.reversal is not None:
                    reversal[a:b] = st.reversal
                    fixed[a:b] = True
        conc = np.zeros(n, bool)
        writers: dict[str, list] = {"i": [], "o": []}
        owner = {"i": np.full(n, -1), "o": np.full(n, -1)}
        current_groups, readers_of_current = [], []
        for g, mname, use in uses.get(name, ()):
            idx = np.asarray(groups[g].index)
            touched = set(use.read) | set(use.write)
            if touched & {f"{name}i", f"{name}o"}:
                conc[idx] = True
            for side in ("i", "o"):
                state = f"{name}{side}"
                if state in use.write:
                    clash = owner[side][idx]
                    if np.any(clash >= 0):
                        other = type(groups[int(clash[clash >= 0][0])].mechanism)
                        raise ValueError(
                            f"mechanisms {other.__name__} and {mname} both write "
                            f"{state!r} in the same compartment (sections "
                            f"{sorted({s for _, s in groups[g].sections})})"
                        )
                    owner[side][idx] = g
                    # the state that holds it (cdp5.mod's `ca` for `cai = ca`)
                    held = getattr(groups[g].mechanism, "concentration_states", {})
                    writers[side].append((g, held.get(state, state)))
            if f"i{name}" in use.write:
                current_groups.append(g)
            if f"i{name}" in use.read:
                readers_of_current.append((g, mname))
        nernst_mask = conc & ~fixed
        out.append(
            BuiltIon(
                inside=jnp.asarray(inside, dtype),
                outside=jnp.asarray(outside, dtype),
                reversal=jnp.asarray(reversal, dtype),
                nernst=jnp.asarray(nernst_mask, jnp.int32),
                name=name,
                valence=int(valence),
                writes_inside=tuple(writers["i"]),
                writes_outside=tuple(writers["o"]),
                current_groups=tuple(current_groups),
                any_nernst=bool(nernst_mask.any()),
            )
        )
    return tuple(out)


def _written(group, states, name):
    try:
        return states[name]
    except KeyError:
        raise ValueError(
            f"mechanism {group.name} writes {name!r} (UseIon ... write) but has no "
            f"state of that name (its states: {sorted(states)}); the concentration "
            "it writes must be its state of exactly that name"
        ) from None


def concentration_views(model, states=None) -> dict[str, IonView]:
    """Every ion of `model` over all compartments at group states `states`
    (`State.groups`; `None`: the initial concentrations), with `current` zero."""
    views = {}
    for ion in model.ions:
        ci, co = ion.inside, ion.outside
        if states is not None:
            for g, name in ion.writes_inside:
                group = model.groups[g]
                ci = group.put(ci, _written(group, states[g], name))
            for g, name in ion.writes_outside:
                group = model.groups[g]
                co = group.put(co, _written(group, states[g], name))
        e = ion.reversal_at(ci, co, ion.reversal, model.celsius)
        views[ion.name] = IonView(
            inside=ci,
            outside=co,
            reversal=e,
            current=jnp.zeros_like(ci),
            valence=ion.valence,
        )
    return views


def current_views(model, v, states, views, v_solve=None):
    """`views` with each ion's total current at voltages `v` and `states`, and
    the split currents of every group writing one (`{group: {key: density}}`);
    `v_solve` as `MembraneModel.ionic_current`'s."""
    groups = sorted({g for ion in model.ions for g in ion.current_groups})
    cache = {}
    totals = {name: view.current for name, view in views.items()}
    for g in groups:
        group = model.groups[g]
        if group.point_current:  # (an imported point process: nA → mA/cm²)
            parts = group.ion_densities(model, v, states[g], views, v_solve)
        else:
            parts = group.currents(model, v, states[g], views, v_solve)
        cache[g] = parts
        for key, val in parts.items():
            if key in totals:
                totals[key] = group.add_to(totals[key], val)
    out = {
        name: IonView(
            inside=view.inside,
            outside=view.outside,
            reversal=view.reversal,
            current=totals[name],
            valence=view.valence,
        )
        for name, view in views.items()
    }
    return out, cache


def reads_current(model) -> bool:
    """Whether any mechanism of `model` reads an ion current (`i<ion>`)."""
    return any(f"i{u.ion}" in u.read for group in model.groups for u in ion_uses(group))


def check_variable(rec, ion_table) -> str:
    """`rec.variable` if the model can record it, else a `ValueError` naming the
    recording."""
    var = rec.variable
    if var == "v" or ion_variable(var, [ion.name for ion in ion_table]):
        return var
    ions = sorted(ion.name for ion in ion_table)
    hint = (
        f"an ion variable of this model's ions {ions} (e.g. 'ca' -> 'cai', 'cao', "
        "'eca', 'ica')"
        if ions
        else "(this model has no ions, so no ion variable)"
    )
    raise ValueError(
        f"recording {rec.name!r}: cannot record variable {var!r}: give 'v', a "
        "state or RANGE variable of a mechanism inserted there as "
        f"'<name>_<suffix>' (e.g. 'm_hh', 'gna_hh'), or {hint}"
    )
