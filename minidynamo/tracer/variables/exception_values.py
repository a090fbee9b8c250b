"""The exceptions of the traced program as values: ``ExceptionVariable``, and how one is made.

An exception the trace raises (``tracer/exceptions.py``: a missing key, the program's own
``raise``) is a real exception object made at trace time.  It is made from constants only, by
a class that runs no code of the program's, so it is a constant of the trace too: an
``except`` clause matches it, ``str(e)`` and ``e.args`` fold.  It never leaves the trace as a
value (each eager call makes a new one): returned or stored, the frame runs eagerly.
"""

from __future__ import annotations

import types

from ...exc import ProgramRaises, Unsupported
from ..class_answers import guard_class
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable, is_constant_value

class ExceptionVariable(VariableTracker):
    """An exception the traced code made or raised.  It was made from constants, so it is one
    too while the trace runs (``except`` matching, ``str(e)``, ``e.args``); it never leaves
    the trace as a value (each eager call makes a new one)."""

    def __init__(self, exception: BaseException, fields: dict | None = None):
        super().__init__()
        self.exception = exception
        self.fields = fields or {}      # attributes that are trace-time values (ProgramRaises.fields)
        self.raised_at = None           # (count, index) of the root instruction that raised it (unwind)

    def python_type(self):
        return type(self.exception)

    def as_python_constant(self):
        if self.fields:
            raise Unsupported(f"{type(self.exception).__name__} holding {sorted(self.fields)} known only at run time")
        return self.exception

    def var_getattr(self, tx, name):
        """A field its built-in class keeps (``args``, ``StopIteration.value``, ``OSError.errno``,
        ``__cause__`` ...): all set when it was made.  Where the class finds ``name`` is guarded
        (a program's class may gain a class attribute); a name it does not find is missing
        (AttributeError).  ``__traceback__`` is not read: eager's has the frames, the trace's is None."""
        if name in self.fields:
            return self.fields[name]
        kind = type(self.exception)
        _require_field(tx, self.exception, name)
        value = getattr(self.exception, name)
        if isinstance(value, BaseException):
            return ExceptionVariable(value)
        if is_constant_value(value) or (isinstance(value, tuple) and all(map(is_constant_value, value))):
            return ConstantVariable(value)
        raise Unsupported(f"{kind.__name__}.{name} holds {type(value).__name__}, not a constant")

    def guard_absent(self, tx, name):
        """(``var_getattr`` guarded where the class finds ``name``; the object is the trace's own.)"""

    def store_attribute(self, tx, name, value):
        """``exc.__traceback__ = tb`` (``contextlib.contextmanager``'s ``__exit__`` does it): the
        trace never reads an exception's traceback (``var_getattr``), so nothing follows from it.
        Any other store is refused."""
        if name == "__traceback__" and (isinstance(value, TracebackVariable) or (
                isinstance(value, ConstantVariable) and value.value is None)):
            return
        raise Unsupported(f"assignment to attribute {name!r} of {self}")

    def __repr__(self) -> str:
        return f"ExceptionVariable({type(self.exception).__name__})"


def _require_field(tx, exception: BaseException, name: str) -> None:
    """``name`` is a field its built-in class keeps (where the class finds it is guarded), or
    AttributeMissing / Unsupported."""
    kind = type(exception)
    guard_class(tx, kind, lookups=(name,))
    owner = next((klass for klass in kind.__mro__ if name in vars(klass)), None)
    if owner is None and name not in vars(exception):
        raise AttributeMissing(f"{kind.__name__!r} object has no attribute {name!r} (AttributeError)")
    field = vars(owner).get(name) if owner is not None else None
    if owner is None or owner.__module__ != "builtins" or name == "__traceback__" \
            or not isinstance(field, (types.GetSetDescriptorType, types.MemberDescriptorType)):
        raise Unsupported(f"attribute {name!r} of {kind.__name__} (not a field of the exception)")


class TracebackVariable(VariableTracker):
    """A traceback: what ``sys.exc_info()`` answers while a handler runs, and what a user's
    ``__exit__`` gets with an exception the trace raised in its block.  Eager's holds the frames,
    the trace has none to give, so any use but passing it on and ``tb is None`` (False) is refused
    (for an ``__exit__``, the break then goes where the exception was raised)."""

    def python_type(self):
        return types.TracebackType

    def __repr__(self):
        return "TracebackVariable()"


class CaughtExceptionVariable(ExceptionVariable):
    """An exception raised at run time that the traced code handles: a handler's resume function
    (breaks/entry.py) starts with the exception its graph break's instruction raised.  Its class
    is guarded, so an ``except`` clause matches it; its fields are read through its source
    (guarded like any value read); it is not a constant of the trace (each call raises another)
    and the trace does not raise it again (the frame runs eagerly there)."""

    def __init__(self, exception: BaseException, source):
        super().__init__(exception)
        self.source = source

    def as_python_constant(self):
        raise Unsupported(f"{type(self.exception).__name__} raised at run time is not a constant of the trace")

    def var_getattr(self, tx, name):
        from ..builder import wrap
        import guards as G

        _require_field(tx, self.exception, name)
        return wrap(tx, getattr(self.exception, name), G.AttrSource(self.source, name))

    def __repr__(self) -> str:
        return f"CaughtExceptionVariable({type(self.exception).__name__}, {self.source.name()})"


# What a class statement that adds nothing to its base leaves in the class's __dict__.
_PLAIN_CLASS_KEYS = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__"}
# What making an exception and reading it at trace time looks up on its class.
_EXCEPTION_LOOKUPS = ("__new__", "__init__", "__str__", "__repr__", "__getattribute__", "__getattr__",
                      "__setattr__", "args")


def plain_exception_class(klass) -> bool:
    """A built-in exception class, or a program's subclass that adds nothing to one: making and
    reading an instance runs no program code."""
    return isinstance(klass, type) and issubclass(klass, BaseException) and type(klass) is type \
        and all(cls.__module__ == "builtins" or set(vars(cls)) <= _PLAIN_CLASS_KEYS for cls in klass.__mro__)


def make_exception(tx, klass: type, args: list, kwargs: dict) -> ExceptionVariable:
    """``klass(*args, **kwargs)`` of an exception class, made now (see the module's docstring)."""
    if not plain_exception_class(klass):
        raise Unsupported(f"exception {klass.__name__} created: its class runs its own code")
    try:
        values = [a.as_python_constant() for a in args]
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
    except Unsupported as error:
        raise Unsupported(f"exception {klass.__name__} made from values known only at run time") from error
    guard_class(tx, klass, mro=True, lookups=_EXCEPTION_LOOKUPS)
    try:
        return ExceptionVariable(klass(*values, **named))
    except Exception as error:          # e.g. a keyword argument the class does not take
        raise Unsupported(f"{klass.__name__}(...) raises {type(error).__name__}") from error


def stop_iteration(iterator) -> ProgramRaises:
    """What ``next()`` raises at the end of ``iterator``: a StopIteration whose ``value`` is the
    return value of a generator that has just returned (None after that, and for other iterators)."""
    from .containers import TupleVariable

    value = getattr(iterator, "stop_value", None)
    if value is None or (isinstance(value, ConstantVariable) and value.value is None):
        return ProgramRaises("next() of an exhausted iterator (StopIteration)", StopIteration())
    if isinstance(value, ConstantVariable):
        return ProgramRaises("next() of a generator that returned (StopIteration)", StopIteration(value.value))
    return ProgramRaises("next() of a generator that returned (StopIteration)", StopIteration(),
                         {"value": value, "args": TupleVariable([value])})


class HandledBefore(VariableTracker):
    """What ``PUSH_EXC_INFO`` leaves on the stack under the exception it starts handling: the
    exception handled before (``before``: a variable, None for none), which ``POP_EXCEPT`` puts
    back.  It remembers the exception it was pushed for (``handling``): a resume function that
    starts inside the handler rebuilds this stack slot by ``PUSH_EXC_INFO`` of that exception
    (breaks/resume_code.py), which also makes it the one being handled, as in the frame."""

    def __init__(self, before, handling):
        super().__init__()
        self.before, self.handling = before, handling

    def __repr__(self) -> str:
        return f"HandledBefore({self.before}, handling={self.handling})"

