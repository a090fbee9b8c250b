"""Graphs with ops XLA cannot lower: find those ops, split the graph around them.

An op without an XLA lowering runs on the CPU inside torch_xla ("CPU fallback"): it forces the
pending lazy graph to execute and cuts it in two, so a graph containing one cannot be replayed
as one hash. (An op with a decomposition that lowers never gets here: ``decompose`` traces it
decomposed; the segments here trace those decompositions too.) ``find_eager_nodes`` runs the graph node by node on device copies and reports the
nodes during which the device executed or a fallback op ran. ``PartitionedProgram`` splits the
graph at those nodes: each run of lowerable nodes becomes a ``ReplayedSegment`` (captured on its
first call, replayed by hash afterwards), and each eager node runs as it is, between them.
``split_module`` orders the pieces by data dependence alone, so a split that would not keep the
graph's order (an in-place write moved past a read of the same tensor) is refused: eager.
"""

import torch
import torch.fx as fx
from torch.fx.passes.split_module import split_module
from torch.utils import _pytree as pytree

from . import device as dev
from .decompose import decomposing
from .lazy_graph import HostRandomWatch, NotOneGraph
from .graph_warnings import GraphWarnings
from .programs import ReplayedGraph


class _ActivityProbe(fx.Interpreter):
    """Runs a graph and notes the nodes during which the device ran or a fallback op ran."""

    def __init__(self, module, decompositions=None):
        super().__init__(module)
        self.eager_nodes = []
        self.decompositions = decompositions

    def run_node(self, node):
        before = dev.device_activity()
        with HostRandomWatch() as watch, decomposing(self.decompositions):
            result = super().run_node(node)
        if dev.device_activity() != before or watch.ops:
            self.eager_nodes.append(node.name)
        return result


def find_eager_nodes(flat, device_args, copies=None, decompositions=None) -> list:
    """Names of the nodes of ``flat.graph_module`` that do not stay in the lazy graph (with the
    ops in ``decompositions`` decomposed), found on ``copies`` of ``device_args``
    (``dev.device_copies``; made here when None)."""
    if copies is None:
        copies = dev.device_copies(device_args)
    probe = _ActivityProbe(flat.graph_module, decompositions)
    with torch.no_grad():
        flat.run_with(lambda *inputs: probe.run(*inputs), copies)
    return probe.eager_nodes


class ReplayedSegment(torch.nn.Module):
    """A split-off piece of a graph, captured on its first call and replayed afterwards (a
    ReplayedGraph: recaptured for new non-tensor arguments or an evicted hash)."""

    def __init__(self, module: fx.GraphModule, decompositions=None, check_indices=False):
        super().__init__()
        self.module = module
        self.decompositions = decompositions
        self.check_indices = check_indices    # each run checks the indices it reads (index_check)
        self.program = None
        self.warnings = ()              # what its capture warned (``PartitionedProgram.warnings``)

    def forward(self, *args):
        args = list(args)
        dev.materialize([a for a in args if isinstance(a, torch.Tensor)])
        if self.program is None:
            tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
            with GraphWarnings() as warned:
                self.program = ReplayedGraph(self.module, args, shape_positions=tensors,
                                             decompositions=self.decompositions,
                                             check_indices=self.check_indices)
            self.warnings = tuple(warned.caught)
        return pytree.tree_unflatten(self.program.run(args), self.program.treespec)


def split_at(graph_module: fx.GraphModule, eager_nodes, decompositions=None, check_indices=False) -> fx.GraphModule:
    """Split into ReplayedSegments (tracing the ops in ``decompositions`` as their
    decomposition; checking the indices they read when ``check_indices``) and single eager
    nodes, in graph order."""
    eager = set(eager_nodes)
    part_of, part, previous_eager = {}, 0, None
    for node in graph_module.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        is_eager = node.name in eager
        if previous_eager is not None and (is_eager or previous_eager):
            part += 1
        part_of[node.name] = part
        previous_eager = is_eager
    _refuse_writes_across_pieces(graph_module, part_of)
    # (split_module reads the symbols of each example value; a body's is the module itself)
    modules = {node: node.meta.pop("example_value") for node in graph_module.graph.nodes
               if isinstance(node.meta.get("example_value"), torch.nn.Module)}
    try:
        split = split_module(graph_module, graph_module, lambda node: part_of[node.name])
    finally:
        for node, module in modules.items():
            node.meta["example_value"] = module
    order = [int(n.target.rsplit("_", 1)[1]) for n in split.graph.nodes
             if n.op == "call_module" and n.target.startswith("submod_")]
    if order != sorted(order):
        # split_module orders the pieces by data dependence only: a piece that writes a tensor
        # in place could move after a piece that reads it (x.mul_(2); i0(x))
        raise NotOneGraph("splitting around the CPU-fallback ops would reorder the graph's "
                          f"pieces ({order}): an in-place write could move past a read")
    for name, child in list(split.named_children()):
        computes = [n.name for n in child.graph.nodes if n.op not in ("placeholder", "output")]
        if not eager.intersection(computes):
            setattr(split, name, ReplayedSegment(child, decompositions, check_indices))
    return split


def _refuse_writes_across_pieces(graph_module: fx.GraphModule, part_of: dict) -> None:
    """A piece's results come back as tensors of their own: a view made in one piece is no
    longer a view of its base in the next, so an in-place write there would not reach the base
    (``z = torch.ones(3, 4); z.narrow(1, 1, 2).add_(x)`` returned z unchanged). A node that
    writes in place (the tracer's ``meta["writes"]``) must find what it writes made in its own
    piece (or be given it as an argument)."""
    for node in graph_module.graph.nodes:
        if not node.meta.get("writes") or node.name not in part_of:
            continue
        crossing = [a.name for a in node.all_input_nodes
                    if a.op != "placeholder" and part_of.get(a.name) != part_of[node.name]]
        if crossing:
            raise NotOneGraph(f"splitting around the CPU-fallback ops would cut {node.name}, an "
                              f"in-place write, from {', '.join(crossing)} (its views would not "
                              f"reach their base)")


class PartitionedProgram:
    """Program protocol (like ``ReplayedGraph``): ``run(device_args) -> leaves`` plus
    ``mutated`` (positions written in place) and ``argument_leaves`` ({leaf: position})."""

    def __init__(self, flat, device_args, eager_nodes, copies=None, decompositions=None, check_indices=False):
        """``copies``: untouched device copies of ``device_args`` to capture on (made if None);
        ``decompositions``: ops the segments trace as their decomposition (``decompose``);
        ``check_indices``: each segment checks the indices it reads, as one graph does
        (``index_check``: XLA clamps an index eager refuses)."""
        self.flat = flat
        self.eager_nodes = tuple(eager_nodes)
        self.split = split_at(flat.graph_module, eager_nodes, decompositions, check_indices)
        if copies is None:
            copies = dev.device_copies(device_args)
        tensor_positions = [i for i, a in enumerate(copies) if isinstance(a, torch.Tensor)]
        # (the version too: an eager op between segments may write a device tensor's own buffer
        # in place, keeping its data's identity: embedding_renorm_, probe P)
        identity_before = dev.data_identities([copies[i] for i in tensor_positions])
        leaves = self.run(copies)       # the first run captures every segment
        # what the segments' captures warned, issued again before every run as for one graph
        # (the eager ops between them warn themselves)
        self.warnings = tuple(warning for segment in self.split.children()
                              if isinstance(segment, ReplayedSegment) for warning in segment.warnings)
        dev.materialize([c for c in copies if isinstance(c, torch.Tensor)])
        identity_after = dev.data_identities([copies[i] for i in tensor_positions])
        self.mutated = tuple(i for i, before, after in zip(tensor_positions, identity_before, identity_after)
                             if after[:2] != before[:2])
        self.argument_leaves = {k: i for k, leaf in enumerate(leaves) for i in tensor_positions
                                if leaf is copies[i]}

    def run(self, device_args, same_signature=False) -> list:
        with torch.no_grad():
            out = self.flat.run_with(self.split, device_args)
        leaves, self.treespec = pytree.tree_flatten(out)
        return leaves
