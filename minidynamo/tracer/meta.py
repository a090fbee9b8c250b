"""Example values: every tensor the tracer sees is mirrored by a tensor on the ``meta`` device.

A meta tensor has a shape, dtype, strides and autograd flags but no storage, so running an
op on it tells us the result's metadata without computing anything or touching user data.

Why not ``FakeTensorMode``?  It imports ``torch._dynamo``, which minidynamo must never load.
Plain meta tensors almost avoid it too, but many meta kernels are Python references
(``torch._refs``) wrapped by ``torch._disable_dynamo``, whose first call imports
``torch._dynamo`` just to mark the function "do not trace".  While we compute example values,
``no_dynamo_import`` puts a tiny stand-in module under that name whose ``disable`` returns
the function unchanged; afterwards the stand-in and the marks it left are removed again, so
torch is exactly as before (if real ``torch._dynamo`` is already loaded we leave it alone).
"""

from __future__ import annotations

import contextlib
import sys
import types

import torch

from ..exc import Unsupported

META = torch.device("meta")


class _DynamoStandIn(types.ModuleType):
    """Answers ``torch._dynamo.disable(fn, ...)`` with ``fn`` and remembers whom it marked."""

    def __init__(self):
        super().__init__("torch._dynamo")
        self.marked = []

    def disable(self, fn=None, recursive=True, wrapping=True, **kwargs):
        if fn is not None:
            self.marked.append(fn)
        return fn


@contextlib.contextmanager
def no_dynamo_import():
    """Run meta kernels without loading ``torch._dynamo`` (see the module docstring)."""
    if "torch._dynamo" in sys.modules:
        yield
        return
    stand_in = _DynamoStandIn()
    sys.modules["torch._dynamo"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("torch._dynamo") is stand_in:
            del sys.modules["torch._dynamo"]
        if torch.__dict__.get("_dynamo") is stand_in:
            del torch._dynamo
        for fn in stand_in.marked:       # torch._compile caches the answer on the function
            fn.__dict__.pop("__dynamo_disable", None)


def to_meta(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with the same metadata as ``tensor`` (a new leaf; no data copied)."""
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported(f"tensor subclass {type(tensor).__name__} as an input")
    if tensor.is_sparse or tensor.is_quantized or tensor.layout != torch.strided:
        raise Unsupported(f"tensor with layout {tensor.layout} as an input")
    meta = torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=META)
    if tensor.requires_grad:
        meta.requires_grad_(True)
    return meta


def run_on_meta(fn, args, kwargs):
    """``fn(*args, **kwargs)`` on meta example values; a failure becomes ``Unsupported``."""
    try:
        with no_dynamo_import():
            return fn(*args, **kwargs)
    except Unsupported:
        raise
    except NotImplementedError as e:
        raise Unsupported(f"{_name(fn)} has no meta kernel: {_first_line(e)}") from e
    except Exception as e:
        raise Unsupported(f"{_name(fn)} fails on its example values: {type(e).__name__}: {_first_line(e)}") from e


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else ""
