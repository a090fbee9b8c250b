"""Where eager's random ops put their numbers: in memory order, which device tensors do not have.

A CPU kernel that fills a tensor with random numbers (``bernoulli_`` of dropout's noise, the
``uniform_`` of ``rand_like``) walks it in memory order, and eager's ``empty_like`` keeps its
input's strides: the dropout of a transposed tensor draws its mask in the transposed order.
Device tensors have no strides, so the draw the bridge makes on the host for one
(``host_random``) filled a contiguous stand-in: eager's numbers, at other places.

So eager itself is asked.  The graph is traced node by node (``NodeNoting``); the first time a
node draws, it runs once more on meta tensors laid out as its example values (eager's strides,
from minidynamo's trace), under a mode that notes each random op it reaches: the op eager runs
(in place or not) and the strides of the tensor it fills.  The node's draws on the device take
those, in order, while they are the same ops on the same sizes; any other draw keeps a
contiguous stand-in, as before.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import device as dev


class NodeNoting(torch.fx.Interpreter):
    """Runs a GraphModule as its forward would, saying which node runs (``layouts.node``)."""

    def __init__(self, gm: torch.fx.GraphModule, layouts: "EagerLayouts"):
        super().__init__(gm)
        self.layouts = layouts
        self.extra_traceback = False     # an error is the program's own, as the forward raises it

    def run_node(self, node):
        self.layouts.node = node
        try:
            return super().run_node(node)
        finally:
            self.layouts.node = None


def run_noting_nodes(fn, args, layouts: Optional["EagerLayouts"]):
    """``fn(*args)``, node by node when ``fn`` is a GraphModule, or a program of one (its
    ``graph_module``, run by its ``run_with(runner, args)``: ``lifting.FlatProgram``, the training
    forward), that draws random numbers (minidynamo's trace marks those nodes ``draws_random``;
    an aten graph's are random ops themselves) and ``layouts`` wants them; else as it is (an
    interpreter costs a Python call per node)."""
    gm = fn.graph_module if hasattr(fn, "run_with") else fn
    if layouts is None or not isinstance(gm, torch.fx.GraphModule) \
            or not any(node.meta.get("draws_random") or _is_random_op(node.target) for node in gm.graph.nodes):
        return (fn.forward if fn is gm else fn)(*args)     # (a graph's forward: no module hooks)
    if gm is fn:
        return NodeNoting(gm, layouts).run(*args)
    return fn.run_with(NodeNoting(gm, layouts).run, tuple(args))


class EagerLayouts:
    """Eager's draws, node by node: ``take(func, shape)`` answers, for the next draw of the node
    that runs, (eager's op, the strides it fills) or None."""

    def __init__(self):
        self.node = None
        self._draws: dict = {}      # node -> [(op, shape, strides), ...] as eager makes them
        self._taken: dict = {}      # node -> how many of them the device's draws took

    def take(self, func, shape) -> Optional[tuple]:
        node = self.node
        if node is None or shape is None:
            return None
        if node not in self._draws:
            self._draws[node], self._taken[node] = _eager_draws(node), 0
        k = self._taken[node]
        if k >= len(self._draws[node]):
            return None
        self._taken[node] = k + 1
        eager_func, eager_shape, strides = self._draws[node][k]
        if _kind(eager_func) != _kind(func) or eager_shape != tuple(shape):
            return None
        return eager_func, strides


def _kind(func) -> str:
    """An op's name without its in-place or functional spelling (``bernoulli_`` and
    ``bernoulli``, ``normal_`` and ``normal_functional``)."""
    return func.overloadpacket.__name__.removesuffix("_functional").rstrip("_")


class _NoExample(Exception):
    pass


def _meta(value):
    if not isinstance(value, torch.fx.Node):
        return value
    example = value.meta.get("example_value", _NoExample)
    if example is _NoExample:
        raise _NoExample()
    if isinstance(example, torch.Tensor):
        return torch.empty_strided(tuple(example.shape), tuple(example.stride()), dtype=example.dtype,
                                   device="meta")
    return example


class _Noting(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.draws = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if torch.Tag.nondeterministic_seeded in func.tags:
            composite = torch._C.DispatchKey.CompositeImplicitAutograd
            if torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), composite):
                with self:                  # a composite (dropout): the ops eager's C++ makes it of
                    return func._op_dk(composite, *args, **kwargs)
            tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            if tensors:
                self.draws.append((func, tuple(tensors[0].shape), tuple(tensors[0].stride())))
            if "device" in kwargs:
                kwargs["device"] = torch.device("meta")     # (never a real draw)
        return func(*args, **kwargs)


def _is_random_op(target) -> bool:
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in target.tags


def _eager_draws(node) -> list:
    """The random ops eager runs for ``node``: the node itself when it is one (an aten graph's,
    recorded with eager's strides: ``aten_recorder``), else those it runs on meta tensors with
    its example values' strides (a node that is not a plain call, or that meta tensors cannot
    run: none known)."""
    if _is_random_op(node.target):
        first = next((a for a in node.args if isinstance(a, torch.fx.Node)), None)
        if first is None or "stride" not in first.meta:
            return []
        return [(node.target, tuple(first.meta["shape"]), tuple(first.meta["stride"]))]
    if node.op not in ("call_function", "call_method"):
        return []
    try:
        args = torch.fx.node.map_arg(node.args, _meta)
        kwargs = torch.fx.node.map_arg(node.kwargs, _meta)
    except _NoExample:
        return []
    noting = _Noting()
    try:
        with _disable_current_modes(), dev.host_random_kept(), torch.no_grad(), noting:
            if node.op == "call_function":
                node.target(*args, **kwargs)
            else:
                getattr(args[0], node.target)(*args[1:], **kwargs)
    except Exception:
        return []
    return noting.draws
