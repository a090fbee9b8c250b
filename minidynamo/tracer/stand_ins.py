"""Library code the trace inlines in another spelling, where the real one cannot be followed.

Each stand-in answers exactly what the real code answers on one thread and is used only while
the real code is what runs (its lookup is guarded by the caller).  Today one:

``functools.cached_property.__get__``: Python 3.11's takes an ``RLock`` around the first
computation (a C context manager: the trace cannot enter it, and the whole frame ran eagerly).
The lock only orders threads that compute the same value at once; Python 3.12 dropped it.
The stand-in is 3.12's: look the name up in the instance's ``__dict__``; on a miss, compute it
and store it there.
"""

from __future__ import annotations

import functools

_NOT_FOUND = object()
CACHED_PROPERTY_GET = functools.cached_property.__get__


def cached_property_get(prop, instance, owner=None):
    """``prop.__get__(instance, owner)`` of a ``functools.cached_property``, without the lock."""
    if instance is None:
        return prop
    if prop.attrname is None:
        raise TypeError("Cannot use cached_property instance without calling __set_name__ on it.")
    try:
        cache = instance.__dict__
    except AttributeError:
        raise TypeError(f"No '__dict__' attribute on {type(instance).__name__!r} instance to cache "
                        f"{prop.attrname!r} property.") from None
    value = cache.get(prop.attrname, _NOT_FOUND)
    if value is _NOT_FOUND:
        value = prop.func(instance)
        try:
            if type(cache) is dict:
                # what ``cache[name] = value`` does: the class's attribute at ``name`` is this
                # non-data descriptor, so the generic store writes the instance's dict (and the
                # trace keeps it in order with the instance's other attribute stores)
                object.__setattr__(instance, prop.attrname, value)
            else:
                cache[prop.attrname] = value
        except TypeError:
            raise TypeError(f"The '__dict__' attribute on {type(instance).__name__!r} instance does not "
                            f"support item assignment for caching {prop.attrname!r} property.") from None
    return value
