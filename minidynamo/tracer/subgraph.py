"""Sub-graphs: a function body traced into a graph of its own (a ``torch.vmap`` body).

A higher-order function such as ``torch.vmap(fn)`` calls ``fn`` in a way the root graph cannot
express op by op: ``fn`` sees per-sample tensors.  So ``fn`` is traced symbolically, by the same
translator and the same ``OutputGraph``, but its nodes go into a separate fx graph (a
``SubgraphScope``) whose placeholders are ``fn``'s arguments.  The root graph then gets one node
that applies the higher-order function to that body (a submodule read by ``get_attr``).

What the body reads from outside it is *lifted*: a tensor of an enclosing graph (a closure's
``padding_mask``, a graph input read inside the body) becomes an extra placeholder of the
body, passed in from the enclosing graph (``lifted``, in order).  Graph inputs always become
placeholders of the ROOT graph first (``OutputGraph.add_input``), so guards and inputs stay
where they are; nested bodies lift through every graph in between.

While a body is traced, ``OutputGraph.graph`` is the body's graph, so every recorded op lands
there; ``trace_body`` puts the enclosing graph back whatever happens.
"""

from __future__ import annotations

import contextlib

import torch
import torch.fx

from ..exc import Unsupported
from .graph_code import CallsTracedObjects


class SubgraphScope:
    def __init__(self, output, name: str):
        self.output = output
        self.name = name
        self.graph = type(output.root_graph)(output.stack_trace)    # a StampedGraph: provenance kept
        self.parent_graph = output.graph
        self.arguments: list = []        # placeholders of the body's own parameters
        self.lifted: dict = {}           # enclosing-graph node -> placeholder here (insertion order)
        self.submodules: dict = {}       # name -> GraphModule of a body nested in this one

    def argument(self, name: str, example: torch.Tensor, device: torch.device):
        """A placeholder for one of the body's parameters (made before anything is lifted)."""
        node = self.graph.placeholder(self._fresh(name))
        node.meta["example_value"] = example
        node.meta["device"] = device
        self.arguments.append(node)
        return node

    def lift(self, outer):
        """The placeholder standing for ``outer`` (a node of the enclosing graph)."""
        if outer.graph is not self.parent_graph:
            raise Unsupported("a tensor of another vmap body is read here")
        existing = self.lifted.get(outer)
        if existing is not None:
            return existing
        if "example_value" not in outer.meta or not isinstance(outer.meta["example_value"], torch.Tensor):
            raise Unsupported(f"a vmap body reads {outer.name}, which is not a tensor")
        node = self.graph.placeholder(self._fresh("lifted_" + outer.name))
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder" and n is not node]
        if placeholders:
            placeholders[-1].append(node)
        node.meta["example_value"] = outer.meta["example_value"]
        node.meta["device"] = outer.meta.get("device")
        self.lifted[outer] = node
        return node

    def _fresh(self, text: str) -> str:
        base = "".join(c if c.isalnum() else "_" for c in text).strip("_").lower() or "arg"
        names = {n.name for n in self.graph.nodes}
        name, k = base, 1
        while name in names:
            k += 1
            name = f"{base}_{k}"
        return name

    def module(self, outputs) -> torch.fx.GraphModule:
        self.graph.output(outputs)
        self.graph.stamp = None
        self.graph.lint()
        self.graph.set_codegen(CallsTracedObjects())
        return torch.fx.GraphModule(module_holding(self.submodules), self.graph)


def module_holding(submodules: dict) -> torch.nn.Module:
    """The root a GraphModule copies its ``get_attr`` targets from (the bodies it calls)."""
    root = torch.nn.Module()
    for name, module in submodules.items():
        root.add_module(name, module)
    return root


@contextlib.contextmanager
def trace_body(output, name: str):
    """Trace into a new body graph; on the way out the enclosing graph is current again."""
    scope = SubgraphScope(output, name)
    saved = output.graph
    output.scopes.append(scope)
    output.graph = scope.graph
    try:
        yield scope
    finally:
        output.scopes.pop()
        output.graph = saved


def register_body(output, prefix: str, module: torch.fx.GraphModule):
    """Store ``module`` where the current graph can read it, and the ``get_attr`` node reading it."""
    table = output.scopes[-1].submodules if output.scopes else output.submodules
    taken = set(table) | {n.target for n in output.graph.nodes if n.op == "get_attr"}
    k = 0
    while f"{prefix}_{k}" in taken:
        k += 1
    name = f"{prefix}_{k}"
    table[name] = module
    node = output.graph.get_attr(name)
    node.meta["example_value"] = module
    return node


class MetaBody(torch.fx.Interpreter):
    """A body run on meta examples as ``call_op`` ran each of its nodes: with the same example
    function (a device move stays on meta) and ``device="meta"`` where the node had a device.
    The real module would copy meta tensors to the program's device.  (A nested body is run
    by its own node's recorded example function, which wraps it in a MetaBody again.)"""

    def __init__(self, module):
        super().__init__(module, garbage_collect_values=True)

    @staticmethod
    def runner(module):
        """A plain function running ``module`` on meta (what ``torch.vmap`` is given)."""
        def run_on_meta(*args):
            return MetaBody(module).run(*args)
        return run_on_meta

    def run_node(self, node):
        self._node = node
        return super().run_node(node)

    def call_function(self, target, args, kwargs):
        return self._call(target, args, kwargs)

    def call_method(self, target, args, kwargs):
        return self._call(None, args, kwargs) if "meta_call" in self._node.meta else \
            super().call_method(target, args, kwargs)

    def _call(self, target, args, kwargs):
        recorded = self._node.meta.get("meta_call")
        if recorded is None:
            return target(*args, **kwargs)
        fn, on_meta = recorded
        if on_meta:
            kwargs = {**kwargs, "device": "meta"}
        return fn(*args, **kwargs)
