"""Forward + backward as one aten graph, split into a forward graph and a backward graph.

``build_joint(fn, args, needs_grad)`` runs ``fn`` (any callable over flat positional
arguments, here a captured ``fx.GraphModule`` with its module state lifted) once on meta
tensors shaped like ``args``, with the arguments flagged in ``needs_grad`` requiring grad, and
then ``torch.autograd.grad`` from the outputs back to those arguments, all under an
``AtenRecorder``. The result is one *joint* aten graph over (arguments, output grads): the
forward's ops, then the ops autograd ran for the backward. No data is touched and nothing is
computed; ``torch._dynamo`` is not imported (see ``aten_recorder``).

``partition(joint)`` splits it with one rule, **save what backward reads**:

- forward graph: ``(*args) -> (*user output leaves, *saved)``: every op recorded in the forward
  phase; ``saved`` = each forward *result* that some backward op reads. A view (``t`` of a
  weight, ``detach`` of an activation, a ``view``) is not saved: its base is, and the view op
  is repeated in the backward graph (free on every device; saving it would make the device
  materialise a copy, a transposed copy of every weight for instance).
- backward graph: ``(*saved, *saved args, *output grads) -> (grad per argument needing grad)``:
  every op recorded in the backward phase; an *argument* it reads (a weight for
  ``convolution_backward``) is passed in again rather than saved, as the caller holds it anyway.

In-place ops stay in the forward graph as recorded (``add_`` on ``num_batches_tracked``,
``native_batch_norm`` updating the running stats): run lazily on the device they leave their
argument with pending computation, which the replay machinery (``lazy_graph``) turns into
explicit graph outputs written back to the caller's tensors, exactly as for inference graphs.

The trade-off. Saving every tensor backward reads costs memory between the two passes
(``Partition.saved_bytes``, activations proportional to batch size and depth) and costs nothing
in compute. The alternative is recomputation (rematerialisation): save fewer tensors (say, the
inputs of each block, or only the outputs of expensive ops such as convolutions and matmuls)
and recompute the cheap ones (relu, batch-norm normalisation, dropout from its saved seed,
attention softmax) inside the backward graph. AOT autograd's min-cut partitioner picks that cut
automatically, and on memory-bound accelerators recomputing a pointwise op is often cheaper
than writing it to memory and reading it back. Here we take the simple rule first: it is
obviously correct (backward reads exactly what eager autograd would have saved, the same
values), its memory is measured, and the graphs it produces are the ones eager autograd runs.
Because every partition is a pair of ordinary graphs, a recomputing partition can replace this
function without touching the replay side.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from .aten_recorder import AtenRecorder, RecordingError, meta_like, no_dynamo_import, \
    retarget, tensor_bytes
from .eager_saved import EagerSaved
from .guarded_views import guarded_kind
from .index_check import finite_required, reads_indices

FORWARD, BACKWARD = "forward", "backward"


class NotDifferentiable(Exception):
    """This program cannot be trained through a joint graph; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class JointGraph:
    """One aten graph: placeholders ``arg{i}`` (every argument) and ``tangent{k}``; it returns
    ``(*user leaves, *grads)``; nodes carry ``meta["phase"]``."""
    graph: fx.Graph
    constants: dict
    arg_count: int
    needs_grad: tuple          # per argument
    leaf_count: int            # user output leaves (tensors and Python values)
    treespec: pytree.TreeSpec
    differentiable: tuple      # leaf indices that require grad: one tangent each, in order
    held: tuple = ()           # per tangent: recorded nodes eager's autograd nodes hold (eager_saved)
    holders: tuple = ()        # per tangent: those autograd nodes (numbered) that hold any


@dataclass
class Partition:
    forward: fx.GraphModule    # (*args) -> (*user leaves, *saved)
    backward: fx.GraphModule   # (*saved, *args at saved_args, *tangents) -> grads (None if unused)
    leaf_count: int
    treespec: pytree.TreeSpec
    differentiable: tuple      # leaf indices that take a tangent, in the backward's order
    saved_args: tuple          # argument positions the backward reads
    grad_positions: tuple      # argument positions the backward returns grads for, in order
    saved_bytes: int           # memory of the saved tensors (each counted at its own size)
    saved_shapes: tuple        # ((shape, dtype), ...) of the saved tensors
    tangent_shapes: tuple      # ((shape, dtype), ...) of the output grads the backward takes
    # What eager autograd would check for in-place changes when a backward runs: per tangent,
    # the saved results ("saved", i) and arguments ("arg", p) the backward ops its grad flows
    # through read; and which user leaves are (views of) saved result i: {leaf: i}.
    tangent_reads: tuple = ()
    saved_leaves: dict = dataclasses.field(default_factory=dict)
    # Per tangent, eager's autograd nodes on its way that hold saved tensors (("node", i)),
    # and the backward ops (by their place in the backward phase) there that read anything
    # from the forward: what a backward that does not retain the graph frees (a later one
    # through any of them raises).
    tangent_read_ops: tuple = ()
    # Per grad returned (grad_positions order): the tangents it is made from; eager gives an
    # argument no grad (None) when none of those arrived. None: made from no tangent.
    grad_tangents: tuple = ()
    # Per tangent, what eager's autograd nodes on its way hold whether or not the backward reads
    # it (``eager_saved``): arguments ("arg", p) and user leaves ("leaf", k); ``checked_args``:
    # every argument position whose version a backward checks; ``held_leaves``: every such leaf.
    held_reads: tuple = ()
    checked_args: tuple = ()
    held_leaves: tuple = ()

    @property
    def saved_count(self) -> int:
        return len(self.saved_shapes)

    def to(self, device: torch.device) -> "Partition":
        """Both graphs with factory ops and constants moved to ``device`` (graphs copied)."""
        return dataclasses.replace(self, forward=_on_device(self.forward, device),
                                   backward=_on_device(self.backward, device))


def build_joint(fn, args: Sequence, needs_grad: Sequence[bool],
                decompositions=None) -> JointGraph:
    """Record ``fn(*args)`` and its backward (w.r.t. args flagged in ``needs_grad``) on meta;
    ops in ``decompositions`` are recorded as the ops they decompose into."""
    needs_grad = tuple(bool(n) for n in needs_grad)
    recorder = AtenRecorder(decompositions)
    eager_saved = EagerSaved(recorder)
    metas = []
    for i, (value, grad) in enumerate(zip(args, needs_grad)):
        if isinstance(value, torch.Tensor):
            meta = meta_like(value, requires_grad=grad)
            recorder.placeholder(meta, f"arg{i}")
        else:
            meta = value
            recorder.graph.placeholder(f"arg{i}").meta["phase"] = FORWARD
        metas.append(meta)
    grad_inputs = [m for m, grad in zip(metas, needs_grad) if grad]
    with no_dynamo_import():
        try:
            # Views regenerated by replaying their view ops, as autograd does for device tensors
            # (XLA's cannot be strided): on meta, an in-place op on a slice of an intermediate
            # would otherwise record an ``as_strided`` view for the backward to write through,
            # and torch_xla writes through a multi-dimensional non-contiguous ``as_strided`` view
            # to other elements (seed 198 i592: ``t[:, 1:].fill_(w)`` got the wrong gradient).
            with torch.enable_grad(), torch.autograd._force_original_view_tracking(True), recorder, \
                    eager_saved.hooks():
                out = fn(*metas)
                refuse_writes_that_require_grad(metas, needs_grad)
                leaves, treespec = pytree.tree_flatten(out)
                differentiable = _takes_tangent(leaves, metas)
                refuse_guarded_views(leaves, differentiable)
                with recorder.paused():
                    held, holders = eager_saved.held_per_leaf(leaves, differentiable, grad_inputs)
                recorder.phase = BACKWARD
                tangents = []
                with recorder.paused():
                    for k in differentiable:
                        tangents.append(torch.empty(leaves[k].shape, dtype=leaves[k].dtype,
                                                    device="meta"))
                for k, tangent in zip(differentiable, tangents):
                    with recorder.graph.inserting_before(_first_op(recorder.graph)):
                        recorder.placeholder(tangent, f"tangent{k}")
                grads = [None] * len(grad_inputs)
                if differentiable and grad_inputs:
                    grads = torch.autograd.grad([leaves[k] for k in differentiable], grad_inputs,
                                                tangents, allow_unused=True)
        except RecordingError as error:
            raise NotDifferentiable(error.reason) from None
        except (RuntimeError, NotImplementedError, TypeError) as error:
            first = (str(error).splitlines() or [""])[0][:200]
            raise NotDifferentiable(f"recording forward+backward on meta tensors failed: "
                                    f"{type(error).__name__}: {first}") from None
        recorder.graph.output((tuple(recorder.node_of(leaf) for leaf in leaves),
                               tuple(recorder.node_of(g) for g in grads)))
    return JointGraph(recorder.graph, recorder.constants, len(args), needs_grad, len(leaves),
                      treespec, differentiable, held, holders)


def refuse_writes_that_require_grad(arguments, needs_grad) -> None:
    """An argument that did not require grad and was written in place with a value that does
    (``y.unsqueeze(0).copy_(x)``, x requiring grad): in eager it now requires grad and has a
    history; the bridge writes it back as data. Such a call runs eagerly (seed 197 i972)."""
    for position, (argument, needed) in enumerate(zip(arguments, needs_grad)):
        if isinstance(argument, torch.Tensor) and not needed and argument.requires_grad:
            raise NotDifferentiable(f"the graph writes a value that requires grad into argument "
                                    f"{position} in place (eager gives it an autograd history)")


def refuse_guarded_views(leaves, differentiable) -> None:
    """A differentiable output that is a view autograd guards (an output of a multi-output op
    such as ``chunk``, a view made in no-grad mode): eager refuses an in-place change to it,
    a tensor the step returns would allow it. Such a call runs eagerly."""
    for k in differentiable:
        kind = guarded_kind(leaves[k])
        if kind is not None:
            raise NotDifferentiable(f"output {k} is a view autograd guards ({kind.name}): "
                                    f"eager refuses in-place changes to it")


def refuse_mixed_dtypes_eager_refuses(backward_ops) -> None:
    """A backward op given floating tensors of several dtypes, which eager's CPU kernel refuses
    where its meta kernel (the recording) and the device's lowering compute: ``mse_loss`` of a
    float32 prediction and a float64 target raises "Found dtype Double but expected Float" in
    eager's backward (probe AE r2). Each such op runs once on zeros shaped like its inputs; if
    it raises, the call runs eagerly, and eager's backward raises its error."""
    for node in backward_ops:
        inputs = [n for n in node.all_input_nodes if isinstance(n.meta.get("dtype"), torch.dtype)]
        if not isinstance(node.target, torch._ops.OpOverload) or \
                len({n.meta["dtype"] for n in inputs if n.meta["dtype"].is_floating_point}) < 2:
            continue
        args, kwargs = pytree.tree_map_only(fx.Node, _zeros_like_recorded, (node.args, node.kwargs))
        try:
            node.target(*args, **kwargs)
        except RuntimeError as error:
            first = (str(error).splitlines() or [""])[0][:160]
            raise NotDifferentiable(f"eager's CPU kernel of {node.target} refuses its operands' "
                                    f"dtypes in the backward: {first}") from None


def _zeros_like_recorded(node: fx.Node):
    shape, dtype = node.meta.get("shape"), node.meta.get("dtype")
    return torch.zeros(shape, dtype=dtype) if isinstance(dtype, torch.dtype) else None


def _takes_tangent(leaves, metas) -> tuple:
    """Leaf indices that get an output grad: tensors requiring grad, each once (a tensor
    returned twice is one output of the step), and not an argument itself (returned as the
    caller's own tensor, its grad reaches it without the step)."""
    seen = {id(m) for m in metas if isinstance(m, torch.Tensor)}
    taken = []
    for k, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor) and leaf.requires_grad and id(leaf) not in seen:
            seen.add(id(leaf))
            taken.append(k)
    return tuple(taken)


def partition(joint: JointGraph) -> Partition:
    """Split the joint graph: save what backward reads (see the module docstring)."""
    graph = joint.graph
    output = graph.output_node()
    leaf_nodes, grad_nodes = output.args[0]
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    arg_nodes = [n for n in placeholders if n.name.startswith("arg")]
    tangent_nodes = [n for n in placeholders if n.name.startswith("tangent")]
    position_of = {node: i for i, node in enumerate(arg_nodes)}

    backward_ops = [n for n in graph.nodes
                    if n.op in ("call_function", "get_attr") and n.meta.get("phase") == BACKWARD]
    backward_set = set(backward_ops)
    refuse_mixed_dtypes_eager_refuses(backward_ops)
    saved, saved_args, recomputed = [], [], set()

    def read_from_forward(node):
        """Backward reads forward ``node``: save its view root, recompute the view chain."""
        if node.op == "get_attr":                # a constant: read again, not saved
            recomputed.add(node)
            return
        root, chain = _view_root(node)
        recomputed.update(chain)
        if root in position_of:
            if position_of[root] not in saved_args:
                saved_args.append(position_of[root])
        elif root not in saved:
            saved.append(root)

    for node in backward_ops:
        for read in node.all_input_nodes:
            if read not in backward_set and read not in tangent_nodes:
                read_from_forward(read)
    # A grad that no backward op made: an argument, a tangent or a forward result.
    for node in grad_nodes:
        if isinstance(node, fx.Node) and node not in backward_set and node not in tangent_nodes:
            read_from_forward(node)
    saved_args.sort()

    forward = fx.Graph()
    env = {}
    for node in arg_nodes:
        env[node] = forward.placeholder(node.name)
    for node in graph.nodes:
        if node.op in ("call_function", "get_attr") and node not in backward_set:
            env[node] = forward.node_copy(node, env.__getitem__)
    forward.output(tuple(_lookup(env, leaf) for leaf in leaf_nodes) +
                   tuple(env[node] for node in saved))
    forward.eliminate_dead_code(is_impure_node=_kept)

    backward = fx.Graph()
    env = {}
    for k, node in enumerate(saved):
        env[node] = backward.placeholder(f"saved{k}")
    for position in saved_args:
        env[arg_nodes[position]] = backward.placeholder(arg_nodes[position].name)
    for node in tangent_nodes:
        env[node] = backward.placeholder(node.name)
    for node in graph.nodes:                     # views of saved tensors, constants: in order
        if node in recomputed:
            env[node] = backward.node_copy(node, env.__getitem__)
    for node in backward_ops:
        env[node] = backward.node_copy(node, env.__getitem__)
    grad_positions = tuple(i for i, grad in enumerate(joint.needs_grad) if grad)
    backward.output(tuple(_lookup(env, node) for node in grad_nodes))
    backward.eliminate_dead_code()

    saved_index = {node: i for i, node in enumerate(saved)}
    roots = {k: _view_root(leaf)[0] for k, leaf in enumerate(leaf_nodes) if isinstance(leaf, fx.Node)}
    saved_leaves = {k: saved_index[root] for k, root in roots.items() if root in saved_index}
    tangent_reads, read_ops, flows = _reads_per_tangent(backward_ops, tangent_nodes, saved_index,
                                                        position_of)
    held_reads = tuple(_held_reads(nodes, roots, position_of) for nodes in joint.held)
    if joint.holders:
        read_ops = tuple(ops | {("node", i) for i in holders}
                         for ops, holders in zip(read_ops, joint.holders))
    held = frozenset().union(*held_reads)
    read = frozenset().union(held, *tangent_reads)
    checked_args = tuple(sorted(set(saved_args) | {p for kind, p in read if kind == "arg"}))
    held_leaves = tuple(sorted(k for kind, k in held if kind == "leaf"))
    # per grad returned: the tangents it is made from (None: from none, a value whatever flows)
    grad_tangents = tuple(flows.get(node) if isinstance(node, fx.Node) else None for node in grad_nodes)
    root = _constants_module(joint.constants)
    return Partition(
        forward=fx.GraphModule(root, forward), backward=fx.GraphModule(root, backward),
        leaf_count=joint.leaf_count, treespec=joint.treespec,
        differentiable=joint.differentiable, saved_args=tuple(saved_args),
        grad_positions=grad_positions, saved_bytes=sum(map(tensor_bytes, saved)),
        saved_shapes=tuple((n.meta["shape"], n.meta["dtype"]) for n in saved),
        tangent_shapes=tuple((n.meta["shape"], n.meta["dtype"]) for n in tangent_nodes),
        tangent_reads=tangent_reads, tangent_read_ops=read_ops, saved_leaves=saved_leaves,
        grad_tangents=grad_tangents,
        held_reads=held_reads, checked_args=checked_args, held_leaves=held_leaves)


def _held_reads(nodes, roots: dict, position_of: dict) -> frozenset:
    """The arguments and user leaves that (views of) the held ``nodes`` are: what a version
    check can watch (an intermediate no caller holds cannot be written)."""
    reads = set()
    for node in nodes:
        root, _ = _view_root(node)
        position = _written_argument(node, position_of)
        if position is not None:
            reads.add(("arg", position))
        reads.update(("leaf", k) for k, leaf_root in roots.items() if leaf_root is root)
    return frozenset(reads)


def _reads_per_tangent(backward_ops, tangent_nodes, saved_index, position_of) -> tuple:
    """Per tangent, what the backward ops its grad flows through read from the forward: eager
    runs an autograd node only when a grad reaches it, and only then checks that what the node
    saved was not changed in place since. Also, per tangent, the ops (their places in
    ``backward_ops``) that read anything, and ``{node: the tangents it is made from}``."""
    depends = {node: frozenset({k}) for k, node in enumerate(tangent_nodes)}
    tangent_free = {}                    # backward op that no grad flows through -> what it reads

    def reads_of(node):
        if node in depends:
            return frozenset()
        if node in tangent_free:
            return tangent_free[node]
        root, _ = _view_root(node)
        if root in position_of:
            return frozenset({("arg", position_of[root])})
        if root in saved_index:
            position = _written_argument(root, position_of)
            also = {("arg", position)} if position is not None else set()
            return frozenset({("saved", saved_index[root]), *also})
        return frozenset()

    per_tangent = [set() for _ in tangent_nodes]
    read_ops = [set() for _ in tangent_nodes]
    for place, node in enumerate(backward_ops):
        inputs = node.all_input_nodes
        flows = frozenset().union(*(depends.get(i, frozenset()) for i in inputs))
        reads = frozenset().union(*map(reads_of, inputs))
        if flows:
            depends[node] = flows
            for k in flows:
                per_tangent[k] |= reads
                if reads:
                    read_ops[k].add(place)
        else:
            tangent_free[node] = reads
    return tuple(map(frozenset, per_tangent)), tuple(map(frozenset, read_ops)), depends


def joint_partition(fn, args, needs_grad, decompositions=None) -> Partition:
    """``partition(build_joint(fn, args, needs_grad, decompositions))``."""
    return partition(build_joint(fn, args, needs_grad, decompositions))


def _view_root(node: fx.Node):
    """(the tensor ``node`` is a chain of views of, the view nodes from it to ``node``)."""
    chain = []
    while (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
           and node.target.is_view and isinstance(node.args[0], fx.Node)
           and len(node.all_input_nodes) == 1):
        chain.append(node)
        node = node.args[0]
    return node, chain


def _written_argument(node: fx.Node, position_of: dict):
    """The argument position that ``node`` is, through views and in-place writes (``x.add_(1)``
    and ``torch.add(a, b, out=x)`` return the caller's ``x``, which eager's autograd then saves
    and checks), or None."""
    while True:
        node, _ = _view_root(node)
        if node in position_of:
            return position_of[node]
        written = _written_input(node)
        if written is None:
            return None
        node = written


def _written_input(node: fx.Node):
    """The input node an op writes in place and returns (``add_``'s self, ``add.out``'s out;
    through ``getitem``, one of several: ``max.dim_max``'s values or indices)."""
    index = 0
    if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[0], fx.Node):
        node, index = node.args[0], node.args[1]
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    schema = node.target._schema
    returned = schema.returns[index].alias_info if index < len(schema.returns) else None
    if returned is None or not returned.is_write:
        return None
    for k, argument in enumerate(schema.arguments):
        if argument.alias_info is not None and argument.alias_info.before_set == returned.before_set:
            value = node.args[k] if k < len(node.args) else node.kwargs.get(argument.name)
            return value if isinstance(value, fx.Node) else None
    return None


def _kept(node: fx.Node) -> bool:
    """Kept in the forward graph although unused: impure ops, ops reading index tensors
    (eager raises for an index out of range whether or not the result is used: index_check),
    and the checks a formula asked for (``finite_required``)."""
    return node.is_impure() or reads_indices(node) or node.target is finite_required


def _lookup(env, value):
    return env[value] if isinstance(value, fx.Node) else value


def _first_op(graph: fx.Graph):
    for node in graph.nodes:
        if node.op != "placeholder":
            return node
    return None


def _constants_module(constants: dict) -> torch.nn.Module:
    root = torch.nn.Module()
    for name, value in constants.items():
        root.register_buffer(name, value)
    return root


def _on_device(gm: fx.GraphModule, device: torch.device) -> fx.GraphModule:
    graph = fx.Graph()
    output = graph.graph_copy(gm.graph, {}, return_output_node=True)
    graph.output(output[0] if isinstance(output, tuple) else output)
    retarget(graph, device)
    root = torch.nn.Module()
    for name, value in gm.named_buffers():
        # 0-dim constants stay on the host (they act as scalars); others move to the device.
        root.register_buffer(name, value if value.dim() == 0 else value.to(device))
    return fx.GraphModule(root, graph)
