"""The optional compiled helpers, and when generated code may use them.

Three ways to check a tensor against its ``TensorSpec``, with the same answers:

- ``"cpp"``: ``_tensor_match.cpp`` compares at::Tensor's own fields (~10 ns a tensor); built only
  when torch is importable at build time, since it compiles against torch's headers;
- ``"c"``: ``_guard_helpers.c`` calls the tensor's Python getters from C (~200 ns a tensor);
- ``"python"``: the generated Python checks (codegen writes them when neither is used).

``mode`` is the fastest one built; tests set it to run every path.  ``ArgumentReader`` and
``DictMemo`` come from the C helper in both compiled modes.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional, Sequence

import torch

from .checks import contiguity_pins_strides
from .guard import AUTOCAST_MATCH, GRAD_MODE_MATCH, TENSOR_MATCH, TORCH_STATE_MATCH, Guard, TensorSpec
from .source import torch_state_function
from .source import FrameInfo, LocalSource, Source

try:
    from . import _guard_helpers as c_helpers
except ImportError:  # pragma: no cover - depends on the build
    c_helpers = None
try:
    from . import _tensor_match as cpp_helpers
except ImportError:  # pragma: no cover - not built (no torch at build time) or built for another torch
    cpp_helpers = None

# The modules that check tensors in each compiled mode (only the built ones).
TENSOR_CHECKERS: dict[str, ModuleType] = {
    name: module for name, module in (("cpp", cpp_helpers), ("c", c_helpers)) if module is not None}
MODES = (*TENSOR_CHECKERS, "python")
mode = MODES[0]

ArgumentReader = c_helpers.ArgumentReader if c_helpers else None
DictMemo = c_helpers.DictMemo if c_helpers else None
# The fastest TensorMatch built (benchmarks time it alone); codegen calls ``tensor_match``.
TensorMatch = next((module.TensorMatch for module in TENSOR_CHECKERS.values()), None)


class PyClassLacks:
    """``ClassLacks(((cls, names, found), ...))()`` in Python: for each triple, no class in
    ``cls.__mro__`` defines any of ``names``, and each ``(name, obj)`` of ``found`` is what the
    MRO lookup of ``name`` gives (the C helper answers the same, and skips a class's walk while
    its type version tag stands)."""

    def __init__(self, pairs: tuple):
        self.pairs = tuple(pairs)

    @staticmethod
    def _lookup(mro, name):
        return next((vars(klass)[name] for klass in mro if name in vars(klass)), _NOT_FOUND)

    def __call__(self) -> bool:
        for cls, names, found in self.pairs:
            mro = cls.__mro__
            if any(name in vars(klass) for klass in mro for name in names):
                return False
            if any(self._lookup(mro, name) is not obj for name, obj in found):
                return False
        return True


_NOT_FOUND = object()


def class_lacks(pairs: Sequence[tuple]) -> Any:
    """The current mode's checker that, for each ``(cls, names, found)``, no class of ``cls``'s MRO
    defines any of ``names`` and each ``(name, obj)`` of ``found`` still resolves to ``obj``: one
    call for every class a guard relies on."""
    pairs = tuple((cls, tuple(sorted(names)), tuple(sorted(found.items()) if isinstance(found, dict) else found))
                  for cls, names, found in pairs)
    if compiled() and c_helpers is not None and hasattr(c_helpers, "ClassLacks"):
        return c_helpers.ClassLacks(pairs)
    return PyClassLacks(pairs)


def compiled() -> bool:
    """True when generated guards may call compiled helpers (False: pure Python)."""
    return mode in TENSOR_CHECKERS


def tensor_match(specs: Sequence[tuple]) -> Any:
    """The current mode's ``TensorMatch(specs)``: one call checks every tensor."""
    return TENSOR_CHECKERS[mode].TensorMatch(specs)


def tensor_spec(spec: TensorSpec) -> Optional[tuple]:
    """The compiled helper's spec for a TensorSpec, or None (pure-Python mode, or a spec the
    helper refuses: the C helper refuses types whose metadata getters are Python code)."""
    if not compiled():
        return None
    c_spec = (spec.type, spec.dtype, spec.device, spec.shape, spec.stride, spec.requires_grad,
              contiguity_pins_strides(spec))
    try:
        tensor_match([c_spec])
    except TypeError:
        return None
    return c_spec


def argument_guard(guards: Sequence[Guard], frame_info: FrameInfo) -> Any:
    """The whole guard function as one compiled object, when every guard is a tensor match on
    an argument or the grad mode (the common case of a function of tensors); else None."""
    if not compiled():
        return None
    checks, grad_mode, autocast, states = [], None, None, []
    for guard in guards:
        if guard.kind == GRAD_MODE_MATCH:
            grad_mode = guard.expected
        elif guard.kind == AUTOCAST_MATCH:
            autocast = guard.expected
        elif guard.kind == TORCH_STATE_MATCH and isinstance(guard.obj, (bool, torch.dtype)):
            states.append((torch_state_function(guard.source.function), guard.obj))   # fn() is value
        elif guard.kind == TENSOR_MATCH and isinstance(guard.source, LocalSource) \
                and tensor_spec(guard.expected) is not None:
            checks.append((frame_info.arg_names.index(guard.source.local_name), tensor_spec(guard.expected)))
        else:
            return None
    state_checks = () if autocast is None else ((torch._C._is_any_autocast_enabled, bool(autocast)),)
    state_checks = (*state_checks, *states)
    return TENSOR_CHECKERS[mode].ArgumentGuard(
        len(frame_info.arg_names), checks, None if grad_mode is None else torch.is_grad_enabled, bool(grad_mode),
        state_checks)


def argument_reader(sources: Sequence[Source], frame_info: FrameInfo) -> Any:
    """A C reader when every graph input is an argument; else None."""
    if not compiled() or ArgumentReader is None \
            or not all(isinstance(source, LocalSource) for source in sources):
        return None
    return ArgumentReader([frame_info.arg_names.index(source.local_name) for source in sources])
