"""Where reading a value runs the program's own Python, so the tracer must not read it itself.

A symbolic interpreter asks real objects questions (``isinstance``, ``getattr``, ``hasattr``)
to know what they are.  Most answers come from C: an object's type, a class's MRO dicts.  But a
class may answer reads in Python: its ``__getattribute__``, a descriptor's ``__get__``, a
property, a metaclass's ``__getattr__``.  That code may count calls, log or change state, and
eager runs it exactly where the program reads, never where a tracer asks.  The predicates here
look only at class dicts (``guards.class_lookup``: no descriptor runs) and say where that
code would run, so the tracer can inline it, read around it, or refuse before reading."""

from __future__ import annotations

import types

import guards as G
from ..exc import Unsupported
from .library import is_library_value, is_program_class


def reads_run_code(cls) -> bool:
    """Does reading an attribute of a ``cls`` run Python code of its own (a ``__getattribute__``
    written in Python)?  C classes' own (a module's, a tensor's) run none."""
    found = G.class_lookup(cls, "__getattribute__")
    return not isinstance(found, (types.WrapperDescriptorType, types.MethodDescriptorType, types.BuiltinFunctionType))


def answers_reads_in_python(cls) -> bool:
    """Would ``getattr(obj, name)`` on a ``cls`` instance run the class's Python: its
    ``__getattribute__`` on every read, or its ``__getattr__`` once a name goes missing?  Guards
    then re-read what object's own lookup found with that lookup (``guards.GenericAttrSource``)."""
    return reads_run_code(cls) or python_slot(cls, "__getattr__") is not None


def is_special(name: str) -> bool:
    """A dunder: what a protocol (``obj[k]``, ``iter``, ``bool``, ``len``) asks of the type."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def python_slot(klass, name):
    """The Python function ``klass`` resolves ``name`` to (its MRO's dicts), or None when a
    builtin base's slot wrapper (or nothing) answers it: the program's override, told from the
    builtin default."""
    found = G.class_lookup(klass, name)
    return found if isinstance(found, types.FunctionType) else None


def runs_code_for(klass, name, namespace) -> bool:
    """Would reading ``name`` of an instance of ``klass`` (a module subclass of the program's)
    run the class's Python: its ``__getattribute__``, a descriptor of it that answers, or its
    ``__getattr__`` for a name the instance lacks?"""
    if python_slot(klass, "__getattribute__") is not None:
        return True
    attr = G.class_lookup(klass, name)
    if attr is not G.NOT_FOUND and getter_runs_program_code(attr):
        return True
    return name not in namespace and attr is G.NOT_FOUND and python_slot(klass, "__getattr__") is not None


def getter_runs_program_code(attr) -> bool:
    """Does reading ``attr`` as a descriptor run the program's Python (its class's ``__get__``,
    or a property's getter)?  A library's is assumed to do only what the library says."""
    if isinstance(attr, property):
        return attr.fget is not None and not is_library_value(attr.fget)
    getter = python_slot(type(attr), "__get__")
    return getter is not None and not is_library_value(getter)


def refuse_metaclass_code(klass, name) -> None:
    """``klass.name`` where the program's metaclass would run code of its own for it (its
    ``__getattribute__``, a property or descriptor of it that takes precedence, or its
    ``__getattr__`` for a name the class lacks): refused before anything is read."""
    meta = type(klass)
    if not is_program_class(meta):
        return
    if python_slot(meta, "__getattribute__") is not None:
        raise Unsupported(f"{klass.__name__}.{name} through a metaclass that defines __getattribute__")
    meta_attr = G.class_lookup(meta, name)
    in_class = G.class_lookup(klass, name) is not G.NOT_FOUND
    if meta_attr is not G.NOT_FOUND and getter_runs_program_code(meta_attr):
        data = isinstance(meta_attr, property) or hasattr(type(meta_attr), "__set__") \
            or hasattr(type(meta_attr), "__delete__")
        if data or not in_class:
            raise Unsupported(f"{klass.__name__}.{name}, a descriptor of its metaclass {meta.__name__}")
    if not in_class and meta_attr is G.NOT_FOUND and python_slot(meta, "__getattr__") is not None:
        raise Unsupported(f"{klass.__name__}.{name}, answered by its metaclass's __getattr__")
