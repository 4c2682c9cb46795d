"""Per-section `cm` and `Ra` of a cell (`Properties`), and how a cell's entries
resolve into one `cm` per compartment and one `Ra` per section.

NEURON's `cm` is a RANGE variable, one value per segment (`seg.cm`); its `Ra` is
a section variable, one value per section (`sec.Ra`; there is no `seg.Ra`). So
a `Distance` capacitance gets one value per compartment, at each compartment's
centre (`for seg in sec: seg.cm = f(h.distance(soma(0.5), seg))`), and a
`Distance` axial resistivity one value per section, at the section's centre
(`for sec in secs: sec.Ra = f(h.distance(soma(0.5), sec(0.5)))`).
"""

import math
from types import SimpleNamespace

import equinox as eqx
import numpy as np

from .._errors import concrete_number, InvalidArgument


_SEQUENCES = (list, tuple, np.ndarray)


class Properties(eqx.Module):
    """Per-section `cm` and `Ra` in a `Cell` (`properties=[...]`; later entries
    win over earlier ones and over the cell's own values).

    **Arguments:**

    - `sections`: entries naming sections (names, `*` patterns, section lists),
      or `None` for all.
    - `capacitance`: µF/cm² (NEURON's `cm`), > 0: a number; a `Distance`,
      evaluated at each compartment's centre (NEURON's
      `for seg in sec: seg.cm = f(h.distance(seg))`); or one value per
      compartment of the entry's sections in order (a sequence). `None` keeps.
    - `axial_resistivity`: Ω·cm (NEURON's `Ra`), > 0: a number, or a `Distance`
      evaluated once per section at its centre (NEURON's `Ra` is one value per
      section, `sec.Ra = f(h.distance(sec(0.5)))`). `None` keeps.

    With `load_morphology`'s `d_lambda` rule a `Distance` `cm` enters each
    section's count at the section's centre (as NEURON's `geom_nseg` reads
    `cm` at `sec(0.5)` after a `for seg` loop over `Import3d`'s one segment per
    section); the compartments then get their own values.
    """

    sections: tuple[str, ...] | None = None
    capacitance: object = None
    axial_resistivity: object = None

    def __init__(self, sections=None, capacitance=None, axial_resistivity=None):
        self.sections = None if sections is None else tuple(sections)
        if isinstance(capacitance, _SEQUENCES):
            capacitance = np.array(capacitance, dtype=np.float64)
        self.capacitance = capacitance
        self.axial_resistivity = axial_resistivity

    def __check_init__(self):
        from ._regions import Distance

        owner = "Properties"
        c = self.capacitance
        if isinstance(c, np.ndarray):
            if c.ndim != 1 or c.size == 0:
                raise InvalidArgument(
                    owner,
                    "capacitance",
                    f"per-compartment values must be a non-empty list, got shape "
                    f"{c.shape}",
                )
            bad = ~(np.isfinite(c) & (c > 0))
            if np.any(bad):
                j = int(np.argmax(bad))
                raise InvalidArgument(
                    owner, f"capacitance[{j}]", f"must be > 0, got {c[j]!r}"
                )
        elif c is not None and not isinstance(c, Distance):
            _positive_number(owner, "capacitance", c)
        r = self.axial_resistivity
        if isinstance(r, _SEQUENCES):
            raise InvalidArgument(
                owner,
                "axial_resistivity",
                "NEURON's Ra is one value per section (sec.Ra; there is no seg.Ra): "
                "give a number, a Distance (evaluated at each section's centre) or "
                "one Properties entry per section",
            )
        if r is not None and not isinstance(r, Distance):
            _positive_number(owner, "axial_resistivity", r)


def _positive_number(owner, argument, x):
    if isinstance(x, str):
        raise InvalidArgument(
            owner,
            argument,
            f"must be a number or a Distance, got {x!r} (an "
            f"expression of the distance x is Distance({x!r}))",
        )
    if concrete_number(x) and not (math.isfinite(x) and x > 0):
        raise InvalidArgument(owner, argument, f"must be > 0, got {x!r}")


def evaluate(value, x, labels, owner, where) -> np.ndarray:
    """`value` (a `Distance`) at distances `x` (µm), each > 0 and finite, else an
    `InvalidArgument` at `where` naming the section (`labels[j]`) and distance."""
    try:
        out = value.values(x)
    except Exception as e:  # a user's function failing
        raise InvalidArgument(owner, where, f"{value!r} failed: {e}") from None
    bad = ~(np.isfinite(out) & (out > 0))
    if np.any(bad):
        j = int(np.argmax(bad))
        raise InvalidArgument(
            owner,
            where,
            f"{value!r} is {out[j]} at distance {x[j]:g} µm in section "
            f"{labels[j]!r}; it must be > 0",
        )
    return out


def resolve_properties(owner, properties, sections, names_of, distances):
    """`Properties` with section entries turned into names, a `Distance` `cm`
    into one value per compartment and a `Distance` `Ra` into one entry per
    section (its value at the section's centre).

    `names_of(entries, where)` resolves section entries (`None` stays `None`);
    `distances(centre)` gives `{section: path distances}` at the compartments'
    centres (`centre=False`) or at the sections' centres (`True`), µm.

    **Raises:** `InvalidArgument` at `properties[m]...`.
    """
    from ._regions import Distance

    count = {s.name: s.n_compartments for s in sections}
    out = []
    for m, p in enumerate(properties):
        where = f"properties[{m}]"
        if not isinstance(p, Properties):
            raise InvalidArgument(owner, where, f"expected Properties, got {p!r}")
        secs = names_of(p.sections, where)
        order = list(count) if secs is None else list(secs)
        if not order:  # a section list this cell has no section of
            continue
        n = sum(count[s] for s in order)
        cm = p.capacitance
        if isinstance(cm, Distance):
            d = distances(False)
            x = np.concatenate([d[s] for s in order])
            labels = [s for s in order for _ in range(count[s])]
            cm = evaluate(cm, x, labels, owner, f"{where}.capacitance")
        elif isinstance(cm, np.ndarray) and cm.size != n:
            raise InvalidArgument(
                owner,
                f"{where}.capacitance",
                f"{cm.size} values for {n} compartments (one per compartment of "
                f"the entry's {len(order)} section(s), in order)",
            )
        ra = p.axial_resistivity
        if not isinstance(ra, Distance):
            out.append(Properties(secs, cm, ra))
            continue
        d = distances(True)
        values = evaluate(
            ra,
            np.asarray([d[s][0] for s in order]),
            order,
            owner,
            f"{where}.axial_resistivity",
        )
        start = 0
        for s, r in zip(order, values.tolist()):
            c = cm[start : start + count[s]] if isinstance(cm, np.ndarray) else cm
            out.append(Properties((s,), c, r))
            start += count[s]
    return tuple(out)


def section_values(cell) -> tuple[dict, dict[str, float]]:
    """`({section: cm}, {section: Ra Ω·cm})` after the cell's properties; a
    section's `cm` (µF/cm²) is a number or an array of one value per
    compartment."""
    count = {s.name: s.n_compartments for s in cell.sections}
    cm: dict = dict.fromkeys(count, cell.capacitance)
    ra = dict.fromkeys(count, cell.axial_resistivity)
    for p in cell.properties:
        names = p.sections if p.sections is not None else list(count)
        c = p.capacitance
        if isinstance(c, np.ndarray):
            start = 0
            for s in names:
                cm[s] = c[start : start + count[s]]
                start += count[s]
        elif c is not None:
            for s in names:
                cm[s] = c
        if p.axial_resistivity is not None:
            for s in names:
                ra[s] = p.axial_resistivity
    return cm, ra


def centre_values(sections, properties, cm, ra, lists, owner):
    """Each section's `cm` and `Ra` at its centre after `properties`, for the
    d_lambda rule (NEURON's `geom_nseg` reads `cm` and `Ra` of `sec(0.5)`);
    `sections` are one compartment each. Entries that name nothing are left
    for `Cell` to report; per-compartment value lists are an error, as their
    count is not known before the rule has run."""
    from ._regions import path_distances, resolve_sections

    names = [s.name for s in sections]
    usable = []
    for m, p in enumerate(properties):
        if not isinstance(p, Properties):
            continue
        if isinstance(p.capacitance, np.ndarray):
            raise InvalidArgument(
                owner,
                f"properties[{m}].capacitance",
                "one value per compartment needs a fixed n_compartments (the "
                "d_lambda rule sets the count); give a number or a Distance",
            )
        try:
            secs = (
                None
                if p.sections is None
                else resolve_sections(p.sections, names, lists)
            )
        except LookupError:
            continue
        usable.append(Properties(secs, p.capacitance, p.axial_resistivity))
    roots = [s.name for s in sections if s.parent is None]
    origin = lists["somatic"][0] if lists["somatic"] else roots[0]
    cache: dict = {}

    def distances(centre):
        del centre  # one compartment per section: its centre is the section's
        if not cache:
            cache.update(path_distances(sections, origin))
        return cache

    resolved = resolve_properties(
        owner, usable, sections, lambda entries, where: entries, distances
    )
    cell = SimpleNamespace(
        sections=sections, capacitance=cm, axial_resistivity=ra, properties=resolved
    )
    cms, ras = section_values(cell)
    return {
        s: float(c[0]) if isinstance(c, np.ndarray) else c for s, c in cms.items()
    }, ras
