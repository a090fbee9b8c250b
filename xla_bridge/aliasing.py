"""Outputs that share memory with the inputs, found once at compile time on meta tensors.

Eager PyTorch may return a view of an argument (``x.t()``, ``x[0]``, ``x.view(-1)``) or the
argument itself (``x.contiguous()``): a later write through one is seen through the other. The
device returns fresh tensors, so the host side rebuilds such outputs as views of the caller's
own tensor (``as_strided`` with the size, stride and offset eager would give), after any
in-place update has been written back.

``analyse_memory(program, args)`` runs the graph on meta tensors shaped and strided like the
arguments (no data, no compute): it maps each output leaf sharing an argument's memory to a
``HostView`` and lists the arguments the graph writes in place (their ``_version`` moved), for
every kind of device program alike. Aliasing the host side cannot rebuild raises ``NotOneGraph`` (the graph then runs
eagerly, with the reason): an output viewing a device argument, or two different outputs
sharing memory that no argument owns (``y, y.view(-1)``).
"""

from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from . import device as dev
from .lazy_graph import NotOneGraph


@dataclass(frozen=True)
class HostView:
    """Output = ``args[position]`` viewed with ``size``/``stride`` at ``offset`` past its own
    storage offset; valid while the argument has ``base_size`` and ``base_stride``."""
    position: int
    size: tuple
    stride: tuple
    offset: int
    base_size: tuple
    base_stride: tuple

    def fits(self, base: torch.Tensor) -> bool:
        return base.shape == self.base_size and base.stride() == self.base_stride

    def of(self, base: torch.Tensor) -> torch.Tensor:
        if self.offset == 0 and self.size == self.base_size and self.stride == self.base_stride:
            return base
        return base.as_strided(self.size, self.stride, base.storage_offset() + self.offset)


def _meta_like(value):
    if not isinstance(value, torch.Tensor):
        return value
    return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


@dataclass(frozen=True)
class MemoryPlan:
    views: dict        # {output leaf index: HostView}
    written: tuple     # argument positions the graph updates in place


def analyse_memory(program, args) -> MemoryPlan:
    """How the outputs of ``program(*args)`` and its in-place updates touch the arguments."""
    metas = [_meta_like(a) for a in args]
    versions = [m._version if isinstance(m, torch.Tensor) else None for m in metas]
    try:
        with torch.no_grad():
            out = program(*metas)
    except Exception as error:
        raise NotOneGraph(f"cannot tell whether outputs alias inputs: the graph does not run on "
                          f"meta tensors ({type(error).__name__}: {str(error)[:120]})") from None
    position_of_storage = {_storage(m): i for i, m in enumerate(metas)
                           if isinstance(m, torch.Tensor)}
    views, owner_of_storage = {}, {}
    for k, leaf in enumerate(pytree.tree_leaves(out)):
        if not isinstance(leaf, torch.Tensor):
            continue
        storage = _storage(leaf)
        position = position_of_storage.get(storage)
        if position is None:
            other = owner_of_storage.setdefault(storage, leaf)
            if other is not leaf:
                raise NotOneGraph("two outputs share memory (one is a view of the other): "
                                  "the device would return them as separate tensors")
            continue
        base = metas[position]
        if dev.is_xla(args[position]):
            if leaf is base:
                continue                  # the device argument itself: the program returns it
            raise NotOneGraph(f"an output is a view of device argument {position}: replaying "
                              "would return a new tensor instead")
        views[k] = HostView(position, tuple(leaf.shape), leaf.stride(),
                            leaf.storage_offset() - base.storage_offset(),
                            tuple(base.shape), base.stride())
    written = tuple(i for i, (m, v) in enumerate(zip(metas, versions))
                    if isinstance(m, torch.Tensor) and m._version != v)
    return MemoryPlan(views, written)
