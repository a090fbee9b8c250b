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
formula that answers as eager does (``EAGER_FAITHFUL``: ``cummax`` keeps the first index among
tied values, eager the last; batch norm in training mode updates ``running_var`` with the
biased variance; ``arange`` with a float step gets another length; ``cumsum`` of a narrow
integer does not widen; ``>>`` of a negative integer shifts zeros in), in every graph that calls
them.

Why stand-ins and not the real trace: a fallback during the real trace has already executed
(so compiled) everything before it, a compile wasted once the graph is traced again decomposed.
On stand-ins a fallback executes only a graph of zeros. The cost is one more lazy trace, once
per node signature (op, shapes, dtypes, other arguments): 10-35 ms on the seed models.
"""

import contextlib
import math
import threading

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from . import device as dev


class _Reentry(threading.local):
    active = False


_reentry = _Reentry()


def _cummax_as_eager(x, dim):
    """``cummax`` whose index among tied values is the last one, as eager's kernels give (XLA's
    lowering keeps the first). The values are XLA's; the index at j is the last i <= j where x
    reached its running maximum (after it nothing new came, so x[i] is the maximum at j). Its
    own ``cummax`` calls are the lowered op (NotImplemented: the mode runs the op itself)."""
    if _reentry.active or x.dim() == 0:
        return NotImplemented
    _reentry.active = True
    try:
        values = torch.ops.aten.cummax.default(x, dim)[0]
        dim = dim % x.dim()
        shape = [1] * x.dim()
        shape[dim] = x.shape[dim]
        positions = torch.arange(x.shape[dim], device=x.device).view(shape).expand(x.shape)
        reached = torch.where(x == values, positions, torch.zeros_like(positions))
        return values, torch.ops.aten.cummax.default(reached, dim)[0]
    finally:
        _reentry.active = False


def _batch_norm_as_eager(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """``native_batch_norm`` in training mode with PyTorch's running statistics: torch_xla's
    lowering updates ``running_var`` with the biased batch variance, eager with the unbiased
    one (1.3% apart at 48 values a channel). The lowering still computes the output and what
    backward saves (without running statistics); the update is made here as eager makes it.
    Other calls keep the lowering (NotImplemented)."""
    if _reentry.active or not training or running_mean is None or running_var is None:
        return NotImplemented
    _reentry.active = True
    try:
        out = torch.ops.aten.native_batch_norm.default(input, weight, bias, None, None, True, momentum, eps)
    finally:
        _reentry.active = False
    dims = [0, *range(2, input.dim())]
    count = input.numel() // input.shape[1]
    variance, mean = torch.var_mean(input.detach(), dims, correction=0)
    running_mean.mul_(1 - momentum).add_(mean.to(running_mean.dtype), alpha=momentum)
    unbiased = variance * (count / max(count - 1, 1))
    running_var.mul_(1 - momentum).add_(unbiased.to(running_var.dtype), alpha=momentum)
    return out


def _arange_as_eager(start, end, step=1, *, dtype=None, layout=None, device=None, pin_memory=None):
    """``arange`` with a float bound or step as eager's CPU kernel makes it: the length is
    ``ceil((end - start) / step)`` in double, value i is ``start + i * step`` in double, then
    cast (XLA's lowering gives ``arange(0.0, 1.0, 0.1)`` an eleventh element, 1.0)."""
    if _reentry.active or all(type(v) is int for v in (start, end, step)):
        return NotImplemented
    length = math.ceil((end - start) / step)
    if length <= 0:
        return NotImplemented
    _reentry.active = True
    try:
        positions = torch.ops.aten.arange.default(length, dtype=torch.float64, device=device)
    finally:
        _reentry.active = False
    return (positions * step + start).to(dtype or torch.get_default_dtype())


_NARROW_INTEGERS = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32)


def _cumsum_as_eager(x, dim, *, dtype=None):
    """``cumsum`` of a narrow integer (or bool) tensor sums in int64, as eager does; XLA sums in
    the input's type (``uint8`` wraps at 256, ``bool`` stays True)."""
    if dtype is not None or x.dtype not in _NARROW_INTEGERS:
        return NotImplemented
    return torch.ops.aten.cumsum.default(x.to(torch.int64), dim)


def _arithmetic_shift(op, in_place=False):
    """``x >> k`` of a signed integer as eager's arithmetic shift (XLA shifts a negative value's
    bits in as zeros: ``-1 >> 1`` gives 0, eager -1): a negative x is ``~(~x >> k)``."""
    def shift(x, k):
        if _reentry.active or not isinstance(x, torch.Tensor) or not x.dtype.is_signed \
                or x.is_floating_point() or x.is_complex():
            return NotImplemented
        _reentry.active = True
        try:
            result = torch.where(x < 0, ~op(~x, k), op(x, k))
        finally:
            _reentry.active = False
        return x.copy_(result) if in_place else result
    return shift


def _shifts():
    aten = torch.ops.aten
    table = {}
    for packet, in_place_packet in ((aten.__rshift__, aten.__irshift__),
                                    (aten.bitwise_right_shift, aten.bitwise_right_shift_)):
        for overload in ("Scalar", "Tensor", "Tensor_Scalar"):
            op = getattr(packet, overload, None)
            if op is None:
                continue
            table[op] = _arithmetic_shift(op)
            in_place = getattr(in_place_packet, overload, None)
            if in_place is not None:
                table[in_place] = _arithmetic_shift(op, in_place=True)
    return table


def _op_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return target.overloadpacket.__name__
    return target if isinstance(target, str) else getattr(target, "__name__", "")


def _calls(*names):
    return lambda node: _op_name(node.target) in names


def _norm_in_training(node) -> bool:
    """A batch or instance norm node that may update running statistics (its ``training`` /
    ``use_input_stats`` argument, the sixth, is not a constant False)."""
    name = _op_name(node.target)
    if name not in ("batch_norm", "native_batch_norm", "instance_norm"):
        return False
    default = name == "instance_norm"
    flag = node.args[5] if len(node.args) > 5 else \
        node.kwargs.get("training", node.kwargs.get("use_input_stats", default))
    return flag is not False


def _arange_with_a_float(node) -> bool:
    return _op_name(node.target) == "arange" and any(type(a) is float for a in (*node.args, *node.kwargs.values()))


# Ops whose XLA lowering answers otherwise than eager on ordinary data, traced as a formula
# that answers as eager does (a NaN or an infinity is ``index_check``'s): (which graph nodes
# reach the op, {op: formula}, whether the grad-mode paths need it too).
EAGER_FAITHFUL = (
    (_calls("cummax"), {torch.ops.aten.cummax.default: _cummax_as_eager}, True),
    (_norm_in_training, {torch.ops.aten.native_batch_norm.default: _batch_norm_as_eager}, True),
    (_arange_with_a_float, {torch.ops.aten.arange.start_step: _arange_as_eager,
                            torch.ops.aten.arange.start: _arange_as_eager,
                            torch.ops.aten.arange.default: lambda end, **kw: _arange_as_eager(0, end, **kw)},
     True),
    (_calls("cumsum"), {torch.ops.aten.cumsum.default: _cumsum_as_eager}, True),
    (_calls("rshift", "__rshift__", "irshift", "__irshift__", "bitwise_right_shift", "bitwise_right_shift_"),
     _shifts(), True),
)


def eager_faithful(graph_module: fx.GraphModule, training: bool = False) -> dict:
    """The ``EAGER_FAITHFUL`` formulas for the ops ``graph_module`` calls (on a grad-mode path
    when ``training``), so that a graph without them (resnet in eval mode) traces with no mode."""
    nodes = list(graph_module.graph.nodes)
    return {op: fn for reaches, table, in_training in EAGER_FAITHFUL
            if (in_training or not training) and any(map(reaches, nodes)) for op, fn in table.items()}


def decompositions_for(op_names) -> dict:
    """{OpOverload: decomposition} for every overload of the named ops (``"aten::foo"``,
    ``"aten::foo.overload"`` or ``"foo"``) that ``torch._decomp`` can decompose; names without
    one are skipped."""
    from torch._decomp import decomposition_table
    table = {}
    for name in op_names:
        packet = getattr(torch.ops.aten, name.split("::")[-1].split(".")[0], None)
        if packet is None:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if op in decomposition_table:
                table[op] = decomposition_table[op]
    return table


def learn(fallback_ops, decompositions: dict) -> bool:
    """Add the decompositions of ``fallback_ops`` (op names that ran on the CPU) not yet in
    ``decompositions`` (PyTorch's own replaces an ``EAGER_FAITHFUL`` formula: both answer as
    eager, and the reference runs no lowering at all); True when one was added (another trace
    may then stay one graph)."""
    more = {op: fn for op, fn in decompositions_for(fallback_ops).items()
            if decompositions.get(op) is not fn}
    decompositions.update(more)
    return bool(more)


def describe(decompositions: dict) -> str:
    return ", ".join(sorted({str(op.overloadpacket).split(".")[-1] for op in decompositions}))


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
        return func(*args, **kwargs)


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
    probe.decompositions = eager_faithful(flat.graph_module)
    stand_ins = [probe._swap(a) if dev.is_xla(a) else a for a in device_args]
    try:
        with torch.no_grad():      # module state too: a leaf module may write its buffers
            flat.run_with(lambda *inputs: probe.run(*inputs), stand_ins)
    except Exception:          # a node that cannot run on zeros: the real trace will tell
        pass
    return probe.decompositions
