"""A vmap body flattened into the operations vmap really runs, recorded once on meta.

``torch.vmap`` pays Python at every call: pytree work and batched-tensor wrappers per level,
batching rules chosen per operation (about 2 ms for transformers' four-level attention-mask
vmap, several times the mask's own work).  Yet for given shapes, dtypes, strides and devices,
which the guards pin anyway, what vmap finally runs is a fixed list of aten operations on the
unbatched tensors.  So the tracer runs the vmap once on the meta examples under a dispatch mode
that sits below the batching rules and records each aten call (``_Recorder``); the enclosing
graph then calls that flat graph instead of ``torch.vmap``::

    vmap_call(self.vmap_body_0, (0, None), 0, x, mask)     # before: vmap at every call
    self.vmap_flat_0(x, mask)                              # after: aten.view, aten.index, ...

The recording is only a faithful stand-in when nothing but the pinned metadata decided it, so
the runtime vmap stays (``flatten_vmap`` returns None) when the recording met a tensor it did
not see made (a constant), a higher-order operator or a data-dependent operation (meta raises
on both); when an input requires grad (a custom ``autograd.Function``'s backward would be
replaced by the one of the operations it ran); under autocast (meta tensors are not cast); and
when the body's tensors live on more than one device (the recording sees only ``meta``, which
becomes the one device).  The flat graph is checked once, on meta, against vmap's own result.
"""

from __future__ import annotations

import operator
from typing import Optional, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from .meta import no_dynamo_import

META = torch.device("meta")


class _NotFlat(Exception):
    """The recording cannot stand for the vmap (the reason is for the log)."""


class _Recorder(TorchDispatchMode):
    """Records every aten call that reaches it as a node of ``graph``; ``env`` maps the id of
    each tensor seen so far (the inputs, then every result) to its node.  A meta device in an
    argument is recorded as ``device`` (the program's one device)."""

    def __init__(self, graph: torch.fx.Graph, env: dict, device: torch.device):
        super().__init__()
        self.graph, self.env, self.device = graph, env, device
        self.alive: list = []          # every result, so that no id is reused while recording

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not isinstance(func, torch._ops.OpOverload):
            raise _NotFlat(f"{func} is not an aten operation")
        node_args, node_kwargs = tree_map(self._argument, (args, kwargs))
        result = func(*args, **kwargs)
        node = self.graph.call_function(func, tuple(node_args), node_kwargs)
        self._bind(result, node)
        self.alive.append(result)
        return result

    def _argument(self, value):
        if isinstance(value, torch.Tensor):
            node = self.env.get(id(value))
            if node is None:
                raise _NotFlat("the body reads a tensor it did not make (a constant)")
            return node
        if isinstance(value, torch.device):
            return self.device if value == META else value
        return value

    def _bind(self, result, node) -> None:
        if isinstance(result, torch.Tensor):
            self.env[id(result)] = node
        elif isinstance(result, (tuple, list)):
            for i, item in enumerate(result):
                if isinstance(item, torch.Tensor):
                    self.env[id(item)] = self.graph.call_function(operator.getitem, (node, i))
                elif isinstance(item, (tuple, list)):
                    raise _NotFlat(f"nested results of {node.target}")


def flatten_vmap(run_vmap, examples: Sequence[torch.Tensor], device: torch.device) -> Optional[torch.fx.GraphModule]:
    """The flat graph of ``run_vmap(*examples)`` (vmap over the body, on the meta examples), to
    run on ``device``; None when the recording could not stand for it (see the module doc)."""
    if any(e.requires_grad for e in examples) or torch._C._is_any_autocast_enabled():
        return None
    graph = torch.fx.Graph()
    env = {id(e): graph.placeholder(f"arg{i}") for i, e in enumerate(examples)}
    recorder = _Recorder(graph, env, device)
    try:
        with no_dynamo_import():
            with recorder:
                expected = run_vmap(*examples)
            leaves, spec = tree_flatten(expected)
            graph.output(tree_unflatten([env[id(t)] for t in leaves], spec))
            flat = torch.fx.GraphModule(torch.nn.Module(), graph)
            _check_on_meta(flat, examples, expected, device)
    except Exception:       # (_NotFlat, or the recording failed): the runtime vmap stays, as is
        return None
    return flat


class _OnMeta(torch.fx.Interpreter):
    """The flat graph run on meta: the program's device read back as meta."""

    def __init__(self, module, device):
        super().__init__(module)
        self.device = device

    def call_function(self, target, args, kwargs):
        args, kwargs = tree_map(lambda v: META if isinstance(v, torch.device) and v == self.device else v,
                                (args, kwargs))
        return target(*args, **kwargs)


def _check_on_meta(flat, examples, expected, device) -> None:
    """The flat graph gives vmap's result on meta: same structure, shapes, strides and dtypes."""
    got, _ = tree_flatten(_OnMeta(flat, device).run(*examples))
    want, _ = tree_flatten(expected)
    if len(got) != len(want) or any(
            g.shape != w.shape or g.stride() != w.stride() or g.dtype != w.dtype for g, w in zip(got, want)):
        raise _NotFlat("the flat graph does not reproduce vmap's result")


def run_flat(flat, *args):
    """What the graph runs in place of ``vmap_call``: the flat graph's forward (not its
    ``__call__``: a graph module has no hooks to honour)."""
    return flat.forward(*args)
