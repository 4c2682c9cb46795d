"""Where in its `.mod` file an imported mechanism's value went non-finite.

Generated code (`stable_ode.nmodl`) assigns every NMODL variable as an
attribute of a `Vars` record, one statement per line, each line ending with
its `# file.mod:line` tag. `first_bad_statement` re-runs one of the
mechanism's functions eagerly, watching those assignments, and returns the
`.mod` line of the first one whose value at the culprit compartment is not
finite: the statement that produced the bad value (everything assigned
before it was finite).
"""

import contextlib
import dataclasses
import linecache
import pathlib
import re
import sys

import numpy as np

from ..nmodl import _runtime


_TAG = re.compile(r"#\s*(\S+):(\d+)\s*$")


@dataclasses.dataclass(frozen=True)
class ModLine:
    """A line of a `.mod` file: `path`, `line` (1-based) and its `text`."""

    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{pathlib.Path(self.path).name}:{self.line}: {self.text}"


def nmodl_info(mech):
    """The `NmodlInfo` of an imported mechanism's class, or `None`."""
    return getattr(type(mech), "nmodl", None)


def mod_line(path: str, line: int) -> ModLine:
    """`ModLine` of `path` at `line` (its text stripped; empty if unreadable)."""
    try:
        lines = pathlib.Path(path).read_text(errors="replace").splitlines()
        text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    except OSError:
        text = ""
    return ModLine(str(path), int(line), text)


def _at(value, j: int, n: int) -> np.ndarray:
    """`value` at entry `j` of a group of `n` (a constant: itself)."""
    x = np.asarray(value)
    if x.ndim and x.shape[0] == n:
        return x[j]
    return x


@contextlib.contextmanager
def _watching(filename: str, j: int, n: int, found: list):
    """While active, the first assignment to a `Vars` attribute, made by code
    compiled from `filename`, whose value is non-finite at entry `j` appends
    `(generated line number, name)` to `found`."""

    def setattr_(self, name, value):
        object.__setattr__(self, name, value)
        if found or value is None:
            return
        frame = sys._getframe(1)
        if frame.f_code.co_filename != filename:
            return
        try:
            x = _at(value, j, n)
        except (TypeError, ValueError):  # not numeric (e.g. a nested record)
            return
        if x.dtype.kind in "fc" and not np.all(np.isfinite(x)):
            found.append((frame.f_lineno, name))

    _runtime.Vars.__setattr__ = setattr_
    try:
        yield
    finally:
        del _runtime.Vars.__setattr__


def first_bad_statement(mech, call, j: int, n: int) -> ModLine | None:
    """The `.mod` line whose statement first gave a non-finite value at entry
    `j` (of `n`) while `call()` runs one of imported mechanism `mech`'s
    functions eagerly; `None` if `mech` is not imported or nothing was."""
    info = nmodl_info(mech)
    if info is None:
        return None
    found: list = []
    with _watching(info.filename, j, n, found):
        call()
    if not found:
        return None
    generated = linecache.getline(info.filename, found[0][0])
    tag = _TAG.search(generated)
    if tag is None:
        return None
    return mod_line(info.path, int(tag.group(2)))


def state_line(model, label: str) -> ModLine | None:
    """The `.mod` line of the equation of state `label` (`"<name>.<state>"`)
    if it belongs to an imported mechanism or point process, else `None`."""
    for group in model.groups:
        mech = getattr(group, "mechanism", group)  # point processes: the group
        mech = getattr(mech, "inner", mech)
        info = nmodl_info(mech)
        if info is None or not label.startswith(f"{group.label}."):
            continue
        where = info.state_lines.get(label[len(group.label) + 1 :])
        if where is not None:
            return mod_line(where[0], where[1])
    return None
