"""The optional C helper (``_guard_helpers.c``) and when generated code may use it.

Everything works without it: ``enabled`` is False when it is not built (or set False to
compare), and codegen then writes the same checks in Python.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from .checks import contiguity_pins_strides
from .guard import GRAD_MODE_MATCH, TENSOR_MATCH, Guard, TensorSpec
from .source import FrameInfo, LocalSource, Source

try:
    from ._guard_helpers import ArgumentGuard, ArgumentReader, DictMemo, TensorMatch
except ImportError:  # pragma: no cover - depends on the build
    ArgumentGuard = ArgumentReader = DictMemo = TensorMatch = None

# Use the helper when built; tests set it False to run the pure-Python checks.
enabled = TensorMatch is not None


def tensor_spec(spec: TensorSpec) -> Optional[tuple]:
    """The C helper's spec for a TensorSpec, or None (no helper, or a tensor type whose
    metadata getters are overridden in Python: those stay Python checks)."""
    if not enabled:
        return None
    c_spec = (spec.type, spec.dtype, spec.device, spec.shape, spec.stride, spec.requires_grad,
              contiguity_pins_strides(spec))
    try:
        TensorMatch([c_spec])
    except TypeError:
        return None
    return c_spec


def argument_guard(guards: Sequence[Guard], frame_info: FrameInfo) -> Any:
    """The whole guard function as one C object, when every guard is a tensor match on an
    argument or the grad mode (the common case of a function of tensors); else None."""
    if not enabled:
        return None
    checks, grad_mode = [], None
    for guard in guards:
        if guard.kind == GRAD_MODE_MATCH:
            grad_mode = guard.expected
        elif guard.kind == TENSOR_MATCH and isinstance(guard.source, LocalSource) \
                and tensor_spec(guard.expected) is not None:
            checks.append((frame_info.arg_names.index(guard.source.local_name), tensor_spec(guard.expected)))
        else:
            return None
    return ArgumentGuard(len(frame_info.arg_names), checks,
                         None if grad_mode is None else torch.is_grad_enabled, bool(grad_mode))


def argument_reader(sources: Sequence[Source], frame_info: FrameInfo) -> Any:
    """A C reader when every graph input is an argument; else None."""
    if not enabled or not all(isinstance(source, LocalSource) for source in sources):
        return None
    return ArgumentReader([frame_info.arg_names.index(source.local_name) for source in sources])
