"""Helpers over NEURON's NMODL AST (`neuron.nmodl.ast`)."""


def node_type(n) -> str:
    """The AST class name of `n` (`"VarName"`, `"IndexedName"`, ...)."""
    return type(n).__name__
