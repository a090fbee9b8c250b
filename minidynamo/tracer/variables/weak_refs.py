"""A weak reference the program holds (``weakref.ref``): calling it reads its referent.

``nn.LSTM`` checks on every call that its weights are still the ones it flattened, by calling the
weak references it keeps (``ref() is not weight``); a program may keep its own.  The call is a
read: the referent now, or None once it died.  It is wrapped from its source ``ref.__call__()``
like any value read from the frame, so the guards pin what it was (the object by identity, a
tensor by its metadata, None) and a later call whose referent changed or died is retraced.
"""

from __future__ import annotations

import weakref

import guards as G
from ...exc import Unsupported
from .base import VariableTracker

REFERENCE_TYPES = (weakref.ReferenceType,)    # exact type: a subclass may define __call__


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
        return wrap(tx, self.value(), G.CallSource(self.source, "__call__"))

    def __repr__(self):
        return f"WeakRefVariable({self.source.name()})"
