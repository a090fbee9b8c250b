"""Make a GraphModule's tensor attributes graph inputs.

minidynamo's tracer already passes parameters and buffers as placeholders, re-read on each
call; ``torch.fx.symbolic_trace`` keeps them as ``get_attr`` nodes. Lifting the second kind to
extra placeholders (after the user's) gives the backends one shape of graph, and re-reading the
attributes on every call means a replaced or updated weight is seen.
"""

import operator

import torch
import torch.fx as fx


class LiftedGraph:
    """``graph_module`` takes the user inputs followed by ``len(readers)`` lifted attributes."""

    def __init__(self, source: fx.GraphModule):
        graph = fx.Graph()
        values = {}
        output = graph.graph_copy(source.graph, values, return_output_node=True)
        graph.output(output[0] if isinstance(output, tuple) else output)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        self.user_input_count = len(placeholders)
        paths = []
        anchor = placeholders[-1] if placeholders else None
        for node in list(graph.nodes):
            if node.op != "get_attr" or not isinstance(_read(source, node.target), torch.Tensor):
                continue
            insert = graph.inserting_after(anchor) if anchor else graph.inserting_before(None)
            with insert:
                lifted = graph.placeholder(f"lifted_{node.name}")
            lifted.meta = dict(node.meta)
            node.replace_all_uses_with(lifted)
            graph.erase_node(node)
            anchor = lifted
            paths.append(node.target)
        graph.lint()
        self.graph_module = fx.GraphModule(source, graph)
        self.source = source
        self.attribute_paths = tuple(paths)
        self.readers = tuple(operator.attrgetter(p) for p in paths)

    def read_attributes(self) -> list:
        """The lifted attributes' current values, read from the original module."""
        source = self.source
        return [read(source) for read in self.readers]


def _read(module, path: str):
    try:
        return operator.attrgetter(path)(module)
    except AttributeError:
        return None
