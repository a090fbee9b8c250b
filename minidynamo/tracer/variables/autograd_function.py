"""``SomeFunction.apply(...)`` of a ``torch.autograd.Function``: one graph node.

The node calls the class's real ``apply`` at run time, so the Function's own Python (its
``forward``, ``setup_context``, its ``vmap`` rule or ``generate_vmap_rule``) runs then, exactly
as in eager, and ``backward`` runs when autograd calls it.  The example value comes from
running ``apply`` on the meta examples.

What this assumes (sound for the graphs the tracer makes):
  - ``forward`` has no Python side effects on state the trace read (it runs at run time only,
    once per call, as in eager; the trace itself only runs it on meta tensors);
  - its inputs are tensors, constants and tuples/lists of them, and so are its outputs;
  - no TorchFunctionMode is active in the trace around the call: in eager the mode would see
    the torch calls ``forward`` makes, which the node does not route (refused).  Inside a mode's
    own handler the mode is inactive, so a handler may call ``apply`` (flex attention's
    getitem-to-index mode, which transformers' mask builder enters, calls ModIndex.apply).
"""

from __future__ import annotations

import weakref

import torch

from ...exc import Unsupported
from .base import VariableTracker, describe


def is_function_apply(value) -> bool:
    """``cls.apply`` bound to a ``torch.autograd.Function`` subclass."""
    owner = getattr(value, "__self__", None)
    func = getattr(value, "__func__", None)
    return isinstance(owner, type) and issubclass(owner, torch.autograd.Function) and \
        getattr(func, "__name__", None) == "apply"


_appliers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def apply_of(cls):
    """A plain function calling ``cls.apply``: the graph's target.  fx names a callable by its
    module, and a bound ``apply`` reports ``torch.autograd.function`` (where ``Function.apply``
    is defined), so its generated code would look for ``torch.autograd.function.apply`` and
    fail on every call.  This one is named after the class and kept in the code's globals."""
    found = _appliers.get(cls)
    if found is None:
        owner = weakref.ref(cls)                 # the cache must not keep the class alive

        def apply(*args):
            return owner().apply(*args)

        apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
        found = _appliers[cls] = apply
    return found


class AutogradFunctionApplyVariable(VariableTracker):
    def __init__(self, apply, source=None):
        super().__init__(source)
        self.apply = apply                     # the bound classmethod (its class is guarded)

    def python_type(self):
        return type(self.apply)

    def call_function(self, tx, args, kwargs):
        cls = self.apply.__self__
        if tx.output.function_modes:
            raise Unsupported(f"{cls.__name__}.apply inside a TorchFunctionMode block (its forward's torch calls "
                              "would go through the mode in eager)")
        if kwargs:
            raise Unsupported(f"{cls.__name__}.apply with keyword arguments")
        return tx.output.call_op("call_function", apply_of(cls), args, {})

    def __repr__(self):
        return f"AutogradFunctionApplyVariable({describe(self.apply.__self__)})"
