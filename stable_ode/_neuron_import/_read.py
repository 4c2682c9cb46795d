"""The whole model instantiated in a NEURON process → one model-file mapping
(`stable_ode.model/1`), and the list of what could not be converted."""

import math

from ._events import netcons, point_processes
from ._mechanisms import ion_settings, mechanism_entries
from ._sections import cell_properties, cell_trees, section_entry


def read_model(h, classes: dict, nmodl: list[str], sections=None, record=None):
    """`(model, problems)`: the model-file mapping of NEURON's instantiated
    model and what it cannot hold (one string each; the model is only valid if
    there are none).

    **Arguments:**

    - `h`: NEURON's `h`.
    - `classes`: `stable_ode.load_nmodl`'s classes of the `.mod` files, by SUFFIX.
    - `nmodl`: the paths written to the top-level `nmodl` key.
    - `sections`: NEURON sections whose cells to convert; `None`: every section.
    - `record`: `{name: NEURON segment, (segment, variable) or (point process,
      variable)}`, what to record besides `soma` (a name `soma` replaces it).
    """
    problems: list[str] = []
    if sections is None:
        sections = list(h.allsec())
    else:
        roots = {h.SectionRef(sec=s).root for s in sections}
        sections = [s for s in h.allsec() if h.SectionRef(sec=s).root in roots]
    if not sections:
        raise ValueError("NEURON has no sections: nothing to convert")
    trees = cell_trees(h, sections, problems)
    top_ions, cell_ions = ion_settings(h, trees, classes, problems)
    cells = []
    for tree in trees:
        cell: dict = {"name": tree.name}
        cell.update(cell_properties(h, tree, problems))
        cell["sections"] = [section_entry(h, s, tree, problems) for s in tree.sections]
        cell["mechanisms"] = mechanism_entries(h, tree, classes, problems)
        if tree.name in cell_ions:
            cell["ions"] = cell_ions[tree.name]
        cells.append(cell)
    stimuli, processes, kinds = point_processes(h, trees, problems, classes)
    model: dict = {
        "format": "stable_ode.model/1",
        "temperature": float(h.celsius),
        "v_init": float(h.v_init),
        "t_stop": float(h.tstop),
    }
    if nmodl:
        model["nmodl"] = list(nmodl)
    if top_ions:
        model["ions"] = top_ions
    model["cells"] = cells
    model["stimuli"] = stimuli
    # every NetCon is checked, with or without point processes to receive
    connections, spikes = netcons(h, trees, kinds, problems, classes)
    if processes:
        model["point_processes"] = processes
        model["netcons"] = connections
    if spikes:
        model["spikes"] = spikes
    records = {"soma": _soma_record(trees)}
    records.update(_named_records(trees, record or {}, kinds, problems))
    model["record"] = list(records.values())
    model["integration"] = _integration(h, problems)
    for lst in ("LinearMechanism",):
        if int(h.List(lst).count()):
            problems.append(f"{lst}: not supported")
    return model, problems


def _soma_record(trees) -> dict:
    """Voltage at the centre of the first section whose name starts with
    `soma`, or of the first section."""
    for tree in trees:
        for sec in tree.sections:
            if tree.names[sec].startswith("soma"):
                return _record(tree, sec)
    return _record(trees[0], trees[0].sections[0])


def _record(tree, sec, name="soma", position=0.5) -> dict:
    return {
        "name": name,
        "cell": tree.name,
        "section": tree.names[sec],
        "position": position,
    }


def _named_records(trees, record: dict, kinds: dict, problems: list) -> dict:
    """`{name: record entry}` for each of `record`: a NEURON segment (its
    voltage), `(segment, variable)` (an ion's or a mechanism's variable there,
    as NEURON names it: `"cai"`, `"m_hh"`), or `(point process, variable)`
    (`"i"` of a clamp, `"g"` of a synapse; `kinds`: the converted point
    processes' kinds by NEURON name)."""
    out = {}
    for name, what in record.items():
        seg, variable = what, None
        if isinstance(what, tuple) and len(what) == 2 and isinstance(what[1], str):
            seg, variable = what
        if not isinstance(name, str) or not name:
            problems.append(f"record {name!r}: the name must be a non-empty string")
            continue
        if (
            variable is not None
            and hasattr(seg, "hname")
            and hasattr(seg, "get_segment")
        ):
            pp = seg.hname()  # a point process
            if pp not in kinds:
                problems.append(
                    f"record {name!r}: {pp} is not a converted point process"
                )
                continue
            out[name] = {"name": name, "point_process": pp, "variable": variable}
            continue
        sec, x = getattr(seg, "sec", None), getattr(seg, "x", None)
        tree = next((t for t in trees if sec is not None and sec in t.names), None)
        if x is None:
            problems.append(
                f"record {name!r}: expected a NEURON segment (sec(x)), a "
                f"(segment, variable) or a (point process, variable) pair, got "
                f"{what!r}"
            )
        elif tree is None:
            problems.append(
                f"record {name!r}: {seg} is not in the cells being converted"
            )
        else:
            out[name] = _record(tree, sec, name, float(x))
            if variable is not None and variable != "v":
                out[name]["variable"] = variable
    return out


def _integration(h, problems: list) -> dict:
    """NEURON's fixed steps (`h.dt`, `h.secondorder`)."""
    dt, tstop = float(h.dt), float(h.tstop)
    steps = tstop / dt
    if not math.isclose(steps, round(steps), rel_tol=1e-9) or round(steps) < 1:
        problems.append(
            f"h.tstop = {tstop:g} ms is not a whole number of h.dt = {dt:g} ms steps"
        )
    order = int(h.secondorder)
    if order == 1:
        problems.append("h.secondorder = 1 is not supported (0 or 2 are)")
    return {
        "solver": "crank_nicolson" if order == 2 else "backward_euler",
        "dt": dt,
        "dtype": "float64",
    }
