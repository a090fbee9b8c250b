"""When the frame lets go of an object it was given: the moments a compiled frame cannot reproduce.

CPython frees an object the moment its last reference goes.  ``del a`` or ``a = None`` can run
its ``__del__`` and kill its weak references (their callbacks run: ``weakref.finalize``, the
entries of a ``weakref.WeakValueDictionary``), which changes what the rest of the frame sees
(``f.alive``, ``len(weak_dict)``, ``ref() is None``).  A traced frame drops nothing while its
graph runs: its arguments stay in the compiled frame until it returns, or until a graph break
hands them on.  So a trace that reaches such a release refuses the frame (it runs eagerly,
exactly) when the object is one the frame was given (an argument; in a resume function, what the
break handed over, which the frame alone may hold) and it has a finalizer or a weak reference,
itself or as an item of a list, tuple, set or dict held there.

Left out: tensors, modules, classes and functions (the runtime's own weak references to them,
torch's caches keyed by tensors, a class's subclass list, would refuse every ``del`` or rebinding
of such an argument; their owners keep them alive anyway, and a tensor's finalizer is not what
the graph computes); objects read from another (``L['seq'][0]``: ``seq`` still holds it);
objects made inside the trace (they do not exist yet).
"""

from __future__ import annotations

import itertools
import types
import weakref

import torch

from guards import LocalSource

from ..exc import Unsupported

_ITEMS_LOOKED_AT = 64      # items of a held container looked at (a dict's: keys and values)
_MISSING = object()


def check_release(tx, name: str, how: str) -> None:
    """Refuse the frame if ``how`` (``del a``, rebinding ``a``) drops the frame's last reference
    to a real object whose release the program can observe (see the module's docstring)."""
    if name.startswith("___") or tx.depth > 0:
        return           # a resume function's own parameter (a stack value, a with-block's factory);
                         # an inlined call's argument, which its caller's frame may still hold
    vt = tx.locals[name]
    source = getattr(vt, "source", None)
    if not isinstance(source, LocalSource):
        return          # made in the trace, or held by what it was read from (L['seq'][0]: seq holds it)
    if any(other is vt for key, other in tx.locals.items() if key != name) or any(v is vt for v in tx.stack):
        return                       # the frame still holds it elsewhere
    value = tx.output.wrapped_values.get(source, _MISSING)
    if value is _MISSING:
        return
    why = _observable(value)
    if why is None and type(value) in (list, tuple, set, frozenset, dict):
        first = itertools.islice(value.items() if type(value) is dict else value, _ITEMS_LOOKED_AT)
        looked_at = itertools.chain.from_iterable(first) if type(value) is dict else first
        why = next((w for w in map(_observable, looked_at) if w is not None), None)
    if why is not None:
        raise Unsupported(f"{how} lets go of {source.name()}, {why}: eager can run it right there, a "
                          "compiled frame lets go only when it returns")


# Objects whose weak references are the runtime's own (a class's subclass list, torch's caches
# of modules and tensors) and which their module, class or owner keeps alive anyway.
_LONG_LIVED = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
               torch.Tensor, torch.nn.Module)


def _observable(obj) -> "str | None":
    if isinstance(obj, _LONG_LIVED):
        return None
    if getattr(type(obj), "__del__", None) is not None:
        return f"whose class defines __del__ ({type(obj).__qualname__})"
    if weakref.getweakrefcount(obj):
        return "which a weak reference watches (it dies with it: weakref.finalize, a weak dictionary's entry)"
    return None
