"""Facts about ``torch.nn.Module`` that guards rely on: hooks and where attributes live.

``nn.Module`` keeps parameters, buffers and submodules in three dicts and finds them
through ``__getattr__``, which Python calls only after the normal lookup (class
attributes, then the instance ``__dict__``) failed.  That fallback costs an exception
inside CPython on every read, so guards read ``m.__dict__['_parameters']['weight']``
directly when that is provably the same object ``m.weight`` would give.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch.nn.modules import module as _module_impl

# Hook dicts on every module instance whose entries change what ``m(...)`` runs.
MODULE_HOOK_DICTS = (
    "_forward_hooks",
    "_forward_pre_hooks",
    "_backward_hooks",
    "_backward_pre_hooks",
)

# Module-wide hook dicts (``torch.nn.modules.module.register_module_forward_hook`` ...).
GLOBAL_HOOK_DICT_NAMES = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
)

# Module-wide registration hooks: they run when a module, parameter or buffer is registered on
# any module (``register_module_module_registration_hook`` ...), not when a module is called.
GLOBAL_REGISTRATION_HOOK_DICT_NAMES = (
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
    "_global_buffer_registration_hooks",
)

# nn.Module.__getattr__ looks in these dicts, in this order.
MODULE_ATTR_DICTS = ("_parameters", "_buffers", "_modules")


def global_hook_dicts() -> dict[str, dict]:
    """The global module hook dicts by name (the same dict objects torch mutates): those that change
    a call, and the registration hooks, which may replace what a module attribute store registers
    (a trace that assigned ``self.buffer = t`` computed on with ``t``)."""
    return {name: getattr(_module_impl, name)
            for name in GLOBAL_HOOK_DICT_NAMES + GLOBAL_REGISTRATION_HOOK_DICT_NAMES}


def hook_counts(module: torch.nn.Module) -> tuple:
    """How many hooks each of ``MODULE_HOOK_DICTS`` holds on ``module`` (a dict that is not one
    counts as -1: the guard then never passes)."""
    return tuple(len(hooks) if isinstance(hooks := getattr(module, name, None), dict) else -1
                 for name in MODULE_HOOK_DICTS)


def module_hooks(module: torch.nn.Module) -> list[str]:
    """Names of the hook dicts that are not empty on ``module`` or globally."""
    found = [name for name in MODULE_HOOK_DICTS if getattr(module, name, None)]
    found += [name for name, hooks in global_hook_dicts().items() if hooks]
    return found


# What makes ``module(...)`` run something else than its hooks and forward
# (``nn.Module._wrapped_call_impl``): ``module.compile()`` sets ``_compiled_call_impl``, and a
# ``_call_impl`` other than nn.Module's (on the instance or a class) replaces nn.Module's.
CALL_OVERRIDES = ("_compiled_call_impl", "_call_impl")
# What ``module(...)`` looks up on the module's class: ``__call__``, and the ``_call_impl``
# nn.Module's ``__call__`` calls (a trace relies on both staying what they were).
CALL_LOOKUPS = ("__call__", "_call_impl")


def call_overrides(module: torch.nn.Module) -> list[str]:
    """Which of ``CALL_OVERRIDES`` ``module`` has (a ``_compiled_call_impl`` that is not None)."""
    found = []
    if getattr(module, "_compiled_call_impl", None) is not None:
        found.append("_compiled_call_impl")
    if "_call_impl" in getattr(module, "__dict__", {}) \
            or getattr(type(module), "_call_impl", None) is not torch.nn.Module._call_impl:
        found.append("_call_impl")
    return found


def uses_module_getattr(cls: type) -> bool:
    """True when ``cls`` resolves missing attributes exactly like ``nn.Module``."""
    return (
        isinstance(cls, type)
        and issubclass(cls, torch.nn.Module)
        and cls.__getattr__ is torch.nn.Module.__getattr__
        and cls.__getattribute__ is object.__getattribute__
    )


def defined_on_class(cls: type, attr: str) -> bool:
    """True when some class in ``cls``'s MRO defines ``attr`` (it would win the lookup)."""
    return any(attr in vars(klass) for klass in cls.__mro__)


def attr_dict_of(module: Any, attr: str) -> Optional[str]:
    """Which dict serves ``module.attr``: ``__dict__`` (the instance dict) or one of
    ``_parameters`` / ``_buffers`` / ``_modules``; None when a class attribute is involved
    or the module's class changes how attributes are found (then read it plainly).
    """
    cls = type(module)
    if not uses_module_getattr(cls) or defined_on_class(cls, attr):
        return None
    instance_dict = module.__dict__
    if attr in instance_dict:
        return "__dict__"
    for dict_name in MODULE_ATTR_DICTS:
        holder = instance_dict.get(dict_name)
        if isinstance(holder, dict) and attr in holder:
            return dict_name
    return None


def submodule_key(module: Any, index: Any, guarded_keys: Optional[tuple]) -> Optional[str]:
    """The ``_modules`` key that ``module[index]`` returns, when that is certain.

    ``Sequential[i]`` is the i-th value of ``_modules`` (certain only while the keys are
    guarded), ``ModuleList[i]`` is ``_modules[str(i)]`` and ``ModuleDict[k]`` is
    ``_modules[k]``, unless the class overrides ``__getitem__``.
    """
    cls = type(module)
    if type(index) is int and guarded_keys is not None:
        if cls.__getitem__ is torch.nn.Sequential.__getitem__ and -len(guarded_keys) <= index < len(guarded_keys):
            return guarded_keys[index % len(guarded_keys)]
        if cls.__getitem__ is torch.nn.ModuleList.__getitem__ and 0 <= index < len(guarded_keys) \
                and guarded_keys[index] == str(index):
            return str(index)
    if type(index) is str and cls.__getitem__ is torch.nn.ModuleDict.__getitem__:
        return index
    return None


def where_attr_lives(module: Any, attr: str) -> str:
    """Where ``module.attr`` is found now, in words (for failure reasons)."""
    cls = type(module)
    instance_dict = getattr(module, "__dict__", {})
    on_class = next((vars(k)[attr] for k in cls.__mro__ if attr in vars(k)), None)
    data_descriptor = on_class is not None and hasattr(type(on_class), "__set__")
    if attr in instance_dict and not data_descriptor:   # Python's order: the instance shadows
        return "the instance __dict__"                  # all but a data descriptor
    if defined_on_class(cls, attr):
        return f"class attribute of {cls.__qualname__}"
    for dict_name in MODULE_ATTR_DICTS:
        if attr in instance_dict.get(dict_name, ()):
            return dict_name
    return "nowhere"
