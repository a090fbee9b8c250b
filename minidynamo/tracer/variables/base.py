"""``VariableTracker``: what the symbolic interpreter holds on its stack and in its locals.

    VariableTracker
     ├── ConstantVariable            Python scalars, strings, None, dtypes, devices, ...
     ├── TensorVariable              an fx node plus a meta example value
     ├── BaseListVariable            TupleVariable, ListVariable, SizeVariable, NamedTupleVariable
     ├── DictVariable, SliceVariable, RangeVariable, IteratorVariable
     ├── UserFunctionVariable        Python functions we inline (NestedFunctionVariable: made in
     │                               the trace), UserMethodVariable (bound), CellVariable,
     │                               PartialVariable (functools.partial)
     ├── GeneratorExpressionVariable a paused generator expression, pulled by builtins
     ├── NNModuleVariable            an nn.Module instance (forward inlined)
     ├── TorchFunctionVariable       torch.*, torch.nn.functional.*, Tensor methods: graph ops
     ├── BuiltinVariable             len, isinstance, range, ... (one handler each)
     └── PythonObjectVariable        modules, classes, user objects, other real objects

Each knows its ``source`` (how to re-read it from a later frame), or None when the value was
made during the trace.  Guards are installed when a real value is wrapped (see builder.py),
so whatever the trace reads from the outside world is checked on the next call.
"""

from __future__ import annotations

from typing import Any

from ...exc import Unsupported


class AttributeMissing(Unsupported):
    """``obj.name`` would raise AttributeError.  ``getattr(obj, name, default)`` and ``hasattr``
    catch it (after guarding that the attribute is still absent); anything else falls back."""


class VariableTracker:
    """A symbolic value.  Subclasses override the operations they support."""

    def __init__(self, source=None):
        self.source = source

    # -- what the interpreter asks of every value ---------------------------------------
    def python_type(self) -> type:
        raise Unsupported(f"type of {self} is not known while tracing")

    def as_python_constant(self) -> Any:
        """The plain Python value, when it is fully known at trace time."""
        raise Unsupported(f"{self} is not a Python constant")

    def truth(self, tx) -> bool:
        """``bool(self)`` for control flow; only values known at trace time have one."""
        return bool(self.as_python_constant())

    def var_getattr(self, tx, name: str) -> "VariableTracker":
        raise Unsupported(f"attribute {name!r} of {self}")

    def guard_absent(self, tx, name: str) -> None:
        """Make the trace's reliance on ``name`` being absent sound.  Values whose type fixes
        their attributes need nothing; real objects with a ``__dict__`` override this."""
        if self.source is not None and hasattr(getattr(self, "value", None), "__dict__"):
            raise Unsupported(f"relying on the absence of attribute {name!r} of {self}")

    def call_function(self, tx, args: list, kwargs: dict) -> "VariableTracker":
        raise Unsupported(f"call to {self}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> "VariableTracker":
        """``self.name(*args, **kwargs)``; by default read the attribute, then call it."""
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def as_graph_arg(self, devices: list):
        """(fx node argument, meta example argument) when passed to a graph op."""
        raise Unsupported(f"{self} as an argument of a tensor operation")

    def unpack(self, tx) -> list:
        """The items of ``iter(self)``, all known at trace time (for unpacking and for-loops)."""
        raise Unsupported(f"iteration over {self}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class KnownObjectVariable(VariableTracker):
    """A real object the trace uses as itself (a builtin, a torch function, a class): its
    identity is what matters, so it is its own Python constant."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value


class NullVariable(VariableTracker):
    """The NULL that PUSH_NULL / LOAD_GLOBAL / LOAD_METHOD put below a callable in 3.11."""

    def __repr__(self) -> str:
        return "NULL"


class BoundMethodVariable(VariableTracker):
    """``obj.name`` for a method the tracker implements itself (``list.append``, ``dict.items``)."""

    def __init__(self, obj: VariableTracker, name: str):
        super().__init__()
        self.obj = obj
        self.name = name

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def __repr__(self):
        return f"BoundMethodVariable({self.obj!r}.{self.name})"


def maybe_constant(vt: VariableTracker, default=None):
    """``vt``'s Python constant, or ``default`` when it has none."""
    try:
        return vt.as_python_constant()
    except Unsupported:
        return default


def describe(value: Any) -> str:
    """A short readable name for a real object, used in Unsupported reasons."""
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if name is not None:
        module = getattr(value, "__module__", None)
        return f"{module}.{name}" if module else str(name)
    return f"a {type(value).__name__} object"
