"""Library code: the packages whose modules, classes and functions the trace treats as fixed.

A value of these libraries read through a library module or class (``torch.nn.functional.relu``)
is not guarded: we assume libraries are not monkeypatched between calls (builder.py).  A class
whose special methods come from these libraries runs no user Python code when an operator or a
builtin touches its instances, so such values may be folded at trace time (operators.py).
"""

from __future__ import annotations

import functools
import os
import sys
import types

from ..exc import Unsupported

LIBRARY_PREFIXES = ("torch", "builtins", "math", "operator", "functools", "collections", "typing",
                    "itertools", "numbers", "abc", "enum", "warnings", "timm", "torchvision", "einops")


def is_library_value(value) -> bool:
    """A module, or a class or function defined in one of the ``LIBRARY_PREFIXES`` packages."""
    if isinstance(value, types.ModuleType):
        return True
    module = getattr(value, "__module__", None) if isinstance(value, (type, types.FunctionType,
                                                                        types.BuiltinFunctionType)) else None
    return isinstance(module, str) and module.split(".")[0] in LIBRARY_PREFIXES and defined_where_it_says(value)


def defined_where_it_says(value) -> bool:
    """Is a Python function's code in the package its ``__module__`` names?  A program's wrapper
    made with ``functools.wraps(torch.relu)`` carries torch's ``__module__`` and name, and must
    not be taken for torch's function (its body is the program's).  A function whose code has no
    file (made by ``exec``) counts where its module holds it under its name, but for torch, none
    of whose functions is made so (a program's wrapper made by ``exec`` and installed as
    ``torch.sigmoid`` would be held by its module).  Anything but a
    Python function: yes (a builtin's module is its own)."""
    if not isinstance(value, types.FunctionType):
        return True
    module = getattr(value, "__module__", None)
    if not isinstance(module, str):
        return False
    filename = value.__code__.co_filename
    package = module.split(".")[0]
    if filename.startswith("<"):        # (torch has no such function: a wrapper exec made, installed)
        return package != "torch" and getattr(sys.modules.get(module), value.__name__, None) is value
    return any(_inside(filename, root) for root in _package_roots(package))


@functools.lru_cache(maxsize=None)
def _package_roots(package: str) -> tuple:
    """Where a loaded top-level package's (or module's) source lies."""
    root = sys.modules.get(package)
    if root is None:
        return ()
    paths = list(getattr(root, "__path__", None) or ())
    if not paths and getattr(root, "__file__", None):
        paths = [root.__file__]
    return tuple(os.path.realpath(path) for path in paths)


@functools.lru_cache(maxsize=4096)
def _inside(filename: str, root: str) -> bool:
    """(Cached: asked for every library value the trace meets, and ``realpath`` asks the disk.)"""
    path = os.path.realpath(filename)
    return path == root or path.startswith(root + os.sep)


def is_program_class(kind) -> bool:
    """A class of the program: a heap type outside the libraries (its attributes can change)."""
    return isinstance(kind, type) and bool(type.__dict__["__flags__"].__get__(kind) & (1 << 9)) \
        and not is_library_value(kind)


def is_program_function(value) -> bool:
    """A Python function of the program (a staticmethod, classmethod or property unwrapped to
    it), as opposed to a library's function or a C slot: what a program puts on a library class."""
    value = getattr(value, "__func__", None) or getattr(value, "fget", None) or value
    return isinstance(value, types.FunctionType) and not is_library_value(value)


# Special methods that no operator or builtin calls on a value (construction, pickling, attribute
# access, descriptors): a class defining only these runs no user code when folded.
NOT_OPERATOR_DUNDERS = {"__new__", "__init__", "__init_subclass__", "__class_getitem__", "__set_name__",
                        "__getstate__", "__setstate__", "__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__",
                        "__dir__", "__post_init__", "__del__", "__getattr__", "__getattribute__", "__setattr__",
                        "__delattr__", "__get__", "__set__", "__delete__", "__call__", "__subclasshook__"}


def has_user_dunders(klass) -> bool:
    """Whether ``klass`` (or a base outside the libraries) defines a special method in Python
    that operators and builtins could run: ``__eq__``, ``__str__``, ``__hash__``, ...  A value of
    such a type folded at trace time would run the user's code on real values: refused.  Asked
    anew each time (not cached): a class can gain such a method between two traces."""
    for base in klass.__mro__:
        if base is object or is_library_value(base):
            continue
        for name, attr in base.__dict__.items():
            if name.startswith("__") and name.endswith("__") and name not in NOT_OPERATOR_DUNDERS \
                    and isinstance(attr, (types.FunctionType, classmethod, staticmethod)) \
                    and not is_library_value(getattr(attr, "__func__", attr)):   # enum's own, copied in
                return True
    return False


def refuse_user_dunders(values, what: str) -> None:
    """Constants (an enum member, a class with a user metaclass) whose type runs Python code
    for operators or builtins are not folded."""
    for value in values:
        if isinstance(value, (tuple, list, set, frozenset)):
            refuse_user_dunders(value, what)
        elif isinstance(value, dict):
            refuse_user_dunders(value.values(), what)
        if has_user_dunders(type(value)):
            raise Unsupported(f"{what} of a {type(value).__name__}, whose class defines special methods in Python")
