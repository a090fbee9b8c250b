"""Context managers the trace can enter: ``torch.no_grad()`` and ``torch.enable_grad()``.

Entering one flips grad mode twice over: for real while tracing (so meta example values get
the right ``requires_grad``), and in the graph (a ``torch._C._set_grad_enabled`` node), so the
compiled code switches mode at the same point the program did.  Leaving restores both.
"""

from __future__ import annotations

import torch

from .base import VariableTracker
from .constant import ConstantVariable

GRAD_MODE_CLASSES = {torch.no_grad: False, torch.enable_grad: True}


class GradModeVariable(VariableTracker):
    def __init__(self, enabled: bool):
        super().__init__()
        self.enabled = enabled
        self.previous = None

    def python_type(self):
        return torch.no_grad if not self.enabled else torch.enable_grad

    def enter(self, tx):
        self.previous = torch.is_grad_enabled()
        _switch(tx, self.enabled)
        return ConstantVariable(None)

    def exit_callable(self):
        return _ExitVariable(self)

    def call_function(self, tx, args, kwargs):
        """``@torch.no_grad()`` applied to a function during the trace."""
        if len(args) != 1 or kwargs:
            return super().call_function(tx, args, kwargs)
        return GradModeFunctionVariable(self.enabled, args[0])


class GradModeFunctionVariable(VariableTracker):
    """A function decorated with ``torch.no_grad()`` / ``torch.enable_grad()``: each call
    runs it inside a fresh grad-mode block."""

    def __init__(self, enabled: bool, fn: VariableTracker):
        super().__init__()
        self.enabled = enabled
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        manager = GradModeVariable(self.enabled)
        manager.enter(tx)
        result = self.fn.call_function(tx, args, kwargs)
        manager.exit_callable().call_function(tx, [], {})
        return result


class _ExitVariable(VariableTracker):
    """The ``__exit__`` BEFORE_WITH leaves on the stack; the with-block's end calls it."""

    def __init__(self, manager: GradModeVariable):
        super().__init__()
        self.manager = manager

    def call_function(self, tx, args, kwargs):
        _switch(tx, self.manager.previous)
        return ConstantVariable(None)


def _switch(tx, enabled: bool):
    torch._C._set_grad_enabled(enabled)
    tx.output.graph.call_function(torch._C._set_grad_enabled, (enabled,))
