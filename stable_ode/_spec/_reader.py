"""The reader's own checks: what only a file can get wrong.

Unknown keys, JSON/TOML types, names, "did you mean", the range of the chosen
dtype and what a file may ask for (`Limits`). Everything else is checked by the
library classes the reader builds; `Reader.at` turns their `ValueError` into a
`SpecError` at the file's key path.
"""

import contextlib
import difflib
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from .._errors import InvalidArgument
from ._errors import SpecError


_NAME = re.compile(r"^[A-Za-z0-9_.\-\[\]]+$")


@dataclass(frozen=True)
class Limits:
    """What a model file may ask for, checked before anything is allocated.

    - `compartments`: compartments of all cells together.
    - `steps`: fixed steps (`t_stop / dt`).
    - `saved_values`: saved samples × values saved per sample (the recordings, or
      every compartment when there are none).
    """

    compartments: int = 10_000_000
    steps: int = 100_000_000
    saved_values: int = 1_000_000_000


LIMITS = Limits()
"""The limits `load_spec` applies."""


def suggest(name: str, choices) -> str:
    """`" (did you mean 'x'?)"` for the closest of `choices`, or `""`."""
    choices = list(choices)
    close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    if not close:
        lower = {c.lower(): c for c in choices}
        if name.lower() in lower:
            close = [lower[name.lower()]]
    return f" (did you mean {close[0]!r}?)" if close else ""


def listing(names, limit: int = 20) -> str:
    """`"a, b, c"`, shortened after `limit` names."""
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def describe(value) -> str:
    """`"string '20'"`, `"list"`, ...: a value's JSON type (and short value)."""
    kind = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "table",
        type(None): "null",
    }.get(type(value), type(value).__name__)
    if isinstance(value, (dict, list)):
        return kind
    if isinstance(value, int) and abs(value) > 10**30:
        return f"integer of {len(str(abs(value)))} digits"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{kind} {text}"


def key(where: str, name: str) -> str:
    """The key path of `name` inside `where` (`a.b`, or `b` at the top)."""
    if not name:
        return where
    if not where:
        return name
    return f"{where}{name}" if name.startswith("[") else f"{where}.{name}"


def one_line(e: BaseException, limit: int = 300) -> str:
    text = " ".join(str(e).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


class Reader:
    """Checks values of one file and reports `SpecError`s naming it.

    **Arguments:**

    - `file`: the file name, for messages.
    - `largest`: the largest magnitude a number may have (the chosen dtype's).
    - `dtype_name`: that dtype's name, for messages.
    """

    def __init__(
        self, file: str, largest: float = sys.float_info.max, dtype_name="float64"
    ):
        self.file = file
        self.largest = largest
        self.dtype_name = dtype_name

    def fail(self, where: str, problem: str):
        raise SpecError(self.file, where, problem)

    @contextlib.contextmanager
    def at(self, where: str, hint: str = "") -> Iterator[None]:
        """Build library objects inside: their `InvalidArgument` becomes a
        `SpecError` at `where` + its argument's key path, any other exception one
        at `where`. `hint` is added to messages about unknown sections."""
        try:
            yield
        except SpecError:
            raise
        except InvalidArgument as e:
            problem = e.problem + (hint if "unknown section" in e.problem else "")
            raise SpecError(self.file, key(where, e.argument), problem) from None
        except (ValueError, TypeError, LookupError) as e:
            raise SpecError(self.file, where, one_line(e)) from None
        except Exception as e:  # noqa: BLE001 - e.g. a user class's own error
            raise SpecError(
                self.file, where, f"{type(e).__name__}: {one_line(e)}"
            ) from None

    def table(self, value, where: str, required=(), optional=()) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"must be a table (JSON object), got {describe(value)}")
        allowed = [*required, *optional]
        for k in value:
            if k not in allowed:
                self.fail(
                    key(where, str(k)),
                    f"unknown key{suggest(str(k), allowed)}; allowed keys here: "
                    f"{', '.join(allowed)}",
                )
        for k in required:
            if k not in value:
                self.fail(key(where, k), "required key is missing")
        return value

    def mapping(self, value, where: str) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"must be a table (JSON object), got {describe(value)}")
        return value

    def seq(self, value, where: str) -> list:
        if not isinstance(value, list):
            self.fail(where, f"must be a list, got {describe(value)}")
        return value

    def string(self, value, where: str) -> str:
        if not isinstance(value, str):
            self.fail(where, f"must be a string, got {describe(value)}")
        if not value:
            self.fail(where, "must not be empty")
        return value

    def number(self, value, where: str, *, gt=None, ge=None) -> float:
        """A finite number that fits the dtype, as a float (bounds: only for keys
        no library class checks)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, f"must be a number, got {describe(value)}")
        try:
            x = float(value)
        except OverflowError:
            x = math.inf
        if not math.isfinite(x):
            shown = describe(value) if isinstance(value, int) else repr(value)
            self.fail(where, f"must be finite, got {shown}")
        if abs(x) > self.largest:
            self.fail(
                where,
                f"{x!r} does not fit {self.dtype_name} (largest finite value "
                f"{self.largest:g})",
            )
        if gt is not None and not x > gt:
            self.fail(where, f"must be > {gt}, got {value!r}")
        if ge is not None and not x >= ge:
            self.fail(where, f"must be >= {ge}, got {value!r}")
        return x

    def position(self, value, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, f"must be a number in [0, 1], got {describe(value)}")
        return self.number(value, where)

    def integer(self, value, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(where, f"must be a positive integer, got {describe(value)}")
        return value

    def name(self, value, where: str) -> str:
        value = self.string(value, where)
        if not _NAME.match(value):
            self.fail(
                where,
                f"{value[:40]!r} is not a valid name: use letters, digits and '_', "
                f"'.', '-', '[', ']'",
            )
        return value

    def tiny_ok(self, x: float, tiny: float) -> bool:
        """Whether `x` > 0 is a normal number of the dtype: in `[tiny, largest]`."""
        return tiny <= x <= self.largest

    def unique(self, names: list[str], where: str, what: str):
        seen = set()
        for i, n in enumerate(names):
            if n in seen:
                self.fail(f"{where}[{i}].name", f"duplicate {what} name {n!r}")
            seen.add(n)
