"""The importer's intermediate representation: a `.mod` file as plain data.

The front end (`_frontend.py`) turns NEURON's NMODL AST into these objects, with
the source line of every statement; code generation (`_codegen.py`) and the
class factory (`_factory.py`) read nothing else. Expressions are small frozen
dataclasses; statements carry `line` (1-based, in `Module.path`).
"""

import dataclasses


# -- expressions ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Num:
    """A number literal (any unit attached to it in the file is dropped, as NMODL
    does: `1(/mV)` is 1)."""

    value: float


@dataclasses.dataclass(frozen=True)
class Name:
    """A variable: a parameter, state, assigned, local, argument, ion variable or
    one of NEURON's globals (`v`, `celsius`, `diam`, `area`, `dt`)."""

    id: str


@dataclasses.dataclass(frozen=True)
class Call:
    """A call of a built-in (`exp`, `log`, `fabs`, ...) or a user `FUNCTION`."""

    fn: str
    args: tuple["Expr", ...]


@dataclasses.dataclass(frozen=True)
class BinOp:
    """`lhs op rhs`, `op` one of `+ - * / ^ < > <= >= == != && ||`."""

    op: str
    lhs: "Expr"
    rhs: "Expr"


@dataclasses.dataclass(frozen=True)
class Unary:
    """`-x` or `!x`."""

    op: str
    operand: "Expr"


Expr = Num | Name | Call | BinOp | Unary


# -- statements ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Assign:
    """`target = value`."""

    target: str
    value: Expr
    line: int


@dataclasses.dataclass(frozen=True)
class CallStmt:
    """A `PROCEDURE` (or `FUNCTION`, result discarded) called as a statement."""

    fn: str
    args: tuple[Expr, ...]
    line: int


@dataclasses.dataclass(frozen=True)
class DiffEq:
    """`state' = rhs` in a `DERIVATIVE` block."""

    state: str
    rhs: Expr
    line: int


@dataclasses.dataclass(frozen=True)
class Local:
    """`LOCAL a, b`: variables of the enclosing block, starting at 0."""

    names: tuple[str, ...]
    line: int


@dataclasses.dataclass(frozen=True)
class If:
    """`if (cond) {body} else if ... else {orelse}`; `else if` chains are nested
    `If`s in `orelse`."""

    cond: Expr
    body: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...]
    line: int


@dataclasses.dataclass(frozen=True)
class Solve:
    """`SOLVE block METHOD method` (BREAKPOINT) or `SOLVE block STEADYSTATE
    method` (INITIAL)."""

    block: str
    method: str | None
    steadystate: str | None
    line: int


@dataclasses.dataclass(frozen=True)
class Reaction:
    """A `KINETIC` reaction. `~ A + B <-> C (kf, kb)`: `lhs` and `rhs` are the
    species with their stoichiometric coefficients (`(("A", 1), ("B", 1))`),
    `kf`/`kb` the forward and backward rate expressions. `~ A << (flux)`:
    `op` is `"<<"`, `lhs` the one species, `kf` the flux, `rhs` empty and `kb`
    `None`."""

    op: str
    lhs: tuple[tuple[str, int], ...]
    rhs: tuple[tuple[str, int], ...]
    kf: Expr
    kb: Expr | None
    line: int


@dataclasses.dataclass(frozen=True)
class Conserve:
    """`CONSERVE a + b + ... = total` in a `KINETIC` block: `terms` are the
    states with their coefficients."""

    terms: tuple[tuple[str, float], ...]
    total: Expr
    line: int


@dataclasses.dataclass(frozen=True)
class Compartment:
    """`COMPARTMENT volume {a b ...}` in a `KINETIC` block: the species whose
    equations are in amounts, `volume·dx/dt = fluxes` (the indexed form
    `COMPARTMENT i, vol[i] {x}` reaches here unrolled: one per element)."""

    volume: Expr
    species: tuple[str, ...]
    line: int


@dataclasses.dataclass(frozen=True)
class LinEq:
    """`~ lhs = rhs` in a `LINEAR` block: one equation, affine in the block's
    unknowns (the `STATE`s its equations name)."""

    lhs: Expr
    rhs: Expr
    line: int


Stmt = (
    Assign
    | CallStmt
    | DiffEq
    | Local
    | If
    | Solve
    | Reaction
    | Conserve
    | Compartment
    | LinEq
)


# -- blocks and the file -------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Callable:
    """A `FUNCTION` (returns the value assigned to its own name) or a
    `PROCEDURE`."""

    kind: str  # "FUNCTION" | "PROCEDURE"
    name: str
    params: tuple[str, ...]
    body: tuple[Stmt, ...]
    line: int
    has_table: bool = False


@dataclasses.dataclass(frozen=True)
class Block:
    """`INITIAL`, `BREAKPOINT` or a named `DERIVATIVE`, `KINETIC` or `LINEAR`
    block."""

    kind: str
    name: str
    body: tuple[Stmt, ...]
    line: int


@dataclasses.dataclass(frozen=True)
class Ion:
    """`USEION ion READ ... WRITE ... VALENCE z`."""

    name: str
    read: tuple[str, ...]
    write: tuple[str, ...]
    valence: int | None
    line: int


@dataclasses.dataclass(frozen=True)
class Module:
    """One density mechanism (`SUFFIX`) or point process (`POINT_PROCESS`,
    `suffix` its name) of one `.mod` file.

    - `parameters`: `PARAMETER`s that become fields, name → default value.
    - `assigned`: `ASSIGNED` names (computed per compartment, start at 0).
    - `statics`: file-level `LOCAL`s (also in `assigned`; memo variables).
    - `states`: `STATE` names, in file order.
    - `state_start`: a state's value before `INITIAL` (its `PARAMETER`
      `<state>0`, else 0).
    - `constants`: `CONSTANT`s and `UNITS` factors, name → value.
    - `nonspecific`: `NONSPECIFIC_CURRENT` names.
    - `electrode`: `ELECTRODE_CURRENT` names (point processes: nA injected,
      positive depolarising).
    - `lines`: where each name is declared, and each state's equation.
    """

    path: str
    suffix: str
    title: str
    ions: tuple[Ion, ...]
    nonspecific: tuple[str, ...]
    range_names: tuple[str, ...]
    global_names: tuple[str, ...]
    parameters: dict[str, float]
    constants: dict[str, float]
    assigned: tuple[str, ...]
    statics: tuple[str, ...]
    states: tuple[str, ...]
    state_start: dict[str, float]
    callables: dict[str, Callable]
    initial: Block | None
    breakpoint: Block | None
    derivatives: dict[str, Block]  # DERIVATIVE and KINETIC blocks by name
    lines: dict[str, int]
    point_process: bool = False  # POINT_PROCESS (else SUFFIX)
    net_receive: Callable | None = None  # NET_RECEIVE(args) as a PROCEDURE
    # the INITIAL block inside NET_RECEIVE (per NetCon: its weight vector)
    net_receive_initial: Block | None = None
    electrode: tuple[str, ...] = ()
    artificial: bool = False  # ARTIFICIAL_CELL (also `point_process`)
    # PROCEDUREs BREAKPOINT solves with METHOD after_cvode (run after the step)
    after_solves: tuple[str, ...] = ()
