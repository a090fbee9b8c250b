"""A weak reference the program holds (``weakref.ref``): calling it reads its referent.

``nn.LSTM`` checks on every call that its weights are still the ones it flattened, by calling the
weak references it keeps (``ref() is not weight``).  The call is a read: the referent now, or
None once it died.  It is wrapped from its source ``ref.__call__()`` like any value read from
the frame, so the guards pin what it was (the object by identity, a tensor by its metadata, None)
and a later call whose referent changed or died is retraced.

Only where the frame cannot be what kills the referent: a traced frame lets go of nothing until
it returns (lifetimes.py), so ``obj = None; ref() is None`` would read the referent alive where
eager finds it dead.  A parameter, a module, a class, a function or a Python module is held by
its owner; a dead referent stays dead.  Any other referent breaks the graph at the call.
"""

from __future__ import annotations

import types
import weakref

import torch

import guards as G
from ...exc import Unsupported
from .base import VariableTracker

REFERENCE_TYPES = (weakref.ReferenceType,)    # exact type: a subclass may define __call__
HELD_BY_OWNERS = (torch.nn.Parameter, torch.nn.Module, type, types.FunctionType, types.ModuleType)


class WeakRefVariable(VariableTracker):
    def __init__(self, value, source):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def call_function(self, tx, args, kwargs):
        from ..builder import wrap

        if args or kwargs:
            raise Unsupported("a weak reference called with arguments")
        referent = self.value()
        if referent is not None and not isinstance(referent, HELD_BY_OWNERS):
            raise Unsupported(f"a weak reference to a {type(referent).__name__} (the frame may be what lets it die)")
        return wrap(tx, referent, G.CallSource(self.source, "__call__"))

    def __repr__(self):
        return f"WeakRefVariable({self.source.name()})"
