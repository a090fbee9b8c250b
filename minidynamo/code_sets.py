"""Weak sets and maps of code objects, by identity.

A ``weakref.WeakSet`` compares its members with ``==``, and code objects compare by value
(name, first line, bytecode, constants; not the file): two equal codes, such as the resume
functions of two programs with the same text or the generated ``forward`` of two equal fx
graphs, would be one member.  Then ``reset()`` would leave one's cache entries alive, disabling
one would disable the other, and naming one as a root would trace the other wherever it lives.
"""

import weakref


_MISSING = object()


class ByCodeIdentity:
    """A weak dict whose keys are code objects, each its own key (an equal code is another key):
    an entry goes when its code does."""

    def __init__(self):
        self._items: dict = {}        # id(code) -> (weak reference to the code, value)

    def get(self, code, default=None):
        entry = self._items.get(id(code))
        return entry[1] if entry is not None and entry[0]() is code else default

    def __getitem__(self, code):
        found = self.get(code, _MISSING)
        if found is _MISSING:
            raise KeyError(code)
        return found

    def __setitem__(self, code, value) -> None:
        items, key = self._items, id(code)

        def gone(ref):
            if items.get(key, (None,))[0] is ref:
                del items[key]
        items[key] = (weakref.ref(code, gone), value)

    def setdefault(self, code, value):
        found = self.get(code, _MISSING)
        if found is _MISSING:
            self[code] = found = value
        return found

    def keys(self) -> list:
        return [code for code in (ref() for ref, _ in list(self._items.values())) if code is not None]

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        self._items.clear()


class CodesByIdentity:
    """A weak set of code objects in which each object is its own member."""

    def __init__(self):
        self._codes = ByCodeIdentity()

    def add(self, code) -> None:
        self._codes[code] = True

    def __contains__(self, code) -> bool:
        return self._codes.get(code, False)

    def __iter__(self):
        return iter(self._codes.keys())

    def __len__(self) -> int:
        return len(self._codes)

    def clear(self) -> None:
        self._codes.clear()
