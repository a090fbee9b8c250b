"""Generator expressions consumed by a builtin: ``any(d > 1 for d in x.shape)``,
``tuple(f(t) for t in ts)``.

Calling a ``<genexpr>`` function does not run it: it makes a ``GeneratorExpressionVariable``
that holds the paused generator frame (a ``GeneratorTranslator``).  A builtin that consumes
iterables pulls items one by one (in builtins.py: ``_consumed_items`` for ``tuple``, ``list``,
``min``, ``max``, ``sum``, ...; ``_iterator`` for ``any``/``all``), so the generator's body runs
symbolically in exactly the order CPython would run it, and ``any``/``all`` stop where CPython
stops.  Unpacking (``f(*gen)``, ``[*gen]``, ``a, b = gen``) consumes it whole before anything
else runs, as CPython does (torch's parametrizations call ``self[0](*originals)``).

Anything else the program could do with the generator object (``for`` over it, ``next``,
returning or storing it) keeps it alive past the builtin call: refused, like user generator
functions (the corpus requires those to fall back).
"""

from __future__ import annotations

import types

from ...exc import Unsupported
from .base import VariableTracker


class GeneratorExpressionVariable(VariableTracker):
    """A generator expression's paused frame; items come out of ``next_item``."""

    def __init__(self, frame):
        super().__init__()
        self.frame = frame          # a translator.GeneratorTranslator
        self.exhausted = False

    def python_type(self):
        return types.GeneratorType

    def next_item(self, tx) -> VariableTracker | None:
        """Run the generator to its next ``yield``: the item, or None once it has returned."""
        if self.exhausted:
            return None
        item = self.frame.resume()
        if item is None:
            self.exhausted = True
        return item

    def consume(self, tx) -> list:
        """All remaining items, in order (``tuple(gen)``)."""
        items = []
        while (item := self.next_item(tx)) is not None:
            items.append(item)
        return items

    def unpack(self, tx):
        """``f(*gen)``, ``[*gen]``, ``a, b = gen``: CPython consumes it whole first, like ``tuple``."""
        return self.consume(tx)

    def refuse_iteration(self):
        raise Unsupported("a generator expression iterated by the program itself (only builtins and unpacking "
                          "that consume it whole, like tuple(), any() or f(*gen), are supported)")

    def __repr__(self):
        return f"GeneratorExpressionVariable({self.frame.code.co_qualname})"
