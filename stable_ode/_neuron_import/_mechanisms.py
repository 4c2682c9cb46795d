"""Reading NEURON's density mechanisms (per-segment parameter values) and ion
settings into model-file entries.

A parameter that has one value in every compartment of a mechanism's sections is
written as a number; otherwise as `{"values": [...]}`, one value per compartment
of the listed sections in order (NEURON's `for seg in sec` order).
"""

from collections import Counter


_BUILTIN = {
    "hh": ("gnabar", "gkbar", "gl", "el"),
    "pas": ("g", "e"),
}
"""NEURON's built-in density mechanisms stable_ode has, with their PARAMETERs."""

_HH_IONS = {"ena": "na", "ek": "k"}  # hh's ion reversals, fields of stable_ode's HH

_IGNORED = {"capacitance", "morphology"}  # not membrane mechanisms

_DEFAULT_VALENCE = {"na": 1, "k": 1, "ca": 2}


def _value(values: list[float]):
    return values[0] if len(set(values)) == 1 else {"values": values}


def _segment_value(h, seg, mech: str, name: str):
    """`seg.<name>_<mech>` (a RANGE variable) or `h.<name>_<mech>` (a GLOBAL)."""
    hoc = f"{name}_{mech}"
    try:
        return float(getattr(seg, hoc))
    except (AttributeError, NameError, LookupError, TypeError):
        return float(getattr(h, hoc))


def _inserted(tree) -> dict[str, list]:
    """`{mechanism: [sections]}` of a tree, in the order NEURON lists them."""
    out: dict[str, list] = {}
    for sec in tree.sections:
        for mech in sec.psection()["density_mechs"]:
            out.setdefault(mech, []).append(sec)
    return out


def mechanism_entries(h, tree, classes: dict, problems: list) -> list[dict]:
    """The `mechanisms` of a tree's cell. `classes`: the `--nmodl` mechanism
    classes by SUFFIX (`stable_ode.load_nmodl`)."""
    out = []
    for sec in tree.sections:
        if h.ismembrane("extracellular", sec=sec):
            problems.append(f"section {sec.name()!r}: extracellular is not supported")
    for mech, secs in _inserted(tree).items():
        if mech in _IGNORED or mech == "extracellular":
            continue
        names = [tree.names[s] for s in secs]
        where = f"{mech!r} (in {', '.join(s.name() for s in secs[:3])}" + (
            ", ...)" if len(secs) > 3 else ")"
        )
        if mech in _BUILTIN:
            params = list(_BUILTIN[mech])
        elif mech in classes:
            params = list(classes[mech].nmodl.parameters.values())
        else:
            problems.append(
                f"density mechanism {where}: no .mod file for it among the --nmodl "
                f"paths (stable_ode has hh and pas built in)"
            )
            continue
        values: dict = {}
        failed = False
        for p in params:
            try:
                values[p] = _value(
                    [_segment_value(h, seg, mech, p) for s in secs for seg in s]
                )
            except (AttributeError, NameError, LookupError, TypeError) as e:
                problems.append(f"density mechanism {where}: cannot read {p}: {e}")
                failed = True
        if mech == "hh":
            for p, ion in _HH_IONS.items():
                values[p] = _value([float(getattr(seg, p)) for s in secs for seg in s])
                for s in secs:
                    if _ion_style(h, ion, s)["follows_concentrations"]:
                        problems.append(
                            f"density mechanism 'hh' in {s.name()!r}: NEURON computes "
                            f"{p} from the {ion} concentrations there; stable_ode's hh "
                            f"takes a fixed {p}"
                        )
                        failed = True
        if not failed:
            out.append({"name": mech, "sections": names, "params": values})
    return out


def _ion_style(h, ion: str, sec) -> dict:
    """NEURON's `ion_style` of `ion` in `sec`, decoded (`c_style + 4*cinit +
    8*e_style + 32*einit + 64*eadvance`)."""
    style = int(h.ion_style(f"{ion}_ion", sec=sec))
    einit, eadvance = (style >> 5) & 1, (style >> 6) & 1
    return {
        "cinit": bool((style >> 2) & 1),
        "follows_concentrations": bool(einit or eadvance),
    }


def _ion_setting(h, ion: str, sec, problems: list) -> dict:
    """`{inside, outside[, reversal]}` of `ion` in `sec`: the reversal potential
    where NEURON keeps it fixed (not computed from concentrations); the initial
    concentrations `finitialize` sets (NEURON's `<ion>i0_<ion>_ion` globals where
    it initialises them, else the section's values)."""
    style = _ion_style(h, ion, sec)
    out: dict = {}
    if style["cinit"]:
        out["inside"] = float(getattr(h, f"{ion}i0_{ion}_ion"))
        out["outside"] = float(getattr(h, f"{ion}o0_{ion}_ion"))
    else:
        for key, var in (("inside", f"{ion}i"), ("outside", f"{ion}o")):
            values = {float(getattr(seg, var)) for seg in sec}
            if len(values) > 1:
                problems.append(
                    f"section {sec.name()!r}: {var} varies along the section; only "
                    f"one value per section is supported"
                )
            out[key] = float(getattr(sec(0.5), var))
    if not style["follows_concentrations"]:
        values = {float(getattr(seg, f"e{ion}")) for seg in sec}
        if len(values) > 1:
            problems.append(
                f"section {sec.name()!r}: e{ion} varies along the section; only one "
                f"value per section is supported"
            )
        out["reversal"] = float(getattr(sec(0.5), f"e{ion}"))
    return out


def ion_settings(h, trees, classes: dict, problems: list):
    """`(top-level ions, {cell name: [cell ion entries]})` for the ions that the
    inserted `--nmodl` mechanisms use (`hh` and `pas` use none here: `hh`'s
    `ena` and `ek` are its parameters). The most common setting of an ion is the
    top-level one; sections that differ get a cell entry."""
    per_section: dict = {}  # ion -> [(tree, section, setting)]
    for tree in trees:
        for mech, secs in _inserted(tree).items():
            cls = classes.get(mech)
            if cls is None or mech in _BUILTIN:
                continue
            for use in getattr(cls, "ions", ()):
                for s in secs:
                    per_section.setdefault(use.ion, {})[s] = tree
    top: dict = {}
    cells: dict = {}
    for ion, where in per_section.items():
        settings = {s: _ion_setting(h, ion, s, problems) for s in where}
        keyed = {s: tuple(sorted(v.items())) for s, v in settings.items()}
        common = Counter(keyed.values()).most_common(1)[0][0]
        top[ion] = dict(common)
        if ion not in _DEFAULT_VALENCE:
            top[ion]["valence"] = int(h.ion_charge(f"{ion}_ion"))
        for s, k in keyed.items():
            if k != common:
                tree = where[s]
                cells.setdefault(tree.name, []).append(
                    {"name": ion, "sections": [tree.names[s]], **settings[s]}
                )
    return top, cells
