"""Device programs: what a backend runs on device arguments.

Each has ``run(device_args) -> flat output leaves`` and, for the host side, ``treespec``,
``mutated`` (argument positions the last run wrote in place) and ``argument_leaves``
({leaf index: argument position} for outputs that are an argument itself).

- ``ReplayedGraph`` (trace_once): one LazyGraph per value of the non-tensor arguments,
  replayed by hash; recaptured if XLA's cache evicted the hash.
- ``TracedEveryCall`` (trivial): runs the graph lazily on every call, then syncs; its random
  ops draw on the host while it traces (``host_random``).
- ``PartitionedProgram`` (partition.py): LazyGraph segments around CPU-fallback ops.
"""

import torch
from torch.utils import _pytree as pytree

from . import device as dev
from .counters import counters
from .decompose import decomposing
from .dtype_check import DtypeWatch, converting_dtypes
from .eager_faithful import eager_faithful
from .eager_layouts import run_noting_nodes
from .host_random import GeneratorRewind, HostDraws
from .index_check import IndexOutOfRange, watching_indices
from .lazy_graph import DrawReadsValues, LazyGraph, NotOneGraph, describe_hash, is_evicted
from .log import log_xla


class ReplayedGraph:
    """Graphs are keyed by the non-tensor arguments and by the shape and dtype of the tensors
    at ``shape_positions`` (the user's inputs; weights keep theirs), so a call that would not
    fit the compiled graph captures a new one instead of replaying the wrong one."""

    def __init__(self, fn, device_args, shape_positions=(), decompositions=None, expected_shapes=None,
                 check_indices=False):
        """``decompositions``: ops every capture traces as their decomposition (``decompose``);
        ``expected_shapes``: what every capture checks its output leaves against (``capture``);
        ``check_indices``: every run checks the indices it read (``index_check``)."""
        self.fn = fn
        self.check_indices = check_indices
        self.decompositions = decompositions or {}
        self.expected_shapes = expected_shapes
        self.value_positions = tuple(i for i, a in enumerate(device_args)
                                     if not isinstance(a, torch.Tensor))
        self.shape_positions = tuple(shape_positions)
        self.keyed = bool(self.value_positions or self.shape_positions)
        self.graphs = {}
        self.graph = self._capture(device_args, self._key(device_args))

    def _key(self, device_args):
        return (tuple(device_args[i] for i in self.value_positions),
                tuple((device_args[i].shape, device_args[i].dtype) for i in self.shape_positions))

    def _capture(self, device_args, key) -> LazyGraph:
        graph = self.graphs[key] = LazyGraph.capture(self.fn, device_args, self.decompositions,
                                                     self.expected_shapes, self.check_indices)
        return graph

    # The current graph's output structure, for the host side.
    @property
    def treespec(self):
        return self.graph.treespec

    @property
    def mutated(self) -> tuple:
        return self.graph.written

    @property
    def argument_leaves(self) -> dict:
        return self.graph.argument_leaves

    def run(self, device_args, same_signature=False) -> list:
        """``same_signature``: the caller vouches that the arguments have the shapes, dtypes
        and Python values of the previous run, so the previous graph is the one (no key)."""
        graph = self.graph
        if self.keyed and not same_signature:
            graph = self._graph_for(device_args)
        try:
            return graph.replay(device_args)
        except RuntimeError as error:
            if not is_evicted(error):
                raise
            counters.record("retraces", "graph hash left XLA's compilation cache; recompiled")
            log_xla.debug("retrace: graph %s left XLA's compilation cache", describe_hash(graph.graph_hash))
            self.graph = self._capture(device_args, self._key(device_args))
            return self.graph.replay(device_args)

    def _graph_for(self, device_args) -> LazyGraph:
        key = self._key(device_args)
        graph = self.graphs.get(key)
        if graph is None:
            values, shapes = key
            reason = (f"new non-tensor arguments {values!r} or input shapes "
                      f"{[tuple(shape) for shape, _ in shapes]}")
            counters.record("retraces", reason)
            log_xla.debug("retrace: %s", reason)
            graph = self._capture(device_args, key)
        elif graph is not self.graph:
            log_xla.debug("replay switches to graph %s", describe_hash(graph.graph_hash))
        self.graph = graph
        return graph


class TracedEveryCall:
    def __init__(self, fn, device_args, check_indices=False):
        self.fn = fn
        self.check_indices = check_indices
        # ops traced as eager answers
        self.faithful = eager_faithful(fn.graph_module, answered=fn.formulas_answered)
        self.in_range = None                  # the last run's lazy "every index in range"
        copies = dev.device_copies(device_args)
        self.positions = tuple(i for i, a in enumerate(device_args) if isinstance(a, torch.Tensor))
        before = dev.data_identities(copies)
        # One trial trace on copies: a graph the device cannot run fails now (-> eager), not on a call.
        with torch.no_grad(), HostDraws() as drawn, DtypeWatch() as dtypes, decomposing(self.faithful):
            run_noting_nodes(fn, copies, drawn.layouts)
        if drawn.reason():
            raise DrawReadsValues(drawn.reason())
        if dtypes.reason():
            raise NotOneGraph(dtypes.reason())
        self.draws = bool(drawn.draws)        # (a graph without any pays nothing for the mode)
        self.rewind = None
        self.converts = dtypes.converts       # then every run converts those results, as the trial did
        self.mutated = self._written(copies, before)   # as the trial saw it; each run says again
        self.argument_leaves = {}
        self.treespec = None

    def run(self, device_args, same_signature=False) -> list:
        """The lazy trace; the sync (execution) is ``sync``, separate so it can be timed.
        Each argument position is traced on device data of its own (``dev.own_data_per_position``:
        the compiled graph is looked up by a hash blind to which parameters are one data)."""
        device_args, before = dev.own_data_per_position(device_args, dev.data_identities(device_args))
        self.rewind = GeneratorRewind(self.draws and self.check_indices)
        # (the watch innermost: it sees the ops the program calls, before any formula)
        with torch.no_grad(), HostDraws.when(self.draws) as drawing, converting_dtypes(self.converts), \
                decomposing(self.faithful), watching_indices(self.check_indices) as indices:
            out = run_noting_nodes(self.fn, device_args, drawing.layouts if drawing is not None else None)
        self.in_range = indices.all_in_range()
        counters.traces += 1
        leaves, self.treespec = pytree.tree_flatten(out)
        self.mutated = self._written(device_args, before)
        position_of = {id(device_args[i]): i for i in self.positions}
        self.argument_leaves = {k: position_of[id(leaf)] for k, leaf in enumerate(leaves)
                                if id(leaf) in position_of}
        return leaves

    def _written(self, device_args, before) -> tuple:
        """Positions the run wrote in place: their identity changed (pending computation, or
        other data: ``x.copy_(y)`` leaves plain data, see ``dev.data_identities``)."""
        after = dev.data_identities(device_args)
        return tuple(p for p in self.positions if after[p] != before[p])

    def sync(self) -> None:
        """Execute the run's graph; IndexOutOfRange if it read an index eager refuses."""
        dev.torch_xla().sync()
        in_range, self.in_range = self.in_range, None
        if in_range is not None and not in_range.item():
            self.rewind.rewind()              # the eager run draws them again
            raise IndexOutOfRange()
