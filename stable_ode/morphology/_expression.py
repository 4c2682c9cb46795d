"""A safe evaluator for the model file's distance expressions.

`{"distance": "0.0002*(-0.8696 + 2.087*exp(0.003*x))"}`: the text is parsed with
`ast.parse(mode="eval")` and only the node kinds below are interpreted, on NumPy
arrays; nothing is ever passed to Python's `eval`. Allowed: numbers, the variable
`x` (µm), `+ - * / **`, unary `+ -`, comparisons `< <= > >= == !=` (for `where`),
and the functions `exp`, `log`, `abs`, `min`, `max` (two or more arguments,
element-wise) and `where(cond, a, b)`.
"""

import ast
import operator

import numpy as np


_MAX_LENGTH = 1000
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_COMPARE = {
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_FUNCTIONS = {
    "exp": (np.exp, 1),
    "log": (np.log, 1),
    "abs": (np.abs, 1),
    "min": (None, -2),  # element-wise, at least two arguments
    "max": (None, -2),
    "where": (np.where, 3),
}


class ExpressionError(ValueError):
    """A distance expression that is not allowed or cannot be parsed."""


def parse(text: str) -> ast.Expression:
    """`text` parsed and checked: only the allowed node kinds and names.

    **Raises:** `ExpressionError` saying what is not allowed.
    """
    if not isinstance(text, str):
        raise ExpressionError(f"expected a string, got {type(text).__name__}")
    if len(text) > _MAX_LENGTH:
        raise ExpressionError(f"longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"not a valid expression ({e.msg}): {text!r}") from None
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        _check(node)
        if isinstance(node, ast.Name) and node.id != "x" and id(node) not in called:
            raise ExpressionError(f"{node.id} is a function: call it, {node.id}(...)")
    return tree


def _check(node) -> None:
    if isinstance(node, (ast.Expression, ast.Load)):
        return
    if type(node) in _BINARY or type(node) in _COMPARE:
        return
    if isinstance(node, (ast.UAdd, ast.USub)):
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ExpressionError(f"only numbers are allowed, got {node.value!r}")
        return
    if isinstance(node, ast.Name):
        if node.id != "x" and node.id not in _FUNCTIONS:
            raise ExpressionError(
                f"unknown name {node.id!r}: the only variable is x (the path "
                f"distance, µm); functions: {', '.join(_FUNCTIONS)}"
            )
        return
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        return
    if isinstance(node, ast.Compare) and all(type(o) in _COMPARE for o in node.ops):
        return
    if isinstance(node, ast.Call):
        f = node.func
        if not isinstance(f, ast.Name) or f.id not in _FUNCTIONS:
            raise ExpressionError(
                f"only the functions {', '.join(_FUNCTIONS)} may be called"
            )
        if node.keywords:
            raise ExpressionError(f"{f.id}() takes no keyword arguments")
        _, arity = _FUNCTIONS[f.id]
        n = len(node.args)
        if (arity > 0 and n != arity) or (arity < 0 and n < -arity):
            want = arity if arity > 0 else f"at least {-arity}"
            raise ExpressionError(f"{f.id}() takes {want} arguments, got {n}")
        return
    raise ExpressionError(
        f"{type(node).__name__} is not allowed (only numbers, x, arithmetic, "
        f"comparisons and {', '.join(_FUNCTIONS)})"
    )


def evaluate(tree: ast.Expression, x: np.ndarray) -> np.ndarray:
    """The expression at each distance in `x` (µm), as a float64 array of x's
    shape. Floating-point warnings are silenced; the caller checks finiteness."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        out = _eval(tree.body, x)
    return np.broadcast_to(np.asarray(out, dtype=np.float64), x.shape).copy()


def _eval(node, x):
    if isinstance(node, ast.Constant):
        return np.float64(node.value)
    if isinstance(node, ast.Name):
        return x
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, x), _eval(node.right, x)
        return _BINARY[type(node.op)](a, b)
    if isinstance(node, ast.UnaryOp):
        a = _eval(node.operand, x)
        return -a if isinstance(node.op, ast.USub) else +a
    if isinstance(node, ast.Compare):
        left = _eval(node.left, x)
        result = True
        for op, right_node in zip(node.ops, node.comparators):
            right = _eval(right_node, x)
            result = np.logical_and(result, _COMPARE[type(op)](left, right))
            left = right
        return result
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    args = [_eval(a, x) for a in node.args]
    name = node.func.id
    if name == "min":
        return np.minimum.reduce(np.broadcast_arrays(*args))
    if name == "max":
        return np.maximum.reduce(np.broadcast_arrays(*args))
    if name == "where":
        return np.where(np.asarray(args[0], dtype=bool), args[1], args[2])
    return _FUNCTIONS[name][0](args[0])
