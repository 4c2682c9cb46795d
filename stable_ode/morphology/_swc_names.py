"""Model-file `"swc"` cells: NEURON's `Import3d` sections and 3-D geometry (as
`"morphology"` cells), named as `stable_ode.load_swc` names its sections.

Each `Import3d` section is matched to the `load_swc` section that starts at the
same file point (its first point read from the file), so a section keeps the
name `load_swc` gives it (`soma`, `dend_3`, ...) whatever geometry it gets.
"""

import os
from collections import deque

from ._import3d import MorphologySection, read_morphology
from ._swc_points import _parse, run_from, section_namer


def load_swc_names(path, soma: str = "single") -> dict[int, str]:
    """`{first point id: name}` of `load_swc(path, soma=soma)`'s sections (the
    point each section's own points start at; a single soma is `-1`)."""
    points = _parse(path)
    children: dict[int, list] = {p.id: [] for p in points}
    roots = []
    for p in points:
        if p.parent == -1:
            roots.append(p)
        elif p.parent in children:
            children[p.parent].append(p)
    root = roots[0]
    soma_points = [p for p in points if p.type == 1]
    single = soma == "single" or len(soma_points) == 1
    names: dict[int, str] = {}
    new_name = section_namer()

    if single:
        names[-1] = "soma"
        queue = deque(c for p in soma_points for c in children[p.id] if c.type != 1)
    else:
        queue = deque(sorted(children[root.id], key=lambda c: c.type != 1))
    while queue:
        first = queue.popleft()
        run = run_from(first, children)
        names[first.id] = new_name(first.type)
        queue.extend(children[run[-1].id])
    return names


def swc_sections(path, soma: str = "single") -> list[MorphologySection]:
    """`read_morphology(path)`'s sections renamed to `load_swc`'s names.

    **Raises:** `MorphologyError` for a malformed file; `ValueError` if a
    section of `Import3d` has no counterpart among `load_swc`'s (then use a
    `"morphology"` cell, with NEURON's names).
    """
    read = read_morphology(path)
    names = load_swc_names(path, soma)
    rename: dict[str, str] = {}
    somas = [s for s in read if s.swc_type == 1]
    for s in read:
        ids = [i for i in s.point_ids if i >= 0]
        if s.swc_type == 1 and (soma == "single" or -1 in names):
            k = somas.index(s)
            rename[s.name] = "soma" if k == 0 else f"soma_{k}"
            continue
        new = None
        for i in ids[:2]:  # a child starting at its parent's point: the next one
            if i in names and names[i] not in rename.values():
                new = names[i]
                break
        if new is None:
            raise ValueError(
                f"{os.fspath(path)}: NEURON's section {s.name} (from point "
                f"{ids[0] if ids else '?'}) has no section of load_swc's naming; "
                f'use "morphology" for this file (NEURON\'s section names)'
            )
        rename[s.name] = new
    return [
        MorphologySection(
            name=rename[s.name],
            points=s.points,
            parent=None if s.parent is None else rename[s.parent],
            parent_position=s.parent_position,
            swc_type=s.swc_type,
            point_ids=s.point_ids,
            logical_connection=s.logical_connection,
            other_points=s.other_points,
        )
        for s in read
    ]


def load_swc_geometry(path, *, soma: str = "single", **kwargs):
    """A model-file `"swc"` cell: `load_morphology`'s sections, 3-D geometry and
    `d_lambda` rule, with `load_swc`'s section names (`swc_sections`).
    `kwargs`: `load_morphology`'s keyword arguments."""
    from ._load import cell_from_sections

    file = os.fspath(path)
    if not os.path.isfile(file):
        raise FileNotFoundError(f"no such SWC file: {file}")
    options = dict(
        name=None,
        n_compartments=None,
        d_lambda=0.1,
        frequency=100.0,
        axial_resistivity=35.4,
        capacitance=1.0,
        mechanisms=(),
        ions=(),
        properties=(),
    )
    options.update(kwargs)
    return cell_from_sections(file, swc_sections(file, soma), **options)
