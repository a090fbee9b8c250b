"""Outputs that view a device tensor, made again by the graph's own view ops after each replay.

A graph often returns a view of one of its arguments (the code after a graph break goes on
with ``x.flatten(1)`` or ``mask[:, None, None, :]`` of the frame's input) or of another of its
outputs (CLIP returns ``logits_per_text.t()`` beside ``logits_per_text``). On the host the
bridge rebuilds such outputs with ``as_strided`` (``aliasing.HostView``, ``OutputView``). On
the device that is not sound: torch_xla reads ``as_strided`` strides in the storage of a base
that is itself a view, in the layout XLA chose for a program's result (a row came back as a
column), and its backward fails for reshapes. So a view of a device tensor is made as eager
makes it: by running the graph's own ops that lead to it from the arguments or from the
output it views, which the meta run proves are view ops only (no data computed, nothing
written, nothing drawn). The result is lazy torch_xla's own view: it shares the viewed
tensor's data, and autograd records the same view functions as in eager.
"""

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from .dead_code import empty_graph_like
from .lazy_graph import NotOneGraph

# aten ops that read only metadata (a size, a stride): neither data nor a new tensor
_METADATA_OPS = frozenset(getattr(torch.ops.aten, name).default for name in (
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "dim",
    "is_contiguous"))


class DeviceViews:
    """Makes output leaves ``leaves`` again, as views of the caller's arguments or of the output
    leaves ``bases`` (their own results, after the replay).

    ``program`` is the bridge's ``FlatProgram``; ``metas`` its arguments and ``base_metas`` those
    outputs as meta tensors (the compile-time check runs the view ops on them)."""

    def __init__(self, program, leaves: tuple, metas: list, bases: tuple = (), base_metas: list = ()):
        self.leaves, self.bases = tuple(leaves), tuple(bases)
        self.program = program
        self.graph_module = _only_the_ops_of(program.graph_module, self.leaves, self.bases)
        _check_views_only(self, metas, list(base_metas))

    def __call__(self, args: list, bases: list) -> list:
        forward = self.graph_module.forward
        return list(self.program.run_with(lambda *inputs: forward(*inputs, *bases), args))

    def into(self, leaves: list, args: list) -> list:
        """``leaves`` with each of ours replaced by the view made of ``args`` and ``leaves``."""
        made = self(args, [leaves[b] for b in self.bases])
        leaves = list(leaves)
        for k, view in zip(self.leaves, made):
            leaves[k] = view
        return leaves


def _only_the_ops_of(source: fx.GraphModule, leaves: tuple, bases: tuple) -> fx.GraphModule:
    """A copy of ``source`` that computes only output leaves ``leaves``: the same placeholders,
    then one per output leaf in ``bases``, which stands for that output's node."""
    output = source.graph.output_node()
    flat = pytree.tree_leaves(output.args[0])
    wanted = [flat[k] for k in leaves]
    graph, copies = empty_graph_like(source), {}
    for node in source.graph.nodes:
        if node.op == "placeholder":
            copies[node] = graph.node_copy(node, lambda n: copies[n])
    for b in bases:
        copies[flat[b]] = graph.placeholder(f"output_{b}")
    needed, todo = set(), [n for n in wanted if isinstance(n, fx.Node)]
    while todo:
        node = todo.pop()
        if node not in needed and node not in copies:
            needed.add(node)
            todo.extend(node.all_input_nodes)
    for node in source.graph.nodes:
        if node in needed:
            copies[node] = graph.node_copy(node, lambda n: copies[n])
    graph.output(tuple(copies[n] if isinstance(n, fx.Node) else n for n in wanted))
    return fx.GraphModule(source, graph)


class _OnlyViews(TorchDispatchMode):
    """Notes every aten op that is neither a view nor a metadata read."""

    def __init__(self):
        super().__init__()
        self.others = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not getattr(func, "is_view", False) and func not in _METADATA_OPS:
            self.others.append(str(func))
        return func(*args, **(kwargs or {}))


def _check_views_only(views: DeviceViews, metas: list, base_metas: list) -> None:
    mode = _OnlyViews()
    try:
        with torch.no_grad(), mode:
            views(metas, base_metas)
    except Exception as error:
        raise NotOneGraph(f"an output is a view of a device tensor and its ops do not run on "
                          f"meta tensors ({type(error).__name__})") from None
    if mode.others:
        raise NotOneGraph(f"an output is a view of a device tensor made by ops that are not "
                          f"views only ({', '.join(sorted(set(mode.others))[:3])}): replaying "
                          "would return a new tensor instead")
