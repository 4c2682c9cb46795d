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
# One pattern, alternatives in hoc's order: a number (C's `%lf`), punctuation,
# `set` / `RGB` (followed by more text on the line), a string, the empty string,
# an unclosed string, a label, a comment, the end of the line.
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<num>[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|(?i:inf(?:inity)?|nan)))
    | (?P<punct>[(),|<>])
    | (?P<set>set|Set|SET)(?=\s*\S)
    | (?P<rgb>RGB)(?=\s*\S)
    | "(?P<str>[^"]+)"
    | (?P<empty>"")
    | (?P<open>")
    | (?P<label>[A-Za-z0-9_]+)
    | (?P<comment>;)
    | (?P<end>$)
    )""",
    re.VERBOSE,
)
_PUNCT = {"(": LEFTPAR, ")": RIGHTPAR, ",": COMMA, "|": BAR, "<": LEFTSP, ">": RIGHTSP}


def tokens(file: str, lines: list[str]):
    """`lex`: the file's tokens `(kind, value, line)`, comments (`;`) dropped."""
    out = []
    append = out.append
    opened = []  # lines of unclosed '('
    match = _TOKEN.match
    for lineno, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        pos = 0
        while True:
            m = match(line, pos)
            if m is None:
                rest = line[pos:].strip()
                raise MorphologyError(file, lineno, f"cannot read {rest!r}")
            pos = m.end()
            group = m.lastgroup
            if group == "num":
                append((NUMBER, float(m.group("num")), lineno))
            elif group == "punct":
                c = m.group("punct")
                kind = _PUNCT[c]
                if kind == LEFTPAR:
                    opened.append(lineno)
                elif kind == RIGHTPAR:
                    if not opened:
                        raise MorphologyError(
                            file, lineno, "')' closes a block that was never opened"
                        )
                    opened.pop()
                append((kind, c, lineno))
            elif group == "label":
                append((LABEL, m.group("label"), lineno))
            elif group == "str":
                append((STRING, m.group("str"), lineno))
            elif group == "set":
                append((SET, None, lineno))
            elif group == "rgb":
                append((RGB, None, lineno))
            elif group == "empty":
                append((STRING, "", lineno))
            elif group == "open":
                raise MorphologyError(file, lineno, "no closing '\"' in string")
            else:  # comment or end of line
                break
    if opened:
        raise MorphologyError(
            file,
            opened[-1],
            f"the block opened here with '(' is not closed by the end of the file "
            f"({len(opened)} unclosed)",
        )
    # padded, so that the parser may look two tokens past the end
    out.extend([(EOF, None, len(lines))] * 3)
    return out
