"""``OutputGraph``: the graph being built, shared by the root translator and every inlined call.

It owns the fx graph, the graph inputs (one placeholder per input Source, with the REAL value
that feeds it now), the guards collected so far, and the one way tensor operations enter the
graph: ``call_op`` records a node and runs the same op on meta example values.
"""

from __future__ import annotations

import operator
import torch
import torch.fx

from .meta import run_on_meta, to_meta
from .side_effects import SideEffects
from .variables.base import VariableTracker


class OutputGraph:
    def __init__(self, frame_info):
        self.graph = torch.fx.Graph()
        self.frame_info = frame_info
        self.guards: list = []
        self.input_sources: list = []
        self.example_inputs: list = []
        self.input_variables: dict = {}     # source -> TensorVariable (one placeholder per source)
        self._names: set = set()
        self.side_effects = SideEffects()

    # -- guards --------------------------------------------------------------------------
    def add_guard(self, guard) -> None:
        self.guards.append(guard)

    # -- inputs --------------------------------------------------------------------------
    def add_input(self, source, tensor: torch.Tensor):
        """The graph input read from ``source`` (a real tensor now), made once per source."""
        from .variables.tensor import TensorVariable
        import guards

        existing = self.input_variables.get(source)
        if existing is not None:
            return existing
        self.add_guard(guards.tensor_match(source, tensor))
        node = self.graph.placeholder(self._fresh_name(source.name()))
        # placeholders must come first: move the new one after the last placeholder
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder" and n is not node]
        if placeholders:
            placeholders[-1].append(node)
        example = to_meta(tensor)
        variable = TensorVariable(node, example, tensor.device, source=source, python_class=type(tensor))
        node.meta["example_value"] = example
        self.input_variables[source] = variable
        self.input_sources.append(source)
        self.example_inputs.append(tensor)
        return variable

    def _fresh_name(self, text: str) -> str:
        base = "".join(c if c.isalnum() else "_" for c in text).strip("_").lower() or "input"
        base = "_".join(part for part in base.split("_") if part)[:60] or "input"
        if base[0].isdigit():
            base = "i_" + base
        name, k = base, 1
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    # -- operations ----------------------------------------------------------------------
    def call_op(self, kind: str, target, args: list, kwargs: dict, *, device=None, example_fn=None):
        """Record ``target(*args, **kwargs)`` (kind: call_function or call_method) and wrap
        its meta result.  ``example_fn`` replaces ``target`` when computing the example value."""
        from .variables.tensor import wrap_op_result

        node_args, example_args, devices = [], [], []
        for a in args:
            n, e = graph_arg(a, devices)
            node_args.append(n)
            example_args.append(e)
        node_kwargs, example_kwargs = {}, {}
        for k, v in kwargs.items():
            node_kwargs[k], example_kwargs[k] = graph_arg(v, devices)
        fn = example_fn or (_method_caller(target) if kind == "call_method" else target)
        if device is None and example_kwargs.get("device") is not None:
            device = torch.device(example_kwargs["device"])          # an explicit device= wins
        if device is None:
            device = devices[0] if devices else None
        if "device" in example_kwargs or (not devices and _accepts_device(target)):
            example_kwargs["device"] = "meta"                       # examples always live on meta
        if not devices:
            device = device or torch.get_default_device()
        example = run_on_meta(fn, example_args, example_kwargs)
        node = self.graph.create_node(kind, target, tuple(node_args), node_kwargs)
        return wrap_op_result(self, node, example, device)

    def getitem_node(self, node, index):
        return self.graph.call_function(operator.getitem, (node, index))

    # -- the end -------------------------------------------------------------------------
    def finish(self, output_nodes: list) -> torch.fx.GraphModule:
        self.graph.output(tuple(output_nodes))
        self.graph.lint()
        return torch.fx.GraphModule(torch.nn.Module(), self.graph)


_DEVICE_FACTORIES = {
    torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.tensor, torch.rand,
    torch.randn, torch.randint, torch.linspace, torch.eye, torch.as_tensor, torch.zeros_like,
    torch.ones_like, torch.empty_like, torch.full_like, torch.rand_like, torch.randn_like,
    torch.logspace, torch.scalar_tensor,
}


def _method_caller(name: str):
    def call_method(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)

    call_method.__qualname__ = f"Tensor.{name}"
    return call_method


def _accepts_device(target) -> bool:
    return target in _DEVICE_FACTORIES


def graph_arg(vt: VariableTracker, devices: list):
    """(fx node argument, meta example argument) for a VariableTracker used as an op argument."""
    from .variables.tensor import TensorVariable

    if isinstance(vt, TensorVariable):
        devices.append(vt.device)
        return vt.node, vt.example
    return vt.as_graph_arg(devices)
