"""The importer's one error type, and where in a `.mod` file things are."""

import re


class NmodlError(ValueError):
    """A `.mod` file the importer cannot take, naming the file, the line and the
    construct.

    **Attributes:** `path` (the file), `line` (1-based, or `None` where the
    problem is the whole file), `construct` (the NMODL construct, e.g.
    `"VERBATIM"`), `problem` (what is wrong and, where there is one, the fix).
    """

    def __init__(self, path: str, line: int | None, construct: str, problem: str):
        self.path = str(path)
        self.line = line
        self.construct = construct
        self.problem = problem
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {construct}: {problem}")

    def __reduce__(self):
        return type(self), (self.path, self.line, self.construct, self.problem)


_COMMENT_BLOCK = re.compile(r"^\s*(COMMENT|VERBATIM)\b(.*?)^\s*END\1\b", re.M | re.S)


def strip_comments(text: str) -> list[str]:
    """The lines of `text` with comments (`: ...`, `? ...`, `COMMENT ...
    ENDCOMMENT`), `TITLE` lines and the insides of `VERBATIM` blocks blanked, so
    that a keyword search finds code only (the `VERBATIM` keyword itself stays)."""

    def blank(match):
        keep = match.group(1) if match.group(1) == "VERBATIM" else ""
        body = match.group(0)
        out = re.sub(r"[^\n]", " ", body)
        if keep:
            start = body.index("VERBATIM")
            out = out[:start] + "VERBATIM" + out[start + 8 :]
        return out

    text = _COMMENT_BLOCK.sub(blank, text)
    lines = []
    for line in text.splitlines():
        if re.match(r"\s*(TITLE|\?)", line):
            line = ""
        line = line.split(":", 1)[0]
        lines.append(line)
    return lines


class Locator:
    """Lines of a `.mod` file found by keyword: the NMODL front end of NEURON's
    wheel (9.0) keeps source positions in its AST but does not expose them to
    Python, so the importer finds each block's header, and each statement in
    order after it, in the comment-stripped text."""

    def __init__(self, text: str):
        self.lines = strip_comments(text)

    def find(self, pattern: str, start: int = 1) -> int | None:
        """The first line number `>= start` whose code matches the regex
        `pattern`, or `None`."""
        rx = re.compile(pattern)
        for k in range(max(start, 1) - 1, len(self.lines)):
            if rx.search(self.lines[k]):
                return k + 1
        return None
