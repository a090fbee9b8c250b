"""Higher-order functions: ``torch.vmap(fn, in_dims, out_dims)`` traced as one node over a body.

``torch.vmap(fn, ...)`` itself only builds a callable (``VmappedFunctionVariable``); calling it
traces ``fn`` once, on per-sample arguments (the batched dimension removed from each example),
into a body graph (subgraph.py).  The enclosing graph gets one node::

    vmap_call(self.vmap_body_0, in_dims, out_dims, *args, *lifted)

which runs the real ``torch.vmap`` over the body at run time; its example value comes from
running the same on meta.  Where the aten operations vmap reaches can stand for it
(vmap_flatten.py), the node is ``run_flat(self.vmap_flat_0, *args, *lifted)`` instead, and no vmap
runs at call time.  Tensors the body reads from outside are lifted as extra inputs
with in_dim None.  Nested vmaps nest: the inner call is traced while the outer body is the
current graph, so its node (and its body module) belong to the outer body.

The body must be a pure function of its tensors, or the one node could not stand for it; so
these are refused, with the reason: Python side effects on anything outside the body (a
mutation the trace would replay), an in-place write to the memory of a body input (directly or
through a view: the graph's effect analysis sees only the root graph), random numbers, outputs other than
tensors (or a tuple/list of them), ``chunk_size`` and ``randomness`` other than ``"error"``.
Python effects on objects made in the trace happen once, as eager vmap calls ``fn`` once; a
tensor of the body that escapes it (stored and read outside) is refused where it is read
(``OutputGraph.lift``).  A graph break
inside the body falls back at the root call that reached it, like any inlined call.  Guards
made while tracing the body are ordinary guards of the frame.  The TorchFunctionModes the
trace has entered stay active in the body, as they do around eager vmap's call of ``fn``.
"""

from __future__ import annotations

import torch

from ...exc import Unsupported
from ..subgraph import MetaBody, register_body, trace_body
from ..vmap_flatten import flatten_vmap, run_flat
from .base import VariableTracker, maybe_constant, NO_CONSTANT
from .constant import ConstantVariable
from .containers import ListVariable, sequence_kind
from .tensor import TensorVariable


def vmap_call(body, in_dims, out_dims, *args):
    """What the graph runs: the real ``torch.vmap`` over a traced body."""
    return torch.vmap(body, in_dims=in_dims, out_dims=out_dims)(*args)


def _vmap_on_meta(body, in_dims, out_dims, *args):
    return vmap_call(MetaBody.runner(body), in_dims, out_dims, *args)


class VmapVariable(VariableTracker):
    """``torch.vmap`` (``torch.func.vmap``) itself."""

    SIGNATURE = ("func", "in_dims", "out_dims", "randomness")

    def python_type(self):
        return type(torch.vmap)

    def as_python_constant(self):
        return torch.vmap

    def call_function(self, tx, args, kwargs):
        if len(args) > len(self.SIGNATURE):
            raise Unsupported("torch.vmap with too many positional arguments")
        bound = dict(zip(self.SIGNATURE, args))
        for key, value in kwargs.items():
            if key in bound:
                raise Unsupported(f"torch.vmap got {key!r} twice (TypeError)")
            bound[key] = value
        if "func" not in bound:
            raise Unsupported("torch.vmap without a function")
        extra = set(bound) - set(self.SIGNATURE) - {"chunk_size"}
        if extra:
            raise Unsupported(f"torch.vmap with unknown arguments {sorted(extra)}")
        randomness = _constant(bound.get("randomness", ConstantVariable("error")), "randomness")
        if randomness != "error":
            raise Unsupported(f"torch.vmap(randomness={randomness!r}) (only 'error' is modelled)")
        if _constant(bound.get("chunk_size", ConstantVariable(None)), "chunk_size") is not None:
            raise Unsupported("torch.vmap(chunk_size=...) (not modelled)")
        in_dims = _constant(bound.get("in_dims", ConstantVariable(0)), "in_dims")
        out_dims = _constant(bound.get("out_dims", ConstantVariable(0)), "out_dims")
        return VmappedFunctionVariable(bound["func"], in_dims, out_dims)

    def __repr__(self):
        return "VmapVariable()"


def _constant(vt, what):
    value = maybe_constant(vt, NO_CONSTANT)
    if value is NO_CONSTANT:
        raise Unsupported(f"torch.vmap's {what} is not a constant")
    return value


class VmappedFunctionVariable(VariableTracker):
    """What ``torch.vmap(fn, in_dims, out_dims)`` returned; calling it traces ``fn``'s body."""

    def __init__(self, fn: VariableTracker, in_dims, out_dims):
        super().__init__()
        self.fn = fn
        self.in_dims = in_dims
        self.out_dims = out_dims

    def python_type(self):
        return type(lambda: None)

    def call_function(self, tx, args, kwargs):
        if kwargs:
            raise Unsupported("keyword arguments to a vmapped function (vmap maps positional arguments only)")
        in_dims = self._in_dims(len(args))
        mapped = []                              # (argument, its normalized in_dim), in order
        for arg, dim in zip(args, in_dims):
            if dim is None:                      # passed whole: a tensor is lifted if the body reads it
                if not isinstance(arg, TensorVariable) and maybe_constant(arg, NO_CONSTANT) is NO_CONSTANT:
                    raise Unsupported(f"a vmapped function given {arg} with in_dim None (only tensors and "
                                      "constants are modelled)")
                continue
            if not isinstance(arg, TensorVariable):
                raise Unsupported(f"a vmapped function given {arg} with in_dim {dim} (only tensors are modelled)")
            if not -arg.example.dim() <= dim < arg.example.dim():
                raise Unsupported(f"vmap in_dim {dim!r} for a {arg.example.dim()}-d tensor (ValueError)")
            mapped.append((arg, dim % arg.example.dim()))
        if len({arg.example.shape[dim] for arg, dim in mapped}) != 1:
            raise Unsupported("vmap over no mapped tensor, or tensors of different batch sizes (ValueError)")

        output = tx.output
        snapshot = output.side_effects.snapshot()
        with trace_body(output, "vmap_body") as scope:
            body_args = []
            for k, (arg, dim) in enumerate(zip(args, in_dims)):
                if dim is None:
                    body_args.append(arg)
                    continue
                example = arg.example.detach().select(dim, 0)       # what fn sees: one sample
                example.requires_grad_(arg.example.requires_grad)
                body_args.append(TensorVariable(scope.argument(f"arg{k}", example, arg.device), example, arg.device))
            result = self.fn.call_function(tx, body_args, {})
            outputs, structure = _body_outputs(output, result)
            if output.side_effects.snapshot() != snapshot:
                raise Unsupported("a vmap body has Python side effects on objects outside it")
            _check_pure(scope)
            body = scope.module(structure(outputs) if structure is not None else outputs[0])

        # the enclosing graph passes the mapped arguments (the body's first placeholders), then
        # what the body lifted (in_dim None)
        ordered = [arg for arg, _ in mapped]
        ordered_dims = [dim for _, dim in mapped]
        lifted = [_NodeArg(outer) for outer in scope.lifted]
        out_dims = self.out_dims
        if structure is not None and isinstance(out_dims, (tuple, list)) and len(out_dims) != len(outputs):
            raise Unsupported("vmap out_dims does not match the body's outputs (ValueError)")
        if structure is not None and isinstance(out_dims, list):
            out_dims = tuple(out_dims)
        all_dims = tuple(ordered_dims) + (None,) * len(lifted)
        flat = _flat_body(body, all_dims, out_dims, ordered, scope)
        if flat is not None:
            def flat_on_meta(_flat, *tensors):
                return _vmap_on_meta(body, all_dims, out_dims, *tensors)

            return output.call_op("call_function", run_flat,
                                  [_ModuleArg(register_body(output, "vmap_flat", flat), flat), *ordered, *lifted],
                                  {}, example_fn=flat_on_meta)
        from ..builder import wrap_constant_result

        body_node = register_body(output, "vmap_body", body)
        return output.call_op("call_function", vmap_call,
                              [_ModuleArg(body_node, body), wrap_constant_result(all_dims),
                               wrap_constant_result(out_dims), *ordered, *lifted], {},
                              example_fn=_vmap_on_meta)

    def _in_dims(self, n):
        in_dims = self.in_dims
        if isinstance(in_dims, (int, type(None))):
            return [in_dims] * n
        if isinstance(in_dims, (tuple, list)) and len(in_dims) == n:
            if any(not isinstance(d, (int, type(None))) for d in in_dims):
                raise Unsupported(f"nested vmap in_dims {in_dims!r} (only an int or None per argument)")
            return list(in_dims)
        raise Unsupported(f"vmap in_dims {in_dims!r} for {n} arguments (ValueError)")

    def __repr__(self):
        return f"VmappedFunctionVariable({self.fn!r}, in_dims={self.in_dims!r}, out_dims={self.out_dims!r})"


def _flat_body(body, all_dims, out_dims, ordered, scope):
    """The body flattened (vmap_flatten.py) when every tensor it reads or makes lives on one
    device, else None (the graph keeps the runtime vmap)."""
    devices = {arg.device for arg in ordered} | {outer.meta.get("device") for outer in scope.lifted}
    devices |= _body_devices(body)
    if len(devices) != 1 or None in devices:
        return None
    examples = [arg.example for arg in ordered] + [outer.meta["example_value"] for outer in scope.lifted]
    return flatten_vmap(lambda *tensors: _vmap_on_meta(body, all_dims, out_dims, *tensors), examples,
                        devices.pop())


def _body_devices(module):
    """The devices of the tensors a body (and the bodies it calls) reads and makes (None where
    one is not known)."""
    devices = set()
    for node in module.graph.nodes:
        if isinstance(node.meta.get("example_value"), torch.Tensor):
            devices.add(node.meta.get("device"))
        elif node.op == "get_attr" and isinstance(node.meta.get("example_value"), torch.fx.GraphModule):
            devices |= _body_devices(node.meta["example_value"])
    return devices


def _body_outputs(output, result):
    """The body's output nodes and its structure (None: one tensor; tuple or list)."""
    if isinstance(result, TensorVariable):
        return [output.lift(result.node)], None
    if sequence_kind(result) in (tuple, list) and result.items \
            and all(isinstance(i, TensorVariable) for i in result.items):
        return [output.lift(i.node) for i in result.items], (list if isinstance(result, ListVariable) else tuple)
    raise Unsupported(f"a vmap body returned {result} (only a tensor or a tuple/list of tensors is modelled)")


def _check_pure(scope):
    """Refuse a body that draws random numbers or writes, in place, the memory of one of its
    inputs (directly or through a view: the meta examples share storage exactly as the real
    tensors would); the enclosing graph's effect analysis never sees inside the body."""
    inputs = [n.meta["example_value"] for n in scope.graph.nodes if n.op == "placeholder"]
    storages = {_storage(e) for e in inputs if isinstance(e, torch.Tensor)}
    for node in scope.graph.nodes:
        if node.meta.get("draws_random"):
            raise Unsupported(f"a vmap body draws random numbers ({node.name})")
        if any(_storage(w) in storages for w in node.meta.get("writes") or ()):
            raise Unsupported(f"a vmap body changes one of its inputs in place ({node.name})")


def _storage(tensor):
    return tensor.untyped_storage()._cdata


class _NodeArg(VariableTracker):
    """A node of the current graph given to ``call_op`` as it is (a lifted body input)."""

    def __init__(self, node):
        super().__init__()
        self.node = node

    def as_graph_arg(self, devices):
        return self.node, self.node.meta["example_value"]


class _ModuleArg(VariableTracker):
    """The ``get_attr`` node of a body, with the body module as its example."""

    def __init__(self, node, module):
        super().__init__()
        self.node = node
        self.module = module

    def as_graph_arg(self, devices):
        return self.node, self.module
