"""Checks shared by `Cell` and the region helpers: suggestions and listings for
messages, positive numbers, ion settings, cycles of parents."""

import difflib
import math
from collections.abc import Sequence

from .._errors import concrete_number, InvalidArgument
from ..mechanisms._ions import ion_value_problems


def _suggest(name: str, choices) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _listing(names: Sequence[str], limit: int = 20) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _positive(owner: str, argument: str, x) -> None:
    if concrete_number(x) and not (math.isfinite(x) and x > 0):
        raise InvalidArgument(owner, argument, f"must be > 0, got {x!r}")


def _check_ions(owner, ions, positions, names):
    """`Cell.ions`: `IonSetting`s naming sections of the cell, with finite values
    (concentrations > 0)."""
    from ..mechanisms._ions import IonSetting

    for m, st in enumerate(ions):
        if not isinstance(st, IonSetting):
            raise InvalidArgument(
                owner, f"ions[{m}]", f"expected an IonSetting, got {st!r}"
            )
        check_section_names(owner, f"ions[{m}]", st.sections, positions, names)
        problems = ion_value_problems(st)
        if problems:
            key, problem = problems[0]
            raise InvalidArgument(owner, f"ions[{m}].{key}", problem)


def _first_cycle(sections, positions) -> tuple[int, list[str]] | None:
    """The first section (in order) on a cycle of parents and the cycle from it
    (`a -> b -> a`), or `None`; linear in the number of sections."""
    return first_cycle(
        [s.parent for s in sections], [s.name for s in sections], positions
    )


def first_cycle(parents, names, positions) -> tuple[int, list[str]] | None:
    """`_first_cycle` on the sections' `parents` and `names` (plain lists)."""
    state = [0] * len(parents)  # 0 unseen, 1 on the current walk, 2 done
    on_cycle = [False] * len(parents)
    for start in range(len(parents)):
        walk, i = [], start
        while i is not None and state[i] == 0:
            state[i] = 1
            walk.append(i)
            p = parents[i]
            i = None if p is None else positions[p]
        if i is not None and state[i] == 1:  # closed a new cycle at i
            for j in walk[walk.index(i) :]:
                on_cycle[j] = True
        for j in walk:
            state[j] = 2
    if not any(on_cycle):
        return None
    first = on_cycle.index(True)
    chain, i = [names[first]], positions[parents[first]]
    while i != first:
        chain.append(names[i])
        i = positions[parents[i]]
    chain.append(names[first])
    return first, chain


def check_section_names(owner, where: str, sections, positions, names) -> None:
    """Every entry of `sections` (`None`: all) names a section of the cell,
    else an `InvalidArgument` at `{where}.sections[k]` suggesting the closest."""
    for k, sec in enumerate(sections or ()):
        if sec not in positions:
            raise InvalidArgument(
                owner,
                f"{where}.sections[{k}]",
                f"unknown section {sec!r}{_suggest(sec, names)}: not a "
                f"section of this cell (sections: {_listing(names)})",
            )
