"""Library code: the packages whose modules, classes and functions the trace treats as fixed.

A value of these libraries read through a library module or class (``torch.nn.functional.relu``)
is not guarded: we assume libraries are not monkeypatched between calls (builder.py).  A class
whose special methods come from these libraries runs no user Python code when an operator or a
builtin touches its instances, so such values may be folded at trace time (operators.py).
"""

from __future__ import annotations

import types

LIBRARY_PREFIXES = ("torch", "builtins", "math", "operator", "functools", "collections", "typing",
                    "itertools", "numbers", "abc", "enum", "warnings", "timm", "torchvision", "einops")


def is_library_value(value) -> bool:
    """A module, or a class or function defined in one of the ``LIBRARY_PREFIXES`` packages."""
    if isinstance(value, types.ModuleType):
        return True
    module = getattr(value, "__module__", None) if isinstance(value, (type, types.FunctionType,
                                                                        types.BuiltinFunctionType)) else None
    return isinstance(module, str) and module.split(".")[0] in LIBRARY_PREFIXES
