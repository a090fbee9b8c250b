"""Graph inputs that share memory get examples that share it too.

Two inputs may be views of one tensor: a resumed frame receives ``y`` and ``t = y[0]`` as two
arguments, a module holds a buffer and a view of it.  Examples made apart would tell the trace
that the two never overlap: a write through one would seem not to reach the other, and an op
eager refuses for overlapping memory (``y.copy_(t)``) would be recorded, to raise only when the
graph runs, after the frame's Python effects were already skipped.

So an input whose storage an earlier input holds gets its example as a view into that input's
example storage: the same offset, strides and dtype, the storage grown to cover both.  Whether
inputs share storage is then part of what the trace saw, and the graph guards it
(``guards.storage_match``) whenever it writes an input in place (``OutputGraph.identity_guards``).
"""

from __future__ import annotations

from typing import Callable

import torch

from guards.guard import autograd_view, storage_key

from ..exc import Unsupported
from .meta import elements_spanned


class SharedStorages:
    """The first example made in each real storage, to view the later ones into."""

    def __init__(self):
        self._anchors: dict = {}    # storage address -> the example of the first input in it

    def example(self, tensor: torch.Tensor, make_example: Callable) -> torch.Tensor:
        """``tensor``'s meta example: ``make_example(tensor)`` for the first input in its
        storage, a view into that one's example storage for every later one."""
        key = storage_key(tensor)
        anchor = self._anchors.get(key) if key is not None else None
        if anchor is None:
            example = make_example(tensor)
            if key is not None:
                self._anchors[key] = example
            return example
        return _view_into(anchor, tensor)


def _view_into(anchor: torch.Tensor, tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``tensor``'s metadata over ``anchor``'s storage, made by autograd where
    ``tensor`` was (a non-leaf that requires grad views ``anchor`` through autograd)."""
    shape, stride, offset = tuple(tensor.shape), torch.Tensor.stride(tensor), torch.Tensor.storage_offset(tensor)
    needed = (offset + elements_spanned(tensor)) * tensor.element_size()
    storage = anchor.untyped_storage()
    try:
        if storage.nbytes() < needed:
            storage.resize_(needed)
        base = anchor.detach() if tensor.dtype == anchor.dtype else _whole_storage_as(anchor, tensor.dtype)
        view = base.as_strided(shape, stride, offset)
    except RuntimeError as error:
        raise Unsupported(f"an input shares memory with another input in a way its example cannot: {error}")
    kind = autograd_view(tensor)
    if not tensor.requires_grad:
        if kind and kind[1] and anchor.requires_grad and tensor.dtype == anchor.dtype:
            with torch.no_grad():     # a view made under no_grad of a base that requires grad
                view = anchor.as_strided(shape, stride, offset)
        return as_view_kind(view, kind)
    if tensor.is_leaf:
        return as_view_kind(view.requires_grad_(True), kind)
    if not anchor.requires_grad or tensor.dtype != anchor.dtype:
        raise Unsupported("an input made by autograd shares memory with an input that does not require grad")
    return as_view_kind(anchor.as_strided(shape, stride, offset), kind)


def as_view_kind(example: torch.Tensor, kind: tuple) -> torch.Tensor:
    """``example`` (a view) made the ``autograd_view`` kind of view ``kind`` says: how it was
    created (under no_grad, as one of several outputs...), which eager asks before letting a view
    be written in place.  Whether its base is a leaf is the caller's to make."""
    if kind and kind[2] not in ("", "DEFAULT") and torch.Tensor._is_view(example):
        torch._C._autograd._set_creation_meta(example, getattr(torch._C._autograd.CreationMeta, kind[2]))
    return example


def _whole_storage_as(anchor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``anchor``'s whole storage as one row of ``dtype`` (a view: it shares the storage)."""
    row = anchor.detach().as_strided((anchor.untyped_storage().nbytes() // anchor.element_size(),), (1,), 0)
    return row.view(dtype)
