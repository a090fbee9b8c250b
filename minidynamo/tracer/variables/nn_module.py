"""``NNModuleVariable``: an ``nn.Module`` instance.  Calling it inlines its forward pre-hooks,
``forward`` and its forward hooks; its parameters and buffers become graph inputs read from the
module on every call."""

from __future__ import annotations

import operator
import types
from collections import OrderedDict

from torch import nn
from torch.nn.modules import module as module_impl

import guards as G
from guards import module_facts
from ...exc import Unsupported
from ..library import is_library_value
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable, is_none
from .containers import BaseListVariable, TupleVariable
from .dicts import DictVariable

# The hook dicts that change a call, or see a registration (one home: guards/module_facts.py).
GLOBAL_HOOK_DICTS = module_facts.GLOBAL_HOOK_DICT_NAMES + module_facts.GLOBAL_REGISTRATION_HOOK_DICT_NAMES


# Methods answered by NNModuleVariable.call_method rather than by inlining nn.Module's code.
MODULE_METHODS_HANDLED_HERE = {"children", "modules", "parameters", "named_parameters", "named_children",
                               "buffers", "named_modules", "named_buffers", "register_buffer",
                               "register_parameter", "add_module", "register_forward_hook",
                               "register_forward_pre_hook", "train", "eval", "to", "cuda", "cpu", "apply",
                               "zero_grad", "items", "keys", "values", "__len__", "__getitem__", "__contains__"}


# Methods that walk the module tree (answered by NNModuleVariable._walk).
WALKS = ("children", "named_children", "parameters", "named_parameters", "buffers", "named_buffers", "modules",
         "named_modules")


# The forward hooks a call inlines: (hook dict, the dict of the ids registered with kwargs).
FORWARD_HOOKS = {"pre": ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"),
                 "post": ("_forward_hooks", "_forward_hooks_with_kwargs")}


def _args_and_kwargs(changed):
    """A with-kwargs pre-hook's ``(new_args, new_kwargs)``, as nn.Module insists on it: the two
    objects themselves (forward unpacks them; the later hooks receive them as they are)."""
    if not (isinstance(changed, TupleVariable) and changed.python_type() is tuple and len(changed.items) == 2):
        raise Unsupported("a forward pre-hook with kwargs returned something else than (args, kwargs) "
                          "(nn.Module raises RuntimeError)")
    new_args, new_kwargs = changed.items
    if not (isinstance(new_args, BaseListVariable) and new_args.python_type() in (tuple, list)
            and isinstance(new_kwargs, DictVariable)):
        raise Unsupported("a forward pre-hook with kwargs returned args or kwargs the tracer cannot unpack")
    return new_args, new_kwargs


def _new_args(changed):
    """A plain pre-hook's result as the new args: a tuple is the args, anything else is wrapped in
    one (nn.Module's ``isinstance(result, tuple)``; a tuple subclass is refused: its own
    iteration would unpack it)."""
    if isinstance(changed, TupleVariable) and changed.python_type() is tuple:
        return changed
    if issubclass(changed.python_type(), tuple):
        raise Unsupported("a forward pre-hook returned a tuple subclass")
    return TupleVariable([changed])


def _forward_kwargs(kwargs_vt) -> dict:
    """``**kwargs`` of forward: the kwargs dict as the hooks left it (they may write it in place)."""
    if not all(isinstance(k, str) for k in kwargs_vt.items):
        raise Unsupported("forward's kwargs have a key that is not a string (TypeError)")
    return dict(kwargs_vt.items)


def _child_source(parent_source, module, key):
    """How to re-read child ``key``: ``seq[2]`` for Sequential/ModuleList (by position),
    ``d['key']`` for ModuleDict, ``m.name`` otherwise."""
    if parent_source is None:
        return None
    if isinstance(module, (nn.Sequential, nn.ModuleList)):
        return G.ItemSource(parent_source, list(module._modules).index(key))
    if isinstance(module, nn.ModuleDict):
        return G.ItemSource(parent_source, key)
    return G.AttrSource(parent_source, key)


# ``len(m)`` answered here (the torch containers' own __len__); any other __len__ is inlined.
CONTAINER_LENS = {nn.Sequential.__len__, nn.ModuleList.__len__, nn.ModuleDict.__len__, nn.ParameterList.__len__,
                  nn.ParameterDict.__len__}


class NNModuleVariable(VariableTracker):
    def __init__(self, module: nn.Module, source=None, child_sources=None):
        super().__init__(source)
        self.value = module
        self.by_structure = False         # guarded by type and state, not identity (module_sharing.py)
        # a slice made during the trace (``seq[1:]``) has no source of its own: its children
        # are the parent's, re-read through the parent's sources (child key -> source)
        self.child_sources = child_sources

    def python_type(self):
        return type(self.value)

    def truth(self, tx):
        """``bool(module)``: its class's ``__bool__``, else its ``__len__`` (an empty Sequential,
        ModuleList or ModuleDict is false), else True, as CPython asks."""
        module = self.value
        if self._overridden("__bool__") or self._overridden("__len__"):
            from ..operators import user_truth

            return user_truth(tx, self)                     # the program's own: inlined, as any object's
        if isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
            if self.source is not None:                     # torch's __len__: len(self._modules)
                tx.output.add_guard(G.dict_keys_match(G.AttrSource(self.source, "_modules"), module._modules))
            return len(module._modules) > 0
        for name in ("__bool__", "__len__"):
            if self._on_class(name) is not None:
                raise Unsupported(f"bool() of a {type(module).__name__} (its {name} is torch's, not modelled)")
        return True

    def _wrap(self, tx, value, source):
        from ..builder import wrap

        return wrap(tx, value, source)

    def _attr_source(self, name):
        return G.AttrSource(self.source, name) if self.source is not None else None

    def children(self, tx) -> list:
        """(key, NNModuleVariable) of the direct children, guarding that the set is unchanged."""
        module = self.value
        if self.source is not None:
            tx.output.add_guard(G.dict_keys_match(G.AttrSource(self.source, "_modules"), module._modules))
        return [(k, self._wrap(tx, m, self._child_source(module, k))) for k, m in module._modules.items()
                if m is not None]

    def _child_source(self, module, key):
        if self.child_sources is not None:
            return self.child_sources[key]
        return _child_source(self.source, module, key)

    def unpack(self, tx):
        module = self.value
        if self._overridden("__iter__"):
            raise Unsupported(f"iteration over {type(module).__name__}, whose __iter__ is not torch's")
        if isinstance(module, nn.ModuleDict):
            return [ConstantVariable(k) for k, _ in self.children(tx)]
        if isinstance(module, (nn.Sequential, nn.ModuleList)):
            return [child for _, child in self.children(tx)]
        if type(module) is nn.ParameterList:
            self._guard_parameter_list(tx)
            return [self.subscript(tx, ConstantVariable(i)) for i in range(len(module))]
        raise Unsupported(f"iteration over {type(module).__name__}")

    def reversed_children(self, tx) -> list:
        """``reversed(module)`` of a ModuleList or a Sequential: neither defines ``__reversed__``,
        so CPython walks ``__getitem__`` from ``__len__() - 1`` down, which for these is the
        children in reverse order."""
        module = self.value
        if not isinstance(module, (nn.Sequential, nn.ModuleList)) or self._on_class("__reversed__") is not None or \
                self._overridden("__getitem__") or self._overridden("__len__"):
            raise Unsupported(f"reversed() of {type(module).__name__}")
        return [child for _, child in reversed(self.children(tx))]

    def _guard_parameter_list(self, tx):
        """nn.ParameterList keeps item i as ``_parameters[str(i)]`` (its length is the number of
        keys): guarding the keys guards its length and what each index names."""
        module = self.value
        if list(module._parameters) != [str(i) for i in range(len(module))]:
            raise Unsupported("a ParameterList whose items are not its registered parameters")
        if self.source is not None:
            tx.output.add_guard(G.dict_keys_match(G.AttrSource(self.source, "_parameters"), module._parameters))

    def subscript(self, tx, index):
        module = self.value
        if self._overridden("__getitem__"):     # a user class's own: inlined
            return self._class_attribute(tx, "__getitem__").call_function(tx, [index], {})
        key = index.as_python_constant()
        if isinstance(module, nn.ModuleDict):
            return self._wrap(tx, module[key], self._child_source(module, key))
        if isinstance(module, (nn.Sequential, nn.ModuleList)):
            if isinstance(key, slice):
                return self._slice(tx, key)
            n = len(module)
            if not -n <= key < n:
                raise Unsupported("module index out of range (IndexError)")
            self.children(tx)
            return self._wrap(tx, module[key], self._child_source(module, list(module._modules)[key % n]))
        if type(module) is nn.ParameterList and type(key) is int:
            self._guard_parameter_list(tx)
            if not -len(module) <= key < len(module):
                raise Unsupported("ParameterList index out of range (IndexError)")
            return self._wrap(tx, module[key], G.ItemSource(self.source, key) if self.source else None)
        raise Unsupported(f"subscript of {type(module).__name__}")

    def _slice(self, tx, key: slice):
        """``seq[a:b]``: nn.Sequential/ModuleList build a new container of the same children.
        Built here for real (it only holds references; no child changes), and its children
        keep the parent's sources, so their parameters stay graph inputs re-read each call."""
        module = self.value
        if type(module) not in (nn.Sequential, nn.ModuleList):
            raise Unsupported(f"slicing a {type(module).__name__} (a subclass: its __getitem__/__init__ would run)")
        for name in GLOBAL_HOOK_DICTS:         # a registration hook would see the new container
            if getattr(module_impl, name, None):
                raise Unsupported(f"slicing {type(module).__name__} while a global module hook is registered")
        self.children(tx)                      # guards that the parent's children are unchanged
        picked = list(module._modules)[key]
        sliced = module[key]
        sources = {new_key: self._child_source(module, old_key) for new_key, old_key in zip(sliced._modules, picked)}
        return NNModuleVariable(sliced, None, sources)

    def library_method(self, tx, name) -> bool:
        """Does ``module.name`` (``type(module).name`` for a special method) find torch's own
        function? Only then may the tracer answer it from its model of nn.Module (children,
        parameters, iteration, subscripts, keys...); a user class's override, or a function
        stored on the instance, is inlined as the user's code. Guarded: the instance must keep
        not shadowing it (the planner's "method of the class" check) while the graph is used."""
        module = self.value
        special = name.startswith("__") and name.endswith("__")
        if not special and name in module.__dict__:
            return False
        found = self._on_class(name)
        if not (isinstance(found, types.FunctionType) and is_library_value(found)):
            return False
        if not special and self.source is not None:
            tx.output.add_guard(G.id_match(G.AttrSource(G.AttrSource(self.source, name), "__func__"), found))
        return True

    def _overridden(self, name) -> bool:
        """Does a class of the module define ``name`` other than torch's own function?"""
        found = self._on_class(name)
        return found is not None and not is_library_value(found)

    def _on_class(self, name):
        """What the module's class finds for ``name`` through its MRO (None: nothing)."""
        return next((vars(k)[name] for k in type(self.value).__mro__ if name in vars(k)), None)

    def _user_method(self, tx, name):
        """``module.name`` when it is not torch's own method: the instance's or the class's."""
        if name in self.value.__dict__ and not (name.startswith("__") and name.endswith("__")):
            return self._wrap(tx, self.value.__dict__[name], self._attr_source(name))
        return self._class_attribute(tx, name)

    def guard_absent(self, tx, name):
        if self.source is not None:            # nn.Module keeps attributes in four dicts
            for where in ("__dict__", "_parameters", "_buffers", "_modules"):
                table = self.value.__dict__ if where == "__dict__" else getattr(self.value, where)
                tx.output.add_guard(G.dict_keys_match(G.AttrSource(self.source, where), table))
            tx.output.add_guard(G.absent_match(self.source, self.value, name))   # and the class's MRO

    def var_getattr(self, tx, name):
        module = self.value
        instance = module.__dict__
        self.refuse_written_tables(tx)
        if name in MODULE_METHODS_HANDLED_HERE and self.library_method(tx, name):
            from .base import BoundMethodVariable

            return BoundMethodVariable(self, name)
        stored = tx.output.side_effects.stored_attribute(self, name)
        if stored is not None:
            return stored
        if name == "training":
            return ConstantVariable(module.training)     # guarded by module_state_match
        if name == "__class__":
            from ..builder import class_of

            return class_of(tx, self)
        # Python's order: data descriptors of the class (properties), the instance __dict__,
        # other class attributes, and last nn.Module.__getattr__ (parameters, buffers, modules)
        if any(isinstance(k.__dict__.get(name), property) for k in type(module).__mro__):
            return self._class_attribute(tx, name)
        if name in instance:
            return self._wrap(tx, instance[name], self._attr_source(name))
        if hasattr(type(module), name):
            return self._class_attribute(tx, name)
        if type(module).__getattr__ is not nn.Module.__getattr__:
            return self._own_getattr(tx, name)
        for store in ("_parameters", "_buffers", "_modules"):
            table = instance.get(store, {})
            if name in table:
                return self._wrap(tx, table[name], self._attr_source(name))   # None too (guarded)
        return self._class_attribute(tx, name)

    def _own_getattr(self, tx, name):
        """``module.name`` that neither the instance nor its class has, for a class with its own
        ``__getattr__`` in Python (PEFT's wrappers forward to the model they wrap, after
        ``super().__getattr__``: the parameters, buffers and submodules): that method inlined, as
        CPython calls it, with nothing standing before it (guarded: a later attribute wins)."""
        from .objects import lookup_class_attribute

        hook = G.class_lookup(type(self.value), "__getattr__")
        if not isinstance(hook, types.FunctionType) or self.source is None:
            raise Unsupported(f"{type(self.value).__name__} has a custom __getattr__ (it would run for real)")
        self.guard_absent(tx, name)
        bound = lookup_class_attribute(tx, type(self.value), "__getattr__", self, self.source)
        return bound.call_function(tx, [ConstantVariable(name)], {})

    def _class_attribute(self, tx, name):
        from .objects import lookup_class_attribute

        found = lookup_class_attribute(tx, type(self.value), name, self, self.source)
        if found is not None:
            return found
        if hasattr(type(self.value), name):
            return self._wrap(tx, getattr(self.value, name), self._attr_source(name))
        if type(self.value).__getattr__ is not nn.Module.__getattr__:
            raise Unsupported(f"{type(self.value).__name__} has a custom __getattr__")
        raise AttributeMissing(f"{type(self.value).__name__} has no attribute {name!r} (AttributeError)", self, name)

    def call_function(self, tx, args, kwargs):
        module = self.value
        if type(module).__call__ is not nn.Module.__call__:
            if not isinstance(type(module).__call__, types.FunctionType):
                raise Unsupported(f"{type(module).__name__} overrides __call__ in C")
            # a Python override (transformers' GradientCheckpointingLayer): inlined, and its
            # super().__call__ comes back here through ModuleCallVariable
            return self._class_attribute(tx, "__call__").call_function(tx, args, kwargs)
        return self.call_forward(tx, args, kwargs)

    def call_forward(self, tx, args, kwargs):
        """What ``nn.Module.__call__`` does: the forward pre-hooks, ``forward``, the forward
        hooks, in nn.Module's order and with its rules for what a hook returns.  As
        ``_call_impl``: ``forward`` is read before any hook runs, each hook dict when its turn
        comes (the forward hooks after forward: a pre-hook or forward may change them), whether a
        hook takes kwargs when it is called, and every hook sees the same args and kwargs objects
        (a with-kwargs hook may write the kwargs dict in place)."""
        module = self.value
        for name in GLOBAL_HOOK_DICTS:
            if getattr(module_impl, name, None):
                raise Unsupported(f"a global nn.Module hook is registered ({name})")
        for name in ("_backward_hooks", "_backward_pre_hooks"):
            if getattr(module, name, None):
                raise Unsupported(f"{type(module).__name__} has {name} registered (backward hooks are not traced)")
        forward = type(module).forward
        if forward is nn.Module.forward or not isinstance(forward, types.FunctionType):
            raise Unsupported(f"{type(module).__name__} has no Python forward")
        forward = self.var_getattr(tx, "forward")
        args, kwargs = TupleVariable(list(args)), DictVariable(dict(kwargs))
        for key, hook in self._forward_hooks(tx, "pre"):
            if self._takes_kwargs(tx, "pre", key):
                changed = hook.call_function(tx, [self, args, kwargs], {})
                if not is_none(changed):
                    args, kwargs = _args_and_kwargs(changed)
            else:
                changed = hook.call_function(tx, [self, args], {})
                if not is_none(changed):
                    args = _new_args(changed)
        result = forward.call_function(tx, list(args.items), _forward_kwargs(kwargs))
        for key, hook in self._forward_hooks(tx, "post"):
            with_kwargs = self._takes_kwargs(tx, "post", key)
            changed = hook.call_function(tx, [self, args, *([kwargs] if with_kwargs else []), result], {})
            if not is_none(changed):
                result = changed
        return result

    def _forward_hooks(self, tx, which):
        """[(key, hook)] of one hook dict as it is now, in its order (a snapshot, as nn.Module
        iterates one), each hook guarded by identity and the dict by its keys, so none is added
        or removed unseen."""
        hooks = self._hook_dict(tx, FORWARD_HOOKS[which][0])
        if not hooks:
            return []
        if which == "post" and self._hook_dict(tx, "_forward_hooks_always_called", hooks=False):
            raise Unsupported(f"{type(self.value).__name__} has a forward hook with always_call=True")
        return list(hooks.items())

    def _takes_kwargs(self, tx, which, key) -> bool:
        """Is hook ``key`` called with the kwargs (read when it is called, as nn.Module does)?"""
        return key in self._hook_dict(tx, FORWARD_HOOKS[which][1], hooks=False)

    def _hook_dict(self, tx, name, hooks=True) -> dict:
        """The module's hook dict ``name`` as the trace sees it now (its keys always guarded;
        ``hooks``: its values are hooks to call, each wrapped, so guarded).  Once the trace read
        or wrote the dict, the tracer's own copy (a hook or forward may have changed it);
        otherwise the module's.  An empty ``_forward_hooks`` / ``_forward_pre_hooks`` the
        trace did not touch needs no guard: module_state_match guards how many it holds."""
        real = getattr(self.value, name, None)
        if type(real) not in (dict, OrderedDict):
            raise Unsupported(f"{type(self.value).__name__}.{name} is not a dict (hooks this tracer does not model)")
        if self.source is None:
            if real:
                raise Unsupported(f"{type(self.value).__name__} made in the trace has {name} registered")
            return {}
        source = G.AttrSource(self.source, name)
        side_effects = tx.output.side_effects
        if (side_effects.cached_container(source) is None and side_effects.stored_attribute(self, name) is None
                and not self._mutated_under_another_name(tx, real)):
            if not real and name in module_facts.MODULE_HOOK_DICTS:
                return {}
            tx.output.add_guard(G.dict_keys_match(source, real))
            return {key: self._wrap(tx, hook, G.ItemSource(source, key)) if hooks else None
                    for key, hook in real.items()}
        found = self.var_getattr(tx, name)
        if not isinstance(found, DictVariable):
            raise Unsupported(f"{type(self.value).__name__}.{name} is not a dict the tracer models")
        return found.items

    @staticmethod
    def _mutated_under_another_name(tx, real) -> bool:
        """Did the trace change this very dict through another name (``m.__dict__[...]``)?"""
        wrapped = tx.output.wrapped_values
        return any(wrapped.get(source) is real for source in tx.output.side_effects.mutated)

    def call_method(self, tx, name, args, kwargs):
        module = self.value
        if name in MODULE_METHODS_HANDLED_HERE and not self.library_method(tx, name):
            return self._user_method(tx, name).call_function(tx, args, kwargs)
        if name == "__len__" and getattr(type(module), "__len__", None) in CONTAINER_LENS:
            if type(module) is nn.ParameterList:
                self._guard_parameter_list(tx)
            elif type(module).__len__ is nn.ParameterDict.__len__:
                raise Unsupported("len() of a ParameterDict")
            else:
                self.children(tx)              # the length is the number of children
            return ConstantVariable(len(module))
        if name == "__getitem__":
            return self.subscript(tx, args[0])
        if name == "__contains__" and isinstance(module, nn.ModuleDict):
            self.children(tx)
            return ConstantVariable(args[0].as_python_constant() in module)
        if name in ("items", "keys", "values"):   # ModuleDict's: live views of its _modules, as in eager
            return self._class_attribute(tx, name).call_function(tx, args, kwargs)
        if name in WALKS and not args and not kwargs:
            return self._walk(tx, name)
        if name in ("modules", "named_modules"):
            raise Unsupported(f"nn.Module.{name}() with arguments")
        if name in ("register_buffer", "register_parameter", "add_module", "register_forward_hook",
                    "register_forward_pre_hook", "train", "eval", "to", "cuda", "cpu", "apply", "zero_grad"):
            raise Unsupported(f"nn.Module.{name} mutates the module")
        if name in MODULE_METHODS_HANDLED_HERE:
            return self._class_attribute(tx, name).call_function(tx, args, kwargs)
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def refuse_written_tables(self, tx) -> None:
        """Refuse a read through a module whose ``__dict__``, ``_parameters``, ``_buffers`` or
        ``_modules`` the trace wrote as a dict (``torch.func.functional_call`` swaps tensors in
        with ``module._parameters[name] = t``): reads answer from the module as it is, before
        those writes are replayed (the override was ignored)."""
        instance = self.value.__dict__
        for table in (instance, *(instance.get(name) for name in ("_parameters", "_buffers", "_modules"))):
            if tx.output.side_effects.mutated_dict(table, tx.output.wrapped_values):
                raise Unsupported(f"reading {type(self.value).__name__} after the trace wrote its attribute "
                                  "tables as dicts (module._parameters[name] = ...)")

    def _walk(self, tx, name):
        """``children()``, ``parameters()``, ``modules()``, ... and their ``named_`` forms.  Eager
        gives a generator: one pass, ``next()`` works, ``len()`` and indexing raise.  So here an
        iterator of that type over the items the walk finds now (all guarded), which a graph
        break hands over as ``module.<name>()`` advanced to where the trace left it."""
        from .containers import IteratorVariable, TupleVariable

        self.refuse_written_tables(tx)
        from .iterators import made_by

        if name in ("children", "named_children"):
            found = self._distinct_children(tx)
        elif name in ("modules", "named_modules"):
            found = self._submodules(tx)
        else:
            found = self._members(tx, "_parameters" if "parameters" in name else "_buffers")
        items = [TupleVariable([ConstantVariable(k), v]) if name.startswith("named") else v for k, v in found]
        return made_by(IteratorVariable(items, types.GeneratorType), operator.methodcaller(name), self)

    def _distinct_children(self, tx):
        """``named_children()``: each child once (one module under two names is yielded under
        the first; which ones are one object: guarded)."""
        seen: set = set()
        return [(key, child) for key, child in self.children(tx) if self._first_visit(tx, child, seen)]

    def _first_visit(self, tx, module_vt, seen: set) -> bool:
        """Whether a walk meets ``module_vt`` for the first time (nn.Module's walks skip a module
        met before); which modules are one object is guarded when identity is not."""
        if self.by_structure or module_vt.by_structure:
            tx.output.note_object_identity(module_vt.source, module_vt.value)
        if id(module_vt.value) in seen:
            return False
        seen.add(id(module_vt.value))
        return True

    def _submodules(self, tx):
        """``named_modules()`` as nn.Module computes it: the module itself, then each child's
        walk in ``_modules`` order (keys guarded), a module met again skipped (which ones are one
        object: guarded, as in ``_members``)."""
        if self.source is None:
            raise Unsupported("nn.Module.modules() of a module made during the trace")
        seen, found = set(), []

        def walk(module_vt, prefix):
            if not self._first_visit(tx, module_vt, seen):
                return
            found.append((prefix, module_vt))
            for key, child in module_vt.children(tx):
                walk(child, prefix + ("." if prefix else "") + key)

        walk(self, "")
        return found

    def _members(self, tx, table):
        """``named_parameters()`` / ``named_buffers()`` as nn.Module computes them (submodules in
        ``_modules`` order, each module once, each tensor once, None skipped), guarding all it
        depends on: the keys of every ``_modules`` / ``table`` dict walked, each submodule (by
        identity), the entries (tensors, or None), and which tensors are one object."""
        if self.source is None:
            raise Unsupported(f"nn.Module.{table.strip('_')}() of a module made during the trace")
        seen_modules, found, kept, repeated = set(), [], [], []
        first_source = {}

        def walk(module, source, prefix):
            if self.by_structure:                  # which of them are one object: guarded (the walk
                tx.output.note_object_identity(source, module)   # visits each once; module_sharing.py)
            if id(module) in seen_modules:
                return
            seen_modules.add(id(module))
            for store in (table, "_modules"):      # (plain instance attributes: no __getattr__)
                tx.output.add_guard(G.dict_keys_match(G.AttrSource(source, store), module.__dict__[store]))
            for key, tensor in module.__dict__[table].items():
                tensor_source = G.ItemSource(G.AttrSource(source, table), key)
                if tensor is None:
                    self._wrap(tx, None, tensor_source)       # guarded: still None
                    continue
                if id(tensor) in first_source:                # nn.Module yields it once
                    repeated.append((tensor_source, first_source[id(tensor)]))
                    continue
                first_source[id(tensor)] = tensor_source
                kept.append(tensor_source)
                found.append((prefix + key, self._wrap(tx, tensor, tensor_source)))
            for key, child in module.__dict__["_modules"].items():
                if child is None:
                    continue
                child_source = G.ItemSource(G.AttrSource(source, "_modules"), key)
                self._wrap(tx, child, child_source)           # identity-guarded
                walk(child, child_source, prefix + key + ".")

        walk(self.value, self.source, "")
        for source, first in repeated:
            tx.output.add_guard(G.alias_match(source, ((first, True),)))
        if len(kept) == 2:
            tx.output.add_guard(G.alias_match(kept[1], ((kept[0], False),)))
        elif len(kept) > 2:
            tx.output.add_guard(G.distinct_match(tuple(kept)))
        return found

    def __repr__(self):
        return f"NNModuleVariable({type(self.value).__name__})"


# nn.Module's own call path: reached from an override's super().__call__, it is the module call.
MODULE_CALL_FUNCTIONS = (nn.Module.__call__, nn.Module._call_impl, nn.Module._wrapped_call_impl)


def module_call_of(owner, name, mro_start, module_vt):
    """``super().name`` on a module, when it reaches ``nn.Module.__call__``: the module call
    (hooks checked, ``forward`` inlined), never nn.Module's dispatch code.  None otherwise."""
    for base in owner.__mro__[mro_start:]:
        if name in base.__dict__:
            return ModuleCallVariable(module_vt) if base.__dict__[name] in MODULE_CALL_FUNCTIONS else None
    return None


class ModuleCallVariable(VariableTracker):
    """``nn.Module.__call__`` bound to a module: calling it runs the module's forward."""

    def __init__(self, module_vt: NNModuleVariable):
        super().__init__()
        self.module_vt = module_vt

    def call_function(self, tx, args, kwargs):
        return self.module_vt.call_forward(tx, args, kwargs)

