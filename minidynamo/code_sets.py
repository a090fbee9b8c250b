"""Weak sets of code objects, by identity.

A ``weakref.WeakSet`` compares its members with ``==``, and code objects compare by value
(name, first line, bytecode, constants; not the file): two equal codes, such as the resume
functions of two programs with the same text or the generated ``forward`` of two equal fx
graphs, would be one member.  Then ``reset()`` would leave one's cache entries alive, disabling
one would disable the other, and naming one as a root would trace the other wherever it lives.
"""

import weakref


class CodesByIdentity:
    """A weak set of code objects in which each object is its own member."""

    def __init__(self):
        self._codes: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()

    def add(self, code) -> None:
        self._codes[id(code)] = code

    def __contains__(self, code) -> bool:
        return self._codes.get(id(code)) is code

    def __iter__(self):
        return iter(list(self._codes.values()))

    def __len__(self) -> int:
        return len(self._codes)

    def clear(self) -> None:
        self._codes.clear()
