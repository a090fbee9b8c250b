"""The two XLA backends: ``backend(gm, example_inputs) -> callable(*inputs)``.

``BridgedCall`` is the host side shared by both: it re-reads the module state the graph uses,
moves host tensors to the device (each kept while unchanged, see DeviceCopyCache), runs a
device program, writes in-place updates back to the caller's host tensors and brings outputs
back to the device the inputs came from. Graphs it cannot run soundly run eagerly instead,
with the reason recorded in ``counters``; so do calls that need autograd.
"""

import torch
from torch.utils import _pytree as pytree

from . import device as dev
from . import timing
from .counters import counters
from .lazy_graph import NotOneGraph
from .lifting import FlatProgram
from .partition import PartitionedProgram, find_eager_nodes
from .programs import ReplayedGraph, TracedEveryCall


def torchxla_trivial(gm: torch.fx.GraphModule, example_inputs):
    """Run ``gm`` lazily on the XLA device on every call, then sync: it traces every call."""
    return _build(gm, example_inputs, TracedEveryCall)


def torchxla_trace_once(gm: torch.fx.GraphModule, example_inputs):
    """Trace ``gm`` on the XLA device once, compile it, then replay it by hash on every call."""
    return _build(gm, example_inputs, _trace_once_program)


def _trace_once_program(flat, device_args):
    user_tensors = [i for i, a in enumerate(device_args[:flat.user_input_count])
                    if isinstance(a, torch.Tensor)]
    try:
        return ReplayedGraph(flat, device_args, shape_positions=user_tensors)
    except NotOneGraph as cut:
        eager_nodes = find_eager_nodes(flat, device_args)
        if not eager_nodes:
            raise
        if flat.module_state_names:
            raise NotOneGraph(f"{cut.reason}; cannot split a graph whose call_module nodes hold "
                              f"state (ops {', '.join(eager_nodes)})") from None
        program = PartitionedProgram(flat, device_args, eager_nodes)
        counters.record("partitions", f"ops run eagerly between replayed XLA segments: "
                                      f"{', '.join(eager_nodes)}")
        return program


def _build(gm, example_inputs, make_program):
    try:
        return BridgedCall(gm, list(example_inputs), make_program)
    except NotOneGraph as error:
        reason = error.reason
    except Exception as error:   # a graph the device cannot run: eager is still right
        first_line = (str(error).splitlines() or [""])[0]
        reason = f"{type(error).__name__}: {first_line[:200]}"
    counters.record("fallbacks", f"graph runs eagerly: {reason}")
    return EagerGraph(gm, reason)


def _requires_grad(value) -> bool:
    return isinstance(value, torch.Tensor) and value.requires_grad


class EagerGraph:
    """The eager backend, for graphs the bridge does not run; ``reason`` says why."""

    def __init__(self, gm, reason: str):
        self.gm = gm
        self.reason = reason

    def __call__(self, *inputs):
        return self.gm(*inputs)


class BridgedCall:
    """The callable a backend returns: host inputs in, device program, outputs back."""

    def __init__(self, gm, example_inputs, make_program):
        self.gm = gm
        self.flat = FlatProgram(gm)
        self.has_state = bool(self.flat.state_names)
        args = example_inputs + self.flat.read_state()
        # The device program computes no gradients: with grad mode on and a tensor that
        # requires grad, a call runs eagerly instead (checked per call: grad mode can change).
        self.check_grad_mode = any(_requires_grad(a) for a in args)
        self.host_positions = tuple(i for i, a in enumerate(args)
                                    if isinstance(a, torch.Tensor) and not dev.is_xla(a))
        self.device_positions = tuple(i for i, a in enumerate(args) if dev.is_xla(a))
        user_tensors = [a for a in example_inputs if isinstance(a, torch.Tensor)]
        self.returns_to_host = not dev.is_xla(user_tensors[0]) if user_tensors else \
            not self.device_positions
        self.copies = dev.DeviceCopyCache(len(args))
        self.program = make_program(self.flat, self._device_args(args))
        self.sync = getattr(self.program, "sync", None)
        self.grad_fallback_reported = False

    def __call__(self, *inputs):
        if self.check_grad_mode and torch.is_grad_enabled():
            return self._eager_for_autograd(inputs)
        timer = timing.active
        if timer is not None:
            timer.start()
        args = list(inputs)
        if self.has_state:
            args += self.flat.read_state()
        device_args = self._device_args(args)
        if timer is not None:
            timer.lap("transfer_in")
        leaves = self.program.run(device_args)
        if self.sync is not None:       # trivial: the lazy trace ran; now dispatch it
            if timer is not None:
                timer.lap("trace")
            self.sync()
        if timer is not None:
            timer.lap("hash_lookup_dispatch")
            dev.wait_device()
            timer.lap("execute")
        for position in self.program.mutated:
            if position in self.host_positions:
                self.copies.write_back(position, args[position], device_args[position])
        out = self._outputs(leaves, args) if self.returns_to_host else leaves
        if timer is not None:
            timer.lap("transfer_out")
        return pytree.tree_unflatten(out, self.program.treespec)

    def _device_args(self, args) -> list:
        device_args = list(args)
        get = self.copies.get
        for i in self.host_positions:
            device_args[i] = get(i, args[i])
        if self.device_positions:
            dev.materialize([args[i] for i in self.device_positions])
        return device_args

    def _outputs(self, leaves, args) -> list:
        """Leaves on the host: arguments returned as the caller's own tensors, each distinct
        device tensor moved once (a repeated output stays one tensor)."""
        out = list(leaves)
        aliases = self.program.argument_leaves
        for k, position in aliases.items():
            out[k] = args[position]
        moving = {}
        for k, leaf in enumerate(out):
            if k not in aliases and dev.is_xla(leaf):
                moving.setdefault(id(leaf), leaf)
        if moving:
            moved = dict(zip(moving, dev.to_host(list(moving.values()))))
            out = [leaf if k in aliases else moved.get(id(leaf), leaf)
                   for k, leaf in enumerate(out)]
        return out

    def _eager_for_autograd(self, inputs):
        if not self.grad_fallback_reported:
            self.grad_fallback_reported = True
            counters.record("fallbacks", "call runs eagerly: grad mode is on and an input "
                                         "requires grad (autograd is not supported through XLA)")
        return self.gm(*inputs)
