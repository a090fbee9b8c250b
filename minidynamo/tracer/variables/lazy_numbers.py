"""A number of the caller's that the frame only counts with, read (and guarded) only if needed.

A program that counts its own calls is common: ``self.calls += 1`` in a forward,
``step = step + 1`` on a global in a training step.  Wrapping such a number the usual way
guards its value; the next call sees the next value, misses the guard and compiles again,
every call, until the cache is full and the frame runs eagerly.

But ``n + 1`` stored back does not need ``n`` at trace time.  So an ``int`` or ``float`` read
from the frame starts *unread*: only its type is guarded (which also checks it is still there).
``+``, ``-`` and ``*`` with numbers (constants or other unread numbers) give an unread number
too: an expression over the sources it came from, which cannot raise (int with int, float
with float; an unread int with a float is read instead: a big int overflows the conversion).
Stored back (an attribute, a global, a returned value, an item of a container the frame
returns, a value handed over at a graph break), the expression is computed when the graph's
Python side effects are replayed, from this call's values.  Any other use reads it: a
comparison, a graph op's argument, a shape, an index, a key, ``print``...  Reading guards the
value of every source it came from, as for any constant, so nothing the trace decided with it
goes unguarded.

    self.calls += 1          # unread: guards type(self.calls) is int; replay: calls = <calls> + 1
    x = x * self.calls       # read: guards self.calls == 7 (this call's value)

A number read straight from the frame and only *compared* with a constant (``if step > warmup``,
``if n_calls:``, a value a graph break handed over tested against a threshold) stays unread
too: the trace depends on the comparison's outcome, not on the value, so that is what is
guarded (``(self.step > 100) is False``, ``guards.compare_match``) and every value on the same
side of the threshold reuses the graph.
"""

from __future__ import annotations

import operator

import guards as G

from .base import VariableTracker
from .constant import ConstantVariable

COUNTING_OPS = {operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
                operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul}
NUMBER_TYPES = (int, float)         # exact types: bool, enums and int subclasses are read at once


class LazyNumberVariable(ConstantVariable):
    """``expr``: ("source", source) for a number read from the frame, or (op, left, right) over
    expressions and ("const", value); ``leaves``: the unread sources' trackers it depends on."""

    def __init__(self, value, source, expr, leaves, guard_value=None):
        VariableTracker.__init__(self, source)
        self._value = value
        self.expr = expr
        self.leaves = leaves if leaves is not None else [self]
        self._guard_value = guard_value    # a leaf's: installs ``source == value``
        self.unread = True

    @classmethod
    def read_from(cls, value, source, guard_value):
        return cls(value, source, ("source", source), None, guard_value)

    @property
    def value(self):
        if self.unread:
            self.unread = False
            for leaf in self.leaves:
                if leaf._guard_value is not None:
                    leaf._guard_value()
                    leaf._guard_value = None
        return self._value

    @value.setter
    def value(self, value):
        self._value = value

    def truth(self, tx) -> bool:
        """``if n:`` is ``n != 0`` for an int or a float (a NaN is true, and != 0)."""
        outcome = _compared(tx, self, "!=", 0)
        return bool(self.value) if outcome is None else outcome

    def python_type(self) -> type:
        return type(self._value)        # guarded for every source (int + float is a float)

    def __repr__(self) -> str:
        return f"LazyNumberVariable({_render(self.expr)} = {self._value!r}{', unread' if self.unread else ''})"


def _counted(vt):
    """(value, expression, leaves) of an operand of counting arithmetic, or None."""
    if isinstance(vt, LazyNumberVariable) and vt.unread:
        return vt._value, vt.expr, vt.leaves
    if type(vt) is ConstantVariable and type(vt.value) in NUMBER_TYPES:
        return vt.value, ("const", vt.value), []
    return None


def combine(fn, args):
    """``a + b`` (``-``, ``*``, in place or not) as an unread number when an operand is one and
    the other a number, or None (the operation reads its operands as usual)."""
    if fn not in COUNTING_OPS or len(args) != 2 or not any(
            isinstance(a, LazyNumberVariable) and a.unread for a in args):
        return None
    operands = [_counted(a) for a in args]
    if None in operands:
        return None
    (a, a_expr, a_leaves), (b, b_expr, b_leaves) = operands
    if type(a) is not type(b) and (a_expr if type(a) is int else b_expr)[0] != "const":
        # an int with a float: the int is converted to a float, and a big one raises
        # OverflowError.  Computed at replay (after the graph, with the other side effects in
        # their replay order) that error would come at another point than eager's: read it.
        return None
    plain = COUNTING_OPS[fn]
    try:
        value = plain(a, b)
    except ArithmeticError:               # a constant int too big for a float: as eager raises it
        return None
    return LazyNumberVariable(value, None, (plain, a_expr, b_expr), a_leaves + b_leaves)


COMPARISON_SYMBOLS = {fn: symbol for symbol, fn in G.COMPARISONS.items()}     # operator.gt -> ">"


def compare(tx, fn, args):
    """``n > 3`` (or ``3 < n``, any comparison) of an unread number read from the frame and a
    number constant: a constant bool, its outcome guarded instead of the value; or None (the
    comparison reads its operands as usual)."""
    if fn not in COMPARISON_SYMBOLS or len(args) != 2:
        return None
    left, right = args
    symbol = COMPARISON_SYMBOLS[fn]
    if type(right) is LazyNumberVariable and type(left) is ConstantVariable:
        left, right, symbol = right, left, G.MIRRORED[symbol]
    if type(left) is not LazyNumberVariable or type(right) is not ConstantVariable:
        return None
    outcome = _compared(tx, left, symbol, right.value)
    return None if outcome is None else ConstantVariable(outcome)


def _compared(tx, vt: LazyNumberVariable, symbol: str, constant):
    """The outcome of ``vt <symbol> constant`` with that outcome guarded, when ``vt`` is an unread
    number of the frame (or an int counted from one: ``n + 1``, ``5 - n``) and ``constant`` an int
    or float (an int for a counted one); else None (the caller reads ``vt``)."""
    if not vt.unread or type(constant) not in NUMBER_TYPES or len(vt.leaves) != 1:
        return None
    leaf = vt.leaves[0]
    if leaf._guard_value is None or leaf.expr[0] != "source":
        return None
    outcome = G.COMPARISONS[symbol](vt._value, constant)
    if vt.expr[0] != "source":
        # sign * leaf + offset in ints, exact: the same comparison, moved onto the leaf
        shifted = _int_shift(vt.expr)
        if shifted is None or type(constant) is not int or type(leaf._value) is not int:
            return None
        sign, offset = shifted
        constant -= offset
        if sign < 0:
            symbol, constant = G.MIRRORED[symbol], -constant
    tx.output.add_guard(G.compare_match(leaf.expr[1], symbol, constant, outcome))
    return outcome


def _int_shift(expr):
    """``(sign, offset)`` with ``expr == sign * leaf + offset`` for an expression of one int leaf
    and int constants under ``+`` and ``-``, or None."""
    kind = expr[0]
    if kind == "source":
        return 1, 0
    if kind == "const":
        return None
    if kind not in (operator.add, operator.sub):
        return None
    left, right = expr[1], expr[2]
    if right[0] == "const" and type(right[1]) is int:
        inner = _int_shift(left)
        if inner is None:
            return None
        return inner[0], inner[1] + right[1] if kind is operator.add else inner[1] - right[1]
    if left[0] == "const" and type(left[1]) is int:
        inner = _int_shift(right)
        if inner is None:
            return None
        if kind is operator.add:
            return inner[0], left[1] + inner[1]
        return -inner[0], left[1] - inner[1]
    return None


def template(templates, vt):
    """What ``templates.Templates`` makes of an unread number: the expression, its sources re-read."""
    return _template_of(templates, vt.expr)


def _template_of(templates, expr):
    # (a module-level function: a recursive closure would be a reference cycle holding the
    # templates, and through them the trace's values, until the next collection)
    if expr[0] == "source":
        return ("real", templates.read(expr[1]))
    if expr[0] == "const":
        return expr
    return ("arith", expr[0], _template_of(templates, expr[1]), _template_of(templates, expr[2]))


def _render(expr) -> str:
    if expr[0] == "source":
        return expr[1].name()
    if expr[0] == "const":
        return repr(expr[1])
    symbol = {operator.add: "+", operator.sub: "-", operator.mul: "*"}[expr[0]]
    return f"({_render(expr[1])} {symbol} {_render(expr[2])})"
