"""``wrap``: turn a REAL value read from the frame into a VariableTracker, installing the guards
that make relying on it sound on a later call.

    tensor            -> graph input (tensor_match)        constant -> equals_match
    tuple/list        -> type + length, items wrapped       dict     -> type + keys, values wrapped
    nn.Module         -> id + module state (training, hooks); from an argument: type + state,
                         unless the trace relies on more of it (module_sharing.py)
    function/module   -> id                                 other    -> type (attributes guarded on read)

Library values (Python modules, classes and functions of torch or the standard library) read
as attributes of a library module or class (``G['torch'].nn.functional.relu``) or as globals of
a library function are not guarded: we assume libraries are not monkeypatched between calls.
The same value read from anything the *program* owns (an object's attribute, a module's
``__dict__``, a container, a default argument, a closure cell, a root) is guarded, since the
program may put another value there (``net.act = torch.tanh``).

Objects guarded only by type (plain user objects) are recorded per type; ``aliasing_guards``
then guards which of them are the same object, since the trace may have relied on it
(``a is b``, ``a == b``, a store through one seen by a read through the other).
"""

from __future__ import annotations

import collections
import enum
import functools
import sys
import types

import torch

import guards as G
from .. import config
from ..exc import Unsupported
from .class_answers import guard_protocol
from .library import is_library_value, is_program_class, is_program_function
from .program_code import reads_run_code
from .variables.base import OpaqueCallableVariable, VariableTracker, describe, instance_dict
from .variables.constant import ConstantVariable, is_constant_value
from .variables.lazy_numbers import NUMBER_TYPES, LazyNumberVariable
from .variables.weak_refs import REFERENCE_TYPES, WeakRefVariable
from .variables.numpy_values import is_numpy_scalar, is_type_info, numpy_callable_kind, scalar_guards, wrap_numpy_callable
from .variables.containers import (IteratorVariable, ListVariable, NamedTupleVariable, SizeVariable, TupleVariable,
                                   check_named_tuple_model, is_named_tuple_type)
from .variables.dicts import DictVariable
from .variables.exception_values import CaughtExceptionVariable, plain_exception_class
from .variables.iterator_rebuild import DictWalk
from .variables.iterators import (LIST_ITERATOR, LIST_REVERSE_ITERATOR, TUPLE_ITERATOR, DictIteratorVariable,
                                  EnumerateVariable, ListIteratorVariable, ListReverseIteratorVariable, ZipVariable)

# The iterators a graph break hands to a resume function (iterators.hands_over_live).
RANGE_ITERATOR = type(iter(range(0)))
HANDED_ITERATORS = (LIST_ITERATOR, LIST_REVERSE_ITERATOR, TUPLE_ITERATOR, RANGE_ITERATOR, enumerate, zip)


CONTAINER_TYPES = (list, dict, collections.OrderedDict)     # whose methods their trackers implement
CONSTANT_TYPES = (str, bytes, int, float, complex, tuple, frozenset)   # immutable: their methods modelled on constants


def _is_root(source) -> bool:
    return isinstance(source, (G.LocalSource, G.GlobalSource, G.BuiltinSource, G.ClosureSource))


def _read_from_library(tx, source) -> bool:
    """True when ``source`` reads an attribute of a library class: the place the
    no-monkeypatching assumption covers.  A library module's attributes and a library
    function's globals are guarded (the dict memo watches each module's ``__dict__`` with one
    version tag, so the many reads cost one check per module on a hit)."""
    if isinstance(source, G.AttrSource):
        owner = tx.output.wrapped_values.get(source.base_source, _MISSING)
        return owner is not _MISSING and isinstance(owner, type) and is_library_value(owner)
    return False


_MISSING = object()


def wrap(tx, value, source) -> VariableTracker:
    """The VariableTracker for ``value`` read from ``source`` (None: made up, no guard)."""
    guard = tx.output.add_guard if source is not None else (lambda g: None)
    own_reads = reads_run_code(type(value))      # (its class's __getattribute__ is Python)
    if reads_run_code(type(type(value))) or (own_reads and issubclass(type(value), type)):
        raise Unsupported("a value whose class's metaclass defines __getattribute__: every read of its class "
                          "runs the program's code")
    if own_reads and not issubclass(type(value), (torch.Tensor, torch.nn.Module)):
        return _wrap_reads_run_code(tx, value, source, guard)
    disguised = G.class_lookup(type(value), "__class__") is not object.__dict__["__class__"]
    if source is not None:
        tx.output.wrapped_values.setdefault(source, value)
        sharing = getattr(tx.output, "module_sharing", None)
        if sharing is not None and sharing.shared:        # read from a module shared by structure?
            sharing.note_read(source, value, not disguised and fully_guarded(value))
    if disguised:
        return _disguised(tx, value, source, guard)
    if isinstance(value, torch.Tensor):
        if source is None:
            raise Unsupported("a tensor reached the trace without a way to re-read it (no source)")
        return tx.output.add_input(source, value)
    if type(value) in HANDED_ITERATORS and _handed_over(source):   # a loop's, handed over at a break
        return _wrap_handed_iterator(tx, value, source, guard)
    if type(value) is DictWalk and _handed_over(source):           # a loop's over the caller's dict
        return _wrap_dict_walk(tx, value, source, guard)
    if isinstance(value, BaseException) and source is not None and plain_exception_class(type(value)):
        guard(G.type_match(source, value))      # a handler's exception, raised at run time
        return CaughtExceptionVariable(value, source)
    if is_numpy_scalar(value):                  # immutable: by exact type and value (numpy_values.py)
        if source is not None:
            for g in scalar_guards(source, value):
                guard(g)
        return ConstantVariable(value, source)
    if type(value) in NUMBER_TYPES and source is not None:     # read only if used (lazy_numbers.py)
        type_guard = guard(G.type_match(source, value))
        return LazyNumberVariable.read_from(value, source, lambda: _guard_number(tx, source, value, type_guard))
    if is_constant_value(value):
        if source is not None:
            singleton = isinstance(value, (type(Ellipsis), type(NotImplemented), torch.layout, torch.memory_format,
                                           enum.Enum))           # singletons: identity is equality
            guard(G.id_match(source, value) if singleton else G.equals_match(source, value))
        if is_program_class(type(value)):      # an enum member, an int subclass: folded by its class's methods
            guard_protocol(tx, type(value))
        return ConstantVariable(value, source)
    if type(value) is range:                    # the rest of a loop over a range, at a break
        if source is not None:                  # equal ranges may differ (range(0) == range(5, 5))
            guard(G.type_match(source, value))
            for part in ("start", "stop", "step"):
                guard(G.equals_match(G.AttrSource(source, part), getattr(value, part)))
        return ConstantVariable(value, source)
    if type(value) is tuple and _is_plain_constant_tuple(value):
        vt = wrap_constant_result(value)
        if source is not None:                  # kernel_size=(3, 3): one guard for the whole tuple
            guard(G.equals_match(source, value))
            _keep_identity(tx, vt, value, source)
        return vt
    if isinstance(value, torch.nn.Module):
        from .variables.nn_module import NNModuleVariable

        from .module_sharing import sharing_of

        if not all(name in instance_dict(value, ()) for name in ("training", "_modules", "_parameters")):
            raise Unsupported(f"a {type(value).__name__} whose nn.Module.__init__ has not run (its own "
                              "__init__ is being called)")

        shared = False
        if source is not None:
            sharing = sharing_of(tx.output)
            shared = sharing.may_share(tx.output.code, source, value)
            guard(G.type_match(source, value) if shared else G.id_match(source, value))
            guard(G.module_state_match(source, value))
            sharing.add(source, value, shared)
        _refuse_replaced_module_protocol(type(value))
        if not config.assume_libraries_unpatched:       # nn.Module.__call__ / __getattr__ patched later
            guard_protocol(tx, type(value), MODULE_PROTOCOL)
        vt = NNModuleVariable(value, source)
        vt.by_structure = shared          # this call's module is re-read from its source
        return vt
    kind = type(value)
    if kind is torch.Size:
        if source is not None:
            guard(G.equals_match(source, value))
        return SizeVariable([ConstantVariable(d) for d in value], source)
    if kind is set and source is not None and all(type(v) in (str, int, bool, type(None)) for v in value):
        guard(G.type_match(source, value))
        # no guard compares sets: their repr does (equal reprs of str/int/bool/None items are
        # equal sets, iterated in the same order); a set changed in any way misses
        guard(G.equals_match(G.CallSource(source, "__repr__"), repr(value)))
        return caller_set(value, source)
    if kind in (list, dict, collections.OrderedDict, collections.defaultdict, collections.deque) and source is not None:
        cached = tx.output.side_effects.cached_container(source)   # one tracker per caller's list:
        if cached is not None:                                    # mutations must be seen by all reads
            return cached
        same = tx.output.side_effects.container_of_object(value, tx.output.wrapped_values)
        if same is not None:              # read before under another name: that tracker, guarded
            guard(G.alias_match(source, ((same[0], True),)))
            tx.output.side_effects.aliases[source] = same[1]
            return same[1]
        if kind is list:          # read only when the trace needs more than appends (caller_lists.py)
            from .variables.caller_lists import CallerListVariable

            guard(G.type_match(source, value))
            vt = CallerListVariable(source, lambda: _sequence_items(tx, value, source, guard))
        elif kind is collections.deque:         # its bound guarded with its items
            from .variables.collection_types import DequeVariable

            guard(G.type_match(source, value))
            guard(G.equals_match(G.AttrSource(source, "maxlen"), value.maxlen))
            vt = DequeVariable(_sequence_items(tx, value, source, guard), value.maxlen, source=source)
        elif kind is collections.defaultdict:   # d[k] of a missing key calls its factory (guarded)
            from .variables.collection_types import DefaultDictVariable

            plain = _wrap_container(tx, value, source, guard)
            factory = wrap(tx, value.default_factory, G.AttrSource(source, "default_factory"))
            vt = DefaultDictVariable(plain.items, factory, source)
        else:
            vt = _wrap_container(tx, value, source, guard)
        tx.output.side_effects.note_container(source, vt)
        return vt
    if kind in SYS_RECORDS:                     # sys.version_info >= (3, 12): one object for the process
        if source is not None:
            guard(G.id_match(source, value))
        return ConstantVariable(value, source)
    if kind in (tuple, list, dict, collections.OrderedDict) or (isinstance(value, tuple) and is_named_tuple_type(kind)):
        return _wrap_container(tx, value, source, guard)
    if type(value) is functools.partial:
        from .variables.functions import PartialVariable

        if source is not None:
            # by what it holds (its function, arguments and keywords, wrapped from their sources:
            # guarded), not by identity: a partial the frame makes is new on every call, and one
            # handed to a resume function at a break would recompile it every call
            guard(G.type_match(source, value))
            tx.output.note_object_identity(source, value)
        return PartialVariable.of_real(tx, value, source)
    numpy_kind = numpy_callable_kind(value)
    if numpy_kind is not None:                  # np.sqrt, np.float32, np.random.rand
        return wrap_numpy_callable(tx, value, source, numpy_kind)
    original = _scripted_original(value)
    if original is not None:
        # torch.jit.script / trace keep the Python function they compiled: it is traced instead
        # (the scripted function computes the same), guarded by the scripted object's identity
        if source is not None:
            guard(G.id_match(source, value))
        return wrap(tx, original, G.AttrSource(source, "_torchdynamo_inline") if source is not None else None)
    if type(value) is types.BuiltinMethodType and source is not None and (
            _owner_models_it(value) or _bound_anew(value)):
        # a C method bound to an object: each read from its owner binds a new one, so it is
        # guarded by its name and its owner (never by identity: that would fail every call).
        # ``log.append`` / ``cache.index_fill_`` / ``"-".join`` (a resume function's stack at
        # ``log.append(t.item())``, a local) are the owner's own tracker's method; any other
        # (``random.random``, ``rng.random``) is a graph break where it is called
        guard(G.type_match(source, value))
        guard(G.equals_match(G.AttrSource(source, "__name__"), value.__name__))
        owner = wrap(tx, value.__self__, G.AttrSource(source, "__self__"))
        if _owner_models_it(value):
            return owner.var_getattr(tx, value.__name__)
        return OpaqueCallableVariable(value, source, f"call to unknown C method {describe(value)}")
    if isinstance(value, types.MethodType):
        from .variables.autograd_function import AutogradFunctionApplyVariable, is_function_apply
        from .variables.functions import UserMethodVariable

        if is_function_apply(value):          # MyFunction.apply: one node (autograd_function.py)
            if source is not None:
                wrap(tx, value.__self__, G.AttrSource(source, "__self__"))
                guard(G.id_match(G.AttrSource(source, "__func__"), value.__func__))
            return AutogradFunctionApplyVariable(value, source)
        if not isinstance(value.__func__, types.FunctionType) and source is not None:
            # a C callable bound to an object (functools.lru_cache's wrapper as a method:
            # transformers' ``logger.warning_once``): the function guarded where it is read,
            # calling it is where the frame breaks
            guard(G.id_match(G.AttrSource(source, "__func__"), value.__func__))
            wrap(tx, value.__self__, G.AttrSource(source, "__self__"))
            return OpaqueCallableVariable(value, source, f"call to unknown C method {describe(value.__func__)}")
        raise_if_unsupported_method(value)
        attr = (lambda name: G.AttrSource(source, name)) if source is not None else (lambda name: None)
        return UserMethodVariable(wrap(tx, value.__func__, attr("__func__")), wrap(tx, value.__self__, attr("__self__")))
    if isinstance(value, types.FunctionType) and source is not None and "<locals>" in value.__code__.co_qualname:
        return _wrap_nested_function(tx, value, source, guard)
    if type(value) in REFERENCE_TYPES and source is not None:
        guard(G.type_match(source, value))
        return WeakRefVariable(value, source)
    if source is not None and (_is_root(source) or not is_library_value(value)
                               or not _read_from_library(tx, source) or not config.assume_libraries_unpatched):
        guard(G.id_match(source, value) if _identity_guarded(value) else G.type_match(source, value))
    vt = wrap_object(value, source)
    if source is not None and type(vt).__name__ == "UserObjectVariable":
        tx.output.note_object_identity(source, value)      # which of them are one object: guarded
    return vt


def _wrap_reads_run_code(tx, value, source, guard) -> VariableTracker:
    """An object whose class defines ``__getattribute__`` in Python (transformers' configs do):
    a plain object, by type, asked nothing more here, since even ``isinstance`` reads its
    ``__class__`` through that code.  The trace runs its reads through it (inlined, guarded)."""
    from .variables.objects import UserObjectVariable

    if source is not None:
        guard(G.type_match(source, value))
        tx.output.note_object_identity(source, value)
    return UserObjectVariable(value, source)


def _wrap_handed_iterator(tx, value, source, guard) -> VariableTracker:
    """A list iterator a graph break handed over (``iterator_rebuild.list_iterator_at``), or enumerate
    of one: the list it reads and where it stands, both through its ``__reduce__()``,
    ``(iter, (list,), index)`` / ``(enumerate, (iterator, count))``, guarded like any value read
    (an exhausted list iterator reduces to ``(iter, ((),))``: refused)."""
    guard(G.type_match(source, value))
    reduced = value.__reduce__()
    state = G.CallSource(source, "__reduce__")
    arguments = G.ItemSource(state, 1)
    if type(value) is enumerate:          # (enumerate, (iterator, count))
        inner, count = reduced[1]
        guard(G.equals_match(G.ItemSource(arguments, 1), count))
        return EnumerateVariable(_handed_inner(tx, inner, G.ItemSource(arguments, 0), guard), count)
    if type(value) is zip:                # (zip, (iterators...)) and True if strict
        guard(G.length_match(state, reduced))
        strict = len(reduced) == 3
        if strict:
            guard(G.equals_match(G.ItemSource(state, 2), reduced[2]))
        guard(G.length_match(arguments, reduced[1]))
        return ZipVariable([_handed_inner(tx, it, G.ItemSource(arguments, k), guard)
                            for k, it in enumerate(reduced[1])],
                           strict and bool(reduced[2]))
    if len(reduced) != 3 or type(reduced[1][0]) not in (list, tuple, range):
        raise Unsupported("an exhausted iterator")
    guard(G.equals_match(G.ItemSource(state, 2), reduced[2]))
    if type(reduced[1][0]) is range:      # (iter, (range(...),), index): the numbers, by value
        numbers = reduced[1][0]
        guard(G.type_match(G.ItemSource(arguments, 0), numbers))
        for field in ("start", "stop", "step"):
            guard(G.equals_match(G.AttrSource(G.ItemSource(arguments, 0), field), getattr(numbers, field)))
        iterator = IteratorVariable(ConstantVariable(numbers).unpack(tx))
        iterator.index = reduced[2]
        return iterator
    walked = wrap(tx, reduced[1][0], G.ItemSource(arguments, 0))
    if type(value) is LIST_REVERSE_ITERATOR:     # (reversed, (list,), index): reads the list live
        if type(reduced[1][0]) is not list:
            raise Unsupported("a reversed iterator over something other than a list")
        iterator = ListReverseIteratorVariable(walked)
        iterator.index = reduced[2]
        return iterator
    if type(value) is TUPLE_ITERATOR:     # the rest of fixed items
        iterator = IteratorVariable(walked.items)
    else:
        iterator = ListIteratorVariable(walked)
    iterator.index = reduced[2]
    return iterator


def _wrap_dict_walk(tx, walk, source, guard) -> VariableTracker:
    """A loop's iterator over the caller's dict, handed over at a break (``DictWalk``): the trace
    walks that very dict (its values read live) from where the real iterator stands, which the
    keys it has left say (guarded: the instruction that broke may have changed the dict)."""
    guard(G.type_match(source, walk))
    for field in ("kind", "reverse"):
        guard(G.equals_match(G.AttrSource(source, field), getattr(walk, field)))
    try:
        left = walk.remaining_keys()
    except RuntimeError as error:        # eager's next step raises it: the loop runs eagerly
        raise Unsupported(f"the dict a loop walks changed during the graph break ({error})") from None
    guard(G.equals_match(G.CallSource(source, "remaining_keys"), left))
    dict_vt = wrap(tx, walk.dict, G.AttrSource(source, "dict"))
    if not isinstance(dict_vt, DictVariable):
        raise Unsupported("a handed-over loop over a dict the trace does not model")
    iterator = DictIteratorVariable(dict_vt, walk.kind, walk.reverse)
    seen = len(iterator.keys) - len(left)
    if seen < 0 or tuple(iterator.keys[seen:]) != left:
        raise Unsupported("the dict a loop walks changed its keys during the graph break")
    iterator.index = seen
    return iterator


def _handed_over(source) -> bool:
    """A resume function's parameter for a loop's own iterator (``___iter<k>``), which no
    program code can reach.  One the program holds too (a local ``it`` the loop walks) comes as
    a plain stack value: it is real, and walking it in the trace would not advance it."""
    return isinstance(source, G.LocalSource) and source.local_name.startswith("___iter")


def _handed_inner(tx, value, source, guard) -> VariableTracker:
    """An iterator inside a handed-over enumerate or zip: a list or tuple iterator, or itself an
    enumerate or zip of those (``for i, (a, b) in enumerate(zip(xs, ys))``)."""
    if type(value) not in HANDED_ITERATORS:
        raise Unsupported(f"a {type(value).__name__} inside a handed-over iterator")
    return _wrap_handed_iterator(tx, value, source, guard)


def _disguised(tx, value, source, guard) -> VariableTracker:
    """An object whose class defines its own ``__class__`` (a mock made with a spec, a proxy):
    ``isinstance`` believes ``__class__``, so the rules of ``wrap`` would take it for what it
    imitates and read that kind's attributes from it (a mock records each read as a call).  Only
    its real type is relied on: a call of it is where the frame breaks, and everything else is
    the generic object's (whose ``isinstance`` answers refuse such a class)."""
    from .variables.objects import UserObjectVariable

    if source is not None:
        guard(G.type_match(source, value))
        tx.output.note_object_identity(source, value)      # which of them are one object: guarded
    if G.class_lookup(type(value), "__call__") is not G.NOT_FOUND:
        return OpaqueCallableVariable(value, source, f"call to a {describe(type(value))}, whose __class__ is "
                                                     "not its type (a mock or a proxy)")
    return UserObjectVariable(value, source)


def fully_guarded(value) -> bool:
    """Values whose guard pins all the trace may rely on: tensors (graph inputs, re-read from
    their source each call), constants (by value), modules (by this rule, recursively), and
    functions, classes and C callables (by identity)."""
    if isinstance(value, (torch.Tensor, torch.nn.Module, torch.Size)) or is_constant_value(value):
        return True
    if type(value) is tuple:
        return all(fully_guarded(v) for v in value)
    if isinstance(value, types.FunctionType):
        return "<locals>" not in value.__code__.co_qualname      # a closure is guarded by code only
    return isinstance(value, (types.BuiltinFunctionType, type, types.ModuleType, types.MethodWrapperType,
                              types.WrapperDescriptorType, types.MethodDescriptorType)) \
        and not isinstance(value, functools.partial)


def _wrap_nested_function(tx, fn, source, guard) -> VariableTracker:
    """A function made by another function's frame (a closure, an attention-mask builder):
    often a new object on every call, so guarding its identity would recompile every call.
    It is guarded by what the trace can rely on instead: its code and globals (by identity), its
    defaults (wrapped, so guarded), and each closure cell the trace reads (guarded on read).
    Its identity is still seen: which of the functions read are one object is guarded
    (``note_object_identity``), and returned or stored it is re-read from its source."""
    from .variables.functions import UserFunctionVariable, trace_time_answers
    from .variables.torch_fns import is_torch_callable

    if is_torch_callable(fn) or fn in trace_time_answers():
        guard(G.id_match(source, fn))
        return wrap_object(fn, source)
    guard(G.type_match(source, fn))
    guard(G.id_match(G.AttrSource(source, "__code__"), fn.__code__))
    guard(G.id_match(G.AttrSource(source, "__globals__"), fn.__globals__))
    wrap(tx, fn.__defaults__, G.AttrSource(source, "__defaults__"))
    wrap(tx, fn.__kwdefaults__, G.AttrSource(source, "__kwdefaults__"))
    tx.output.note_object_identity(source, fn)
    vt = UserFunctionVariable(fn, source)
    vt.guarded_by_code = True
    return vt


# What the module model stands for: torch's attribute lookup, stores and call of nn.Module.
MODULE_PROTOCOL = ("__getattr__", "__getattribute__", "__setattr__", "__delattr__", "__call__", "_call_impl",
                   "_wrapped_call_impl")


def _refuse_replaced_module_protocol(kind) -> None:
    """A module is modelled as torch's ``nn.Module`` looks attributes up and calls ``forward``; a
    program that put its own function in place of torch's (``nn.Module.__getattr__ = f``) gets
    that function's behaviour only eagerly.  (A module class of the program overriding them is
    handled by the module model itself.)"""
    for name in MODULE_PROTOCOL:
        owner = next((k for k in G.mro_of(kind) if name in k.__dict__), None)
        if owner is not None and is_library_value(owner) and is_program_function(owner.__dict__[name]):
            raise Unsupported(f"{owner.__qualname__}.{name} was replaced by the program")


def class_of(tx, vt) -> VariableTracker:
    """``type(obj)`` / ``obj.__class__``: read from the object (``obj.__class__``) when it is a
    real object with a source, so reading the class's attributes is guarded."""
    from .variables.objects import ClassVariable

    if getattr(vt, "class_vt", None) is not None:           # an object made in the trace
        return vt.class_vt
    value, source = getattr(vt, "value", _MISSING), getattr(vt, "source", None)
    heap_type = value is not _MISSING and bool(type(value).__flags__ & (1 << 9))   # builtin types are immutable
    if source is not None and heap_type and type(value) is vt.python_type():
        return wrap(tx, type(value), G.AttrSource(source, "__class__"))
    return ClassVariable(vt.python_type())        # a program's class is re-read as itself (HeldSource)


def _keep_identity(tx, vt, value: tuple, source) -> None:
    """A constant tuple read from ``source`` is the caller's very object, and so is each tuple in
    it (``t[2] is t[2]``, returned as itself): they keep their sources, re-read on every call.
    (Equal tuples pass the guard; which object the program then gets is the one it reads.)"""
    tx.output.wrapped_values.setdefault(source, value)
    vt.source = source
    for i, (item_vt, item) in enumerate(zip(vt.items, value)):
        if type(item) is tuple:
            _keep_identity(tx, item_vt, item, G.ItemSource(source, i))


def held_constant(tx, value) -> VariableTracker:
    """A constant that lives on in an object the trace only reads (the tuples a code object keeps:
    ``co_consts``, ``co_names``): held as the object itself, so that ``is`` and ``id`` see that
    object, as eager does, and a value leaving the trace is that object, not an equal copy.  An
    immutable object held needs no guard."""
    vt = wrap_constant_result(value)
    if type(value) is tuple:
        _keep_identity(tx, vt, value, G.HeldSource.of(value))
    return vt


def _is_plain_constant_tuple(value) -> bool:
    return all(type(v) in (int, float, bool, str, type(None)) or type(v) is tuple and _is_plain_constant_tuple(v)
               for v in value)


# The interpreter's own records (struct sequences no program can make: ``type(sys.version_info)()``
# raises): constants, each the one object of its kind.
SYS_RECORDS = frozenset(type(record) for record in (sys.version_info, sys.flags, sys.float_info, sys.int_info,
                                                    sys.hash_info, sys.thread_info))


def _wrap_container(tx, value, source, guard) -> VariableTracker:
    """tuple / list / namedtuple / dict: guard the shape of the container, wrap each item."""
    kind = type(value)
    if isinstance(value, dict):
        if "__builtins__" in value:       # a module's (an exec's) namespace: maybe the frame's own
            raise Unsupported("a module's globals as a dict (its entries are also read as globals, "
                              "a write through one would not be seen through the other)")
        if not all(map(_constant_key, value)):
            raise Unsupported("a dict with non-constant keys")
        if source is not None and any(_ambiguous_key(k) for k in value):
            raise Unsupported("a dict keyed by a float zero or nan (its keys guard compares with ==, which "
                              "cannot tell -0.0 from 0.0, and nan keys by identity)")
        if source is not None:
            guard(G.type_match(source, value))
            guard(G.dict_keys_match(source, value))
        items = {k: wrap(tx, v, G.ItemSource(source, k) if source is not None else None) for k, v in value.items()}
        return DictVariable(items, kind, source)
    if source is not None:
        guard(G.type_match(source, value))
    items = _sequence_items(tx, value, source, guard)
    if kind is list:
        return ListVariable(items, source)
    if kind is tuple:
        return TupleVariable(items, source)
    check_named_tuple_model(tx, kind)
    return NamedTupleVariable(items, kind, source)


def _constant_key(key) -> bool:
    """A constant, or a tuple of them (``(seq_len, dtype)``: a cache's key): equal keys are
    interchangeable, which the keys guard (``==``) and the items' sources rely on.  Not one whose
    class hashes or compares in Python of the program's (a ``str`` subclass with its own
    ``__eq__``): a lookup would run that code, and its answer could change between calls while
    the guard, which finds the entry by the stored key itself, still passes."""
    if type(key) is tuple:
        return all(map(_constant_key, key))
    return is_constant_value(key) and all(_looked_up_in_c(type(key), name) for name in ("__hash__", "__eq__"))


def _looked_up_in_c(kind, name) -> bool:
    """``kind``'s ``name`` is C's (or enum's own ``__hash__``, which hashes the member's name)."""
    found = G.class_lookup(kind, name)
    return not isinstance(found, types.FunctionType) or found is enum.Enum.__dict__.get(name)


def _ambiguous_key(key) -> bool:
    """A key ``==`` cannot pin down: a float zero (``-0.0 == 0.0``) or nan, also inside a tuple."""
    if type(key) is tuple:
        return any(map(_ambiguous_key, key))
    return type(key) is float and (key == 0.0 or key != key)


def _guard_number(tx, source, value, type_guard) -> None:
    """A lazy number is read: its value is guarded, which checks its type too (``equals_match``),
    so the type guard of its wrap is dropped (the hit path checks each fact once).  Searched
    from the end, by identity: it was added when the number was wrapped, usually just before."""
    guards = tx.output.guards
    for index in range(len(guards) - 1, -1, -1):
        if guards[index] is type_guard:
            del guards[index]
            break
    tx.output.add_guard(G.equals_match(source, value))


def _sequence_items(tx, value, source, guard) -> list:
    """The wrapped items of a list or tuple, its length guarded."""
    if source is not None:
        guard(G.length_match(source, value))
    base = G.container_base(type(value))          # (a subclass's __iter__ is the program's code)
    items = iter(value) if base is None else base.__iter__(value)
    return [wrap(tx, v, G.ItemSource(source, i) if source is not None else None) for i, v in enumerate(items)]


def _identity_guarded(value) -> bool:
    """Functions, classes, modules and C callables are guarded by identity; plain objects by
    type (their attributes are guarded one by one when the trace reads them)."""
    return isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type,
                              functools.partial, types.MethodWrapperType, types.WrapperDescriptorType,
                              types.MethodDescriptorType, torch._ops.OpOverloadPacket, torch._ops.OpOverload))


def wrap_object(value, source) -> VariableTracker:
    """Callables, modules, classes and plain objects (guards already installed)."""
    from .variables.builtins import BUILTIN_HANDLERS, BuiltinVariable
    from .variables.functions import TraceTimeAnswerVariable, UserFunctionVariable, trace_time_answers
    from .variables.objects import ClassVariable, PythonModuleVariable, UserObjectVariable
    from .variables.torch_fns import OPERATOR_OBJECTS, TorchFunctionVariable, is_torch_callable

    if isinstance(value, OPERATOR_OBJECTS):              # (their __hash__ is Python code)
        return TorchFunctionVariable(value, source)
    if not isinstance(value, (type, types.ModuleType)) and not _hashable(value):
        return UserObjectVariable(value, source)   # a user __hash__: never a torch/builtin callable
    if value in BUILTIN_HANDLERS:                        # modelled C and stdlib callables
        return BuiltinVariable(value, source)
    special = special_functions().get(value) if isinstance(value, types.FunctionType) else None
    if special is not None:                              # torch.vmap, pytree: their own trackers
        return special(value, source)
    answers = trace_time_answers() if isinstance(value, types.FunctionType) else {}
    if answers and value in answers:                     # torch.compiler.is_compiling(): True while tracing
        return TraceTimeAnswerVariable(value, answers[value], source)
    if isinstance(value, types.FunctionType) and not is_torch_callable(value):
        return UserFunctionVariable(value, source)
    if is_torch_callable(value):
        return TorchFunctionVariable(value, source)
    if isinstance(value, types.ModuleType):
        return PythonModuleVariable(value, source)
    if isinstance(value, type):
        return ClassVariable(value, source)
    base_slot = _builtin_base_slot(value)
    if base_slot is not None:                            # object.__setattr__, dict.keys: modelled
        from .variables.new_objects import BuiltinBaseMethod

        return BuiltinBaseMethod(*base_slot, None)
    if isinstance(value, (types.BuiltinFunctionType, types.BuiltinMethodType, types.WrapperDescriptorType,
                          types.MethodDescriptorType, types.MethodWrapperType)):
        owner = getattr(value, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):   # bound anew at each read:
            raise Unsupported(f"call to unknown C function {describe(value)}")  # no identity to guard
        # calling it is where the frame breaks
        return OpaqueCallableVariable(value, source, f"call to unknown C function {describe(value)}",
                                      frame_readers().get(value, ""))
    return UserObjectVariable(value, source)


@functools.lru_cache(maxsize=None)
def frame_readers() -> dict:
    """C functions that read the frame calling them: "always own" (its locals), "own" (the same
    when called without arguments: ``vars()``, ``dir()``), "stack" (frames further down too),
    "warn" (``warnings.warn``: the file, line and globals of its caller, frames further down with
    a higher stacklevel: only where frames are, which a break's entry and a resume function show
    as eager's, so a call of it breaks there as any unknown call, and a frame naming it as a
    global breaks as any other).  See ``variables.base.refuse_frame_reader``.  A break's entry and
    the resume functions run with the frame's own globals, so what only reads them may run at a
    break (``type(name, bases, ns)``); ``globals()`` stays one: the dict it returns would reach
    the resume function as a value, its entries also read as the frame's globals."""
    import builtins
    import sys
    import warnings

    readers = {builtins.globals: "always own", builtins.locals: "always own", builtins.eval: "always own",
               builtins.exec: "always own", builtins.breakpoint: "stack", builtins.vars: "own",
               builtins.dir: "own", sys._getframe: "stack", warnings.warn: "warn"}
    return {fn: kind for fn, kind in readers.items() if isinstance(fn, types.BuiltinFunctionType)}


def _scripted_original(value):
    """The Python function behind a ``torch.jit.ScriptFunction`` (or a ``torch.jit.trace``d
    function), which torch keeps as its attribute "_torchdynamo_inline" (a plain attribute: no import)."""
    if not isinstance(value, (torch.jit.ScriptFunction, torch.jit.ScriptModule)):
        return None
    original = getattr(value, "_torchdynamo_inline", None)
    return original if isinstance(original, types.FunctionType) else None


def _builtin_base_slot(value):
    """(owner, name) if ``value`` is an unbound C method of object / dict / OrderedDict (read
    from a variable rather than as ``object.__setattr__``: handed to a resume function)."""
    from .variables.new_objects import BUILTIN_BASES

    if not isinstance(value, (types.WrapperDescriptorType, types.MethodDescriptorType)):
        return None
    owner, name = getattr(value, "__objclass__", None), getattr(value, "__name__", None)
    if owner in BUILTIN_BASES and isinstance(name, str) and owner.__dict__.get(name) is value:
        return owner, name
    return None


_special: dict = {}


def special_functions() -> dict:
    """Python functions with a tracker of their own instead of being inlined: the higher-order
    ``torch.vmap`` (variables/higher_order.py), pytree's pure functions (variables/pytree.py) and
    ``torch.overrides.handle_torch_function`` (variables/torch_function_modes.py)."""
    if not _special:
        from .variables.higher_order import VmapVariable
        from .variables.pytree import PYTREE_FUNCTIONS, PytreeFunctionVariable
        from .variables.torch_function_modes import HandleTorchFunctionVariable

        _special[torch.vmap] = lambda value, source: VmapVariable(source)
        _special[torch.overrides.handle_torch_function] = HandleTorchFunctionVariable
        for fn in PYTREE_FUNCTIONS:
            _special[fn] = PytreeFunctionVariable
    return _special


def raise_if_unsupported_method(method):
    if not isinstance(method.__func__, types.FunctionType):
        raise Unsupported(f"bound C method {describe(method.__func__)}")


def _hashable(value) -> bool:
    """Whether ``value`` can be looked up in a table without running any of the program's code
    and without leaving a trace of the lookup.  Only hashes that read the object's address (the
    default one, functions', builtins', modules'), constants' and tuples of those qualify: a
    ``__hash__`` of the program may do anything (raise on a half-built object, count its calls),
    and hashes made in C may call it (a bound method hashes its function, a tuple its items) or
    remember the answer (a weak reference keeps the hash of its referent, and a dead one without
    it cannot be hashed)."""
    return _hash_runs_no_code(value, 3)


_ADDRESS_HASHED = (types.FunctionType, types.BuiltinFunctionType, types.MethodWrapperType,
                   types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType,
                   types.GetSetDescriptorType, types.MemberDescriptorType, types.ModuleType)
_VALUE_HASHED = (int, float, bool, complex, str, bytes, type(None), type(Ellipsis), range, slice)


def _hash_runs_no_code(value, depth: int) -> bool:
    kind = type(value)
    if kind in _ADDRESS_HASHED or kind in _VALUE_HASHED:
        return kind.__hash__ is not None
    if isinstance(value, type):                   # a class: its metaclass's hash
        return kind.__hash__ is type.__hash__
    if kind is types.MethodType:                  # the address of its self, the hash of its function
        return depth > 0 and _hash_runs_no_code(value.__func__, depth - 1)
    if kind in (tuple, frozenset):
        return depth > 0 and all(_hash_runs_no_code(item, depth - 1) for item in value)
    return kind.__hash__ is object.__hash__       # the default hash: the object's address


def wrap_constant_result(value) -> VariableTracker:
    """A value computed at trace time from constants (no source, no guard)."""
    if is_constant_value(value) or isinstance(value, (range, slice)):
        return ConstantVariable(value)
    if isinstance(value, torch.Size):
        return SizeVariable([ConstantVariable(d) for d in value])
    if isinstance(value, tuple):
        items = [wrap_constant_result(v) for v in value]
        return NamedTupleVariable(items, type(value)) if is_named_tuple_type(type(value)) else TupleVariable(items)
    if isinstance(value, list):
        return ListVariable([wrap_constant_result(v) for v in value])
    if type(value) is collections.deque:
        from .variables.collection_types import DequeVariable

        return DequeVariable([wrap_constant_result(v) for v in value], value.maxlen)
    if isinstance(value, dict):
        return DictVariable({k: wrap_constant_result(v) for k, v in value.items()}, type(value))
    if type(value) is frozenset:
        return ConstantVariable(value)               # immutable: stays a frozenset (fs | s is one)
    if isinstance(value, (set, frozenset)):
        from .variables.sets import SetVariable

        return SetVariable(value, owned=True)         # just made by CPython: its own table
    if is_type_info(value):
        from .variables.numpy_values import TypeInfoVariable

        return TypeInfoVariable(value)
    if isinstance(value, (torch.finfo, torch.iinfo)):
        from .variables.objects import UserObjectVariable

        return UserObjectVariable(value, None)
    raise Unsupported(f"a {type(value).__name__} computed at trace time")


def caller_set(value, source) -> VariableTracker:
    """A set of constants read from the frame (a library's table of accepted flag strings, say):
    read-only in the trace (``in``, ``len``, iteration, ``s | t``).  Changing it would need a
    replay on the caller's set: refused.  Returned, it is the caller's own set."""
    from .variables.sets import CallerSetVariable

    vt = CallerSetVariable(value, owned=True)        # read-only: the caller's very set, its order
    vt.source = source
    return vt


def _owner_models_it(value) -> bool:
    """A C method whose owner's tracker implements it (a container's, a constant's, a tensor's)."""
    return type(value.__self__) in CONTAINER_TYPES + CONSTANT_TYPES or _tensors_own_method(value)


def _bound_anew(value) -> bool:
    """A C method bound to an object or class, which no modelled handler answers.  A module's C
    function is not one, though its ``__self__`` need not be the module: pybind11 binds its own
    record of the function there (``torch._C._log_api_usage_once``); such a function names its
    module, where a method bound to an object has ``__module__`` None."""
    from .variables.builtins import BUILTIN_HANDLERS

    owner = value.__self__
    return (owner is not None and not isinstance(owner, types.ModuleType) and value.__module__ is None
            and value not in BUILTIN_HANDLERS)


def _tensors_own_method(value) -> bool:
    """``value`` is what reading its name from its tensor gives (a C method of torch.Tensor)."""
    owner = value.__self__
    return isinstance(owner, torch.Tensor) and getattr(owner, value.__name__, None) == value
