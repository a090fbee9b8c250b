"""``copy.copy`` / ``copy.deepcopy`` of values the tracer models wholly, and ``id(obj)``.

The ``copy`` module is Python, but inlining it would need what the trace cannot give: ``id()``
of values made in the frame (its memo), ``object.__reduce_ex__`` (C), ``copyreg``.  Its result is
fully determined by the value's shape, so it is modelled here, one rule per family, each what
``copy`` itself does for that family (CPython 3.11's ``copy.py``):

    constants (None, int, str, dtype...)  the value itself (``copy._deepcopy_atomic``); a torch.device
                                          is rebuilt by its reduce: an equal constant
    tuple                                 items copied; the same tuple when every item copied to
                                          itself (``copy._deepcopy_tuple``)
    list / dict (exact types)             a new list / dict made in the frame, items (and keys)
                                          copied; the memo is filled first, so a list holding
                                          itself copies to a list holding the copy
    plain objects                         a new object of the same class (``NewObjectVariable``)
                                          with the instance ``__dict__`` copied into it: what
                                          ``__reduce_ex__(4)`` + ``copy._reconstruct`` do for a class
                                          that leaves the copy protocol alone (below)

``copy.copy`` is the same with the items shared instead of copied.  The memo is keyed by the
real object for values read from the frame (two reads of one object copy to one object, as in
eager) and by the tracker for values made in the frame.

A plain object is one whose class Python instantiates without user code
(``new_objects.modelled_class``), with an instance ``__dict__`` and no ``__slots__``, which
defines none of ``__deepcopy__`` / ``__copy__`` / ``__reduce_ex__`` / ``__reduce__`` /
``__getstate__`` / ``__setstate__`` / ``__getnewargs(_ex)__`` (object's C defaults answer) and is
not in ``copyreg.dispatch_table``; those lookups are guarded on the class (``guard_protocol``).
``copy`` asks the *instance* for ``__deepcopy__`` first (``getattr(x, "__deepcopy__", None)``): that
probe is traced as it is, so a Python ``__getattribute__`` / ``__getattr__`` answering it is
inlined (transformers' ``PretrainedConfig.__getattribute__`` maps ``attribute_map`` names).  The
later probes (``__reduce_ex__``, ``__setstate__`` on the copy) are answered from the class:
a Python ``__getattribute__`` is assumed to pass dunder names of the copy protocol through
(docs/guard-assumptions.md).  The instance's state is read through its ``__dict__`` (its keys
and values guarded), so an attribute added, removed or changed between calls is seen.
An object whose attributes the frame already assigned or deleted is refused.

Everything else (tensors, sets, namedtuples, objects with their own copy protocol, a ``memo``
argument, an object whose attributes the frame already changed) is refused with the reason:
a clean graph break at the call.  Tensors are refused rather than cloned: ``Tensor.__deepcopy__``
copies the whole storage (offset and the parts outside a view included) and keeps views of one
storage sharing in the copy, which ``clone`` does not reproduce.

``id(obj)`` of an object read from the frame is a constant, guarded by identity: while the guard
passes it is the very object, so the same id.  An object made in the frame has a new id per call:
refused.
"""

from __future__ import annotations

import copy
import copyreg

import torch

import guards as G
from ...exc import Unsupported
from .base import KnownObjectVariable, VariableTracker, instance_dict, read_or_absent, static_class_attribute
from .constant import ConstantVariable
from .caller_lists import CallerListVariable
from .containers import ListVariable, TupleVariable
from .dicts import DictVariable

# Constants whose copy is the value itself (copy's own table of atomic types, plus torch's enum-like
# types whose ``__reduce__`` is a name, which copy returns as the object itself).
_ATOMIC = tuple(t for t, f in copy._deepcopy_dispatch.items() if f is copy._deepcopy_atomic) + (
    torch.dtype, torch.layout, torch.memory_format)
# The names of the copy protocol a plain object's class must leave to object (or not define).
_PROTOCOL = ("__deepcopy__", "__copy__", "__reduce_ex__", "__reduce__", "__getstate__", "__setstate__",
             "__getnewargs__", "__getnewargs_ex__")
_LISTS = (ListVariable, CallerListVariable)      # not a deque: its own __copy__/__reduce__
_MAX_DEPTH = 100             # a structure nested deeper (or reaching itself through new reads): refused
_OBJECT_DEFAULTS = {name: object.__dict__.get(name) for name in _PROTOCOL}


def _memo_key(tx, vt: VariableTracker):
    """What one object is: the real object when read from the frame (which of the objects read
    are one object is then guarded, ``note_object_identity``), else the tracker."""
    real = tx.output.wrapped_values
    if vt.source is not None and vt.source in real and not isinstance(vt, ConstantVariable):
        value = real[vt.source]
        if isinstance(value, (list, dict)) or type(value).__flags__ & (1 << 9):   # mutable, or a heap class
            tx.output.note_object_identity(vt.source, value)
        return ("real", id(value))
    return ("made", id(vt))


def _is_plain_dict(vt) -> bool:
    """An exact dict: made in the frame, the caller's, or an object's ``__dict__`` view."""
    from .new_objects import InstanceDictVariable

    return type(vt) in (DictVariable, InstanceDictVariable) and vt.dict_type is dict


def _copy_constant(vt: ConstantVariable) -> VariableTracker:
    value = vt.value
    if type(value) in _ATOMIC:
        return vt
    if type(value) is torch.device:                # reduced to torch.device(type, index): equal, new
        return ConstantVariable(copy.deepcopy(value))
    raise Unsupported(f"copy of a constant {type(value).__name__} (its copy may run its own code)")


def _plain_class_reason(klass: type) -> str | None:
    """Why ``copy`` would not treat instances of ``klass`` as state in a ``__dict__`` (None: it would)."""
    from ..program_code import python_slot
    from .new_objects import modelled_class

    why = modelled_class(klass)
    if why is not None:
        return why
    if any(b in (dict, list, set) or issubclass(b, (dict, list, set)) for b in klass.__mro__[1:]):
        return "it is a container subclass (reduced with its items)"
    if klass.__dictoffset__ == 0 or any("__slots__" in b.__dict__ for b in klass.__mro__):
        return "it has __slots__"
    if klass in copyreg.dispatch_table:
        return "it is registered in copyreg.dispatch_table"
    if python_slot(klass, "__getattr__") is not None:    # (copy asks the copy for __setstate__ & co.)
        return "it defines __getattr__ in Python (which may answer the copy protocol)"
    for name in _PROTOCOL:
        found = next((b.__dict__[name] for b in klass.__mro__ if name in b.__dict__), None)
        if found is not _OBJECT_DEFAULTS[name]:
            return f"it defines {name}"
    return None


def _instance_state(tx, vt) -> dict:
    """The instance ``__dict__`` as trackers (name -> tracker), as ``object.__getstate__`` sees it:
    its keys (in order) guarded, each value read as the attribute."""
    from .new_objects import NewObjectVariable

    if isinstance(vt, NewObjectVariable):           # no __slots__ (_plain_class_reason): all in __dict__
        return dict(vt.attrs)
    real = instance_dict(vt.value)
    klass = type(vt.value)
    if not isinstance(real, dict) or not all(type(k) is str for k in real):
        raise Unsupported(f"copy of a {klass.__name__} whose __dict__ is not a dict of attribute names")
    own_protocol = [name for name in _PROTOCOL if name in real]
    if own_protocol:                               # (the instance's own __getstate__ is the one called)
        raise Unsupported(f"copy of a {klass.__name__} whose instance holds {own_protocol[0]}")
    if tx.output.side_effects.has_stored_attributes(vt):
        raise Unsupported(f"copy of a {klass.__name__} whose attributes the frame changed")
    tx.output.add_guard(G.dict_keys_match(G.AttrSource(vt.source, "__dict__"), real))   # which attributes
    shadowed = [k for k in real if hasattr(static_class_attribute(klass, k), "__set__")]
    if shadowed:                                   # obj.k would run the class's data descriptor
        raise Unsupported(f"copy of a {klass.__name__}: {shadowed[0]!r} is also a data descriptor")
    # each value read as obj.k (the source the rest of the trace reads it by), guarded on wrap
    return {k: vt.generic_getattr(tx, k) for k in real}


def _copy_object(tx, vt, memo, deep: bool, depth: int = 0):
    from .new_objects import NewObjectVariable
    from .objects import UserObjectVariable
    from ..builder import wrap
    from ..class_answers import PROTOCOL_NAMES, guard_protocol

    is_new = isinstance(vt, NewObjectVariable)
    if not is_new and (type(vt) is not UserObjectVariable or vt.source is None):
        raise Unsupported(f"copy of a {type(vt).__name__} (not a value the copy model covers)")
    klass = vt.python_type()
    why = _plain_class_reason(klass)
    if why is not None:
        raise Unsupported(f"copy of a {klass.__name__}: {why}")
    guard_protocol(tx, klass, names=tuple(sorted(set(PROTOCOL_NAMES) | set(_PROTOCOL))))
    if deep:            # getattr(x, "__deepcopy__", None), asked of the instance (copy.copy asks the class)
        if read_or_absent(tx, vt, "__deepcopy__") is not None:
            raise Unsupported(f"deepcopy of a {klass.__name__} whose instance answers __deepcopy__")
    class_vt = vt.class_vt if is_new else wrap(tx, klass, G.AttrSource(vt.source, "__class__"))
    result = NewObjectVariable(klass, class_vt)
    memo[_memo_key(tx, vt)] = result                   # before the state: a cycle reaches the copy
    state = _instance_state(tx, vt)
    result.attrs = {k: (_deep(tx, v, memo, depth + 1) if deep else v) for k, v in state.items()}
    return result


def _deep(tx, vt: VariableTracker, memo: dict, depth: int = 0) -> VariableTracker:
    if depth > _MAX_DEPTH:
        raise Unsupported(f"deepcopy of a structure nested deeper than {_MAX_DEPTH}")
    key = _memo_key(tx, vt)
    if key in memo:
        return memo[key]
    if isinstance(vt, ConstantVariable):             # a lazy number too: an int copies to itself
        return _copy_constant(vt)
    if type(vt) is TupleVariable:
        items = [_deep(tx, i, memo, depth + 1) for i in vt.items]
        if key in memo:                            # the tuple was reached through its own items
            return memo[key]
        if all(a is b for a, b in zip(items, vt.items)):
            return vt
        return TupleVariable(items)
    if type(vt) in _LISTS:                         # a caller's list is read (realized) whole
        result = ListVariable([])
        memo[key] = result
        result.items = [_deep(tx, i, memo, depth + 1) for i in vt.items]
        return result
    if _is_plain_dict(vt):
        if vt.has_tensor_keys:
            raise Unsupported("deepcopy of a dict keyed by tensors")
        result = DictVariable({})
        memo[key] = result
        for k, v in list(vt.items.items()):
            if type(k) not in _ATOMIC:             # keys are constants; tuples of them copy to themselves
                if not (type(k) is tuple and all(type(p) in _ATOMIC for p in k)):
                    raise Unsupported(f"deepcopy of a dict key of type {type(k).__name__}")
            result.items[k] = _deep(tx, v, memo, depth + 1)
        return result
    return _copy_object(tx, vt, memo, deep=True, depth=depth)


def _shallow(tx, vt: VariableTracker) -> VariableTracker:
    if isinstance(vt, ConstantVariable):             # a lazy number too: an int copies to itself
        if type(vt.value) in _ATOMIC or type(vt.value) is torch.device:   # copy.copy: atomic, itself
            return vt
        raise Unsupported(f"copy of a constant {type(vt.value).__name__}")
    if type(vt) is TupleVariable:
        return vt
    if type(vt) in _LISTS:                         # a caller's list is read (realized) whole
        return ListVariable(list(vt.items))
    if _is_plain_dict(vt):
        return DictVariable(dict(vt.items))
    return _copy_object(tx, vt, {}, deep=False)


def _deepcopy(tx, x, memo=None, _nil=None):
    if memo is not None or _nil is not None:
        raise Unsupported("copy.deepcopy with an explicit memo")
    return _deep(tx, x, {})


def _copy(tx, x):
    return _shallow(tx, x)


def _id(tx, obj):
    from .nn_module import NNModuleVariable
    from .objects import PythonModuleVariable, UserObjectVariable

    if obj.source is None or getattr(obj, "is_new_object", False) or not isinstance(
            obj, (UserObjectVariable, NNModuleVariable, KnownObjectVariable, PythonModuleVariable)):
        raise Unsupported(f"id() of {obj} (made in the frame or not a real object: "
                          "its id differs per call)")
    if getattr(obj, "by_structure", False):        # a module shared by entries: pinned to this one
        from ..module_sharing import sharing_of

        sharing_of(tx.output).pin(obj.source, "the trace took its id()")
    tx.output.add_guard(G.id_match(obj.source, obj.value))
    return ConstantVariable(id(obj.value))


COPY_CALLS = {copy.deepcopy: _deepcopy, copy.copy: _copy, id: _id}
