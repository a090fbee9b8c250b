"""A host program's own device, named in its graph, means the device the bridge runs it on.

A graph captured from a CPU program names its device as a constant: ``torch.arange(n,
device=cpu)``, ``x.to(cpu)``, ``mask.to(device=cpu, dtype=bool)`` (Hugging Face code writes
``.to(input.device)`` everywhere).  Run by the bridge on the lazy device, or on meta tensors
to learn the aliasing, those constants would make host tensors in the middle of the device
graph (or fail: a meta tensor cannot be copied to the CPU).  In the program they only mean
"where the data lives", so while the bridge runs the graph, ``RedirectDevice`` (a
TorchFunctionMode) replaces the host device by the device the arguments are on, in every
argument of every torch call, inside ``torch.vmap`` bodies too.  Outputs still come back to
the host (``BridgedCall.returns_to_host``).  Applied only to programs whose tensor arguments
were all on the host: a program that itself mixes devices is left alone.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map


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
        return func(*args, **kwargs)


def target_of(flat_args) -> torch.device | None:
    for value in flat_args:
        if isinstance(value, torch.Tensor):
            return value.device
    return None
