"""Calling an nn.Module straight to its forward when ``nn.Module.__call__`` would do nothing else.

``module(x)`` runs two Python frames before ``forward``: ``Module._wrapped_call_impl`` and
``Module._call_impl``. With no hooks (the module's or global ones), no JIT tracing and no
``module.compile()`` they end in ``self.forward(x)``. An optimized module's hit runs them twice
(the ``OptimizedModule`` and the module it wraps), which costs more than its guard and replay.

``ModuleCall(module)`` (C, ``_module_call.c``) answers exactly as ``module(*args, **kwargs)``:
it reads what those frames read, and when all of it says "just call forward" it calls forward
itself; otherwise it makes the usual call. ``direct_forward`` below is the same rule in Python,
for readers and for the tests that compare the two. Every read is a dict lookup or a lookup in
the class (no ``__getattr__``, no descriptor's code), so reading and then calling the usual way
runs exactly what the usual call alone runs.

``ModuleCall(None, call_without_global_hooks)`` is ``OptimizedModule.__call__``: the wrapper's
forward is the wrapped module's own call, which fires the global hooks (``register_module_forward_hook``
and friends) for that module, once, as eager does; the wrapper's usual call fires only its own.
"""

from __future__ import annotations

import collections
import types

import torch
import torch.nn.modules.module as module_py

from ._module_call import ModuleCall, reset_stats, stats

_Module = torch.nn.Module
_WRAPPED_CALL_IMPL = _Module.__dict__["__call__"]
_CALL_IMPL = _Module.__dict__["_call_impl"]
_GENERIC_GETATTRIBUTE = object.__dict__["__getattribute__"]
_GET_TRACING_STATE = torch._C._get_tracing_state
OWN_HOOKS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks")
GLOBAL_HOOKS = ("_global_backward_hooks", "_global_backward_pre_hooks", "_global_forward_hooks",
                "_global_forward_pre_hooks")
_MISSING = object()


def _class_attribute(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


def _is_data_descriptor(value) -> bool:
    return hasattr(type(value), "__set__") or hasattr(type(value), "__delete__")


def _plain_attribute(cls, instance_dict, name):
    """``module.name`` when the generic lookup finds it with no code of its own, else _MISSING."""
    descr = _class_attribute(cls, name)
    if descr is not _MISSING and _is_data_descriptor(descr):
        return _MISSING
    if name in instance_dict:
        return instance_dict[name]
    if descr is _MISSING or hasattr(type(descr), "__get__"):
        return _MISSING
    return descr


def _empty_hooks(hooks) -> bool:
    return type(hooks) in (dict, collections.OrderedDict) and len(hooks) == 0


def direct_forward(module, as_method: bool = False):
    """The forward ``module(...)`` would end in, or None when the usual call must run: a hook,
    JIT tracing, a compiled call, or a read that could run Python code. ``as_method``: called as
    ``type(module).__call__`` itself (OptimizedModule), so only nn.Module's own needs checking."""
    cls = type(module)
    if (_class_attribute(cls, "__getattribute__") is not _GENERIC_GETATTRIBUTE
            or _class_attribute(cls, "_call_impl") is not _CALL_IMPL):
        return None
    call = _class_attribute(_Module if as_method else cls, "__call__")
    if call is not _WRAPPED_CALL_IMPL:        # torch.fx patches nn.Module.__call__ while tracing
        return None
    instance_dict = getattr(module, "__dict__", None)
    if type(instance_dict) is not dict or "_call_impl" in instance_dict:
        return None
    if _plain_attribute(cls, instance_dict, "_compiled_call_impl") is not None:
        return None
    if torch._C.__dict__.get("_get_tracing_state") is not _GET_TRACING_STATE or _GET_TRACING_STATE() is not None:
        return None
    for own, name in zip(OWN_HOOKS, GLOBAL_HOOKS):
        hooks = _plain_attribute(cls, instance_dict, own)
        if hooks is _MISSING or not _empty_hooks(hooks):
            return None
        if not _empty_hooks(module_py.__dict__.get(name)):
            return None
    descr = _class_attribute(cls, "forward")
    if descr is not _MISSING and _is_data_descriptor(descr):
        return None
    if "forward" in instance_dict:
        return instance_dict["forward"]
    if type(descr) is not type(direct_forward):
        return None
    return descr.__get__(module, cls)


def call_without_global_hooks(module, *args, **kwargs):
    """``nn.Module.__call__(module, ...)`` for a wrapper whose forward calls the module it wraps:
    the wrapper's own hooks fire, the global ones are left to the wrapped module's call (else
    they would fire twice, once with the wrapper).  A patched ``nn.Module.__call__`` (torch.fx
    patches it while tracing) runs as it is."""
    if _Module.__dict__["__call__"] is not _WRAPPED_CALL_IMPL:
        return _Module.__call__(module, *args, **kwargs)
    if module._compiled_call_impl is not None:
        return module._compiled_call_impl(*args, **kwargs)
    call_impl = module._call_impl
    if getattr(call_impl, "__func__", None) is _CALL_IMPL:
        call_impl = types.MethodType(_call_impl_seeing_no_global_hooks(), module)
    return call_impl(*args, **kwargs)


def _call_impl_seeing_no_global_hooks():
    """``nn.Module._call_impl`` itself (its code, nn.Module's namespace as it is now) with the
    global hook dicts it reads bound to empty ones: its own-hook logic, unchanged."""
    namespace = dict(module_py.__dict__)
    namespace.update({name: {} for name in GLOBAL_HOOKS})
    return types.FunctionType(_CALL_IMPL.__code__, namespace, _CALL_IMPL.__name__, _CALL_IMPL.__defaults__,
                              _CALL_IMPL.__closure__)


__all__ = ["ModuleCall", "direct_forward", "call_without_global_hooks", "stats", "reset_stats", "OWN_HOOKS",
           "GLOBAL_HOOKS"]
