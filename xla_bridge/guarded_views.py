"""Views autograd guards, returned as eager returns them.

Autograd remembers how a view was made (its *creation meta*): by an op with several results
(``x.unbind(0)[1]``, ``split``, ``chunk``), in no-grad mode, in inference mode.  Eager refuses
an in-place write into such a view when the write would make it require grad ("... is being
modified inplace"), since it cannot rebase the view's history.  The bridge hands back views of
arguments made again with ``as_strided`` and device results as fresh tensors: both would accept
the write.  So the kind of each such output is found once, at compile time, and given to the
tensor the caller receives (a fresh tensor first becomes a view of itself)."""

import torch
from torch.utils import _pytree as pytree

from .lazy_graph import NotOneGraph

_DEFAULT_CREATION = torch._C._autograd.CreationMeta.DEFAULT


def guarded_kind(tensor):
    """The creation kind of ``tensor`` when it is a view autograd guards, else None."""
    if isinstance(tensor, torch.Tensor) and tensor._is_view():
        kind = torch._C._autograd._get_creation_meta(tensor)
        if kind != _DEFAULT_CREATION:
            return kind
    return None


def guarded_view_kinds(program, metas, leaves) -> dict:
    """{output leaf index: CreationMeta} for the outputs eager returns as views that autograd
    guards: made by an op with several results (``x.unbind(0)[1]``, ``chunk``, ``split``) or in
    no-grad mode.  Eager refuses an in-place write into one that makes it require grad; a view
    the bridge makes again (``as_strided``) or a fresh tensor from the device would allow it
    (host seed 284 i289).  The analysis's meta run is in no-grad mode, so the outputs that are
    views are made once more, in the grad mode the call runs in (the guards pin it)."""
    candidates = [k for k, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor) and leaf._is_view()]
    if not candidates:
        return {}
    try:   # (in the call's grad mode, restored after: a graph may end inside a no_grad block)
        with torch.set_grad_enabled(torch.is_grad_enabled()):
            again = pytree.tree_leaves(program(*metas))
    except Exception as error:
        raise NotOneGraph(f"cannot tell how autograd guards the views the graph returns: the graph "
                          f"does not run on meta tensors in grad mode ({type(error).__name__}: "
                          f"{str(error)[:120]})") from None
    kinds = {}
    for k in candidates:
        leaf = again[k] if k < len(again) else None
        kind = guarded_kind(leaf)
        if kind is not None and not any(leaf is m for m in metas):
            kinds[k] = kind
    return kinds


def guard_views_as_eager(out: list, creations: dict) -> None:
    """Give each output in ``creations`` the creation kind eager's view has (a tensor that is
    not a view becomes a view of itself first; one returned twice stays one tensor)."""
    made = {}
    for k, kind in creations.items():
        tensor = out[k]
        if not isinstance(tensor, torch.Tensor) or tensor.requires_grad and not tensor._is_view():
            continue                   # (a differentiable output that eager guards runs eagerly)
        if id(tensor) not in made:
            view = tensor if tensor._is_view() else torch.Tensor.as_strided(
                tensor, tensor.shape, torch.Tensor.stride(tensor), torch.Tensor.storage_offset(tensor))
            torch._C._autograd._set_creation_meta(view, kind)
            made[id(tensor)] = view
        out[k] = made[id(tensor)]
