"""Make every tensor a graph reads from its module an explicit, positional input.

minidynamo's tracer already passes parameters and buffers as placeholders, re-read on each
call. ``torch.fx.symbolic_trace`` graphs instead read them from the module: ``get_attr`` nodes
(lifted here to extra placeholders) and leaf ``call_module`` nodes such as ``nn.Conv2d``
(whose parameters and buffers are swapped for the given values while the graph runs).
Either way ``FlatProgram(*user_inputs, *state)`` sees every tensor as an argument, so the XLA
graph can map each of its device-data inputs to a position, and state is re-read on every call
so a replaced or updated weight is seen.
"""

import contextlib
import operator
from contextlib import contextmanager

import torch
import torch.fx as fx

from .dead_code import empty_graph_like
from .device_redirect import CopiesFromHost, RedirectDevice, target_of


class FlatProgram:
    """A GraphModule as a function of positional tensors: user inputs, then ``state_names``."""

    def __init__(self, source: fx.GraphModule):
        graph = empty_graph_like(source)
        output = graph.graph_copy(source.graph, {}, return_output_node=True)
        graph.output(output[0] if isinstance(output, tuple) else output)
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        self.user_input_count = len(placeholders)
        last_input = placeholders[-1] if placeholders else None
        lifted_names = _lift_tensor_attributes(graph, source, last_input)
        graph.lint()
        self.graph_module = fx.GraphModule(source, graph)   # shares the leaf modules of source
        self.source = source
        self.lifted_count = len(lifted_names)
        self.module_state_names = tuple(_leaf_module_state(source, graph))
        self.state_names = tuple(lifted_names) + self.module_state_names
        self._readers = tuple(operator.attrgetter(name) for name in lifted_names)
        # Which state entries are weights (parameters, registered buffers), which the opt-in
        # ``cache_host_weights`` may keep on the device; a plain tensor attribute is not one.
        self.state_is_weight = tuple(_is_weight(source, name) for name in lifted_names) + \
            (True,) * len(self.module_state_names)
        self._slots = tuple(_state_slot(source, name) for name in self.module_state_names)
        self.home_device = None       # set when every argument lives on one device (device_redirect.py)
        self.formulas_answered = frozenset()   # ops an eager-faithful formula answered for (eager_faithful.py)

    def read_state(self) -> list:
        """The module tensors the graph reads, as they are now (a reassigned parameter too).

        Leaf modules' state is read straight from their parameter/buffer tables: the graph
        calls the module objects it was built with, so those are the tables it uses.
        """
        source = self.source
        return [read(source) for read in self._readers] + [table[key] for table, key in self._slots]

    def __call__(self, *flat):
        return self.run_with(self.graph_module, flat)

    def run_with(self, runner, flat):
        """Run ``runner`` (this graph, or a split of it) on flat inputs, module state swapped in;
        the device the graph names (its arguments' own) means the device of the inputs (device_redirect.py)."""
        graph_inputs = flat[:self.user_input_count + self.lifted_count]
        target = target_of(flat)
        home = self.home_device
        redirect = home is not None and target is not None and target.type != home.type
        on_device = target is not None and target.type != "cpu"     # (meta: the aliasing analysis)
        if isinstance(runner, fx.GraphModule):   # not runner(...): FX prints its traceback to stderr
            runner = runner.forward              # when the graph raises (eager prints nothing)
        with RedirectDevice(home, target) if redirect else contextlib.nullcontext(), \
                CopiesFromHost() if on_device else contextlib.nullcontext():
            if not self._slots:
                return runner(*graph_inputs)
            with _swapped(self._slots, flat[self.user_input_count + self.lifted_count:]):
                return runner(*graph_inputs)


def _lift_tensor_attributes(graph: fx.Graph, source, anchor) -> list:
    """Replace each ``get_attr`` of a tensor by a new placeholder; return the attribute paths."""
    names = []
    for node in list(graph.nodes):
        if node.op != "get_attr" or not isinstance(_read(source, node.target), torch.Tensor):
            continue
        with graph.inserting_after(anchor) if anchor is not None else graph.inserting_before(None):
            lifted = graph.placeholder(f"lifted_{node.name}")
        lifted.meta = dict(node.meta)
        node.replace_all_uses_with(lifted)
        graph.erase_node(node)
        anchor = lifted
        names.append(node.target)
    return names


def _leaf_module_state(source, graph: fx.Graph):
    """Dotted names of the parameters and buffers of every module a call_module node calls."""
    seen = set()
    for node in graph.nodes:
        if node.op != "call_module" or node.target in seen:
            continue
        seen.add(node.target)
        module = source.get_submodule(node.target)
        for name, _ in module.named_parameters(remove_duplicate=False):
            yield f"{node.target}.{name}"
        for name, _ in module.named_buffers(remove_duplicate=False):
            yield f"{node.target}.{name}"


def _is_weight(source, dotted: str) -> bool:
    """Is the attribute at ``dotted`` a parameter or a registered buffer of its module?"""
    owner_path, _, leaf = dotted.rpartition(".")
    try:
        owner = source.get_submodule(owner_path)
    except AttributeError:
        return False
    return leaf in owner._parameters or leaf in owner._buffers


def _state_slot(source, dotted: str):
    """(dict holding the tensor, key): the place a parameter or buffer lives in its module."""
    owner_path, _, leaf = dotted.rpartition(".")
    owner = source.get_submodule(owner_path)
    table = owner._parameters if leaf in owner._parameters else owner._buffers
    return table, leaf


@contextmanager
def _swapped(slots, values):
    saved = [table[key] for table, key in slots]
    try:
        for (table, key), value in zip(slots, values):
            table[key] = value
        yield
    finally:
        for (table, key), value in zip(slots, saved):
            table[key] = value


def _read(module, path: str):
    try:
        return operator.attrgetter(path)(module)
    except AttributeError:
        return None
