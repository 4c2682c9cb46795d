"""The tokens of a Neurolucida `.asc` file, as `Import3d_Neurolucida3.lex` reads them.

Numbers (C's `%lf`), `( ) , | < >`, `set`, `RGB`, quoted strings and labels
(`[A-Za-z0-9_]+`); `;` starts a comment to the end of the line. Tried in that order
on what is left of the line, as the hoc `sscanf` patterns are.
"""

import re

from ._import3d import MorphologyError


# token kinds
EOF, NUMBER, LEFTPAR, RIGHTPAR, COMMA, BAR, SET, RGB, STRING, LABEL, ERR = range(11)
LEFTSP, RIGHTSP = 11, 12
KIND = {
    EOF: "end of file",
    NUMBER: "number",
    LEFTPAR: "'('",
    RIGHTPAR: "')'",
    COMMA: "','",
    BAR: "'|'",
    SET: "set",
    RGB: "RGB",
    STRING: "string",
    LABEL: "label",
    ERR: "unreadable text",
    LEFTSP: "'<'",
    RIGHTSP: "'>'",
}
_NUMBER = re.compile(
    r"\s*([+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan))(.+)",
    re.DOTALL | re.IGNORECASE,
)
_PUNCT = {"(": LEFTPAR, ")": RIGHTPAR, ",": COMMA, "|": BAR, "<": LEFTSP, ">": RIGHTSP}
_SET = re.compile(r"\s*(?:set|Set|SET)(?>\s*)(.+)", re.DOTALL)
_RGB = re.compile(r"\s*RGB(?>\s*)(.+)", re.DOTALL)
_STRING = re.compile(r'\s*"([^"]+)"(.+)', re.DOTALL)
_OPEN_STRING = re.compile(r'\s*"([^"]+)$', re.DOTALL)
_EMPTY_STRING = re.compile(r'\s*""(.+)', re.DOTALL)
_LABEL = re.compile(r"\s*([A-Za-z0-9_]++)(.+)", re.DOTALL)


def tokens(file: str, lines: list[str]):
    """`lex`: the file's tokens `(kind, value, line)`, comments (`;`) dropped."""
    out = []
    opened = []  # lines of unclosed '('
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip() + "\n"
        while len(line) > 1 and not line.lstrip().startswith(";"):
            if m := _NUMBER.match(line):
                out.append((NUMBER, float(m.group(1)), lineno))
                line = m.group(2)
                continue
            s = line.lstrip()
            if not s:
                break
            if s[0] in _PUNCT:
                kind = _PUNCT[s[0]]
                if kind == LEFTPAR:
                    opened.append(lineno)
                elif kind == RIGHTPAR:
                    if not opened:
                        raise MorphologyError(
                            file, lineno, "')' closes a block that was never opened"
                        )
                    opened.pop()
                out.append((kind, s[0], lineno))
                line = s[1:]
                continue
            for pattern, kind in ((_SET, SET), (_RGB, RGB)):
                if m := pattern.match(line):
                    out.append((kind, None, lineno))
                    line = m.group(1)
                    break
            else:
                if m := _STRING.match(line):
                    out.append((STRING, m.group(1), lineno))
                    line = m.group(2)
                elif _OPEN_STRING.match(line):
                    raise MorphologyError(file, lineno, "no closing '\"' in string")
                elif m := _EMPTY_STRING.match(line):
                    out.append((STRING, "", lineno))
                    line = m.group(1)
                elif m := _LABEL.match(line):
                    out.append((LABEL, m.group(1), lineno))
                    line = m.group(2)
                else:
                    raise MorphologyError(file, lineno, f"cannot read {line.strip()!r}")
    if opened:
        raise MorphologyError(
            file,
            opened[-1],
            f"the block opened here with '(' is not closed by the end of the file "
            f"({len(opened)} unclosed)",
        )
    out.append((EOF, None, len(lines)))
    return out
