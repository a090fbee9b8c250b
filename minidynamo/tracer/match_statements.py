"""``match`` statements: the opcodes CPython 3.11 compiles patterns to.

A ``match`` is a chain of tests on the subject, each an ordinary question the tracer can already
answer (``isinstance``, ``len``, ``in``, attribute reads, ``==``), so each opcode below asks it
through the usual machinery and its guards:

    match p:                        LOAD_FAST p
        case Point(x=0, y=y):       LOAD_GLOBAL Point; LOAD_CONST ('x', 'y'); MATCH_CLASS 0
                                    -> (p.x, p.y) if isinstance(p, Point), else None
        case [a, *rest]:            MATCH_SEQUENCE; GET_LEN; COMPARE_OP >= ...; UNPACK_EX
        case {"k": v, **kw}:        MATCH_MAPPING; MATCH_KEYS -> (p["k"],) or None;
                                    COPY_DICT_WITHOUT_KEYS -> kw

``MATCH_SEQUENCE`` and ``MATCH_MAPPING`` read the subject's class flags (set for ``list``,
``tuple``, ``range``, ``dict``..., never for ``str``): facts about a class, which a later
``Sequence.register(C)`` can add to a class that has neither (``class_answers.collection_flag``
guards that no ABC registered a class since).  Mapping patterns are traced for dicts only
(CPython calls the subject's ``get``).
"""

from __future__ import annotations

import collections

from ..exc import Unsupported
from .class_answers import builtin_class, collection_flag
from .variables.base import read_or_absent
from .variables.builtins import BuiltinVariable
from .variables.constant import ConstantVariable
from .variables.containers import TupleVariable

# Classes whose instances a single positional sub-pattern matches as a whole (``case int(n)``).
MATCH_SELF = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)
# Subjects of mapping patterns: their ``get`` is dict's, so ``in`` then ``[]`` ask the same.
DICT_TYPES = (dict, collections.OrderedDict, collections.defaultdict)

_SEQUENCE, _MAPPING = 1 << 5, 1 << 6       # Py_TPFLAGS_SEQUENCE, Py_TPFLAGS_MAPPING


class MatchOpcodes:
    """The pattern-matching opcodes, for ``InstructionTranslatorBase``."""

    def GET_LEN(self, inst):
        self.push(BuiltinVariable(len).call_function(self, [self.stack[-1]], {}))

    def MATCH_SEQUENCE(self, inst):
        self.push(ConstantVariable(collection_flag(self, self.stack[-1].python_type(), _SEQUENCE)))

    def MATCH_MAPPING(self, inst):
        self.push(ConstantVariable(collection_flag(self, self.stack[-1].python_type(), _MAPPING)))

    def MATCH_KEYS(self, inst):
        """(subject, keys) -> the values at those keys, or None when one is missing."""
        keys, subject = self.stack[-1], self.stack[-2]
        if subject.python_type() not in DICT_TYPES:
            raise Unsupported(f"a mapping pattern on a {subject.python_type().__name__} (its get() is not dict's)")
        values = []
        for key in keys.unpack(self):
            if not self._contains(subject, key):
                self.push(ConstantVariable(None))
                return
            values.append(self.subscript(subject, key))
        self.push(TupleVariable(values))

    def COPY_DICT_WITHOUT_KEYS(self, inst):
        """``**rest`` of a mapping pattern: a new dict of the subject's other items."""
        keys, subject = self.pop(), self.stack[-1]
        rest = BuiltinVariable(dict).call_function(self, [subject], {})
        for key in keys.unpack(self):
            rest.call_method(self, "pop", [key], {})
        self.push(rest)

    def MATCH_CLASS(self, inst):
        """(subject, class, keyword names) -> the attributes the sub-patterns match, or None."""
        names, cls_vt, subject = self.pop(), self.pop(), self.pop()
        cls = cls_vt.as_python_constant()
        if not isinstance(cls, type):
            raise Unsupported(f"a class pattern over {cls!r}, not a class (TypeError)")
        matched = BuiltinVariable(isinstance).call_function(self, [subject, cls_vt], {})
        if not matched.as_python_constant():
            self.push(ConstantVariable(None))
            return
        match_args = _match_args(self, cls_vt, cls) if inst.arg else None
        attributes = [subject] if inst.arg == 1 and match_args is None and issubclass(cls, MATCH_SELF) else None
        wanted = list(names.as_python_constant())
        if attributes is None:
            wanted = _positional_names(match_args, cls, inst.arg) + wanted
            attributes = []
        if len(set(wanted)) != len(wanted):
            raise Unsupported(f"a class pattern over {cls.__name__} names an attribute twice (TypeError)")
        for name in wanted:
            found = read_or_absent(self, subject, name)
            if found is None:                  # (an AttributeError: no match)
                self.push(ConstantVariable(None))
                return
            attributes.append(found)
        self.push(TupleVariable(attributes))

    def _contains(self, subject, key) -> bool:
        from . import operators

        return operators.contains(self, subject, key).truth(self)


def _match_args(tx, cls_vt, cls: type):
    """``cls.__match_args__``, or None without one (a built-in class's cannot change; a program's
    class is read through its guarded lookups)."""
    if builtin_class(cls):
        return getattr(cls, "__match_args__", None)
    found = read_or_absent(tx, cls_vt, "__match_args__")
    return None if found is None else found.as_python_constant()


def _positional_names(match_args, cls: type, count: int) -> list:
    """The attributes ``count`` positional sub-patterns match: the first of ``__match_args__``."""
    if count == 0:
        return []
    if match_args is None:
        raise Unsupported(f"{cls.__name__}() accepts 0 positional sub-patterns ({count} given) (TypeError)")
    if type(match_args) is not tuple or len(match_args) < count \
            or not all(type(name) is str for name in match_args):
        raise Unsupported(f"{cls.__name__}.__match_args__ does not name {count} attributes (TypeError)")
    return list(match_args[:count])
