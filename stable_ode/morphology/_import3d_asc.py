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

from ._import3d import _Sec, MorphologyError
from ._import3d_asc_lex import (
    BAR,
    COMMA,
    EOF,
    KIND,
    LABEL,
    LEFTPAR,
    LEFTSP,
    NUMBER,
    RGB,
    RIGHTPAR,
    RIGHTSP,
    SET,
    STRING,
    tokens,
)
from ._import3d_contour import connect2soma


class _Parser:
    """The productions of `Import3d_Neurolucida3`, over a token list."""

    def __init__(self, file, tokens):
        self.file = file
        self.tok = tokens
        self.pos = 0
        self.points = []  # Import3d's x, y, z, d vectors: [x, y, z, d, line]
        self.sections: list[_Sec] = []
        self.parentsec = None
        self.sectype = 0
        self.plist = []

    # tokens
    def kind(self, k=0):
        return self.tok[self.pos + k][0]

    def value(self):
        return self.tok[self.pos][1]

    def advance(self):
        if self.tok[self.pos][0] != EOF:
            self.pos += 1

    def err(self, expected=None):
        kind, value, line = self.tok[self.pos]
        got = KIND[kind] + ("" if value is None else f" {value!r}")
        want = f"expected {expected}, " if expected else ""
        raise MorphologyError(self.file, line, f"parse error: {want}got {got}")

    def chk(self, kind):
        if self.kind() != kind:
            self.err(KIND[kind])

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
        t, p = self.tok, self.pos
        if (  # the common `(x y z d)`, as the general path below reads it
            t[p + 1][0] == NUMBER
            and t[p + 2][0] == NUMBER
            and t[p + 3][0] == NUMBER
            and t[p + 4][0] == NUMBER
            and t[p + 5][0] == RIGHTPAR
            and t[p][0] == LEFTPAR
        ):
            if keep:
                self.points.append(
                    [t[p + 1][1], t[p + 2][1], t[p + 3][1], t[p + 4][1], t[p + 1][2]]
                )
            self.pos = p + 6
            return
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


def read_asc_sections(file: str):
    """Import3d's section list for a Neurolucida `.asc` file."""
    try:
        with open(file, errors="replace") as f:
            lines = f.readlines()
    except OSError as e:
        raise MorphologyError(file, None, f"cannot read the file ({e})") from None
    parser = _Parser(file, tokens(file, lines))
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
    sections = connect2soma(file, sections)
    somas = [s for s in sections if s.parent is None and not s.is_subsidiary]
    if len(somas) > 1:
        lines = ", ".join(str(s.line) for s in somas)
        raise MorphologyError(
            file,
            somas[1].line,
            f"{len(somas)} separate soma contours (their first points on lines "
            f"{lines}, x-y boxes not overlapping): Import3d would make "
            f"{len(somas)} disconnected cells",
        )
    return sections
