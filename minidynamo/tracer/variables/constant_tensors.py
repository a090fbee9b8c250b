"""Tensors made from constants only: their values are known while tracing.

``torch.arange(n)``, ``torch.tensor(2)``, ``torch.div(seq_len, window, rounding_mode="trunc")``
and whatever is computed from such tensors alone depend on nothing but constants the guards
pin (Python values, shapes, the default dtype).  So the trace computes them for real, once, on
the CPU, beside the meta example (``TensorVariable.known``), and Python may read their data the
way eager does: ``t.item()``, ``int(t)``, ``if t:``, ``lst[t]``, ``x.view(n, t)``,
``torch.arange(t0, t1)``.  The graph still computes the tensor at every call; only what Python
decides from its value is specialized, and that value is the same at every call that passes
the guards.

A value is known only when every tensor argument has one, the operation draws no random numbers
and writes nothing, it does not make uninitialized memory (``empty``), the program runs on the
CPU (a value computed here is then the one eager computes) and the result is small.  An
operation that writes a tensor forgets the values of every known tensor sharing its memory.
"""

from __future__ import annotations

import types
from typing import Optional

import torch
from torch.utils._pytree import tree_map

from ... import compile_warnings

MAX_KNOWN_ELEMENTS = 1 << 14
CPU = torch.device("cpu")
# What Python reads from a known tensor, by the Tensor method eager would call.
DATA_READS = {"item", "tolist", "__bool__", "__int__", "__float__", "__index__"}


def known_result(fn, target, arg_vts, kwarg_vts, example_args, example_kwargs, probe, device, example):
    """The real value of ``fn(*args, **kwargs)`` when every tensor argument's value is known and
    the operation is pure (see the module doc), else None."""
    if device is None or torch.device(device) != CPU or probe.draws_random or probe.written or not isinstance(example, torch.Tensor):
        return None
    if example.numel() > MAX_KNOWN_ELEMENTS or "empty" in getattr(target, "__name__", str(target)):
        return None
    values = {}
    if not _collect(list(arg_vts) + list(kwarg_vts.values()), values):
        return None

    def real(value):
        if isinstance(value, torch.Tensor):
            return values[id(value)]          # (KeyError: a tensor we do not know)
        return value

    try:
        args, kwargs = tree_map(real, (list(example_args), dict(example_kwargs)))
        if "device" in kwargs:
            kwargs["device"] = CPU
        with torch.no_grad(), compile_warnings.recorded():   # (the meta run and the graph
            result = fn(*args, **kwargs)                               # warn as eager does)
    except Exception:       # (a value is a help, never a requirement: the meta run decided)
        return None
    if not isinstance(result, torch.Tensor) or result.shape != example.shape or result.dtype != example.dtype:
        return None
    return result


def pure_target(target) -> bool:
    """Is ``target`` torch's or Python's own operation (a method name, a C function, an aten
    operator, ``operator.*``, a torch function)?  Running it again on real values then repeats
    nothing a user wrote (a custom ``autograd.Function``'s forward, a vmap body: never)."""
    if isinstance(target, str) or isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    if isinstance(target, types.BuiltinFunctionType):
        return True
    module = getattr(target, "__module__", None) or ""
    return module == "_operator" or (module.split(".")[0] == "torch" and not module.startswith("torch._functorch"))


def _collect(vts, values) -> bool:
    """Map each tensor argument's meta example to its known value; False if one has none."""
    from .base import NO_CONSTANT, maybe_constant
    from .constant import ConstantVariable
    from .containers import BaseListVariable
    from .tensor import TensorVariable

    for vt in vts:
        if isinstance(vt, TensorVariable):
            if vt.known is None:
                return False
            values[id(vt.example)] = vt.known
        elif isinstance(vt, BaseListVariable):
            if not _collect(vt.items, values):
                return False
        elif not isinstance(vt, ConstantVariable) and maybe_constant(vt, NO_CONSTANT) is NO_CONSTANT:
            return False          # (a slice, a dtype, ...: constants; anything else: unknown)
    return True


def forget_written(output, written) -> None:
    """An operation wrote ``written`` (meta tensors): known values sharing their memory are stale."""
    if not written:
        return
    storages = {w.untyped_storage()._cdata for w in written if isinstance(w, torch.Tensor)}
    for vt in output.known_tensors:
        if vt.known is not None and vt.example.untyped_storage()._cdata in storages:
            vt.known = None


def scalar_arguments(arg_vts, kwarg_vts):
    """The arguments with every known 0-d tensor replaced by its Python number (what eager's
    ``__index__``/``item()`` gives an operation that reads the data), or None when there is none."""
    from .constant import ConstantVariable
    from .containers import sequence_kind
    from .tensor import TensorVariable

    changed = False

    def scalar(vt):
        nonlocal changed
        if isinstance(vt, TensorVariable) and vt.known is not None and vt.known.dim() == 0:
            changed = True
            return ConstantVariable(vt.known.item())
        if sequence_kind(vt) in (tuple, list, torch.Size):
            return vt.rebuild([scalar(item) for item in vt.items])       # new_zeros((n, t, 3))
        return vt

    args = [scalar(vt) for vt in arg_vts]
    kwargs = {k: scalar(vt) for k, vt in kwarg_vts.items()}
    return (args, kwargs) if changed else None


def reads_data(error: Exception) -> bool:
    """Did the meta run fail because the operation reads a tensor's data?"""
    text = str(error)
    return "item()" in text or "_local_scalar_dense" in text or "data-dependent" in text


def answers(vt, name: str) -> bool:
    """Can ``vt.name()`` (a read of the data) be answered from a known value?"""
    return getattr(vt, "known", None) is not None and name in DATA_READS


def read(vt, name: str):
    """``vt.name()`` from its known value; what eager would raise there is Unsupported (the
    frame then runs eagerly and raises it)."""
    from ...exc import Unsupported

    try:
        return getattr(vt.known, name)()
    except Exception as error:
        raise Unsupported(f"Tensor.{name}() raises: {error}") from error


def index_of(vt) -> Optional[int]:
    """``operator.index(vt)`` for a known integer tensor of one element, else None."""
    known = getattr(vt, "known", None)
    if known is None or known.numel() != 1 or known.dtype.is_floating_point or known.dtype.is_complex:
        return None
    return int(known.item())
