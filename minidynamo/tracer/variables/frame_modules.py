"""Library modules made in the frame: ``nn.ReLU()(x)``, ``nn.Softmax(dim=-1)(x)``, ``nn.Dropout(p)``.

    cls(*constants)  ->  the real module, built now, once, at trace time, then traced like any
                         module (``forward`` inlined; it has no source: nothing to guard on it)
    returned         ->  rebuilt after the graph by calling ``cls`` with the same constants
                         (each call gets its own new module, as in eager)

Building it now stands for building it on every call only when the construction is provably
free of effects and the object is fully told by its arguments:

  - making it runs only library code: no class of the program in its MRO defines ``__init__``,
    ``__new__``, ``__setattr__``, ``__getattr(ibute)__`` or ``__del__`` (a user module that only
    defines ``forward`` qualifies: its attributes are then read through the class, guarded),
    its metaclass leaves ``__call__`` alone, and no global module hook would see it registered;
  - every argument is an immutable constant (numbers, strings, None, dtypes, tuples of them),
    guarded wherever it came from the frame;
  - afterwards it owns no parameter and no buffer (those are drawn from the random state or
    hold state a call changes: ``nn.Linear(4, 4)`` made in ``forward`` is refused), and
    torch's random state is unchanged (restored, and refused, if it moved).

The module is never changed in the trace (``train()``, attribute stores: refused on a module
without a source), so rebuilding it from its arguments gives what eager returns.  Stored on a
caller's object it is refused like any module assignment.

``torch.distributions`` objects are not covered: their arguments are tensors (``Normal(x, 1.)``),
so the object cannot be built at trace time from constants; they stay refused.
"""

from __future__ import annotations

from torch.nn.modules import module as module_impl

import guards as G
from xla_bridge.generator_lock import cpu_state_kept
from ...exc import Unsupported
from ..library import is_library_value
from .base import NO_CONSTANT, describe, maybe_constant
from .constant import is_constant_value
from .nn_module import GLOBAL_HOOK_DICTS, NNModuleVariable


def _immutable_constant(value) -> bool:
    if type(value) is tuple:
        return all(_immutable_constant(v) for v in value)
    return is_constant_value(value)


# Special methods that would run the program's code while an instance is made (or freed).
CONSTRUCTION_HOOKS = ("__init__", "__new__", "__setattr__", "__getattr__", "__getattribute__", "__del__")


def program_hook(klass) -> str | None:
    """The first construction hook a program class in ``klass``'s MRO defines (None: making an
    instance runs only library code, e.g. a user module that only defines ``forward``)."""
    for base in klass.__mro__:
        if base is not object and not is_library_value(base):
            for name in CONSTRUCTION_HOOKS:
                if name in base.__dict__:
                    return f"{base.__name__}.{name} is the program's code"
    return None


def _why_not(klass, class_source, values, kw) -> str | None:
    hook = program_hook(klass)
    if hook is not None:
        return hook
    if not is_library_value(klass) and class_source is None:
        return "the program's class has no source to guard its attributes by"
    if type(klass).__call__ is not type.__call__:
        return f"its metaclass {type(klass).__name__} defines __call__"
    if not all(v is not NO_CONSTANT and _immutable_constant(v) for v in [*values, *kw.values()]):
        return "an argument is not an immutable constant"
    for name in GLOBAL_HOOK_DICTS:
        if getattr(module_impl, name, None):
            return f"a global nn.Module hook is registered ({name})"
    return None


def create_module(tx, class_vt, args, kwargs) -> NNModuleVariable:
    """``cls(*args, **kwargs)`` for an ``nn.Module`` class, per the rule above."""
    klass = class_vt.value
    values = [maybe_constant(a, NO_CONSTANT) for a in args]
    kw = {k: maybe_constant(v, NO_CONSTANT) for k, v in kwargs.items()}
    why = _why_not(klass, class_vt.source, values, kw)
    if why is not None:
        raise Unsupported(f"creating an instance of {describe(klass)}: {why}")
    kept = cpu_state_kept()            # the trace leaves torch's random state as it was
    try:
        with kept:
            module = klass(*values, **kw)
    except Exception as e:
        raise Unsupported(f"{describe(klass)}(...) on constants raised {type(e).__name__}: {e}") from e
    if kept.drew or next(module.parameters(), None) is not None or next(module.buffers(), None) is not None:
        raise Unsupported(f"creating an instance of {describe(klass)}: it has parameters or buffers "
                          "(made anew, from the random state, on every call)")
    vt = FrameModuleVariable(module, klass, tuple(values), kw)
    if not is_library_value(klass):            # the program's class: its attributes are guarded
        vt.class_source = class_vt.source
        _guard_hooks_unchanged(tx, klass, class_vt.source)
    return vt


def _guard_hooks_unchanged(tx, klass, class_source):
    """What made the construction library-only (and the call nn.Module's) stays so: each hook
    the class resolves is guarded by identity, an absent one stays absent."""
    for name in (*CONSTRUCTION_HOOKS, "__call__"):
        if hasattr(klass, name):
            tx.output.add_guard(G.id_match(G.AttrSource(class_source, name), getattr(klass, name)))
        else:
            tx.output.add_guard(G.absent_match(class_source, klass, name))


class FrameModuleVariable(NNModuleVariable):
    """A parameter-free library module built at trace time from constant arguments."""

    rebuilt_by_call = True
    class_source = None            # a program class's source: its attributes are read through it

    def __init__(self, module, klass, args: tuple, kwargs: dict):
        super().__init__(module, None)
        self.constructor = (klass, args, kwargs)

    def _class_attribute(self, tx, name):
        """A program class's attributes are read (and guarded) through the class: the object is
        new, but its class may change between calls.  A library class's are fixed."""
        if self.class_source is None:
            return super()._class_attribute(tx, name)
        from ..builder import wrap
        from .base import AttributeMissing
        from .objects import lookup_class_attribute

        klass = type(self.value)
        found = lookup_class_attribute(tx, klass, name, self, None, 0, self.class_source)
        if found is not None:
            return found
        if hasattr(klass, name):
            return wrap(tx, getattr(klass, name), G.AttrSource(self.class_source, name))
        raise AttributeMissing(f"{klass.__name__} has no attribute {name!r} (AttributeError)", self, name)

    def guard_absent(self, tx, name):
        if self.class_source is not None:      # the instance dicts are ours; the class is guarded
            tx.output.add_guard(G.absent_match(self.class_source, type(self.value), name))

    def __repr__(self):
        return f"FrameModuleVariable({type(self.value).__name__})"


def rebuild_module(klass, args, kwargs):
    """After the graph: the module a returned ``cls(*args)`` stands for, made anew."""
    return klass(*args, **kwargs)
