"""SWC points as `load_swc` reads them: the file parsed into points (with
their line numbers, for errors), SWC type names, the runs of points that make
one section, and the sections' names in file order."""

import math
import os
from dataclasses import dataclass

import numpy as np


_TYPE_NAMES = {1: "soma", 2: "axon", 3: "dend", 4: "apic"}
_NAME_TYPES = {v: k for k, v in _TYPE_NAMES.items()}


@dataclass(frozen=True)
class _Point:
    id: int
    type: int
    xyz: np.ndarray
    radius: float
    parent: int
    line: int


def _type_name(t: int) -> str:
    return _TYPE_NAMES.get(t, f"type{t}")


def run_from(first: _Point, children: dict) -> list[_Point]:
    """The run of points from `first` (an SWC point) down its tree while each
    point has exactly one child of `first`'s type: the points of one section
    (`children`: point id → child points)."""
    run = [first]
    while len(children[run[-1].id]) == 1 and children[run[-1].id][0].type == first.type:
        run.append(children[run[-1].id][0])
    return run


def section_namer():
    """A function from an SWC type to the next section name of that type in file
    order: `dend_0`, `dend_1`, ... (`load_swc`'s names)."""
    counts: dict[str, int] = {}

    def new_name(t) -> str:
        base = _type_name(t)
        k = counts.get(base, 0)
        counts[base] = k + 1
        return f"{base}_{k}"

    return new_name


def _parse(path) -> list[_Point]:
    points: list[_Point] = []
    seen: dict[int, int] = {}
    with open(path) as f:
        for lineno, raw in enumerate(f, start=1):
            text = raw.split("#", 1)[0].strip()
            if not text:
                continue
            cols = text.split()
            where = f"{os.fspath(path)}, line {lineno}"
            if len(cols) != 7:
                raise ValueError(
                    f"{where}: expected 7 columns `id type x y z radius parent`, "
                    f"got {len(cols)}: {text!r}"
                )
            try:
                pid, ptype, parent = int(cols[0]), int(cols[1]), int(cols[6])
            except ValueError:
                raise ValueError(
                    f"{where}: id, type and parent must be integers, got {text!r}"
                ) from None
            try:
                x, y, z, r = (float(c) for c in cols[2:6])
            except ValueError:
                raise ValueError(
                    f"{where}: x, y, z and radius must be numbers, got {text!r}"
                ) from None
            if not all(math.isfinite(c) for c in (x, y, z, r)):
                raise ValueError(
                    f"{where}: non-finite coordinate or radius in {text!r}"
                )
            if not r > 0:
                raise ValueError(f"{where}: radius must be > 0 µm, got {r}")
            if pid in seen:
                raise ValueError(
                    f"{where}: point id {pid} already defined on line {seen[pid]}"
                )
            if parent == pid:
                raise ValueError(f"{where}: point {pid} is its own parent (a cycle)")
            if parent < 0 and parent != -1:
                raise ValueError(
                    f"{where}: parent must be -1 (root) or an id, got {parent}"
                )
            seen[pid] = lineno
            points.append(_Point(pid, ptype, np.array([x, y, z]), r, parent, lineno))
    if not points:
        raise ValueError(f"{os.fspath(path)}: no points")
    return points
