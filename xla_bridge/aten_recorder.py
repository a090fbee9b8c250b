"""Record every aten op a program runs on meta tensors into an ``fx.Graph``.

``AtenRecorder`` is a ``TorchDispatchMode``: the dispatcher hands it each aten op *below*
autograd, so while ``torch.autograd.grad`` runs a backward pass the backward's ops
(``convolution_backward``, ``native_batch_norm_backward``, ...) reach it exactly like the
forward's. Each op becomes one ``call_function`` node whose target is the ``OpOverload``; a
tensor argument becomes the node that produced it (found by the tensor's identity, so an
in-place op, which returns its own input, re-binds that tensor to the in-place node). Nothing
is computed: the inputs are meta tensors, and each op's meta kernel only yields metadata.

Why not ``make_fx``? On torch 2.9 calling it imports ``torch._inductor`` and with it
``torch._dynamo``; this recorder is ~100 lines and imports neither. Meta kernels themselves
import ``torch._dynamo`` on first use (``torch._disable_dynamo`` wraps many ``torch._refs``),
so recording runs inside ``no_dynamo_import`` (the same stand-in trick as the tracer's
``minidynamo.tracer.meta``; duplicated here because ``xla_bridge`` never imports the tracer).

``decompositions`` ({OpOverload: function}, from ``torch._decomp``) replaces an op by the ops its
decomposition runs: for ops the target device cannot lower (XLA has no
``native_layer_norm_backward``; it would run on the CPU, splitting the graph).

The recorded graph is device-neutral: factory ops recorded with ``device=meta`` are re-targeted
by ``retarget(graph, device)`` before the graph runs on a real device. Tensors that are not meta
(a 0-dim CPU tensor an autograd formula made from a Python number) are kept as constants.
"""

from __future__ import annotations

import contextlib
import operator
import sys
import types

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

META = torch.device("meta")


class RecordingError(Exception):
    """The program could not be recorded as one aten graph; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
    """Run meta kernels without loading ``torch._dynamo``: a stand-in module answers
    ``torch._dynamo.disable`` while inside, and is removed (with the marks it left) after.
    If the real ``torch._dynamo`` is already loaded (torch_xla loads it) this does nothing."""
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


def meta_like(tensor: torch.Tensor, requires_grad: bool = False) -> torch.Tensor:
    """A meta leaf with ``tensor``'s size, strides and dtype (no data)."""
    meta = torch.empty_strided(tensor.shape, torch.Tensor.stride(tensor), dtype=tensor.dtype, device=META)
    return meta.requires_grad_(True) if requires_grad else meta


class AtenRecorder(TorchDispatchMode):
    """Builds ``self.graph`` from the aten ops run while the mode is active.

    Every node gets ``meta["phase"]`` (the recorder's ``phase`` when it was made: "forward" or
    "backward", set by the caller) and, for tensors, ``meta["shape"]``/``meta["dtype"]`` and
    ``meta["stride"]`` (eager's layout, which ``eager_layouts`` reads).
    """

    def __init__(self, decompositions=None):
        super().__init__()
        self.decompositions = decompositions or {}   # OpOverload -> its decomposition
        self.graph = fx.Graph()
        self.phase = "forward"
        self.constants = {}       # attribute name -> non-meta tensor read by the graph
        self._node_of = {}        # id(tensor) -> node that last produced it
        self._alive = []          # every bound tensor, kept so no id is reused while recording
        self._paused = False

    def placeholder(self, tensor: torch.Tensor, name: str) -> fx.Node:
        node = self.graph.placeholder(name)
        node.meta["phase"] = self.phase
        self._bind(tensor, node)
        return node

    def node_of(self, value):
        """The node for a recorded tensor (None passes through; other values are constants)."""
        if isinstance(value, torch.Tensor):
            return self._arg(value)
        return value

    def recorded_node(self, tensor: torch.Tensor):
        """The node that made ``tensor`` (or its placeholder), or None if none did."""
        return self._node_of.get(id(tensor))

    @contextlib.contextmanager
    def paused(self):
        """Run ops without recording them (making tangents, for instance)."""
        self._paused, saved = True, self._paused
        try:
            yield
        finally:
            self._paused = saved

    def record_call(self, fn, *tensors) -> None:
        """Record a call of the Python function ``fn`` on recorded tensors, for its effect when
        the graph runs (``index_check.finite_required``): no aten op to dispatch, no result."""
        if self._paused:
            return
        node = self.graph.call_function(fn, tuple(self._arg(t) for t in tensors))
        node.meta["phase"] = self.phase

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        decomposition = self.decompositions.get(func)
        if decomposition is not None and not self._paused:
            with self:                       # record the ops the decomposition runs instead
                out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        out = func(*args, **kwargs)
        if self._paused:
            return out
        node_args, node_kwargs = pytree.tree_map_only(torch.Tensor, self._arg, (args, kwargs))
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        node.meta["phase"] = self.phase
        if isinstance(out, torch.Tensor):
            self._bind(out, node)
        elif isinstance(out, (tuple, list)):
            for index, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    item_node = self.graph.call_function(operator.getitem, (node, index))
                    item_node.meta["phase"] = self.phase
                    self._bind(item, item_node)
        return out

    def _bind(self, tensor: torch.Tensor, node: fx.Node) -> None:
        self._node_of[id(tensor)] = node
        self._alive.append(tensor)
        node.meta["shape"], node.meta["dtype"] = tuple(tensor.shape), tensor.dtype
        node.meta["stride"] = tuple(tensor.stride())

    def _arg(self, tensor: torch.Tensor) -> fx.Node:
        node = self._node_of.get(id(tensor))
        if node is not None:
            return node
        if tensor.device.type == "meta":
            raise RecordingError(f"an op read a meta tensor {tuple(tensor.shape)} made outside "
                                 "the recorded program (not an input, not an op's result)")
        name = f"_constant{len(self.constants)}"
        self.constants[name] = tensor.detach().clone()
        with self.graph.inserting_before(_first_op(self.graph)):
            node = self.graph.get_attr(name)
        node.meta["phase"] = "forward"
        self._bind(tensor, node)
        return node


def active_recorder():
    """The ``AtenRecorder`` recording on this thread (the innermost), or None."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
    for mode in reversed(_get_current_dispatch_mode_stack()):
        if isinstance(mode, AtenRecorder):
            return mode
    return None


def _first_op(graph: fx.Graph):
    for node in graph.nodes:
        if node.op != "placeholder":
            return node
    return None


def retarget(graph: fx.Graph, device: torch.device) -> None:
    """Replace every ``device=meta`` argument (factory ops) by ``device``, in place."""
    def swap(value):
        return device if isinstance(value, torch.device) and value.type == "meta" else value

    for node in graph.nodes:
        if node.op == "call_function":
            node.args = pytree.tree_map(swap, node.args)
            node.kwargs = pytree.tree_map(swap, node.kwargs)


def tensor_bytes(node: fx.Node) -> int:
    """Bytes of the tensor a recorded node produces (0 for a non-tensor)."""
    shape, dtype = node.meta.get("shape"), node.meta.get("dtype")
    if shape is None:
        return 0
    count = 1
    for size in shape:
        count *= size
    return count * dtype.itemsize
