"""The exceptions of the traced program as values: ``ExceptionVariable``, and how one is made.

An exception the trace raises (``tracer/exceptions.py``: a missing key, the program's own
``raise``) is a real exception object made at trace time.  It is made from constants only, by
a class that runs no code of the program's, or only its own ``__init__`` in Python (inlined, on
the object: the attributes it stores are constants too), so it is a constant of the trace: an
``except`` clause matches it, ``str(e)``, ``e.args`` and ``e.code`` fold.  It never leaves the
trace as a value (each eager call makes a new one): returned or stored, the frame runs eagerly.
"""

from __future__ import annotations

import types

import guards as G
from ...exc import ProgramRaises, Unsupported
from ..class_answers import guard_class
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable, is_constant_value, is_none

class ExceptionVariable(VariableTracker):
    """An exception the traced code made or raised.  It was made from constants, so it is one
    too while the trace runs (``except`` matching, ``str(e)``, ``e.args``); it never leaves
    the trace as a value (each eager call makes a new one)."""

    def __init__(self, exception: BaseException, fields: dict | None = None, class_source=None):
        super().__init__()
        self.exception = exception
        self.fields = fields or {}      # attributes that are trace-time values (ProgramRaises.fields)
        self.raised_at = None           # (count, index) of the root instruction that raised it (unwind)
        self.class_source = class_source    # a program class with its own __init__: where it was read

    def python_type(self):
        return type(self.exception)

    def as_python_constant(self):
        if self.fields:
            raise Unsupported(f"{type(self.exception).__name__} holding {sorted(self.fields)} known only at run time")
        return self.exception

    def text(self, fn):
        """``str(e)`` / ``repr(e)`` (``fn``) where no run-time field enters it: a built-in class's
        own method reads its arguments, never the ``obj`` an attribute read set.  Else None."""
        method = getattr(type(self.exception), "__str__" if fn is str else "__repr__")
        if set(self.fields) - {"obj"} or not isinstance(method, types.WrapperDescriptorType) \
                or method.__objclass__.__module__ != "builtins":
            return None
        return fn(self.exception)

    def var_getattr(self, tx, name):
        """A field its built-in class keeps (``args``, ``StopIteration.value``, ``OSError.errno``,
        ``__cause__`` ...): all set when it was made.  Where the class finds ``name`` is guarded
        (a program's class may gain a class attribute); a name it does not find is missing
        (AttributeError).  ``__traceback__`` is not read: eager's has the frames, the trace's is None."""
        if name in self.fields:
            return self.fields[name]
        kind = type(self.exception)
        if name in vars(self.exception):          # its class's __init__ stored it (a constant)
            guard_class(tx, kind, lookups=(name,))
            if G.class_lookup(kind, name) is G.NOT_FOUND:
                return ConstantVariable(vars(self.exception)[name])
        _require_field(tx, self, name)
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
        if self.class_source is not None and isinstance(value, ConstantVariable) and not name.startswith("__"):
            guard_class(tx, type(self.exception), lookups=(name,))    # no descriptor takes the store
            if G.class_lookup(type(self.exception), name) is G.NOT_FOUND:
                setattr(self.exception, name, value.value)      # the trace's own object (never leaves it)
                return
        raise Unsupported(f"assignment to attribute {name!r} of {self}")

    def class_lookup(self, tx, name, mro_start=0):
        """What ``super().name`` finds from ``mro_start`` (in a program class's ``__init__``):
        a built-in exception's ``__init__`` sets ``args`` now; a program class's function is bound."""
        from .objects import lookup_class_attribute

        klass = type(self.exception)
        if self.class_source is None:
            raise Unsupported(f"super().{name} on {self}")
        owner = next((base for base in klass.__mro__[mro_start:] if name in vars(base)), None)
        if name == "__init__" and owner is not None and owner.__module__ == "builtins":
            guard_class(tx, klass.__mro__[mro_start], lookups=(name,))
            return BuiltinExceptionInit(self, vars(owner)[name])
        found = lookup_class_attribute(tx, klass, name, self, None, mro_start, self.class_source)
        if found is None:
            raise Unsupported(f"super().{name} on {self}")
        return found

    def __repr__(self) -> str:
        return f"ExceptionVariable({type(self.exception).__name__})"


def _require_field(tx, vt, name: str) -> None:
    """``name`` is a field the built-in class of ``vt``'s exception keeps (where the class finds it
    is guarded), or AttributeMissing / Unsupported."""
    exception = vt.exception
    kind = type(exception)
    guard_class(tx, kind, lookups=(name,))
    owner = next((klass for klass in kind.__mro__ if name in vars(klass)), None)
    if owner is None and name not in vars(exception):
        raise AttributeMissing(f"{kind.__name__!r} object has no attribute {name!r} (AttributeError)", vt, name)
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

        _require_field(tx, self, name)
        return wrap(tx, getattr(self.exception, name), G.AttrSource(self.source, name))

    def __repr__(self) -> str:
        return f"CaughtExceptionVariable({type(self.exception).__name__}, {self.source.name()})"


# What a class statement that adds nothing to its base leaves in the class's __dict__.
_PLAIN_CLASS_KEYS = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__annotations__"}
# What making an exception and reading it at trace time looks up on its class.
_EXCEPTION_LOOKUPS = ("__new__", "__init__", "__str__", "__repr__", "__getattribute__", "__getattr__",
                      "__setattr__", "args")


class BuiltinExceptionInit(VariableTracker):
    """``super().__init__(*args)`` reaching a built-in exception's ``__init__`` (``BaseException``'s,
    ``OSError``'s, ``ImportError``'s ...): run now on the trace's object, from constants."""

    def __init__(self, made: ExceptionVariable, init):
        super().__init__()
        self.made, self.init = made, init

    def call_function(self, tx, args, kwargs):
        kind = type(self.made.exception).__name__
        try:
            values = [a.as_python_constant() for a in args]
            named = {k: v.as_python_constant() for k, v in kwargs.items()}
        except Unsupported as error:
            raise Unsupported(f"exception {kind} given values known only at run time") from error
        try:
            self.init(self.made.exception, *values, **named)
        except Exception as error:      # (a keyword it does not take: eager raises it)
            raise Unsupported(f"{kind}.__init__(...) raises {type(error).__name__}") from error
        return ConstantVariable(None)


def plain_exception_class(klass) -> bool:
    """A built-in exception class, or a program's subclass that adds nothing to one: making and
    reading an instance runs no program code."""
    return isinstance(klass, type) and issubclass(klass, BaseException) and type(klass) is type \
        and all(cls.__module__ == "builtins" or set(vars(cls)) <= _PLAIN_CLASS_KEYS for cls in klass.__mro__)


def own_init_class(klass) -> bool:
    """A program's exception class whose only code is one ``__init__`` in Python (``MyError(msg,
    code)`` storing ``self.code``): made by its built-in base's ``__new__``, then that ``__init__``
    inlined."""
    if not (isinstance(klass, type) and issubclass(klass, BaseException) and type(klass) is type):
        return False
    own = [cls for cls in klass.__mro__ if cls.__module__ != "builtins"]
    inits = [cls for cls in own if "__init__" in vars(cls)]
    return len(inits) == 1 and isinstance(vars(inits[0])["__init__"], types.FunctionType) and \
        all(set(vars(cls)) <= _PLAIN_CLASS_KEYS | {"__init__"} for cls in own)


def make_exception(tx, klass: type, args: list, kwargs: dict, class_vt=None) -> ExceptionVariable:
    """``klass(*args, **kwargs)`` of an exception class, made now (see the module's docstring)."""
    source = getattr(class_vt, "source", None)
    own_init = source is not None and own_init_class(klass)
    if not plain_exception_class(klass) and not own_init:
        raise Unsupported(f"exception {klass.__name__} created: its class runs its own code")
    try:
        values = [a.as_python_constant() for a in args]
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
    except Unsupported as error:
        raise Unsupported(f"exception {klass.__name__} made from values known only at run time") from error
    guard_class(tx, klass, mro=True, lookups=_EXCEPTION_LOOKUPS)
    if own_init:
        try:                  # what type.__call__ does first: the built-in base's __new__
            exception = klass.__new__(klass, *values, **named)
        except Exception as error:
            raise Unsupported(f"{klass.__name__}.__new__(...) raises {type(error).__name__}") from error
        made = ExceptionVariable(exception, class_source=source)
        init = made.class_lookup(tx, "__init__")
        if not is_none(init.call_function(tx, list(args), dict(kwargs))):
            raise Unsupported("__init__ returned something other than None (TypeError)")
        return made
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

