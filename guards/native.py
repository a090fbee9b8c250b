"""The compiled helpers, and when generated code may use them.

Two ways to check a tensor against its ``TensorSpec``, with the same answers:

- ``"cpp"``: ``_tensor_match.cpp`` compares at::Tensor's own fields (~10 ns a tensor); built
  whenever torch is importable at build time, since it compiles against torch's headers;
- ``"python"``: the generated Python checks (codegen writes them when the helper is not used).

``mode`` is the fastest one built; tests set it to run both.  The torch-free helpers of
``_guard_helpers.c`` (``DictMemo``, ``ClassLacks``, ``ArgumentReader``) are used in the compiled
mode, and ``_tensor_match.FastGuard`` runs a guard's common path (see ``fast_path``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional, Sequence

from .checks import contiguity_pins_strides
from .guard import PyAutogradViews, PyStorageGroups, TensorSpec, autograd_view, mro_of

_dict_of = type.__dict__["__dict__"].__get__
from .source import FrameInfo, LocalSource, Source

try:
    from . import _guard_helpers as c_helpers
except ImportError:  # pragma: no cover - depends on the build
    c_helpers = None
try:
    from . import _tensor_match as cpp_helpers
except ImportError:  # pragma: no cover - not built (no torch at build time) or built for another torch
    cpp_helpers = None

# The module that checks tensors in each compiled mode (only the built one).
TENSOR_CHECKERS: dict[str, ModuleType] = {"cpp": cpp_helpers} if cpp_helpers is not None and c_helpers is not None else {}
MODES = (*TENSOR_CHECKERS, "python")
mode = MODES[0]

ArgumentReader = c_helpers.ArgumentReader if c_helpers else None
DictMemo = c_helpers.DictMemo if c_helpers else None
# The compiled TensorMatch (benchmarks time it alone); codegen calls ``tensor_match``.
TensorMatch = cpp_helpers.TensorMatch if cpp_helpers is not None else None


class PyClassLacks:
    """``ClassLacks(((cls, names, found), ...))()`` in Python: for each triple, no class in
    ``cls.__mro__`` defines any of ``names``, and each ``(name, obj)`` of ``found`` is what the
    MRO lookup of ``name`` gives (the C helper answers the same, and skips a class's walk while
    its type version tag stands)."""

    def __init__(self, pairs: tuple):
        self.pairs = tuple(pairs)

    @staticmethod
    def _lookup(mro, name):
        return next((_dict_of(klass)[name] for klass in mro if name in _dict_of(klass)), _NOT_FOUND)

    def __call__(self) -> bool:
        for cls, names, found in self.pairs:
            mro = mro_of(cls)          # type's own descriptors, as the C helper: no metaclass asked
            if any(name in _dict_of(klass) for klass in mro for name in names):
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


def storage_groups(groups: tuple) -> Any:
    """The current mode's checker that tensors share storages as ``groups`` says (for each,
    the position of the first in its storage): from each TensorImpl's storage pointer
    (compiled) or from ``untyped_storage()``."""
    if compiled() and hasattr(cpp_helpers, "StorageGroups"):
        return cpp_helpers.StorageGroups(groups)
    return PyStorageGroups(groups)


def autograd_views(kinds: tuple) -> Any:
    """The current mode's checker that tensors are the kinds of autograd view ``kinds`` says
    (``guard.autograd_view``): a tensor that is no view answered from its TensorImpl (compiled),
    a view asked in Python."""
    if compiled() and hasattr(cpp_helpers, "AutogradViews"):
        return cpp_helpers.AutogradViews(kinds, autograd_view)
    return PyAutogradViews(kinds)


def compiled() -> bool:
    """True when generated guards may call compiled helpers (False: pure Python)."""
    return mode in TENSOR_CHECKERS


def tensor_match(specs: Sequence[tuple]) -> Any:
    """The current mode's ``TensorMatch(specs)``: one call checks every tensor."""
    return TENSOR_CHECKERS[mode].TensorMatch(specs)


def tensor_spec(spec: TensorSpec) -> Optional[tuple]:
    """The compiled helper's spec for a TensorSpec, or None (pure-Python mode, or a spec the
    helper refuses)."""
    if not compiled():
        return None
    c_spec = (spec.type, spec.dtype, spec.device, spec.shape, spec.stride, spec.requires_grad,
              contiguity_pins_strides(spec))
    try:
        tensor_match([c_spec])
    except TypeError:
        return None
    return c_spec


def argument_reader(sources: Sequence[Source], frame_info: FrameInfo) -> Any:
    """A C reader when every graph input is an argument; else None."""
    if not compiled() or ArgumentReader is None \
            or not all(isinstance(source, LocalSource) for source in sources):
        return None
    return ArgumentReader([frame_info.arg_names.index(source.local_name) for source in sources])
