"""Neurolucida `.asc` files as NEURON's `Import3d_Neurolucida3` reads them.

A recursive-descent parser with the productions of `import3d/read_nlcda3.hoc`
(`objects`, `contour`, `tree`, `branch`, `split`, `marker`, `property`, `spine`, ...)
and its semantic actions: contours named `CellBody`, `Cell Body` or `Soma` with more
than two points become soma sections; every tree branch becomes a section that
starts with a copy of its parent's last point (with the branch's first diameter)
unless its first point already coincides with it; markers, spines, text and other
contours are read and dropped. Then `connect2soma`: soma contours go first,
overlapping ones (in x-y) form a stack, and each tree is joined to a soma's centre
by a logical connection at `soma(0.5)`.

Parsed here rather than with `morphio`: morphio stores coordinates as 32-bit floats
(the soma centroid must be computed from the file's doubles to match NEURON), keeps
no line numbers for errors, and does not keep Import3d's quirks (the section type
from a tree's last property, marker points that start a branch).
"""

import re

import numpy as np

from ._import3d import _Sec, MorphologyError
from ._import3d_contour import contourcenter, stk_center


# token kinds
EOF, NUMBER, LEFTPAR, RIGHTPAR, COMMA, BAR, SET, RGB, STRING, LABEL, ERR = range(11)
LEFTSP, RIGHTSP = 11, 12
_KIND = {
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


def _tokens(file: str, lines: list[str]):
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
                    raise MorphologyError(file, lineno, 'no closing \'"\' in string')
                elif m := _EMPTY_STRING.match(line):
                    out.append((STRING, "", lineno))
                    line = m.group(1)
                elif m := _LABEL.match(line):
                    out.append((LABEL, m.group(1), lineno))
                    line = m.group(2)
                else:
                    raise MorphologyError(
                        file, lineno, f"cannot read {line.strip()!r}"
                    )
    if opened:
        raise MorphologyError(
            file,
            opened[-1],
            f"the block opened here with '(' is not closed by the end of the file "
            f"({len(opened)} unclosed)",
        )
    out.append((EOF, None, len(lines)))
    return out


class _Parser:
    """The productions of `Import3d_Neurolucida3`, over a token list."""

    def __init__(self, file, tokens):
        self.file = file
        self.tok = tokens
        self.pos = 0
        self.points = []  # Import3d's x, y, z, d vectors: [x, y, z, d, line]
        self.sections: list[_Sec] = []
        self.ranges = {}  # id(sec) -> (begin, end) into points (tree/soma points)
        self.parentsec = None
        self.sectype = 0
        self.plist = []

    # tokens
    def kind(self, k=0):
        return self.tok[min(self.pos + k, len(self.tok) - 1)][0]

    def value(self):
        return self.tok[self.pos][1]

    def advance(self):
        if self.pos < len(self.tok) - 1:
            self.pos += 1

    def err(self, expected=None):
        kind, value, line = self.tok[self.pos]
        got = _KIND[kind] + ("" if value is None else f" {value!r}")
        want = f"expected {expected}, " if expected else ""
        raise MorphologyError(self.file, line, f"parse error: {want}got {got}")

    def chk(self, kind):
        if self.kind() != kind:
            self.err(_KIND[kind])

    def demand(self, kind):
        self.advance()
        self.chk(kind)

    def optionalcomma(self):
        if self.kind() == COMMA:
            self.advance()

    # productions
    def objects(self):
        self.object()
        while True:
            self.optionalcomma()
            if self.kind() != LEFTPAR:
                break
            self.object()

    def object(self):
        if self.kind() != LEFTPAR:
            self.err("'('")
        la = self.kind(1)
        if la == STRING:
            self.contour()
        elif la == LABEL:
            self.marker_or_property()
        elif la == LEFTPAR:
            self.tree_or_text()
        elif la == SET:
            self.p_set()
        else:
            self.advance()
            self.err("a contour, tree, marker, property or set")

    def marker_or_property(self):
        if self.kind(2) == LEFTPAR:
            self.marker()
        else:
            self.property()

    def tree_or_text(self):
        save = self.pos
        if not self.text():
            # back to the '(' (Import3d keeps the point text() read; it ends up
            # in no section)
            self.pos = save
            self.tree()

    def properties(self):
        self.plist = []
        if self.kind() == LEFTPAR and self.kind(1) in (LABEL, SET):
            self.property_or_set()
            while True:
                self.optionalcomma()
                if self.kind() != LEFTPAR or self.kind(1) not in (LABEL, SET):
                    break
                self.property_or_set()

    def property_or_set(self):
        if self.kind(1) == LABEL:
            self.property()
        else:
            self.p_set()

    def property(self):
        self.chk(LEFTPAR)
        self.demand(LABEL)
        items = [self.value()]
        self.advance()
        while self.kind() in (NUMBER, STRING, LABEL, RGB):
            items.append(self.value())
            if self.kind() == RGB:
                self.demand(LEFTPAR)
                self.demand(NUMBER)
                self.advance()
                self.optionalcomma()
                self.chk(NUMBER)
                self.advance()
                self.optionalcomma()
                self.chk(NUMBER)
                self.demand(RIGHTPAR)
            self.advance()
        self.plist.append(items)
        self.chk(RIGHTPAR)
        self.advance()

    def p_set(self):
        self.chk(LEFTPAR)
        self.demand(SET)
        self.demand(STRING)
        self.advance()
        if self.kind() != RIGHTPAR:
            self.objects()
        self.chk(RIGHTPAR)
        self.advance()

    def contour(self):
        self.chk(LEFTPAR)
        begin = len(self.points)
        self.demand(STRING)
        keep = self.value() in ("CellBody", "Cell Body", "Soma")
        self.advance()
        self.properties()
        self.point_list()
        if keep and len(self.points) - begin > 2:
            self.sectype = 1
            self.newsec(begin, len(self.points))
            self.sections[-1].iscontour = True
        self.chk(RIGHTPAR)
        self.advance()

    def tree(self):
        self.parentsec = None
        self.chk(LEFTPAR)
        self.advance()
        self.properties()
        # set_sectype: the tree's last property names its type
        last = self.plist[-1][0] if self.plist else None
        self.sectype = {"Axon": 2, "Dendrite": 3, "Apical": 4}.get(last, 0)
        self.branch()
        self.chk(RIGHTPAR)
        self.advance()
        self.parentsec = None

    def branch(self):
        psav = self.parentsec
        begin = len(self.points)
        line = self.tok[self.pos][2]
        self.treepoints()
        if len(self.points) == begin:
            raise MorphologyError(self.file, line, "a branch without points")
        self.newsec(begin, len(self.points))
        self.parentsec = self.sections[-1]
        self.branchend()
        self.parentsec = psav

    def treepoints(self):
        self.treepoint()
        while True:
            self.optionalcomma()
            if self.kind() != LEFTPAR or self.kind(1) != NUMBER:
                break
            self.treepoint()

    def treepoint(self):
        if self.kind(1) == LABEL:
            self.marker_or_property()
        else:
            self.point()
            while self.kind() == LEFTSP:  # spines: read, not kept
                self.advance()
                self.properties()
                self.point(keep=False)
                self.chk(RIGHTSP)
                self.advance()

    def branchend(self):
        self.optionalcomma()
        if self.kind() == LEFTPAR:
            while self.kind(1) == LABEL:
                self.markerlist()
        self.optionalcomma()
        if self.kind() == LEFTPAR:
            self.advance()
            self.branch()
            while self.kind() == BAR:
                self.advance()
                self.branch()
            self.chk(RIGHTPAR)
            self.advance()
        elif self.kind() == LABEL:
            self.advance()

    def markerlist(self):
        self.chk(LEFTPAR)
        depth = 1
        while depth != 0:
            self.advance()
            if self.kind() == EOF:
                self.err("')'")
            if self.kind() == RIGHTPAR:
                depth -= 1
            elif self.kind() == LEFTPAR:
                depth += 1
        self.advance()

    def marker(self):
        self.chk(LEFTPAR)
        self.demand(LABEL)
        self.advance()
        self.properties()
        self.point_list()
        self.chk(RIGHTPAR)
        self.advance()

    def text(self) -> bool:
        self.chk(LEFTPAR)
        self.advance()
        self.properties()
        self.point()
        if self.kind() != STRING:
            return False
        self.advance()
        if self.kind() != RIGHTPAR:
            return False
        self.advance()
        return True

    def point_list(self):
        self.point()
        while True:
            self.optionalcomma()
            if self.kind() != LEFTPAR:
                break
            self.point()

    def point(self, keep=True):
        self.chk(LEFTPAR)
        self.demand(NUMBER)
        line = self.tok[self.pos][2]
        xval = self.value()
        self.advance()
        self.optionalcomma()
        self.chk(NUMBER)
        yval = self.value()
        zval = dval = 0.0
        self.advance()
        self.optionalcomma()
        if self.kind() == NUMBER:  # optz
            zval = self.value()
            self.advance()
            self.optionalcomma()
            if self.kind() == NUMBER:  # optmodifier
                dval = self.value()
                self.advance()
                self.optionalcomma()
                if self.kind() == LABEL:
                    self.advance()
                self.optionalcomma()
                if self.kind() == LEFTPAR:  # optbezier
                    self.demand(NUMBER)
                    for _ in range(3):
                        self.advance()
                        self.optionalcomma()
                        self.chk(NUMBER)
                    self.demand(RIGHTPAR)
                    self.advance()
        if keep:
            self.points.append([xval, yval, zval, dval, line])
        self.chk(RIGHTPAR)
        self.advance()

    def newsec(self, begin, end):
        pts = self.points[begin:end]
        xyz = [p[:3] for p in pts]
        d = [p[3] for p in pts]
        ids = list(range(begin, end))  # renumbered after parsing
        parent = self.parentsec
        if parent is not None and parent.xyz[-1] != xyz[0]:  # need_extra
            xyz.insert(0, list(parent.xyz[-1]))
            d.insert(0, d[0])
            ids.insert(0, -1)
        sec = _Sec(xyz=xyz, d=d, ids=ids, type=self.sectype, parent=parent)
        sec.line = pts[0][4]
        sec.parentx = 1.0
        self.sections.append(sec)


def _bbox(sec):
    a = np.asarray(sec.xyz)
    return np.concatenate([a.min(axis=0), a.max(axis=0)])


def _connect2soma(file, sections: list[_Sec]) -> list[_Sec]:
    somas = [s for s in sections if s.iscontour]
    others = [s for s in sections if not s.iscontour]
    sections = somas + others
    if not somas:
        raise MorphologyError(
            file,
            None,
            'no soma contour ("CellBody", "Cell Body" or "Soma" with more than two '
            "points): Import3d would make disconnected trees",
        )
    # soma_contour_stack: consecutive soma contours whose x-y boxes overlap
    first = somas[0]
    bb1 = _bbox(first)
    kept = [first]
    for nxt in somas[1:]:
        bb2 = _bbox(nxt)
        overlap = not any(bb1[i] > bb2[3 + i] or bb2[i] > bb1[3 + i] for i in (0, 1))
        if overlap:
            first.contour_list.append(nxt)
            nxt.is_subsidiary = True
        else:
            first = nxt
            kept.append(nxt)
        bb1 = bb2
    somas = kept
    roots = [s for s in sections if not s.iscontour and s.parent is None]
    centers = []
    for soma in somas:  # connect2soma_2
        if soma.contour_list:
            center = stk_center(soma)
            boxes = np.array([_bbox(c) for c in [soma] + soma.contour_list])
            xmin, ymin = boxes[:, 0].min(), boxes[:, 1].min()
            xmax, ymax = boxes[:, 3].max(), boxes[:, 4].max()
        else:
            a = np.asarray(soma.xyz)
            xmin, xmax = a[:, 0].min() - 0.5, a[:, 0].max() + 0.5
            ymin, ymax = a[:, 1].min() - 0.5, a[:, 1].max() + 0.5
            center = contourcenter(a)[0]
        centers.append(center)
        for i in range(len(roots) - 1, -1, -1):
            sec = roots[i]
            x, y = sec.xyz[0][0], sec.xyz[0][1]
            if xmin <= x <= xmax and ymin <= y <= ymax:
                _join(sec, soma, center)
                del roots[i]
    for sec in roots:  # outside every soma box: the nearest soma centre
        dist = [np.sqrt(np.sum((np.asarray(sec.xyz[0]) - c) ** 2)) for c in centers]
        k = int(np.argmin(dist))
        _join(sec, somas[k], centers[k])
    return sections


def _join(sec, soma, center):
    sec.parent = soma
    sec.parentx = 0.5
    sec.xyz.insert(0, [float(c) for c in center])
    sec.d.insert(0, 0.01)
    sec.ids.insert(0, -1)
    sec.first = 1


def read_asc_sections(file: str):
    """Import3d's section list for a Neurolucida `.asc` file, and the types."""
    try:
        with open(file, errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        raise MorphologyError(file, None, f"cannot read the file ({e})") from None
    parser = _Parser(file, _tokens(file, lines))
    if parser.kind() == EOF:
        raise MorphologyError(file, None, "no Neurolucida objects in the file")
    parser.objects()
    if parser.kind() != EOF:
        parser.err("'(' or the end of the file")
    sections = parser.sections
    # point ids: the index, in file order, among the points the sections read
    used = sorted({i for s in sections for i in s.ids if i >= 0})
    rank = {i: k for k, i in enumerate(used)}
    for s in sections:
        s.ids = [rank[i] if i >= 0 else -1 for i in s.ids]
    sections = _connect2soma(file, sections)
    return sections, {s.type for s in sections}
