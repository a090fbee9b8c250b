"""Does each kernel of a try body exist for what it will be called with?

``try: cache.index_copy_(2, pos, k) except NotImplementedError: cache[:, :, pos] = k`` (the static
KV cache of transformers) asks whether a kernel exists, not what the data holds: a kernel raises
``NotImplementedError`` when nothing implements it for the backend, dtype or layout it meets
("Could not run 'aten::index_copy_' with arguments from the 'MPS' backend", "not implemented
for 'Half'"), and an op raises ``TypeError`` for the types of its arguments.  The guards pin all
of that for every tensor of the graph (each graph input's device, dtype, shape and strides; the
ops' constant arguments), so whether an op raises either is the same on every call the entry
serves.  The trace's example values are meta tensors, whose kernels say nothing about the real
backend's: this module runs each op once on stand-ins, fresh tensors with the example's
metadata on the real device.  When every op ran, the handler cannot see those errors from the
graph (docs/guard-assumptions.md states what this rests on); otherwise try_blocks.py keeps its
general rule.

Only torch's own functions and tensor methods are run (no module, no user function, nothing
that draws random numbers), and a flattened vmap's graph of aten ops (``vmap_flatten``): on
stand-ins they touch nothing the program can see.
"""

from __future__ import annotations

import operator
from typing import Optional

import torch
import torch.fx

from .. import compile_warnings
from .vmap_flatten import run_flat


def unprobed(nodes, answers: Optional[dict] = None) -> Optional[str]:
    """None when every op among ``nodes`` (a try body's graph nodes) ran on stand-ins on its
    real device; else why one did not (it raised, or it is not something to run here).
    ``answers`` (node -> that answer) keeps each op's run for the next call: an op inside two
    nested handlers is run once."""
    answers = {} if answers is None else answers
    from .variables.ctx_managers import switches_state

    for node in nodes:
        if node.op not in ("call_function", "call_method") or switches_state(node):
            continue                     # (a switch the trace made itself: constant arguments, never raises)
        if node.target is operator.getitem and _is_results_of_op(node.args[0]):
            continue                     # one result of an op that returns several (itself run on stand-ins)
        if node not in answers:
            answers[node] = _run_on_stand_ins(node)
        why = answers[node]
        if why is not None:
            return why
    return None


def refused_across_devices(node: torch.fx.Node) -> Optional[str]:
    """Why eager refuses ``node``'s op for where its tensors live, or None.  A CPU tensor of one
    or more dims meeting a tensor of another device is refused by most kernels and taken by
    some (advanced indexing with host indices); the meta kernels take all.  So such an op runs
    once on stand-ins on the real devices (a device op only records it), and what it raises
    there eager raises too.  (0-dim CPU tensors are scalars anywhere: not checked.)"""
    placed = [(arg.meta.get("example_value"), arg.meta.get("device")) for arg in node.all_input_nodes]
    placed = [(example, torch.device(device)) for example, device in placed
              if isinstance(example, torch.Tensor) and device is not None]
    if len({device.type for _, device in placed}) < 2 or \
            not any(device.type == "cpu" and example.dim() > 0 for example, device in placed):
        return None
    outcome = _run_on_stand_ins(node)
    return outcome if isinstance(outcome, _Raised) else None


class _Raised(str):
    """What an op raised on its stand-ins (not a reason it was not run)."""


def _run_on_stand_ins(node: torch.fx.Node) -> Optional[str]:
    fn = _runnable(node)
    if fn is None:
        return f"{node.target} is not one of torch's own ops"
    if node.meta.get("draws_random"):
        return f"{node.target} draws random numbers"
    try:
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), _stand_in)
    except _NoStandIn as why:
        return str(why)
    except Exception as error:          # the device refuses such a tensor
        return f"no stand-in for an argument of {node.target}: {type(error).__name__}: {error}"
    try:
        with compile_warnings.recorded(), torch.no_grad():     # (catch_warnings would reset
            fn(*args, **kwargs)                                # every module's warnings shown)
    except Exception as error:          # NotImplementedError, or stand-ins the kernel refuses
        return _Raised(f"{node.target} raised {type(error).__name__} on stand-ins: {error}")
    return None


def _runnable(node: torch.fx.Node):
    if node.op == "call_method":
        method = getattr(torch.Tensor, node.target, None) if isinstance(node.target, str) else None
        return None if method is None else (lambda self, *a, **k: getattr(self, node.target)(*a, **k))
    target = node.target
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return target
    if target is run_flat and not _draws(node.args[0].meta.get("example_value")):
        return target                    # a flattened vmap: aten ops only (vmap_flatten.py)
    module = getattr(target, "__module__", None) or ""
    if module in ("_operator", "torch") or module.startswith("torch."):   # x * y: the tensor's own operator
        return target
    return None


def _draws(flat) -> bool:
    return not isinstance(flat, torch.fx.GraphModule) or any(
        isinstance(n.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in n.target.tags
        for n in flat.graph.nodes)


def _is_results_of_op(node) -> bool:
    """``node`` is an op whose results are several tensors (``chunk``, ``max(dim)``): the tracer
    reads them through ``getitem`` nodes and keeps no example of the whole."""
    return isinstance(node, torch.fx.Node) and node.op in ("call_function", "call_method") and \
        "example_value" not in node.meta and any(user.target is operator.getitem for user in node.users)


class _NoStandIn(Exception):
    pass


def _stand_in(node: torch.fx.Node):
    example = node.meta.get("example_value")
    device = node.meta.get("device")
    return _stand_in_for(example, device, node)


def _stand_in_for(example, device, node):
    if isinstance(example, torch.Tensor) and device is not None:
        if example.dtype.is_floating_point or example.dtype.is_complex:
            made = torch.empty_strided(example.shape, example.stride(), dtype=example.dtype, device=device)
        else:                            # integers are indexes: zeros are in range
            made = torch.zeros_like(torch.empty_strided(example.shape, example.stride(), dtype=example.dtype,
                                                        device=device), memory_format=torch.preserve_format)
        return made
    if isinstance(example, (tuple, list)):
        return type(example)(_stand_in_for(e, device, node) for e in example)
    if isinstance(example, torch.fx.GraphModule):     # a flattened vmap's graph (``_runnable``)
        return example
    raise _NoStandIn(f"{node.name} has no tensor example value")
