"""Which recorded tensors eager's autograd nodes hold, per output grad: eager checks them all.

When a backward reaches an autograd node, eager unpacks every tensor the node saved and raises
if one was changed in place since ("modified by an inplace operation"), whether or not the
node's formula then reads it: over a dimension of size 1 ``cumprod``'s backward is the
identity, yet ``CumprodBackward0`` saved its result, and a write to that result makes the
backward raise (host fuzz seed 283 i705). The joint graph's backward ops read only what the
formulas read (``joint_graph._reads_per_tangent``); this module adds what the nodes hold.

While the forward runs on meta tensors, ``hooks()`` (a ``saved_tensors_hooks`` pair) notes the
recorded node of each tensor a node saves. ``held_per_leaf`` then walks the autograd graph from
each output leaf through the nodes a backward to the arguments runs, and reads each node's
``_saved_*`` fields: each read unpacks, and so names, a tensor the node holds.
"""

from __future__ import annotations

import contextlib
from typing import Sequence

import torch


def _version(tensor) -> int:
    return torch.Tensor._version.__get__(tensor)


def _check_version(tensor, version, what) -> None:
    """Eager's error for a saved tensor changed in place since it was saved (autograd makes this
    check itself only for tensors saved without hooks)."""
    now = _version(tensor)
    if now != version:
        raise RuntimeError(     # eager's words on the first line, then which tensor it was here
            f"one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{tensor.type()} {list(tensor.shape)}] is at version {now}; "
            f"expected version {version} instead. Hint: enable anomaly detection to find the "
            f"operation that failed to compute its gradient, with "
            f"torch.autograd.set_detect_anomaly(True).\n({what} of the compiled graph that its "
            f"backward reads)")


class _Held:
    """What the pack hook keeps in place of a saved tensor: the tensor, its recorded node, and
    its version then (with hooks, autograd leaves the version check to the unpack hook)."""
    __slots__ = ("node", "tensor", "version")

    def __init__(self, node, tensor):
        self.node, self.tensor, self.version = node, tensor, _version(tensor)


class EagerSaved:
    def __init__(self, recorder):
        self.recorder = recorder
        self._unpacked = None             # the nodes unpacked while a node's fields are read

    @contextlib.contextmanager
    def hooks(self):
        with torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack):
            yield

    def _pack(self, tensor):
        return _Held(self.recorder.recorded_node(tensor), tensor)

    def _unpack(self, held):
        _check_version(held.tensor, held.version, "a tensor")
        if self._unpacked is not None:    # (None: a tensor not recorded, a wrapped number)
            self._unpacked.append(held.node)
        return held.tensor

    def held_per_leaf(self, leaves: Sequence, differentiable: Sequence[int], grad_inputs: Sequence) -> tuple:
        """Per differentiable leaf (in order): the recorded nodes held by the autograd nodes a
        backward from that leaf to ``grad_inputs`` runs; and which of those autograd nodes hold
        any (numbered): the nodes a backward frees, and a later one through them refuses."""
        starts = [getattr(leaves[k], "grad_fn", None) for k in differentiable]
        useful = _leading_to(starts, {id(t) for t in grad_inputs})
        held_by, number = {}, {}
        out, holders = [], []
        for start in starts:
            held, holding = set(), set()
            for fn in _reachable([start], useful):
                if fn not in held_by:
                    held_by[fn] = self._held_by(fn)
                if held_by[fn]:          # any saved tensor, recorded or not
                    holding.add(number.setdefault(fn, len(number)))
                held.update(node for node in held_by[fn] if node is not None)
            out.append(frozenset(held))
            holders.append(frozenset(holding))
        return tuple(out), tuple(holders)

    def _held_by(self, fn) -> tuple:
        """The recorded nodes of the tensors ``fn`` holds; None for one no hook saw (a wrapped
        number such as the ``2`` of ``x * 2``, which eager frees and checks all the same)."""
        self._unpacked = []
        try:
            for name in dir(fn):
                if name.startswith("_saved_"):
                    try:
                        value = getattr(fn, name)
                    except Exception:   # noqa: BLE001 - a field that cannot be read holds nothing here
                        continue
                    values = value if isinstance(value, (tuple, list)) else (value,)
                    if any(isinstance(v, torch.Tensor) for v in values):
                        self._unpacked.append(None)
            return tuple(self._unpacked)
        finally:
            self._unpacked = None


def _reachable(starts, within=None) -> list:
    """The autograd nodes reachable from ``starts`` through ``next_functions`` (only nodes in
    ``within``, when given)."""
    seen, order, stack = set(), [], [fn for fn in starts if fn is not None]
    while stack:
        fn = stack.pop()
        if fn in seen or (within is not None and fn not in within):
            continue
        seen.add(fn)
        order.append(fn)
        stack.extend(next_fn for next_fn, _ in fn.next_functions if next_fn is not None)
    return order


def _leading_to(starts, input_ids: set) -> set:
    """The nodes from which a path leads to an argument's AccumulateGrad: those a backward to
    the arguments runs (eager prunes the rest)."""
    nodes = _reachable(starts)
    parents = {}
    for fn in nodes:
        for next_fn, _ in fn.next_functions:
            if next_fn is not None:
                parents.setdefault(next_fn, []).append(fn)
    useful = set()
    stack = [fn for fn in nodes if id(getattr(fn, "variable", None)) in input_ids]
    while stack:
        fn = stack.pop()
        if fn in useful:
            continue
        useful.add(fn)
        stack.extend(parents.get(fn, ()))
    return useful
