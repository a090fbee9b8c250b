"""A host program's own device, named in its graph, means the device the bridge runs it on.

A graph captured from a CPU program names its device as a constant: ``torch.arange(n,
device=cpu)``, ``x.to(cpu)``, ``mask.to(device=cpu, dtype=bool)`` (Hugging Face code writes
``.to(input.device)`` everywhere).  Run by the bridge on the lazy device, or on meta tensors
to learn the aliasing, those constants would make host tensors in the middle of the device
graph (or fail: a meta tensor cannot be copied to the CPU).  In the program they only mean
"where the data lives", so while the bridge runs the graph, ``RedirectDevice`` (a
TorchFunctionMode) replaces the host device by the device the arguments are on, in every
argument of every torch call, inside ``torch.vmap`` bodies too.  Outputs still come back to
the host (``BridgedCall.returns_to_host``).  The same holds for a program whose arguments
are all on the lazy device already (``.to(input.device)`` names it): run on meta tensors to
learn the aliasing, its device means meta.  Applied only to programs whose tensor arguments
all share one device: a program that itself mixes devices is left alone.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves, tree_map


class RedirectDevice(TorchFunctionMode):
    def __init__(self, host: torch.device, target: torch.device):
        super().__init__()
        self.host = host
        self.target = target

    def _swap(self, value):
        if isinstance(value, torch.device) and value.type == self.host.type:
            return self.target
        if isinstance(value, str) and value.split(":")[0] == self.host.type:
            return self.target
        return value

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.device:            # the graph's code spells its constants device(type='cpu')
            return func(*args, **(kwargs or {}))
        args = tree_map(self._swap, args)
        kwargs = tree_map(self._swap, kwargs or {})
        if (func in _FACTORIES or _integer_arange(func, args, kwargs)) and kwargs.get("device") is None \
                and torch.get_default_device().type == self.host.type:
            kwargs["device"] = self.target  # ``torch.zeros(3, 4)``: the default device, the host's
        if func in _DATA_CONSTRUCTORS and self.target.type == "meta" and _carries_data(args, kwargs):
            # A meta tensor has no data: made on the CPU and copied, the values stay in the
            # program (the copy is an op; its CPU operand, a constant of the recorded graph).
            return func(*args, **dict(kwargs, device="cpu")).to(self.target)
        if self.target.type != "meta":
            args, kwargs = _host_operands_to(self.target, args, kwargs)
        if func in _INDEXING and self.target.type == "meta" and len(args) > 1:
            # x[..., [-2]]: torch makes the list an index tensor on x's device, out of sight
            # of the recording; made here on the CPU, it is a constant of the recorded graph.
            index = args[1]
            if isinstance(index, tuple):
                index = tuple(map(_list_as_tensor, index))
            elif isinstance(index, list) and not any(isinstance(i, list) for i in index):
                index = _list_as_tensor(index)   # (a list of lists on its own reads as a tuple)
            args = (args[0], index, *args[2:])
        return func(*args, **kwargs)


# Constructors that take Python data (``torch.tensor([], device=x.device)``: Hugging Face's caches)
_DATA_CONSTRUCTORS = frozenset({torch.tensor, torch.as_tensor, torch.asarray})
# Factories whose values are exact wherever they are made (``torch.zeros(3, 4)``, ``torch.full``,
# an integer ``arange``): without a ``device`` they make their tensor on the default device, which
# in a host program is the host. Those that compute values (``linspace``: XLA's lowering rounds
# otherwise, ``(linspace(0, 1, 4) * 3).long()`` differed), random ones and data constructors stay
# host constants, copied in where they are used.
_FACTORIES = frozenset({torch.zeros, torch.ones, torch.empty, torch.full, torch.eye, torch.empty_strided})


_INDEXING = frozenset({torch.Tensor.__getitem__, torch.Tensor.__setitem__})


def _integer_arange(func, args, kwargs) -> bool:
    """``torch.arange`` of integers: exact wherever it is made, like the factories above (a
    float one computes its values, and stays a host constant)."""
    return func is torch.arange and all(type(a) is int for a in args) \
        and kwargs.get("dtype") in (None, torch.int64, torch.int32)


def _host_operands_to(target: torch.device, args, kwargs):
    """A host tensor beside a device one in a call: one the graph made itself (``torch.tensor([0])``,
    a float ``arange``, ``x.cpu()``), which in the host program lived beside the others.  Most
    device kernels refuse a host operand (``index_fill``, ``gather``, ``take``: "Expected XLA
    tensor"), so it joins the others on the device, where its values are the same."""
    leaves = [v for v in tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)]
    if not any(t.device.type == "cpu" for t in leaves) or not any(t.device.type == target.type for t in leaves):
        return args, kwargs
    move = lambda v: v.to(target) if isinstance(v, torch.Tensor) and v.device.type == "cpu" else v  # noqa: E731
    return tree_map(move, args), tree_map(move, kwargs)


def _list_as_tensor(index):
    """A (nested) list of integers as the index tensor torch makes of it; anything else as is."""
    if isinstance(index, list) and index and all(type(i) is int for i in _flat(index)):
        return torch.tensor(index, device="cpu")
    return index


def _flat(values) -> list:
    return [x for v in values for x in (_flat(v) if isinstance(v, list) else [v])]


def _carries_data(args, kwargs) -> bool:
    device = kwargs.get("device")
    return (bool(args) and not isinstance(args[0], torch.Tensor) and isinstance(device, torch.device)
            and device.type == "meta" and not kwargs.get("requires_grad", False))


def target_of(flat_args) -> torch.device | None:
    for value in flat_args:
        if isinstance(value, torch.Tensor):
            return value.device
    return None


class CopiesFromHost(TorchFunctionMode):
    """``device_tensor.copy_(host_tensor)`` with the host tensor moved to the device first.

    torch_xla's ``copy_`` from a host tensor of another (broadcast) shape gives the destination
    the source's own shape underneath its logical one: ``x.copy_(torch.tensor(0.5))`` leaves
    ``x`` holding one element under a [2, 3] shape (``x.cpu()`` and ``x + 0`` are 0-dim), and
    ``x[0].copy_(...)`` fails. Eager broadcasts, and so does a copy between two device tensors.
    Active while the bridge runs a graph on the lazy device (a graph's ``torch.tensor(0.5)``
    without a device is a host tensor; a recorded training graph keeps 0-dim constants on the
    host), and on meta tensors, which refuse a host source outright: the aliasing analysis
    (``aliasing.analyse_memory``) then runs the copy as the device run will."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _COPIES and len(args) >= 2 and isinstance(args[1], torch.Tensor) \
                and args[1].device != args[0].device and args[0].device.type != "cpu":
            args = (args[0], args[1].to(args[0].device), *args[2:])
        return func(*args, **(kwargs or {}))


_COPIES = frozenset({torch.Tensor.copy_, torch.ops.aten.copy_.default})
