"""Ops the device cannot lower, traced as the ops PyTorch decomposes them into.

An aten op with no XLA lowering for its arguments runs on the CPU inside torch_xla (``i0``;
``_adaptive_avg_pool2d`` whenever an output size does not divide its input size, alexnet's
1x1 -> 6x6 on small images): it executes the pending lazy graph, copies its inputs to the host
and its result back, and cuts the graph in two. Many such ops have a decomposition in
``torch._decomp`` into ops the device does lower; a decomposition computes the op by
definition (PyTorch's reference, what its compilers run), so tracing it instead is sound.

The rule, one for every op: before the graph is traced for real, each of its nodes runs once
on stand-ins (lazy zeros shaped like its inputs, ``decompositions_on_stand_ins``); a node that
ran an op on the CPU runs again with the decompositions of the ops that fell back (repeated
while that finds new ones), and if it then stays on the device, those decompositions are kept.
The real trace runs them (``Decomposing``): the graph stays one lazy graph, compiled once and
replayed as one hash, with no host round trip. A node no decomposition keeps on the device is
left to the partitioner (``partition``). Only ops seen falling back are decomposed: where an op
lowers, its lowering is kept.

The same mode traces the few ops whose XLA lowering *answers otherwise* on ordinary data as a
formula that answers as eager does (``eager_faithful``), in every graph that calls them.

Why stand-ins and not the real trace: a fallback during the real trace has already executed
(so compiled) everything before it, a compile wasted once the graph is traced again decomposed.
On stand-ins a fallback executes only a graph of zeros. The cost is one more lazy trace, once
per node signature (op, shapes, dtypes, other arguments): 10-35 ms on the seed models.
"""

import contextlib

import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode

from . import device as dev
from .eager_faithful import dispatched_formulas, eager_faithful


# Decompositions in ``torch._decomp`` that answer otherwise than eager's kernel on valid data:
# left out, so the op runs eagerly between device segments (``partition``), as it would with none.
UNFAITHFUL = {
    # counts the slots after a row's first -1 as class 0 (1.39 where eager gives 0.59, probe AF r9)
    "multilabel_margin_loss_forward",
    # an unbatched input's loss with reduction='none' has shape (1,) where eager's is 0-dim
    # (probe AG r2)
    "multi_margin_loss",
}


def decompositions_for(op_names) -> dict:
    """{OpOverload: decomposition} for every overload of the named ops (``"aten::foo"``,
    ``"aten::foo.overload"`` or ``"foo"``) that ``torch._decomp`` can decompose; names without
    one are skipped."""
    from torch._decomp import decomposition_table
    table = {}
    for name in op_names:
        base = name.split("::")[-1].split(".")[0]
        packet = getattr(torch.ops.aten, base, None)
        if packet is None or base in UNFAITHFUL:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if op in decomposition_table:
                table[op] = decomposition_table[op]
    return table


def learn(fallback_ops, decompositions: dict) -> bool:
    """Add the decompositions of ``fallback_ops`` (op names that ran on the CPU) not yet in
    ``decompositions`` (PyTorch's own replaces an ``eager_faithful`` formula: both answer as
    eager, and the reference runs no lowering at all); True when one was added (another trace
    may then stay one graph). A decomposition's own ops were not in the run on meta tensors
    that chose the graph's formulas: the formulas chosen by the ops dispatched come too (the
    ``eq`` of ``isin``'s decomposition compares a uint8 and an int8 tensor)."""
    more = {op: fn for op, fn in decompositions_for(fallback_ops).items()
            if decompositions.get(op) is not fn}
    decompositions.update(more)
    if more:
        for op, formula in dispatched_formulas().items():
            decompositions.setdefault(op, formula)
    return bool(more)


def describe(decompositions: dict) -> str:
    """The ops decomposed by PyTorch's own decompositions (the formulas beside them left out)."""
    from torch._decomp import decomposition_table
    return ", ".join(sorted({str(op.overloadpacket).split(".")[-1] for op, fn in decompositions.items()
                             if decomposition_table.get(op) is fn}))


class Decomposing(TorchDispatchMode):
    """Runs each op in ``decompositions`` as its decomposition (whose own ops pass through this
    mode again, so a decomposition into another decomposed op unfolds too)."""

    def __init__(self, decompositions: dict):
        super().__init__()
        self.decompositions = decompositions

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        decomposition = self.decompositions.get(func)
        if decomposition is not None:
            with self:
                out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return dev.run_functionally(func, args, kwargs)


def decomposing(decompositions):
    """``Decomposing(decompositions)``, or nothing to enter when there are none (a dispatch
    mode costs every op a Python call)."""
    return Decomposing(decompositions) if decompositions else contextlib.nullcontext()


class _StandInProbe(fx.Interpreter):
    """Runs each node of a graph on stand-ins shaped like its real inputs (lazy zeros) and
    notes the ops that ran on the CPU.

    No node's stand-in inputs have pending computation beyond a constant, so a CPU fallback
    here executes nothing of the graph: it costs a tiny graph of zeros, not a compile of
    everything before the op (what a fallback during the real trace costs). One stand-in per
    shape and dtype serves every node (values do not matter, only what the device lowers)."""

    def __init__(self, module):
        super().__init__(module)
        self.decompositions = {}  # what makes the nodes that fell back lower
        self.stand_ins = {}
        self.results = {}         # (target, argument signature) -> the result it gave

    def run_node(self, node):
        if node.op in ("placeholder", "output"):
            return super().run_node(node)
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        swapped = self._swap((args, kwargs))
        if swapped is None:                  # no device tensor in: nothing can fall back
            return getattr(self, node.op)(node.target, args, kwargs)
        key = None
        if node.op == "call_function":       # the same op on the same shapes: probed already
            key = (node.target, _signature(swapped))
            try:
                if key in self.results:
                    return self.results[key]
            except TypeError:                # an unhashable argument
                key = None
        result = self._run_decomposed(node, swapped, self.decompositions)
        if result is None:       # fell back: try it with the decompositions of what fell back
            trial = dict(self.decompositions)
            while result is None and learn(self.fell_back, trial):
                result = self._run_decomposed(node, swapped, trial)
            if result is not None:
                self.decompositions = trial
            else:                # stays on the CPU: its ops are the partitioner's
                result = getattr(self, node.op)(node.target, *swapped)
        if key is not None:
            self.results[key] = result
        return result

    def _run_decomposed(self, node, args_kwargs, decompositions):
        """The node's result, or None if an op ran on the CPU (named in ``fell_back``)."""
        counts = dev.fallback_counts()
        with decomposing(decompositions):
            result = getattr(self, node.op)(node.target, *args_kwargs)
        self.fell_back = dev.fallbacks_since(counts)
        return None if self.fell_back else result

    def _swap(self, value):
        """``value`` with every device tensor replaced by a stand-in, or None if it has none."""
        if isinstance(value, torch.Tensor):
            return self._stand_in(value) if dev.is_xla(value) else None
        if isinstance(value, (tuple, list)):
            items = [self._swap(v) for v in value]
            if all(item is None for item in items):
                return None
            return type(value)(v if item is None else item for v, item in zip(value, items))
        if isinstance(value, dict):
            swapped = self._swap(tuple(value.values()))
            return None if swapped is None else dict(zip(value, swapped))
        return None

    def _stand_in(self, tensor):
        key = (tuple(tensor.shape), tensor.dtype)
        stand_in = self.stand_ins.get(key)
        if stand_in is None:
            stand_in = self.stand_ins[key] = torch.zeros(key[0], dtype=tensor.dtype,
                                                         device=tensor.device)
        return stand_in


def _signature(value):
    """What decides an op's lowering: shapes and dtypes of tensors, other values as they are."""
    if isinstance(value, torch.Tensor):
        return (tuple(value.shape), value.dtype)
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_signature(v) for v in value))
    if isinstance(value, dict):
        return (dict, tuple((k, _signature(v)) for k, v in value.items()))
    return value


def decompositions_on_stand_ins(flat, device_args) -> dict:
    """{OpOverload: decomposition} that keeps on the device the nodes of ``flat`` (a
    ``FlatProgram``) that run on the CPU for arguments shaped like ``device_args`` (whose data
    is not read: every node runs on stand-ins). A node whose op has no decomposition, or whose
    decomposition runs on the CPU too, adds nothing."""
    probe = _StandInProbe(flat.graph_module)
    probe.decompositions = eager_faithful(flat.graph_module, answered=flat.formulas_answered)
    stand_ins = [probe._swap(a) if dev.is_xla(a) else a for a in device_args]
    try:
        with torch.no_grad():      # module state too: a leaf module may write its buffers
            flat.run_with(lambda *inputs: probe.run(*inputs), stand_ins)
    except Exception:          # a node that cannot run on zeros: the real trace will tell
        pass
    return probe.decompositions
