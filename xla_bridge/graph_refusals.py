"""Graphs the device cannot run as eager does, found on the captured graph before anything
reaches the device: each check says why (the graph then runs eagerly), or None.

The tracer leaves each node's example value in ``node.meta["example_value"]`` (and what an
in-place op wrote in ``node.meta["writes"]``): these checks read them, never the device.
"""

from __future__ import annotations

import inspect

import torch
from torch.utils import _pytree as pytree

from .dtype_check import UNSOUND_ON_DEVICE
from .eager_faithful import op_name


def unfit_for_the_device(gm, example_inputs):
    """Why the device cannot run ``gm`` (the first check that says so), or None."""
    return _subclass_with_its_own_functions(example_inputs) or _holds_unsound_dtype(gm, example_inputs) or _marked_by_the_tracer(gm) or _empty_input_to_a_shuffle(gm) \
        or _as_strided_of_stored_memory(gm) or _writes_a_strided_region(gm) \
        or _in_place_write_gains_grad(gm, example_inputs) or _makes_grad_leaves(gm, example_inputs) \
        or _silent_write_into_a_view(gm) or _inverts_a_matrix(gm) or _bags_by_max(gm) or _other_devices(gm)


def _subclass_with_its_own_functions(example_inputs):
    """Why the device cannot run a graph, if an input is a tensor subclass with a
    ``__torch_function__`` of its own: the graph's ops reach it only where they run on the
    subclass itself (eager), and the device holds plain values."""
    for value in example_inputs:
        kind = type(value)
        if isinstance(value, torch.Tensor) and kind not in (torch.Tensor, torch.nn.Parameter) \
                and inspect.getattr_static(kind, "__torch_function__") not in _TORCH_OWN_FUNCTIONS:
            return f"an input is a {kind.__name__}, whose __torch_function__ runs for the ops it meets"
    return None


# A subclass's __torch_function__ that is torch's (the default, or the disabled one)
_TORCH_OWN_FUNCTIONS = (torch.Tensor.__dict__["__torch_function__"], torch._C._disabled_torch_function_impl)


# Devices a graph's tensors may live on: the host's (the bridge runs it on the lazy device, which
# stands for it) and the lazy device itself.
_BRIDGED_DEVICES = frozenset({"cpu", "xla"})


def _other_devices(gm):
    """Why the device cannot run ``gm``, if it makes a tensor on another device (``x.to("meta")``:
    run on the lazy device, the op would answer with a lazy tensor, or the input itself)."""
    for node in gm.graph.nodes:
        device = node.meta.get("device")
        if device is not None and torch.device(device).type not in _BRIDGED_DEVICES:
            return f"it makes a tensor on the {torch.device(device).type} device ({node.name})"
    return None


def _requires_grad(value) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


def _holds_unsound_dtype(gm, example_inputs):
    """Why the device cannot run ``gm``, if an input or a value it makes has a dtype torch_xla
    gets wrong whatever the op (``dtype_check.UNSOUND_ON_DEVICE``).  Checked on the whole graph
    before anything reaches the device: a partitioned graph would copy such an input to the
    device even for an op it then runs eagerly."""
    values = list(example_inputs) + [node.meta.get("example_value") for node in gm.graph.nodes]
    for value in pytree.tree_leaves(values):
        if isinstance(value, torch.Tensor) and value.dtype in UNSOUND_ON_DEVICE:
            return f"the graph holds a {value.dtype} tensor: {UNSOUND_ON_DEVICE[value.dtype]}"
    return None


# Node marks the tracer leaves (``node.meta``) on ops whose results the device would not give:
# the reason, given the mark's value.
_MARKED = {
    # a CPU autocast region cast the result; on the device no region would (one acts only on
    # tensors of its own device)
    "autocast": lambda dtype: f"was traced in a CPU autocast region that casts its result to {dtype}; "
                              "on the device no region would",
    # eager's results inside an inference-mode block are inference tensors; a replay's are not
    "inference_mode": lambda mode: "enters an inference-mode block (eager's results in it are inference tensors)",
    # a custom operator's or autograd.Function's Python (the program's own) may read any state:
    # a program replayed by hash would keep what it computed while traced
    "python_kernel": lambda op: f"calls {op}, whose kernel is the program's own Python",
    # a global flag changes what the host kernel does (NaN-filled memory, a refusal); the
    # device's compiler reads none (minidynamo/tracer/kernel_flags.py)
    "kernel_flags": lambda flags: f"runs where {flags}: its eager kernel reads that flag, the device's does not",
}


def _marked_by_the_tracer(gm):
    """Why the device cannot run ``gm``, if the tracer marked one of its nodes (``_MARKED``)."""
    for node in gm.graph.nodes:
        for mark, reason in _MARKED.items():
            if node.meta.get(mark) is not None:
                return f"{node.name} {reason(node.meta[mark])}"
    return None


# Ops whose eager kernel raises for a singular (or not positive-definite) matrix, where
# torch_xla's lowering returns NaN or garbage and an ``info`` of zeros (``ones(2, 2).inverse()``
# gave 2.2e7, probe X r03, r04): data no trace can decide, so such graphs run eagerly.
_MATRIX_INVERSES = frozenset({"inverse", "linalg_inv", "linalg_inv_ex", "inv_ex", "cholesky"})
_MATRIX_POWERS = frozenset({"matrix_power", "linalg_matrix_power"})


def _inverts_a_matrix(gm):
    """Why the device cannot run ``gm``, if it inverts a matrix (a negative matrix power too)."""
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        name = op_name(node.target)
        exponent = node.args[1] if len(node.args) > 1 else node.kwargs.get("n")
        if name in _MATRIX_INVERSES or (name in _MATRIX_POWERS and not (type(exponent) is int and exponent >= 0)):
            return f"{node.name} inverts a matrix: eager raises for a singular one, torch_xla's lowering does not"
    return None


# ``embedding_bag`` by name (F.embedding_bag, torch.embedding_bag, the aten ops), where its
# ``mode`` argument is: torch_xla's lowering of ``mode='max'`` starts each bag's maximum at 0, so
# a bag whose values are all negative gives 0 (probe AF r5).
_BAGS = frozenset({"embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"})


def _bags_by_max(gm):
    """Why the device cannot run ``gm``, if it reduces embedding bags by their maximum."""
    for node in gm.graph.nodes:
        name = op_name(node.target)
        if node.op != "call_function" or name not in _BAGS:
            continue
        # F.embedding_bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode),
        # the others (weight, indices, offsets, scale_grad_by_freq, mode)
        position = 6 if node.target is torch.nn.functional.embedding_bag else 4
        mode = node.kwargs.get("mode", node.args[position] if len(node.args) > position else None)
        if mode in ("max", 2):
            return f"{node.name} reduces embedding bags by max: torch_xla's lowering starts each maximum at 0"
    return None


# Ops whose torch_xla lowering divides by, or reshapes into, a size an empty input makes zero:
# ``roll`` of a tensor with a zero-size dim kills the process (SIGFPE: a shift modulo 0);
# ``pixel_unshuffle`` of an empty batch returns its input's shape.
_EMPTY_INPUT_LOWERINGS = frozenset({"roll", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
                                    "native_channel_shuffle"})


def _empty_input_to_a_shuffle(gm):
    """Why the device cannot run ``gm``, if one of those ops gets an empty tensor."""
    for node in gm.graph.nodes:
        name = op_name(node.target)
        if node.op in ("call_function", "call_method") and name in _EMPTY_INPUT_LOWERINGS:
            first = node.args[0] if node.args else None
            value = first.meta.get("example_value") if isinstance(first, torch.fx.Node) else None
            if isinstance(value, torch.Tensor) and value.numel() == 0:
                return (f"{name} of an empty tensor: torch_xla's lowering divides by or reshapes into "
                        "its zero size")
    return None


def _as_strided_of_stored_memory(gm):
    """Why the device cannot run ``gm``, if it calls ``as_strided`` (or ``as_strided_copy``,
    ``as_strided_scatter``) on a tensor it did not make itself as one compact block: ``as_strided`` reads the storage behind its input, which for an
    argument or any view (its offset, its strides, the elements around it) the device's dense
    copy does not have (``x[::2].as_strided((2, 2), (1, 1))``), and torch_xla's own
    ``as_strided`` of a view reads other elements than eager's."""
    for node in gm.graph.nodes:
        if node.op in ("call_function", "call_method") and \
                op_name(node.target) in ("as_strided", "as_strided_", "as_strided_copy", "as_strided_scatter"):
            first = node.args[0] if node.args else node.kwargs.get("input")
            value = first.meta.get("example_value") if isinstance(first, torch.fx.Node) else None
            if op_name(node.target) == "as_strided_" and getattr(first, "op", None) == "placeholder":
                continue        # an argument's metadata changed in place: refused by its own check
            if not isinstance(value, torch.Tensor) or first.op in ("placeholder", "get_attr") \
                    or value._base is not None or value.storage_offset() != 0 \
                    or not value.is_contiguous() \
                    or value.untyped_storage().nbytes() != value.numel() * value.element_size():
                return "as_strided of an argument or of a view: it reads storage the device's copy has not"
    return None


# as_strided-family ops -> the position of their ``size`` argument (``stride`` follows it)
_STRIDED_REGION = {"as_strided": 1, "as_strided_": 1, "as_strided_copy": 1, "as_strided_scatter": 2}


def _writes_a_strided_region(gm):
    """Why the device cannot run ``gm``, if it writes a region ``as_strided`` describes that is
    not one compact block (``(4, 5)`` with strides ``(8, 1)``: the first five of each row of
    eight): torch_xla's ``as_strided_scatter`` writes the values into the first elements as if
    compact (measured: wrong values).  Such writes are ``as_strided_scatter`` itself, an in-place
    op on an ``as_strided`` view, and the backward of any ``as_strided`` whose input requires
    grad.  A compact region, and a read with no gradient, are right."""
    for node in gm.graph.nodes:
        name = op_name(node.target)
        if node.op not in ("call_function", "call_method") or name not in _STRIDED_REGION:
            continue
        at = _STRIDED_REGION[name]
        size, stride = (node.args[at], node.args[at + 1]) if len(node.args) > at + 1 else \
            (node.kwargs.get("size"), node.kwargs.get("stride"))
        if not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)) or _compact(size, stride):
            continue
        first = node.args[0] if node.args else node.kwargs.get("input")
        written = name in ("as_strided_", "as_strided_scatter") or any(
            op_name(user.target).endswith("_") and user.args and user.args[0] is node for user in node.users)
        needs_grad = isinstance(first, torch.fx.Node) and _requires_grad(first.meta.get("example_value"))
        if written or needs_grad:
            return (f"{node.name} writes (or its backward writes) an {name} region that is not one compact block: "
                    "torch_xla writes it as if it were")
    return None


def _compact(size, stride) -> bool:
    """Is ``(size, stride)`` a row-major block (dims of size 1 aside)?"""
    expected = 1
    for extent, step in reversed(list(zip(size, stride))):
        if extent != 1 and step != expected:
            return False
        expected *= extent
    return True


def _in_place_write_gains_grad(gm, example_inputs):
    """Why the device cannot run ``gm``, if an in-place op makes an argument that does not require
    grad require it (``x.add_(w * y)`` under grad mode, or a write through a view of it): eager
    gives the caller's ``x`` a ``grad_fn``, but the bridge writes results back into arguments
    without autograd (X9). What an op writes is what the tracer saw it write (``writes``: the
    arguments' meta tensors or views of them), not its first argument (batch norm writes its
    running statistics)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    position_of = {id(n.meta.get("example_value")): k for k, n in enumerate(placeholders)}
    for node in gm.graph.nodes:
        for written in node.meta.get("writes") or ():
            root = written._base if written._base is not None else written
            k = position_of.get(id(root))
            before = example_inputs[k] if k is not None and k < len(example_inputs) else None
            if isinstance(before, torch.Tensor) and not before.requires_grad and written.requires_grad:
                return (f"in-place {getattr(node.target, '__name__', node.target)} makes argument "
                        f"{k} require grad (the write-back carries no autograd)")
    return None


def _silent_write_into_a_view(gm):
    """Why the device cannot run ``gm``, if an op writes without a version (batch norm's
    running statistics) into a view (``rs[0]``, ``rs[1]``): torch_xla's kernel leaves a view
    unwritten, where eager's writes through it into the base (probe P)."""
    for node in gm.graph.nodes:
        for written in node.meta.get("silent_writes") or ():
            if isinstance(written, torch.Tensor) and written._base is not None:
                return (f"{getattr(node.target, '__name__', node.target)} writes its running statistics into a "
                        "view, which torch_xla leaves unwritten")
    return None


def _makes_grad_leaves(gm, example_inputs):
    """Why the device cannot run ``gm``, if one of its ops makes a tensor require grad that
    none of its inputs made require it (``t.detach().requires_grad_()``, a factory with
    ``requires_grad=True``, ``nn.Parameter(...)``): eager's autograd then records from that
    leaf on (``torch.autograd.grad(y, t)`` after a graph break), and the bridge's outputs
    carry autograd only back to the graph's arguments."""
    def value(node):
        if node.op == "get_attr":
            return getattr(gm, node.target, None)
        return node.meta.get("example_value")

    def known_inputs(node):
        """The values ``node`` reads; through a node with no example value of its own (a
        multi-output op, ``chunk``, ``split``, ``sort``: its ``getitem``s have them), its inputs."""
        for n in node.all_input_nodes:
            if n.op != "get_attr" and "example_value" not in n.meta and n.op != "placeholder":
                yield from known_inputs(n)
            else:
                yield from pytree.tree_leaves(value(n))

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node in gm.graph.nodes:
        if node.op not in ("call_function", "call_method", "call_module"):
            continue
        if not any(map(_requires_grad, pytree.tree_leaves(value(node)))):
            continue
        if op_name(node.target) == "requires_grad_":
            # The example values show the state at the graph's end (``requires_grad_`` changed
            # its argument's example in place): only an argument that required grad before
            # the call (``example_inputs``, the caller's) makes it a no-op.
            first = node.args[0] if node.args else None
            k = placeholders.index(first) if first in placeholders else None
            if k is None or k >= len(example_inputs) or not _requires_grad(example_inputs[k]):
                return ("requires_grad_ makes a tensor require grad inside the graph (in eager a new leaf, "
                        "whose autograd history starts there)")
            continue
        inputs = list(known_inputs(node))
        if node.op == "call_module":                # a leaf module's own state counts as input
            inputs += list(gm.get_submodule(node.target).parameters())
        if not any(map(_requires_grad, inputs)):
            return (f"{getattr(node.target, '__name__', node.target)} makes a tensor that requires "
                    f"grad inside the graph (its autograd history starts there, in eager)")
    return None
