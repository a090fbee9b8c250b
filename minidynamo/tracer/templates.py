"""The output templates: how the values a trace leaves behind are rebuilt on every call.

A trace ends with values that outlive it: the frame's return value, what it stored into the
caller's objects, attributes and globals, and (at a graph break) the stack and locals handed to
the resume function.  ``Templates`` turns each tracker into a small recipe over the graph's
outputs and the objects re-read from the frame; ``OutputBuilder`` follows the recipes at call
time, so a value held in two places is one object, as in eager.
"""

from __future__ import annotations

import collections
import operator
import types
from typing import Optional

import torch

from .._set_table import copy_exact
from ..exc import MinidynamoError, Unsupported
from .side_effects import DELETED
from .variables.base import OpaqueCallableVariable, VariableTracker, instance_dict
from .variables import iterator_rebuild, iterators, lazy_numbers
from .variables.constant import ConstantMethodVariable, ConstantVariable
from .variables.lazy_numbers import LazyNumberVariable
from .variables.containers import (BaseListVariable, ListVariable, NamedTupleVariable, SizeVariable,
                                   SliceVariable, TupleVariable, make_named_tuple)
from .variables.dicts import DictVariable, DictViewVariable
from .variables.sets import SetVariable
from .variables.builtins import BuiltinVariable, GetterVariable
from .variables.functions import NestedFunctionVariable, PartialVariable, UserFunctionVariable, UserMethodVariable
from .variables.nn_module import NNModuleVariable
from .variables.objects import ClassVariable, PythonModuleVariable, has_own_attribute
from .variables.tensor import TensorVariable
from .variables.torch_fns import TorchFunctionVariable


class Templates:
    """Turns VariableTrackers into templates ``build_output`` can fill in at call time:

        ("tensor", i)        the i-th graph output          ("const", v)   a constant
        ("real", k)          the k-th object re-read from the frame (a caller's list/dict:
                             returned as itself, so identity matches eager)
        (kind, [children])   a container to rebuild (tuple, list, dict, namedtuple)
        ("set", snapshot)    a set made by the trace: an exact copy of its hash table
        ("call", fn, [args]) fn(*args) per call (a slice, a partial, an itemgetter, an
                             iterator at its position: iterator_rebuild.py)
        ("method", f, obj)   f bound to obj (a method of an object the frame made)
        ("getattr", obj, name)   obj.name read again (``"-".join`` of a constant, ``x.item``)
        ("fresh", k, t)      anything rebuilt: built from t once per call, so every place
                             that holds it (two locals, the return value, attributes stored,
                             other containers, a bound method) holds the same object, as in eager
        ("module", cls, args, kwargs)   a library module made in the frame, made anew
        ("frame_cell", i)    cell i of this call's function's closure (a closure the frame
                             made over its own free variable holds the very cell)
        ("tagged", t, [(name, v)])   a tensor the graph made, with the Python attributes the
                             trace stored on it (``t.name = v``)
    """

    def __init__(self, effects=None):
        self.effects = effects       # the trace's side effects: attributes stored on tensors it made
        self.nodes: list = []        # graph outputs, each node once
        self.output_index: dict = {}     # node -> its index in ``nodes``
        self.reads: list = []        # sources re-read at call time
        self.fresh: dict = {}        # id(VT) -> its "fresh" template
        self._keep: list = []        # those VTs, alive while ids are compared
        self.reads_frame_cells = False   # a ("frame_cell", i) template: the frame's own closure cell

    def read(self, source) -> int:
        if source not in self.reads:
            self.reads.append(source)
        return self.reads.index(source)

    def of(self, vt: VariableTracker):
        if isinstance(vt, LazyNumberVariable) and vt.unread:      # computed from this call's values
            return lazy_numbers.template(self, vt)
        if isinstance(vt, TensorVariable):
            attributes = self.effects.made_tensor_attributes(vt.example) if self.effects is not None else {}
            if attributes:
                return self.once(vt, lambda: ("tagged", self._output(vt), [(k, self.of(v)) for k, v in attributes.items()]))
            return self._output(vt)
        if isinstance(vt, SizeVariable):
            return ("const", torch.Size(vt.as_python_constant()))
        if isinstance(vt, ConstantVariable):
            return ("const", vt.value)
        if (isinstance(vt, (ListVariable, DictVariable)) or getattr(vt, "returns_real", False)) and vt.source is not None:
            return ("real", self.read(vt.source))
        if type(vt) in (TupleVariable, NamedTupleVariable) and vt.source is not None:
            return ("real", self.read(vt.source))          # a tuple read from the frame: that very tuple
        if type(vt) is TupleVariable and vt.__dict__.get("value") is not None:
            return ("const", vt.value)                     # a tuple constant of the code: that very tuple
        return self.once(vt, lambda: self._container(vt))

    def _output(self, vt: TensorVariable):
        # One output per node: a backend makes one object per output position, and eager holds
        # one object wherever the frame put this tensor (a local and an attribute stored).
        if vt.node not in self.output_index:
            self.output_index[vt.node] = len(self.nodes)
            self.nodes.append(vt.node)
        return ("tensor", self.output_index[vt.node])

    def once(self, vt: VariableTracker, make):
        """``make()``'s template for ``vt``, rebuilt once per call: every place that holds it (two
        locals, a container, a bound method's self) holds the same object, as in eager (``t is u``)."""
        key = id(vt)
        if key not in self.fresh:
            self._keep.append(vt)
            index = len(self._keep) - 1
            self.fresh[key] = None                         # a container holding itself: refused below
            try:
                template = make()
            except Unsupported:
                del self.fresh[key]
                raise
            if template[0] in ("const", "real", "fresh"):   # one object already
                del self.fresh[key]
                return template
            self.fresh[key] = ("fresh", index, template)
        if self.fresh[key] is None:
            raise Unsupported("a container that contains itself")
        return self.fresh[key]

    def _container(self, vt):
        if isinstance(vt, NestedFunctionVariable):          # a closure made in the trace
            from .variables.functions import function_template

            return function_template(self, vt)
        if getattr(vt, "rebuilt_by_call", False):            # a library module made in the frame
            return ("module", *vt.constructor)
        if getattr(vt, "is_new_object", False):              # a user object made in the trace
            items = None if vt.dict_part is None else [(k, self.of(v)) for k, v in vt.dict_part.items.items()]
            return ("object", vt.klass, items, [(k, self.of(v)) for k, v in vt.attrs.items()])
        if isinstance(vt, NamedTupleVariable):
            return ("namedtuple", vt.tuple_type, [self.of(i) for i in vt.items])
        if isinstance(vt, (UserMethodVariable, OpaqueCallableVariable, PartialVariable)) and vt.source is not None:
            return ("real", self.read(vt.source))            # a method, C callable or partial read from the frame
        if isinstance(vt, UserMethodVariable):               # obj.method of an object the frame made: bound anew
            return ("method", self.of(vt.fn), self.of(vt.self_vt))
        if isinstance(vt, ConstantMethodVariable):           # "-".join: read again from its constant
            return ("getattr", self.of(vt.owner), vt.name)
        if isinstance(vt, GetterVariable):                   # operator.itemgetter / attrgetter made here
            return ("call", getter_of, [("const", vt.kind), self.of(TupleVariable(vt.keys))])
        if isinstance(vt, PartialVariable):                  # one made here, anew
            return ("call", partial_of, [self.of(vt.fn), self.of(TupleVariable(vt.args)), self.of(vt.keywords)])
        if isinstance(vt, BaseListVariable):
            if getattr(vt, "maxlen", None) is not None:      # a bounded deque: deque(items, maxlen)
                return ("call", vt.python_type(), [(list, [self.of(i) for i in vt.items]), ("const", vt.maxlen)])
            return (vt.python_type(), [self.of(i) for i in vt.items])
        if isinstance(vt, DictVariable):
            if vt.cannot_rebuild():
                raise Unsupported(f"returning {vt.cannot_rebuild()} from the frame")
            return ("dict", vt.dict_type, [(k, self.of(v)) for k, v in vt.items.items()])
        if isinstance(vt, SetVariable):                      # its very table: eager's order (_set_table.c)
            return ("set", copy_exact(vt.values))
        if isinstance(vt, SliceVariable):                    # a new slice per call, as eager makes
            return ("call", slice, [self.of(part) for part in vt.parts])
        if isinstance(vt, iterators.DictWalkVariable):       # at a break: a loop's over the caller's dict
            it = vt.iterator
            return ("call", iterator_rebuild.dict_walk_at, [self.of(it.dict_vt), ("const", it.kind),
                                                            ("const", it.reverse), ("const", it.index)])
        if iterators.hands_over_live(vt):                    # at a break: the loop's real iterator
            if isinstance(vt, iterators.EnumerateVariable):
                return ("call", enumerate, [self.of(vt.iterator), ("const", vt.count)])
            if isinstance(vt, iterators.ZipVariable):
                return ("call", iterators.zip_of, [("const", vt.strict)] + [
                    self.of(it) if iterators.hands_over_live(it)
                    else ("call", iter, [self.of(TupleVariable(it.items[it.index:]))]) for it in vt.iterators])
            if isinstance(vt, iterators.ListReverseIteratorVariable):
                return ("call", iterator_rebuild.reverse_iterator_at, [self.of(vt.list_vt), ("const", vt.index)])
            if isinstance(vt, iterators.DictIteratorVariable):      # over the caller's dict, at its place
                if iterator_rebuild.recipe(vt) is None:
                    raise Unsupported("returning an iterator over a dict whose keys changed while iterated")
                return iterator_rebuild.template(self, vt)
            return ("call", iterator_rebuild.list_iterator_at,
                    [self.of(vt.list_vt), ("const", vt.index), ("const", vt.done)])
        if isinstance(vt, DictViewVariable):                 # d.keys(): a view of the real/rebuilt dict
            return ("view", vt.kind, self.of(vt.dict_vt))
        if isinstance(vt, (NNModuleVariable, PythonModuleVariable)) and vt.source is not None:
            # this call's own (the very object when guarded by identity), re-read before any
            # replay: held as a constant, it would live as long as the entry (a model the
            # program dropped, whose guard holds it weakly: guards.pin)
            return ("real", self.read(vt.source))
        if getattr(vt, "guarded_by_code", False) and vt.source is not None:
            return ("real", self.read(vt.source))           # a closure guarded by code: this call's own
        if isinstance(vt, (TorchFunctionVariable, BuiltinVariable, ClassVariable, UserFunctionVariable)):
            return ("const", vt.as_python_constant())        # immutable, or guarded by identity
        if isinstance(vt, PythonModuleVariable):             # a module: sys.modules' object (IMPORT_NAME)
            return ("const", vt.value)
        raise Unsupported(f"returning {vt} from the frame")

    def replays_of(self, effects) -> list:
        """(kind, index of the real object, key, template of the new value)."""
        replays = []
        for source, vt in effects.mutated.items():
            if isinstance(vt, DictVariable):
                if vt.cannot_rebuild():
                    raise Unsupported(f"storing {vt.cannot_rebuild()} into the caller's dict")
                new = [(k, self.of(v)) for k, v in vt.items.items()]
                replays.append(("dict", self.read(source), None, new))
            elif vt.python_type() is collections.deque:    # (no slice assignment): emptied, refilled
                replays.append(("deque", self.read(source), None, [self.of(v) for v in vt.items]))
            elif getattr(vt, "unread", False):     # appended to only: the caller's items stay
                replays.append(("extend", self.read(source), None, [self.of(v) for v in vt.appended]))
            else:
                replays.append(("list", self.read(source), None, [self.of(v) for v in vt.items]))
        for key, (source, vt, raw) in effects.attribute_stores.items():
            name = key[1]
            if vt is DELETED:
                if_present = key in effects.deleted_after_store
                replays.append(("delattr", self.read(source), (name, raw, if_present), None))
            else:
                replays.append(("attr", self.read(source), (name, raw, key in effects.reinserted), self.of(vt)))
        for name, vt in effects.global_stores.items():
            replays.append(("global", None, name, self.of(vt)))
        for index, vt in effects.cell_stores.items():
            replays.append(("cell", None, index, self.of(vt)))
        for tracker, vt in effects.foreign_cell_stores.values():     # fn.__closure__[i] of this call
            replays.append(("foreign_cell", self.read(tracker.source.base_source), None, self.of(vt)))
        return replays


def rebuild_refusal(vt: VariableTracker) -> Optional[str]:
    """Why the output templates could not rebuild ``vt`` after the graph (None: they can).  A
    store of ``vt`` into something that outlives the frame (an attribute, a global) asks this at
    the store, so a value they cannot rebuild is a graph break there, not a fallback at the end."""
    try:
        Templates().of(vt)
    except Unsupported as refusal:
        return refusal.reason
    return None


def getter_of(kind: str, keys: tuple):
    """``operator.itemgetter(*keys)`` or ``attrgetter(*keys)``, a ``("call", ...)`` template's function."""
    return (operator.itemgetter if kind == "item" else operator.attrgetter)(*keys)


def partial_of(fn, args: tuple, keywords: dict):
    """``functools.partial(fn, *args, **keywords)``, a ``("call", ...)`` template's function."""
    import functools

    return functools.partial(fn, *args, **keywords)


class OutputBuilder:
    """``build_output(graph_outputs)``: the frame's return value from the graph's outputs.

    When the frame changed the caller's Python objects, or returns one of them
    (``needs_frame``), call it as ``build_output(graph_outputs, func, *args)``: it re-reads
    those objects from the new frame and replays the changes on them (see side_effects.py)."""

    def __init__(self, template, replays=(), reader=None, reads_frame_cells=False):
        self.template = template
        self.replays = list(replays)
        self.reader = reader
        self.needs_frame = reader is not None or bool(self.replays) or reads_frame_cells

    def specialized(self):
        """An equivalent, faster callable for the common shapes of a return value.

        The hit path runs this on every call: a bare graph output is an ``itemgetter``, a
        tuple of all graph outputs in order is the outputs themselves."""
        if self.replays:
            return self
        template = self.template
        if template[0] == "fresh":       # the return value is held nowhere else: built once anyway
            template = template[2]
        kind = template[0]
        if kind == "tensor":
            return operator.itemgetter(template[1])
        if kind is tuple and [t for t in template[1]] == [("tensor", i) for i in range(len(template[1]))]:
            return tuple
        return self

    def __call__(self, outputs, func=None, *args):
        real, made = [], {FRAME_FUNCTION: func}
        if self.needs_frame:
            if func is None:
                raise MinidynamoError("this capture reads or changes the caller's objects: "
                                      "call build_output(outputs, func, *args)")
            real = self.reader(func, *args) if self.reader is not None else []
            self._replay(outputs, real, func, made)
        return _build(self.template, outputs, real, made)

    def _replay(self, outputs, real, func, made):
        for kind, index, key, template in self.replays:
            if kind == "list":
                real[index][:] = [_build(t, outputs, real, made) for t in template]
            elif kind == "deque":
                new = [_build(t, outputs, real, made) for t in template]
                real[index].clear()
                real[index].extend(new)
            elif kind == "extend":
                real[index].extend([_build(t, outputs, real, made) for t in template])
            elif kind == "dict":
                new = [(k, _build(t, outputs, real, made)) for k, t in template]
                real[index].clear()
                real[index].update(new)
            elif kind == "attr":
                name, raw, reinserted = key
                value = _build(template, outputs, real, made)
                if reinserted and name in instance_dict(real[index], ()):
                    (object.__delattr__ if raw else delattr)(real[index], name)
                (object.__setattr__ if raw else setattr)(real[index], name, value)
            elif kind == "delattr":
                name, raw, if_present = key
                if not if_present or has_own_attribute(real[index], name):
                    (object.__delattr__ if raw else delattr)(real[index], name)
            elif kind == "cell":
                func.__closure__[key].cell_contents = _build(template, outputs, real, made)
            elif kind == "foreign_cell":
                real[index].cell_contents = _build(template, outputs, real, made)
            else:
                func.__globals__[key] = _build(template, outputs, real, made)

    def __repr__(self):
        return f"OutputBuilder({self.template!r})"


FRAME_FUNCTION = "function"     # the key of this call's function in ``made``


def _build(template, outputs, real=(), made=None):
    """The value a template stands for; ``made`` holds this call's "fresh" containers."""
    kind = template[0]
    if kind == "tensor":
        return outputs[template[1]]
    if kind == "const":
        return template[1]
    if kind == "real":
        return real[template[1]]
    if kind == "arith":                                      # variables.lazy_numbers
        return template[1](_build(template[2], outputs, real, made), _build(template[3], outputs, real, made))
    if made is None:
        made = {}
    if kind == "fresh":
        if template[1] not in made:
            made[template[1]] = _build(template[2], outputs, real, made)
        return made[template[1]]
    if kind == "tagged":                                     # a made tensor with its stored attributes
        tensor = _build(template[1], outputs, real, made)
        for name, value in template[2]:
            setattr(tensor, name, _build(value, outputs, real, made))
        return tensor
    if kind == "frame_cell":                                 # a closure cell of the frame's own function
        return made[FRAME_FUNCTION].__closure__[template[1]]
    if kind == "cell":
        return types.CellType() if template[1] is None else types.CellType(_build(template[1], outputs, real, made))
    if kind == "function":                                   # variables.functions.function_template
        from .variables.functions import rebuild_function

        return rebuild_function(template[1], [_build(t, outputs, real, made) for t in template[2]],
                                [(k, _build(t, outputs, real, made)) for k, t in template[3]],
                                [_build(t, outputs, real, made) for t in template[4]])
    if kind == "object":
        from .variables.new_objects import rebuild

        items = None if template[2] is None else [(k, _build(t, outputs, real, made)) for k, t in template[2]]
        return rebuild(template[1], items, [(k, _build(t, outputs, real, made)) for k, t in template[3]])
    if kind == "module":                                     # variables.frame_modules
        from .variables.frame_modules import rebuild_module

        return rebuild_module(template[1], template[2], template[3])
    if kind == "namedtuple":
        return make_named_tuple(template[1], [_build(t, outputs, real, made) for t in template[2]])
    if kind == "set":
        return copy_exact(template[1])
    if kind == "call":
        return template[1](*(_build(t, outputs, real, made) for t in template[2]))
    if kind == "view":
        return getattr(_build(template[2], outputs, real, made), template[1])()
    if kind == "method":                                     # a bound method
        return types.MethodType(_build(template[1], outputs, real, made), _build(template[2], outputs, real, made))
    if kind == "getattr":                                    # "-".join, tensor.item before the call
        return getattr(_build(template[1], outputs, real, made), template[2])
    if kind == "dict":
        return template[1]((k, _build(t, outputs, real, made)) for k, t in template[2])
    return kind(_build(t, outputs, real, made) for t in template[1])
