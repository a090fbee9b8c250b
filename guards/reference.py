"""The plain reference layer: what each guard means, with no shortcut at all.

Every source is read once, the plain Python way (``Source.read``: ``getattr``, ``[]``), and each
guard kind is one predicate over that value.  Nothing here is fast: no dict shortcuts, no memo,
no native code.  It is the meaning the fast layer (``planner`` + ``codegen`` + ``memo`` +
``fast_path``) must keep: tests mutate watched objects at random and require that the fast guard
never passes where this one fails, and that the two agree wherever no shortcut's premise was
touched (``tests/guards/test_fast_vs_plain.py``).

    first_failure(guards, func, args, frame_info)   # None, or the first guard that fails
    render(guards)                                  # the guards as a plain list, one per line
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Optional, Sequence

import torch

from . import module_facts
from .checks import describe_guard
from .guard import (
    ABSENT_MATCH, ALIAS_MATCH, AUTOCAST_MATCH, AUTOGRAD_VIEW_MATCH, CLASS_MATCH, DICT_KEYS_MATCH, DISTINCT_MATCH, EQUALS_MATCH, COMPARE_MATCH, COMPARISONS, GLOBAL_HOOKS_EMPTY,
    GRAD_MODE_MATCH, ID_MATCH, LENGTH_MATCH, MODULE_STATE_MATCH, STORAGE_MATCH, TENSOR_MATCH, TORCH_STATE_MATCH, TYPE_MATCH, Guard,
    TensorSpec, UnguardableValue, class_lookup, constant_key, mro_of, pinned, PyAutogradViews, PyStorageGroups,
)
from .source import FrameInfo, FrameValues, Source


def render(guards: Sequence[Guard]) -> str:
    """The guards, one readable line each, in the order given."""
    return "\n".join(describe_guard(guard) for guard in guards)


class Reader:
    """Reads each source once per check, the plain way (a failed read is remembered too)."""

    def __init__(self, func: Any, args: Sequence[Any], frame_info: FrameInfo):
        self.frame = FrameValues(func, dict(zip(frame_info.arg_names, args)), func.__globals__,
                                 func.__builtins__)
        self.values: dict[Source, Any] = {}

    def __call__(self, source: Source) -> Any:
        if source not in self.values:
            try:
                self.values[source] = ("ok", source.read(self.frame))
            except Exception as error:   # noqa: BLE001 - a source that cannot be read fails its guards
                self.values[source] = ("error", error)
        status, value = self.values[source]
        if status == "error":
            raise _Unreadable(value)
        return value


class _Unreadable(Exception):
    pass


def _tensor(guard: Guard, x: Any, read) -> bool:
    spec: TensorSpec = guard.expected
    return (type(x) is spec.type and x.dtype == spec.dtype and x.device == spec.device
            and tuple(x.shape) == spec.shape and tuple(torch.Tensor.stride(x)) == spec.stride
            and x.requires_grad == spec.requires_grad)


def _equals(guard: Guard, x: Any, read) -> bool:
    try:
        return constant_key(x) == guard.expected
    except UnguardableValue:
        return False


def _absent(guard: Guard, x: Any, read) -> bool:
    attr, mode, descriptor, _, _ = guard.expected
    if any(class_lookup(type(x), name) is not found for name, found in guard.obj):
        return False
    if mode == "instance":
        return attr not in getattr(x, "__dict__", {})
    if mode == "class":
        return not hasattr(x, attr)
    found = next((k.__dict__[attr] for k in type(x).__mro__ if attr in k.__dict__), _MISSING)
    if mode == "slot":
        return found is descriptor and not hasattr(x, attr)
    if found is not _MISSING:
        return False
    return mode != "object" or attr not in x.__dict__


_MISSING = object()


def _class_facts(guard: Guard, cls: Any, read) -> bool:
    facts = guard.obj
    return ((facts.mro_tuple is None or mro_of(cls) is facts.mro_tuple)
            and all(class_lookup(cls, name) is found for name, found in facts.lookups)
            and (facts.abc_token is None or abc.get_cache_token() == facts.abc_token))


def _module_state(guard: Guard, module: Any, read) -> bool:
    training, hook_counts = guard.expected
    return (module.training is training and module_facts.hook_counts(module) == hook_counts
            and not any(module_facts.global_hook_dicts().values()) and not module_facts.call_overrides(module)
            and all(class_lookup(type(module), name) is found for name, found in guard.obj))


def _keys(guard: Guard, d: Any, read) -> bool:
    cls, keys, key_types = guard.expected
    return type(d) is cls and tuple(d) == keys and tuple(map(type, d)) == key_types


def _relations(guard: Guard, x: Any, read) -> bool:
    return all((x is read(other)) == same for other, same in guard.expected)


def _distinct(guard: Guard, x: Any, read) -> bool:
    values = [read(other) for other in guard.expected] + [x]
    return len({id(v) for v in values}) == len(values)


def _storages(guard: Guard, x: Any, read) -> bool:
    sources, groups = guard.expected
    return PyStorageGroups(groups)(*[read(other) for other in sources], x)


def _autograd_views(guard: Guard, x: Any, read) -> bool:
    sources, kinds = guard.expected
    return PyAutogradViews(kinds)(*[read(other) for other in sources], x)


PREDICATES: dict[str, Callable[[Guard, Any, Callable], bool]] = {
    ID_MATCH: lambda guard, x, read: x is pinned(guard.obj),
    TYPE_MATCH: lambda guard, x, read: type(x) is guard.expected,
    EQUALS_MATCH: _equals,
    COMPARE_MATCH: lambda guard, x, read: COMPARISONS[guard.expected[0]](x, guard.obj) is guard.expected[2],
    TENSOR_MATCH: _tensor,
    LENGTH_MATCH: lambda guard, x, read: type(x) is guard.expected[0] and len(x) == guard.expected[1],
    DICT_KEYS_MATCH: _keys,
    MODULE_STATE_MATCH: _module_state,
    GLOBAL_HOOKS_EMPTY: lambda guard, x, read: not any(x.values()),
    GRAD_MODE_MATCH: lambda guard, x, read: x is guard.expected,
    AUTOCAST_MATCH: lambda guard, x, read: x is guard.expected,
    TORCH_STATE_MATCH: lambda guard, x, read: x == guard.obj and type(x) is type(guard.obj),
    CLASS_MATCH: _class_facts,
    ABSENT_MATCH: _absent,
    ALIAS_MATCH: _relations,
    DISTINCT_MATCH: _distinct,
    STORAGE_MATCH: _storages,
    AUTOGRAD_VIEW_MATCH: _autograd_views,
}


def holds(guard: Guard, read: Reader) -> bool:
    """True when ``guard`` holds for the frame ``read`` reads from."""
    try:
        return bool(PREDICATES[guard.kind](guard, read(guard.source), read))
    except Exception:   # noqa: BLE001 - as the generated guard: an error is a failed guard
        return False


def first_failure(guards: Sequence[Guard], func: Any, args: Sequence[Any],
                  frame_info: FrameInfo) -> Optional[Guard]:
    """The first guard (in the order given) that does not hold, or None when all hold."""
    read = Reader(func, args, frame_info)
    return next((guard for guard in guards if not holds(guard, read)), None)

