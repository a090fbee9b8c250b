"""Training through the device: a call made in grad mode with a tensor that requires grad.

``ReplayedTraining`` (``torchxla_trace_once``): the first such call records the captured graph's
forward and backward as one aten graph on meta tensors and splits it (``joint_graph``: save
what backward reads). The forward graph and the backward graph then each become a
``ReplayedGraph``: traced on the device once, compiled once, replayed by hash on every later
call. The call itself is one ``autograd.Function`` (``_DeviceStep``) per group of outputs that
eager's autograd graph keeps apart (``backward_groups``; nearly always one group), so that a
backward through one output runs, frees and checks only what eager would:

- ``forward`` replays the forward graph: the user's outputs plus the saved tensors, which stay
  on the device, held by ``ctx.save_for_backward`` (so ``retain_graph`` and the "backward
  through the graph a second time" error are autograd's own; a node for several outputs
  frees them per op, as eager's nodes would: ``_PartlyFreed``), with the arguments the
  backward reads (weights, for instance; device copies of host ones);
- ``backward`` replays the group's backward graph on (saved tensors, output grads) and returns
  one grad per argument that requires grad (None for those its grads do not reach, which are
  not even its edges), on that argument's device. Autograd does the rest, exactly
  as in eager mode: ``.grad`` accumulates on leaves, arguments that do not require grad get
  nothing, non-leaf arguments pass their grad upstream.

One plan (joint graph, two compiled graphs) per set of arguments requiring grad and argument
shapes, which the guards of the cache entry already pin. Both graphs are compiled on the first
call, the backward too even if no backward ever runs (a model called for inference without
``torch.no_grad()``): the price of finding a backward the device cannot run before any call
depends on it; under ``torch.no_grad()`` the inference graph alone is used. An op the device
cannot lower (XLA has no ``native_layer_norm_backward``) would run on the CPU and split the
graph: the joint graph is then recorded again with that op decomposed (``torch._decomp``) into
ops the device has. Likewise when the device's own op saves other tensors for its backward than
the recorded one (XLA's batch norm in eval mode saves empty statistics): that op and the backward
ops reading them are recorded decomposed, so both sides run the same reference formulas.
In-place updates the forward graph makes (batch norm's running stats) are written back to the
caller's tensors as for inference. Random ops draw on the host generator, as eager does
(``host_random``: the forward graph takes each replay's draws as inputs); a dropout mask is a
forward result saved for the backward, so forward and backward see the same mask.

An output that is an argument itself is the caller's tensor, as in eager (its grad reaches it
without the step), and a tensor returned twice is one output of the step, returned twice.
Every other output is an output of the step, beside the others, as AOTAutograd's compiled
function returns them (``torch.compile`` behaves the same): an intermediate returned with a
result computed from it (``return head(h).sum(), h``) is not on that result's autograd path, so
a hook or ``retain_grad`` on it, or ``autograd.grad(loss, h)``, sees only the grad given to it
directly.  The parameters' gradients are eager's.

In-place changes are checked as eager's autograd checks them: a backward raises "modified by
an inplace operation" when an argument or an output it reads changed since the forward, only
for the output grads that arrived (eager checks a saved tensor when a grad reaches its node).

Not supported, with the reason (the call runs eagerly, or for double backward, an error):
an output that is a view of an argument or of another output in a graph that also switches grad
mode, or of an argument the graph writes in place, a graph writing in place to an argument that
requires grad, and graphs that do not stay one lazy XLA graph. ``create_graph=True`` (the backward
graph is replayed by hash and has no autograd of its own) recomputes the call eagerly
(``double_backward``), or raises ``DoubleBackwardUnsupported`` saying why it cannot.

Both training paths (this and ``lazy_training.LazyTraining``) need autograd's engine to have
a queue for the device (``device.backward_on_device``): a backward that ran before torch_xla
was loaded leaves none, and such calls run eagerly.
"""

from __future__ import annotations

import operator

import torch
from torch.utils import _pytree as pytree

from . import device as dev
from .aliasing import rebuild_output_views
from .guarded_views import guard_views_as_eager
from .backward_groups import for_arrived, restrict, tangent_groups
from .counters import counters
from .decompose import learn
from .double_backward import DoubleBackwardUnsupported, Recompute, draws_random, reads_and_writes, unsupported
from .eager_faithful import eager_faithful
from .eager_saved import _check_version, _version
from .graph_warnings import GraphWarnings, WarningIsError, reissue
from .index_check import require_finite
from .joint_graph import NotDifferentiable, Partition, joint_partition
from .lazy_graph import ArgumentCopy, Constant, DrawReadsValues, LeafShapesDiffer, NotOneGraph, Result
from .programs import ReplayedGraph

NO_GRAD_NEEDED = object()   # returned by a training path when no argument requires grad
_NO_DEVICE_BACKWARD = ("autograd's engine started before torch_xla was loaded and has no queue "
                       "for the device (import torch_xla before the first backward)")
_INFERENCE = "no output requires grad"   # a plan's place when the inference graph is the answer


class BatchedBackwardUnsupported(RuntimeError):
    """A replayed backward asked for a batch of gradients at once (``is_grads_batched=True``,
    ``jacobian(vectorize=True)``): its graph takes one gradient per output."""


_shape_of = operator.attrgetter("shape")
_dtype_of = operator.attrgetter("dtype")


def _requires_grad(value) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


class TrainingPlan:
    """The joint graph's two halves for one key, traced and compiled on the device now (the
    backward on example values: zeros shaped like the saved tensors and output grads), so a
    graph the device cannot run is found before any call depends on it."""

    warnings = ()             # what warned while it was traced: issued again by every step

    def __init__(self, partition: Partition, device_args, tensor_positions, check_indices=False):
        self.partition = partition
        try:                  # the saved tensors must be what the backward graph is made for
            self.forward = ReplayedGraph(_ForwardRequiringFinite(partition), device_args, expected_shapes=[
                None] * partition.leaf_count + [shape for shape, _ in partition.saved_shapes],
                check_indices=check_indices)
        except LeafShapesDiffer as differ:
            raise SavedShapesDiffer(_ops_around(partition, [k - partition.leaf_count
                                                            for k in differ.leaves])) from None
        written = set(self.forward.mutated).intersection(partition.grad_positions)
        if written:
            raise NotDifferentiable(f"the graph writes in place to arguments that require grad "
                                    f"(positions {sorted(written)})")
        # Outputs that are not the step's own: an argument itself (the caller's tensor is
        # returned, as in eager) and a result returned again (the same tensor as before).
        leaf_count = partition.leaf_count
        self.argument_leaves = {k: p for k, p in self.forward.argument_leaves.items() if k < leaf_count}
        self.repeats, first = {}, {}
        for k, leaf in enumerate(self.forward.graph.leaves[:leaf_count]):
            if isinstance(leaf, (Result, Constant, ArgumentCopy)) and first.setdefault(leaf, k) != k:
                self.repeats[k] = first[leaf]
        if set(partition.differentiable) & (set(self.argument_leaves) | set(self.repeats)):
            raise NotDifferentiable("the device graph's outputs repeat tensors the recorded "
                                    "graph keeps apart")
        examples = dev.to_device([torch.zeros(shape, dtype=dtype) for shape, dtype in
                                  partition.saved_shapes + partition.tangent_shapes])
        saved_count = len(partition.saved_shapes)
        inputs = [*examples[:saved_count], *[device_args[p] for p in partition.saved_args]]
        tangents = examples[saved_count:]
        self.tensor_positions = tensor_positions
        # Which of the Function's tensor inputs get a grad, and from which backward output.
        grad_index = {p: k for k, p in enumerate(partition.grad_positions)}
        self.grad_of_input = tuple(grad_index.get(p) for p in tensor_positions)
        groups = tangent_groups(partition.backward, len(tangents))
        if len(groups) == 1:
            self.groups = [_Group(groups[0], partition.backward, inputs + tangents, self.grad_of_input)]
        else:                            # one autograd node per group, as eager's graph falls apart
            self.groups = [_Group(group, restrict(partition.backward, group, len(tangents)),
                                  inputs + [tangents[j] for j in group], self.grad_of_input)
                           for group in groups]
        self.group_of_tangent = {j: g for g, group in enumerate(self.groups) for j in group.tangents}
        # per group: the saved tensors its node saves (and so checks) for its backward
        self.saved_reads = [_saved_reads(partition, group.tangents) for group in self.groups]
        # per tangent: the saved tensors its grad's way reads
        self.tangent_saved_reads = tuple(_saved_reads(partition, (j,)) for j in range(len(tangents)))
        self.saved_bytes = partition.saved_bytes
        self.draws = draws_random(partition.forward)
        self.reads_writes = reads_and_writes(partition.forward, partition.differentiable)
        self.unchecked_positions = tuple(p for p in tensor_positions if p not in partition.checked_args)


class _Group:
    """The outputs whose grads one autograd node takes (``backward_groups``): their tangents
    (indices), the backward graph replayed for them, and the inputs it gives no grad, which the
    node is given detached: as its edges, autograd would run their own backward nodes (with no
    grad), which check their saved tensors for in-place changes, where eager never reaches them."""

    def __init__(self, tangents, backward_gm, examples, grad_of_input):
        self.tangents = tangents
        self.backward_gm = backward_gm
        self.backward = ReplayedGraph(backward_gm, examples)
        self.partial = {}           # arrived tangents -> the backward for them (``for_arrived``)
        grads = backward_gm.graph.output_node().args[0]
        self.gives = frozenset(index for index, grad in enumerate(grads) if grad is not None)
        detached = {k for k, index in enumerate(grad_of_input) if index not in self.gives}
        self.detached = frozenset() if len(detached) == len(grad_of_input) else frozenset(detached)

    def backward_for(self, active, inputs) -> ReplayedGraph:
        """The backward graph for the tangents that came (``active``): the whole group's when
        all did, else one made (on these inputs) and kept for the next call like it."""
        if len(active) == len(self.tangents):
            return self.backward
        arrived = frozenset(i for i, j in enumerate(self.tangents) if j in active)
        if arrived not in self.partial:
            try:
                with dev.function_modes_set_aside():
                    self.partial[arrived] = ReplayedGraph(
                        for_arrived(self.backward_gm, arrived, len(self.tangents)), inputs)
            except Exception:     # (a subset of a graph the device ran: not expected) the
                self.partial[arrived] = self.backward    # whole group's, zeros for the rest
        return self.partial[arrived]


class SavedShapesDiffer(NotDifferentiable):
    """The device's forward saves tensors shaped unlike the recorded graph's (which its backward
    graph was made for); ``ops``: the aten ops that made them."""

    def __init__(self, ops):
        super().__init__(f"the device's forward saves tensors shaped unlike the recorded graph's "
                         f"(made by {', '.join(sorted(ops))}), which its backward graph was made for")
        self.ops = ops


def _ops_around(partition, saved_indices) -> set:
    """Names (``aten::op``) of the forward ops that made saved tensors ``saved_indices`` and of
    the backward ops that read them: the device's own pair (batch norm and its backward) agree
    on what those tensors hold, so one decomposed means both decomposed."""
    output = partition.forward.graph.output_node()
    made = [output.args[0][partition.leaf_count + k] for k in saved_indices]
    made = [node.args[0] if node.target is operator.getitem else node for node in made]
    wanted = {f"saved{k}" for k in saved_indices}
    read, reading = [], [node for node in partition.backward.graph.nodes if node.name in wanted]
    while reading:                             # through views, to the ops that use the values
        users = [user for node in reading for user in node.users]
        read += users
        reading = [user for user in users if getattr(user.target, "is_view", False)]
    return {node.target._schema.name for node in made + read
            if isinstance(node.target, torch._ops.OpOverload)}


def _host_argument_views(bridged, args, written) -> dict:
    """{output leaf: HostView} for the outputs that view a host argument (a graph after a break
    often returns ``x.flatten(1)`` of its input).  The replayed step rebuilds them, and those
    viewing a device tensor (``bridged.device_views``), outside its Function as views of the
    caller's tensor: autograd records the view, so gradients reach the argument through it as
    in eager.  Refused where that view could differ from eager's: the graph switches grad mode
    (eager's view then has the mode of its block), writes the host argument it views, or this
    call's argument has another layout (``_unsound_call``)."""
    views = {k: view for k, view in bridged.views.items() if not view.itself}
    if not views and bridged.device_views is None:
        return views
    if bridged.enables_grad or bridged.disables_grad:
        raise NotDifferentiable("an output is a view of an argument or another output and the graph "
                                "switches grad mode")
    if {view.position for view in views.values()} & set(written):
        raise NotDifferentiable("an output is a view of an argument the graph writes in place")
    reason = bridged._unsound_call(args)
    if reason is not None:
        raise NotDifferentiable(reason)
    return views


class _ForwardRequiringFinite:
    """The forward graph, whose traced run also requires what the backward will read (the saved
    tensors, the arguments it reads again) to hold no NaN or infinity (``index_check``)."""

    def __init__(self, partition: Partition):
        self.partition = partition
        self.graph_module = partition.forward

    def __call__(self, *args):
        return self.run_with(self.graph_module.forward, args)   # (no module hooks: not the program's)

    def run_with(self, runner, args):
        """(``runner``: the forward graph, or what runs it node by node: ``eager_layouts``)"""
        partition = self.partition
        out = runner(*args)
        require_finite([*out[partition.leaf_count:], *(args[p] for p in partition.saved_args)])
        return out


def _refuse_saved_tensor_hooks() -> None:
    """The program's saved-tensor hooks (``torch.utils.checkpoint``, offloading) see what each
    op saves for backward; a device step saves device copies of other tensors (or, replayed,
    the partition's), so with such hooks on, the call runs eagerly and they see eager's."""
    if torch._C._autograd._top_saved_tensors_default_hooks(False) is not None:
        raise NotDifferentiable("saved-tensor hooks are active (torch.utils.checkpoint, say): they "
                                "would see the device step's saved tensors instead of eager's")


def _arguments(bridged, inputs) -> tuple:
    """The graph's arguments (inputs, then the module state it reads) and which require grad."""
    args = list(inputs)
    if bridged.has_state:
        args += bridged.flat.read_state()
    return args, tuple(map(_requires_grad, args))


class ReplayedTraining:
    """The grad-mode path of a ``BridgedCall`` built by ``torchxla_trace_once``."""

    def __init__(self, bridged):
        self.bridged = bridged
        self.plans = {}
        self.device = None

    def __call__(self, inputs):
        bridged = self.bridged
        args, needs_grad = _arguments(bridged, inputs)
        if not any(needs_grad):
            return NO_GRAD_NEEDED
        _refuse_saved_tensor_hooks()
        if any(n and dev.is_xla(a) for a, n in zip(args, needs_grad)) and not dev.backward_on_device():
            raise NotDifferentiable(_NO_DEVICE_BACKWARD)   # the step's backward runs on the device
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        values = tuple(a for a in args if not isinstance(a, torch.Tensor))
        try:
            hash(values)
        except TypeError:                         # a list argument, say: keyed by its text
            values = tuple(map(repr, values))
        key = (needs_grad, tuple(map(_shape_of, tensors)), tuple(map(_dtype_of, tensors)), values)
        device_args, _ = bridged._device_args(args)
        bridged.program_saw_last_args = False     # the inference program did not run
        plan = self.plans.get(key)
        if plan is None:
            try:
                with dev.host_random_kept(), dev.function_modes_set_aside(), GraphWarnings() as warned:
                    plan = self._plan(args, device_args, needs_grad)
                if isinstance(plan, TrainingPlan):
                    plan.warnings = tuple(warned.caught)   # issued again by every step
            except (NotDifferentiable, NotOneGraph) as error:
                plan = error                     # remembered: not recorded again every call
            except Exception as error:           # a graph the device cannot run: eager is right
                first = (str(error).splitlines() or [""])[0][:200]
                plan = NotDifferentiable(f"{type(error).__name__}: {first}")
            self.plans[key] = plan
        if isinstance(plan, Exception):
            raise plan
        if plan is _INFERENCE:
            return NO_GRAD_NEEDED
        if plan.warnings:
            try:
                reissue(plan.warnings, bridged.warning_registry)
            except WarningIsError as error:       # the call runs eagerly: eager raises it
                raise NotDifferentiable(str(error)) from None
        # Writes the device sees, and those it cannot (``y.copy_(y)`` leaves the data as it was;
        # eager still counts it, and ``y`` may be another argument's memory).
        written = tuple(sorted(set(plan.forward.mutated) | set(bridged.written)))
        if written and bridged.host_inputs.aliased(written, args, bridged.device_positions):
            raise NotDifferentiable("an argument the graph writes in place shares memory with "
                                    "another argument")
        host_views = _host_argument_views(bridged, args, written)
        partition = plan.partition
        if bridged.own_version_leaves & (set(partition.saved_leaves) | set(partition.held_leaves)):
            # eager's backward reads what a write to ``t.data`` put there (no version moves);
            # the replayed backward reads the device's copy
            raise NotDifferentiable("an output made through `.data` is a tensor the backward reads")
        step = _Step(self, plan, args, device_args)
        step.recompute = Recompute.of(bridged.flat, args, needs_grad, plan.unchecked_positions,
                                      plan.draws, written, plan.reads_writes)
        outputs = {}                               # leaf index -> tensor from its group's node
        for g, group in enumerate(plan.groups):    # the first node replays the forward graph
            node_inputs = [args[p].detach() if k in group.detached else args[p]
                           for k, p in enumerate(plan.tensor_positions)]
            returned = _DeviceStep.apply(step, g, *node_inputs)
            outputs.update(zip(step.leaves_of_group[g], returned))
        leaves = list(step.leaves)
        layouts = {k: layout for k, layout in bridged.layouts.items() if k in bridged.host_outputs}
        for k, tensor in outputs.items():
            # eager's strides, laid out outside the Function (autograd records the copy): an
            # output that is a view made inside a custom Function cannot be written in place
            leaves[k] = layouts[k].of(tensor, differentiable=True) if k in layouts else tensor
        rebuild_output_views(leaves, bridged.output_views)
        for k, view in host_views.items():
            leaves[k] = view.of(args[view.position])
        if bridged.device_views is not None:
            leaves = bridged.device_views.into(leaves, args)
        for k, position in plan.argument_leaves.items():
            leaves[k] = args[position]
        for k, first in plan.repeats.items():
            leaves[k] = leaves[first]
        guard_views_as_eager(leaves, bridged.creations)
        for k, saved_index in plan.partition.saved_leaves.items():
            step.output_versions.setdefault(saved_index, []).append((leaves[k], _version(leaves[k])))
        for k in plan.partition.held_leaves:
            step.output_versions.setdefault(("leaf", k), []).append((leaves[k], _version(leaves[k])))
        return pytree.tree_unflatten(leaves, plan.partition.treespec)

    def _plan(self, args, device_args, needs_grad) -> TrainingPlan:
        if self.device is None:
            # torch_xla is loaded before the first backward (the joint graph's, on meta): the
            # autograd engine sizes its per-device queues once, on the first backward, and an
            # XLA device registered after that would have none.
            self.device = dev.xla_device()
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        decompositions = eager_faithful(self.bridged.flat.graph_module, training=True,
                                        answered=self.bridged.flat.formulas_answered)
        while True:
            partition = joint_partition(self.bridged.flat, args, needs_grad, decompositions)
            if not partition.differentiable:     # argmax, or outputs independent of the grads
                return _INFERENCE
            try:
                plan = TrainingPlan(partition.to(self.device), device_args, positions,
                                    self.bridged.check_indices)
            except DrawReadsValues:
                raise
            except NotOneGraph:
                # An op the device cannot lower ran on the CPU: record it decomposed, if it can be.
                if not learn(dev.executed_fallback_ops(), decompositions):
                    raise
                continue
            except SavedShapesDiffer as error:
                # The device's own op saves other tensors than the recorded one: recorded
                # decomposed, both run the same ops and save the same tensors.
                if not learn(error.ops, decompositions):
                    raise
                continue
            counters.training_plans.append(dict(
                saved_bytes=partition.saved_bytes, saved_count=partition.saved_count,
                forward_ops=_op_count(partition.forward),
                backward_ops=_op_count(partition.backward),
                groups=[group.tangents for group in plan.groups],
                decomposed=sorted({str(op.overloadpacket) for op in decompositions})))
            return plan


def _op_count(gm) -> int:
    return sum(1 for node in gm.graph.nodes if node.op == "call_function")


class _Step:
    """One training call: what ``_DeviceStep.forward`` needs, and what it leaves for backward."""

    def __init__(self, training: ReplayedTraining, plan: TrainingPlan, args, device_args):
        self.training, self.plan, self.args, self.device_args = training, plan, args, device_args
        self.leaves = ()
        self.recompute = None         # what a backward with create_graph=True recomputes
        self.tensor_leaves = ()
        self.leaves_of_group = ()     # per group: the tensor leaves its node returns
        self.output_versions = {}     # saved result index -> [(output as returned, its version)]

    def forward(self, ctx, group: int):
        """The outputs of one group's node (the first group's call replays the forward)."""
        if group == 0:
            self._replay()
        plan, partition = self.plan, self.plan.partition
        ctx.arg_versions = self.arg_versions
        ctx.output_versions = self.output_versions
        ctx.recompute = self.recompute            # for a backward with create_graph=True
        ctx.set_materialize_grads(False)          # which outputs a grad reaches: see backward
        ctx.device = self.training.device
        ctx.group = plan.groups[group]
        mine = self.leaves_of_group[group]
        outputs = [self.outputs[k] for k in mine]
        differentiable = set(partition.differentiable)
        ctx.mark_non_differentiable(*[t for k, t in zip(mine, outputs) if k not in differentiable])
        # Eager saves in each autograd node only what its backward reads, and checks only those
        # for in-place changes: so does each group's node (the rest it keeps detached, unchecked;
        # device fuzz seed 407: ``t3 *= 2`` after the call broke ``relu``'s backward, which
        # eager's does not read ``t3`` for).
        # A tensor the caller holds (an argument, an output) is saved as its ``.data``, which
        # has a version counter of its own, and checked by ``_check_versions`` for the tangents
        # that come: saved itself, it would be checked for all of them (device fuzz seed 407
        # i54: an output changed after the call, which only the backward of another output read).
        reads = plan.saved_reads[group]
        held = {id(t) for t in (*self.outputs.values(), *self.args) if isinstance(t, torch.Tensor)}
        kept = [_data(t) if id(t) in held else t for i, t in enumerate(self.saved) if i in reads]
        ctx.save_for_backward(*kept)
        ctx.unread = {i: t.detach() for i, t in enumerate(self.saved) if i not in reads}
        # A node for several outputs frees its saved tensors as eager's nodes would: only
        # those on the ways of the grads that came (``_PartlyFreed``). One output: autograd's own.
        ctx.partly = _PartlyFreed(plan, ctx.group, sorted(reads), kept) if len(ctx.group.tangents) > 1 else None
        ctx.step_plan = plan
        ctx.tangent_outputs = tuple(mine.index(partition.differentiable[j]) for j in ctx.group.tangents)
        ctx.input_devices = self.input_devices
        if group == len(plan.groups) - 1:          # the call's tensors are not kept past forward
            self.args = self.device_args = self.saved = self.outputs = None
        return tuple(outputs)

    def _replay(self):
        plan, bridged = self.plan, self.training.bridged
        partition = plan.partition
        results = plan.forward.run(self.device_args)
        written_on_host = [p for p in plan.forward.mutated if p in bridged.host_set]
        if written_on_host:
            bridged.host_inputs.write_back(written_on_host, self.args, self.device_args, bridged.silent)
        # (a device argument's data was swapped: eager's writes, one per in-place op)
        bridged.move_versions_as_eager(plan.forward.mutated, self.args, written_on_host)
        # The arguments the backward reads, at their versions after the call (and the outputs
        # that are what it saved, once returned): eager's autograd saves them, and refuses a
        # backward through a node whose saved tensor changed in place since.
        self.arg_versions = {p: (self.args[p], _version(self.args[p])) for p in partition.checked_args}
        leaves = list(results[:partition.leaf_count])
        self.saved = (*results[partition.leaf_count:], *[self.device_args[p] for p in partition.saved_args])
        if plan.forward.graph.casts:   # a converted result is pending; the backward graph takes data
            dev.materialize(list(self.saved))
        self.tensor_leaves = tuple(k for k, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)
                                   and k not in plan.argument_leaves and k not in plan.repeats)
        outputs = [leaves[k] for k in self.tensor_leaves]
        if bridged.host_outputs:           # each output on the device eager makes it on
            on_device = [j for j, t in enumerate(outputs)
                         if dev.is_xla(t) and self.tensor_leaves[j] in bridged.host_outputs]
            for j, moved in zip(on_device, dev.to_host([outputs[j] for j in on_device])):
                outputs[j] = moved
        self.leaves = leaves
        self.outputs = dict(zip(self.tensor_leaves, outputs))
        # each differentiable output goes with its tangent's group; the others with the first
        group_of = {partition.differentiable[j]: g for j, g in plan.group_of_tangent.items()}
        self.leaves_of_group = [[k for k in self.tensor_leaves if group_of.get(k, 0) == g]
                                for g in range(len(plan.groups))]
        self.input_devices = tuple(a.device for a in (self.args[p] for p in plan.tensor_positions))


_data = torch.Tensor.data.__get__     # the same data and metadata, a version counter of its own


def _check_versions(ctx, active) -> None:
    """Raise eager's error if a tensor the backward of the ``active`` tangents reads (an
    argument, or an output that is what it saved) changed in place since the forward."""
    partition = ctx.step_plan.partition
    reads = frozenset().union(*(partition.tangent_reads[j] | partition.held_reads[j] for j in active))
    for kind, index in sorted(reads):
        watched = [ctx.arg_versions[index]] if kind == "arg" \
            else ctx.output_versions.get(("leaf", index) if kind == "leaf" else index, ())
        for tensor, version in watched:
            _check_version(tensor, version, "an argument" if kind == "arg" else "an output")


def _batched(tensor) -> bool:
    """A vmap's batched tensor.  torch.autograd.grad's ``is_grads_batched`` uses the legacy vmap,
    whose dispatch key (``Batched``) the Python enum does not name: read from the key set's text."""
    keys = str(torch._C._dispatch_keys(tensor))[len("DispatchKeySet("):-1].split(", ")
    return "Batched" in keys or "FuncTorchBatched" in keys


def _saved_reads(partition: Partition, tangents) -> frozenset:
    """Positions in the step's saved tensors (saved results, then the arguments at
    ``saved_args``) that the backward of ``tangents`` reads."""
    reads = frozenset().union(*(partition.tangent_reads[j] for j in tangents))
    first_arg = partition.saved_count
    return frozenset(index if kind == "saved" else first_arg + partition.saved_args.index(index)
                     for kind, index in reads
                     if kind == "saved" or index in partition.saved_args)


class _Freed(Exception):
    """Autograd's "backward through the graph a second time" for a step's node, raised when the
    backward ends (``_DeviceStep.backward``)."""

    def __init__(self, error: RuntimeError):
        super().__init__(str(error))
        self.error = error
        self.kept = []

    def keep_grads(self, leaves) -> None:
        self.kept = [(leaf, leaf.grad, None if leaf.grad is None else leaf.grad.detach().clone())
                     for leaf in leaves]

    def raise_error(self):
        with torch.no_grad():
            for leaf, grad, value in self.kept:
                if grad is not None and not torch.equal(grad, value):
                    grad.copy_(value)         # accumulated in place
                if leaf.grad is not grad:
                    leaf.grad = grad
        raise self.error


def _arrived(ctx, grads) -> list:
    """The tangents of this node's group whose output grads came."""
    return [j for j, k in zip(ctx.group.tangents, ctx.tangent_outputs) if grads[k] is not None]


def _gives_grad(plan, group, index, active: frozenset) -> bool:
    """Whether the group's backward gives grad ``index`` (None: an input it gives none) for the
    ``active`` tangents: it makes that grad, and from one of them (eager gives an argument no
    grad when none of its tangents arrived)."""
    if index is None or index not in group.gives:
        return False
    made_from = plan.partition.grad_tangents[index]
    return made_from is None or bool(made_from & active)


def _engine_runs(node) -> bool:
    """Whether the running backward executes ``node``, an edge of a step's node.  Of a leaf that
    ``autograd.grad`` was asked for, torch refuses to say (a RuntimeError): that means yes."""
    try:
        return torch._C._will_engine_execute_node(node)
    except RuntimeError:
        return True


def _needed(ctx, active) -> list:
    """The arrived tangents whose grads reach an edge the running backward executes.  Eager's
    engine runs only the nodes on a way to what it was asked for: ``autograd.grad(y, [p])``
    never runs a history of ``y`` that reaches no ``p``, so it neither needs nor frees what that
    history saved.  A step's node stands for every output's history, with an edge to every
    argument, and the engine runs it if any one is needed (fuzz seed 375 i1101: a second
    backward through a freed output, asked for a parameter only the first one reached).
    Asked only where the answer matters (a saved tensor is gone): each edge costs a call."""
    plan, group = ctx.step_plan, ctx.group
    runs = [index for (node, _), index in zip(ctx.next_functions, plan.grad_of_input)
            if node is not None and index is not None and _engine_runs(node)]
    return [j for j in active if any(_gives_grad(plan, group, index, frozenset((j,))) for index in runs)]


def _reached_leaves(ctx, grads) -> list:
    """The leaf arguments the grads that came would reach through this node (eager's nodes
    between them hold what was freed)."""
    plan, active = ctx.step_plan, frozenset(_arrived(ctx, grads))
    leaves = []
    for k, index in enumerate(plan.grad_of_input):
        if not _gives_grad(plan, ctx.group, index, active):
            continue
        leaf = getattr(ctx.next_functions[k][0], "variable", None)     # AccumulateGrad's (one
                                                                       # edge per tensor input)
        if leaf is not None:
            leaves.append(leaf)
    return leaves


def _saved_tensors(ctx) -> tuple:
    """``ctx.saved_tensors``; ``_Freed`` (carrying autograd's own error) once they were freed."""
    try:
        return ctx.saved_tensors
    except RuntimeError as error:
        raise _Freed(error) from None


class _PartlyFreed:
    """The saved tensors of a node for several outputs, freed as eager's nodes free theirs.

    Eager's graph keeps the ops of each output apart: after ``t = cat([x, x])`` and
    ``loss = lin(t).sum()``, ``loss.backward()`` frees what ``lin``'s nodes saved, and a later
    backward through ``t`` alone still works, as ``cat``'s node saved nothing (fuzz X71).
    Autograd frees all of a node's saved tensors at once, so this node also keeps them itself
    and frees them per op: a backward that does not retain the graph frees the ops its grads
    went through (``Partition.tangent_read_ops``), and a backward that reaches a freed op
    raises autograd's own error. A tensor is let go once every output that reads it is spent."""

    def __init__(self, plan: TrainingPlan, group: _Group, positions, kept):
        self.plan, self.tangents = plan, group.tangents
        self.positions = frozenset(positions)
        self.kept = dict(zip(positions, kept))
        self.freed = frozenset()

    def saved_for(self, ctx, active, unread_count) -> list:
        """The saved tensors (None where let go) for a backward of the ``active`` tangents."""
        read_ops = self.plan.partition.tangent_read_ops
        if self.freed and any(not self.freed.isdisjoint(read_ops[j]) for j in active):
            _saved_tensors(ctx)           # freed by an earlier backward: autograd's own error
            raise RuntimeError("Trying to backward through the graph a second time")
        return [self.kept.get(i) for i in range(unread_count + len(self.positions))]

    def ran(self, ctx, active, whole: bool) -> None:
        """Before a backward of ``active`` runs (``whole``: the group's whole graph, which
        reads every saved tensor): unless it retains the graph, its ops are freed."""
        if whole and len(self.kept) < len(self.positions):
            _saved_tensors(ctx)           # some were let go: autograd's own error
        if torch._C._autograd._get_current_graph_task_keep_graph():
            return
        read_ops = self.plan.partition.tangent_read_ops
        self.freed = self.freed.union(*(read_ops[j] for j in active))
        if len(active) == len(self.tangents):      # the common case: all of them spent
            self.kept = {}
            return
        live = [j for j in self.tangents if not read_ops[j] <= self.freed]
        needed = frozenset().union(*(self.plan.tangent_saved_reads[j] for j in live))
        self.kept = {i: t for i, t in self.kept.items() if i in needed}


_FREED = "a backward that did not retain the graph went through the call (eager freed it then)"


def _recomputed(ctx, grads) -> list:
    """The grads of this node's inputs from an eager recomputation of the call, with their
    history (``double_backward``); None for the inputs the backward does not ask about."""
    if isinstance(ctx.recompute, str):
        raise unsupported(ctx.recompute)
    plan = ctx.step_plan
    outputs = [plan.partition.differentiable[j] for j in ctx.group.tangents]
    tangents = [grads[k] for k in ctx.tangent_outputs]
    wanted = [k for k in range(len(plan.tensor_positions)) if ctx.needs_input_grad[2 + k]]
    found = ctx.recompute.grads(outputs, tangents, [plan.tensor_positions[k] for k in wanted],
                                ctx.arg_versions)
    result = [None] * len(plan.tensor_positions)
    for k, grad in zip(wanted, found):
        result[k] = grad
    return result


class _DeviceStep(torch.autograd.Function):
    """Forward: replay the forward graph. Backward: replay the backward graph."""

    @staticmethod
    def forward(ctx, step: _Step, group: int, *tensors):
        return step.forward(ctx, group)

    @staticmethod
    def backward(ctx, *grads):
        with dev.DEVICE_STEP:
            try:
                return _DeviceStep._backward(ctx, *grads)
            except _Freed as freed:
                # Eager's engine runs the nodes before the one whose saved tensors are gone, and
                # their grads reach the leaves (an AccumulateGrad runs as soon as it is ready);
                # this one node stands for many, with edges to every argument, so the error is
                # raised when the backward ends and this node gives no grad (fuzz X72). The
                # leaves eager's freed nodes would have given grads to never got theirs there
                # (their AccumulateGrad waited on them): their grads are put back (seed 5038 i479).
                freed.keep_grads(_reached_leaves(ctx, grads))
                torch.autograd.Variable._execution_engine.queue_callback(freed.raise_error)
                return (None, None) + (None,) * len(ctx.step_plan.grad_of_input)

    @staticmethod
    def _backward(ctx, *grads):
        nothing = (None, None) + (None,) * len(ctx.step_plan.grad_of_input)
        if ctx.partly is None:
            # autograd's own error after the graph was freed, unless nothing on the output's way
            # holds a saved tensor (``cat``, ``add``): eager's nodes there run again, or that way
            # leads nowhere this backward goes (eager's nodes there do not run)
            holds = ctx.step_plan.partition.tangent_read_ops[ctx.group.tangents[0]]
            try:
                read = _saved_tensors(ctx) if holds else ()
            except _Freed:
                if not _needed(ctx, _arrived(ctx, grads)):
                    return nothing
                raise
            each = iter(read)
            saved = [ctx.unread[i] if i in ctx.unread else next(each)
                     for i in range(len(ctx.unread) + len(read))]
        if any(g is not None and _batched(g) for g in grads):
            raise BatchedBackwardUnsupported(
                "batched gradients (is_grads_batched=True, jacobian(vectorize=True)) through "
                "torchxla_trace_once: the backward graph is replayed by hash for one gradient per "
                "output; ask for them one at a time, or use the torchxla_trivial or eager backend")
        plan, group = ctx.step_plan, ctx.group
        active = _arrived(ctx, grads)
        if not active:
            return nothing
        if ctx.partly is not None:
            try:
                kept = ctx.partly.saved_for(ctx, active, len(ctx.unread))
            except (_Freed, RuntimeError):         # (autograd's error, or its words: ops freed)
                active = _needed(ctx, active)      # (the ways that read what is gone may not run)
                if not active:
                    return nothing
                kept = ctx.partly.saved_for(ctx, active, len(ctx.unread))
            saved = [ctx.unread[i] if i in ctx.unread else value for i, value in enumerate(kept)]
        _check_versions(ctx, active)
        if torch.is_grad_enabled():               # create_graph=True: grads with a history
            return (None, None, *_recomputed(ctx, grads))
        if not torch._C._autograd._get_current_graph_task_keep_graph():
            ctx.recompute = _FREED                # (eager's nodes free what they saved now)
            if ctx.partly is None:                # the caller's tensors it watched too
                ctx.arg_versions, ctx.output_versions = {}, {}
        tangents = [grads[k] for k in ctx.tangent_outputs]
        for i, j in enumerate(group.tangents):
            if tangents[i] is None:               # no grad reached that output: zeros
                shape, dtype = plan.partition.tangent_shapes[j]
                tangents[i] = torch.zeros(shape, dtype=dtype, device=ctx.device)
        host = [k for k, t in enumerate(tangents) if not dev.is_xla(t)]
        dev.materialize([t for t in tangents if dev.is_xla(t)])   # a lazy loss's backward
        for k, copy in zip(host, dev.to_device([tangents[k] for k in host])):
            tangents[k] = copy
        # a device argument or output the backward reads, written through ``.data`` since (no
        # version moved): eager's backward reads the new values, here pending computation
        dev.materialize([t for t in saved if isinstance(t, torch.Tensor)])
        inputs = [*saved, *tangents]
        backward = group.backward_for(active, inputs)
        if ctx.partly is not None:
            ctx.partly.ran(ctx, active, whole=backward is group.backward)
        grads_out = backward.run(inputs)
        active = frozenset(active)
        result = [grads_out[index] if _gives_grad(plan, group, index, active) else None
                  for index in plan.grad_of_input]
        to_host = [k for k, (g, device) in enumerate(zip(result, ctx.input_devices))
                   if g is not None and device.type != "xla"]
        for k, moved in zip(to_host, dev.to_host([result[k] for k in to_host])):
            result[k] = moved
        return (None, None, *result)


__all__ = ["ReplayedTraining", "NO_GRAD_NEEDED", "DoubleBackwardUnsupported",
           "BatchedBackwardUnsupported", "NotDifferentiable"]
