"""The replay call without Python: when a call can take the C++ path, and the recipe it runs.

``BridgedCall`` (backends.py) decides every call in Python. For the common case of a model
kept on the XLA device, a call's work is a fixed recipe: check that each argument is what the
graph was compiled for, pick the graph's inputs, ``_run_cached_graph(hash, inputs)``, shape the
output. ``_replay.Replay`` (C++, ``_replay.cpp``) runs that recipe with no Python frame and
hands any call it does not cover to the BridgedCall, whose answer is the reference.

The recipe of the graph the BridgedCall would replay next is installed (``arm``) after every
Python-path call that changed it. A graph gets none, so every call stays in Python, when it
needs what only the Python path does: host tensors to copy in or outputs to move home, outputs
that view or are laid out like an argument, in-place updates to write back, random numbers to
draw on the host (``host_random``), results to cast, constant outputs to clone, module state to
read (``symbolic_trace`` graphs), a split graph, an output structure other than one leaf, a
tuple or a list of leaves.

A caller that reads the graph's inputs itself can hand the whole cache-entry body to C++:
``Replay.cache_entry_fn(read_inputs, build_output, graph_raised, rerun, vouch)`` (used by
minidynamo's ``convert_frame.make_compiled_fn``) reads, replays and shapes the output with no
Python frame, and when the reader handed over values its guard just checked (``vouch``: what the
guard checks of each input) it does not check those again (see ``_replay.cpp``, ``Entry``).

The extension is optional (built by ``setup.py``); ``xla_bridge.config.native_replay = False``
turns it off (read when a graph is compiled). Without it every call takes the Python path.
"""

from . import config, timing
from . import device as dev
from .counters import counters
from .lazy_graph import Argument, Baked, FromArgument, Result, Value
from .programs import ReplayedGraph

try:
    from . import _replay
except ImportError:               # not built: the Python path serves every call
    _replay = None

# Leaf kinds and output shapes, as _replay.cpp numbers them.
_LEAF_KINDS = {Result: (0, "index"), Argument: (1, "position"), Value: (2, "value")}
_OUT_LEAF, _OUT_TUPLE, _OUT_LIST = 0, 1, 2


def native_entry(bridged):
    """A ``_replay.Replay`` in front of ``bridged``, or None without the extension."""
    if _replay is None or not config.native_replay:
        return None
    return _replay.Replay(bridged, dev.xlac(), timing, counters)


def recipe(bridged, program):
    """The arguments of ``Replay.arm`` for the graph ``program`` replays next, or None when its
    calls need the Python path (see the module docstring)."""
    if (type(program) is not ReplayedGraph or bridged.host_positions or bridged.has_state
            or bridged.views or bridged.device_views or bridged.layouts or bridged.output_views
            or bridged.creations
            or bridged.written
            or bridged.detached or bridged.enables_grad
            or bridged.host_outputs or getattr(program, "warnings", None)):
        return None
    graph = program.graph
    if (graph.graph_hash is None or graph.written or graph.casts or graph.draws is not None
            or graph.index_check is not None
            or not all(type(leaf) in _LEAF_KINDS for leaf in graph.leaves)):
        return None
    out_kind = _out_kind(graph.treespec, len(graph.leaves))
    if out_kind is None:
        return None
    assert all(isinstance(p, (FromArgument, Baked)) for p in graph.input_plan)
    leaves = [(kind, getattr(leaf, field)) for leaf in graph.leaves
              for kind, field in [_LEAF_KINDS[type(leaf)]]]
    return (graph.graph_hash, graph.argument_count, bridged.check_grad_mode, dev.xla_device(),
            graph.tensor_specs, graph.values, graph.pick_order, graph.baked, leaves, out_kind)


def _out_kind(treespec, leaf_count):
    if treespec is None or leaf_count == 0:
        return None
    if treespec.is_leaf():
        return _OUT_LEAF
    flat = all(child.is_leaf() for child in treespec.children_specs)
    if flat and treespec.type is tuple:
        return _OUT_TUPLE
    if flat and treespec.type is list:
        return _OUT_LIST
    return None


def arm(entry, bridged) -> None:
    """Install the recipe of ``bridged``'s current graph on ``entry`` (or send every call to
    Python when there is none)."""
    plan = recipe(bridged, bridged.program)
    if plan is None:
        entry.disarm()
    else:
        entry.arm(*plan)


__all__ = ["native_entry", "recipe", "arm"]
