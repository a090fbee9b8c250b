"""Ops whose results nothing reads, left out of a program on device tensors.

Lazy torch_xla records every op a program runs but computes only what a sync asks for: an op
whose result nothing reads is never computed.  A replayed graph that keeps such an op computes
it, and first needs its inputs.  One of them may be a tensor still pending from plain lazy
mode (made at a graph break) that torch_xla cannot lower: then the bridge's sync of it fails,
leaves the tensor without data, and the call raises where lazy torch_xla answers (device fuzz
seed 414 i2: ``t3 / (t3.norm(p=inf) + 1)`` of an int64 ``t3``, never returned; the norm of
an int64 tensor does not lower).  Without the dead ops the input is unread, and
``_WithoutUnreadInputs`` leaves it pending, as lazy mode does.

An op is left out only when it ran on the device, is one of torch's operators (an
``operator`` function, a function of ``torch`` or of its op namespaces, or a tensor method,
named as an aten op) and not an in-place one (``*_``, ``out=``), the tracer's probe saw it
neither write a tensor nor draw random numbers (a dead draw still moves the device's generator
in lazy mode), and it returned tensors. Every other node stays: grad-mode switches, calls of
modules, ``requires_grad_`` (which writes no data), ``torch.autograd.grad``, anything of unknown
effect, and every op on host tensors, which eager runs, dead or not, and which may raise (an
index out of range: device fuzz seed 421 i321). Only for programs on device tensors: on the
host, eager computes dead code too, and the bridge checks the values it reads where eager
would raise (``index_check``).
"""

from __future__ import annotations

import operator

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree


def without_dead_code(gm: fx.GraphModule) -> fx.GraphModule:
    """``gm`` with the ops nothing reads left out (a new module of its class; ``gm`` itself when
    none is)."""
    dead = _dead_nodes(gm.graph)
    if not dead:
        return gm
    graph, env = empty_graph_like(gm), {}
    for node in gm.graph.nodes:
        if node not in dead:
            env[node] = graph.node_copy(node, env.__getitem__)
    return own_class(gm)(gm, graph)     # (its class too: a graph that enters blocks leaves them)


def empty_graph_like(gm: fx.GraphModule) -> fx.Graph:
    """An empty graph whose code ``gm``'s code generator writes (minidynamo's binds the torch
    functions its graph calls: a copy must call the same objects)."""
    graph = fx.Graph()
    graph.set_codegen(gm.graph._codegen)
    return graph


def own_class(gm: fx.GraphModule) -> type:
    """The class ``gm`` was made as: fx gives every instance a class of its own under it (named
    ``GraphModuleImpl``), which constructs instances of the class above it, uninitialised."""
    return next(cls for cls in type(gm).__mro__ if cls.__qualname__.rpartition(".")[2] != "GraphModuleImpl")


def _dead_nodes(graph: fx.Graph) -> set:
    """The removable nodes whose results reach nothing but other removable nodes."""
    dead: set = set()
    for node in reversed(graph.nodes):   # users come after their inputs
        if _removable(node) and all(user in dead for user in node.users):
            dead.add(node)
    return dead


# Where a function named as an aten op is torch's own operator.
_OP_NAMESPACES = (torch, torch.nn.functional, torch.linalg, torch.special, torch.fft)


def _removable(node: fx.Node) -> bool:
    if _projection(node):
        return _on_the_device(node)
    if not _a_torch_operator(node) or "out" in node.kwargs:
        return False
    if "draws_random" not in node.meta or "writes" not in node.meta:
        return False                     # not probed: effects unknown
    if node.meta["draws_random"] or node.meta["writes"]:
        return False
    value = node.meta.get("example_value")
    if value is None:                    # several results (``chunk``): the projections hold them
        picks = list(node.users)
        return bool(picks) and all(_projection(pick) and _on_the_device(pick) for pick in picks)
    leaves = pytree.tree_leaves(value)
    return _on_the_device(node) and bool(leaves) and all(isinstance(leaf, torch.Tensor) for leaf in leaves)


def _on_the_device(node: fx.Node) -> bool:
    """Where the tracer saw the op run: an op of host tensors in a device program runs eagerly
    in lazy mode too, and raises there (``tf[torch.tensor([7])]`` of a host tensor ``tf``)."""
    device = node.meta.get("device")
    return isinstance(device, torch.device) and device.type != "cpu"


def _projection(node: fx.Node) -> bool:
    """``results[k]`` of an op with several results: picks one, computes nothing."""
    if node.op != "call_function" or node.target is not operator.getitem:
        return False
    source = node.args[0]
    return isinstance(source, fx.Node) and source.op in ("call_function", "call_method") \
        and not isinstance(source.meta.get("example_value"), torch.Tensor) and isinstance(node.args[1], int)


def _a_torch_operator(node: fx.Node) -> bool:
    """An operator of Python or of torch that makes new values (not an in-place one)."""
    if node.op == "call_method":
        name = node.target
    elif node.op == "call_function" and getattr(node.target, "__module__", None) == "_operator":
        return not _in_place_operator(node.target.__name__)
    elif node.op == "call_function":
        name = getattr(node.target, "__name__", "")
        if not any(getattr(space, name, None) is node.target for space in _OP_NAMESPACES):
            return False
    else:
        return False
    return isinstance(name, str) and not name.endswith("_") and hasattr(torch.ops.aten, name)


def _in_place_operator(name: str) -> bool:
    """``iadd``, ``iand``, ...: the augmented assignments (``and_`` is ``and``'s operator)."""
    return name.startswith("i") and any(hasattr(operator, plain) for plain in (name[1:], name[1:] + "_"))
