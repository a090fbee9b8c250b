"""One lazy XLA graph: traced once on the device, compiled, then replayed by its hash.

``LazyGraph.capture(fn, args)`` runs ``fn`` once on throwaway device copies of ``args`` (so the
caller's tensors are never touched), and from the pending lazy computation it takes:

- the graph's outputs: the inputs the program updated in place, then its distinct tensor outputs;
- the graph hash (``_get_graph_hash``), compiling the graph into XLA's cache
  (``_xla_warm_up_cache``);
- the graph parameters (``_get_tensors_xla_device_data_node``), each mapped by tensor id to an
  argument position, to a random draw, or kept as a constant made inside the graph.

Random ops are drawn on the host while tracing (``host_random``): each draw's numbers reach
the graph as data, read like an extra argument after the caller's, and every replay makes the
draws again (``Draws``) on the host generator, as eager would.

``replay(args)`` is then one ``_run_cached_graph(hash, inputs)`` call: no Python tracing.
The trace's pending computation lives only on the throwaway copies and outputs, and is dropped
with them (never ``_clear_pending_irs``, which would also wipe the caller's pending tensors).
The trace must stay one lazy graph: if the device executed or a CPU-fallback op ran while
tracing (an op without an XLA lowering), capture raises ``NotOneGraph``.
"""

import hashlib
import logging
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from . import device as dev
from .counters import counters
from .decompose import decomposing
from .device_redirect import CopiesFromHost
from .dtype_check import DtypeWatch
from .eager_layouts import run_noting_nodes
from .host_random import GeneratorRewind, HostDraws
from .index_check import IndexOutOfRange, watching_indices
from .log import log_xla
from .host_inputs import picker



# Where an output leaf comes from on replay: one record per leaf, ``leaf.read(args, results)``.
@dataclass(frozen=True)
class Result:
    """A graph result: ``_run_cached_graph``'s ``index``-th output."""
    index: int

    def read(self, args, results):
        return results[self.index]


@dataclass(frozen=True)
class Argument:
    """An argument returned as it is."""
    position: int

    def read(self, args, results):
        return args[self.position]


@dataclass(frozen=True, eq=False)
class ArgumentCopy:
    """A new tensor equal to an argument (``x.clone()``: lazily it is the argument's own data):
    a copy on every call, never the argument object (a later write to one must not reach the
    other)."""
    position: int

    def read(self, args, results):
        return torch.Tensor.clone(args[self.position])


@dataclass(frozen=True, eq=False)
class Constant:
    """A tensor made inside the graph, not computed from inputs: cloned on every call."""
    tensor: torch.Tensor

    def read(self, args, results):
        return self.tensor.clone()


@dataclass(frozen=True, eq=False)
class Value:
    """A Python value, returned as traced."""
    value: object

    def read(self, args, results):
        return self.value


# Where each graph parameter (a device-data input of the compiled graph) comes from.
@dataclass(frozen=True)
class FromArgument:
    """The argument at ``position``."""
    position: int


@dataclass(frozen=True, eq=False)
class Baked:
    """Device data made while tracing (a Python scalar, a literal tensor), passed as it is."""
    tensor: torch.Tensor


class NotOneGraph(Exception):
    """The program did not stay one lazy graph while tracing; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason
        self.spare_copies = None      # the trace's device copies when it left them untouched


class DrawReadsValues(NotOneGraph):
    """A random op the host cannot draw for the device (``host_random``): the graph runs
    eagerly, not split around the op (a split would run it on the device's generator)."""


class LeafShapesDiffer(NotOneGraph):
    """The device computed output leaves ``leaves`` with other shapes than expected (XLA's own
    batch norm in eval mode returns empty statistics where eager returns one per channel)."""

    def __init__(self, leaves):
        super().__init__(f"the device shapes output leaves {leaves} unlike the recorded graph")
        self.leaves = leaves


class LazyGraph:
    """A captured graph; ``replay(args)`` returns the flat output leaves."""

    def __init__(self, graph_hash, input_plan, mutated, leaves, treespec, arguments, casts=(),
                 index_check=None, data_writes=(), draws=None):
        self.graph_hash = graph_hash          # None when no output needs computing
        self.input_plan = input_plan          # per graph parameter: FromArgument or Baked
        # random draws made again per call (host_random.Draws), read as arguments after the
        # caller's (``FromArgument``, ``ArgumentCopy``); None when the graph draws nothing
        self.draws = draws
        self.mutated = mutated                # positions written in place: the first results
        self.data_writes = data_writes        # (position, ArgumentCopy or Constant): see _writes
        self.written = mutated + tuple(position for position, _ in data_writes)
        self.leaves = leaves                  # per output leaf: Result, Argument, Constant or Value
        self.treespec = treespec
        self.argument_leaves = {k: leaf.position for k, leaf in enumerate(leaves)
                                if isinstance(leaf, Argument)}   # {leaf index: position}
        self.casts = casts                    # (result index, PyTorch dtype): see _logical_casts
        self.index_check = index_check        # result index of "every index in range" (index_check)
        # What the graph was traced for: (position, dtype, sizes) of each tensor argument and
        # (position, value) of each Python value (the C++ replay path checks both per call).
        self.tensor_specs = tuple((i, a.dtype, tuple(a.shape)) for i, a in enumerate(arguments)
                                  if isinstance(a, torch.Tensor))
        self.values = tuple((i, a) for i, a in enumerate(arguments)
                            if not isinstance(a, torch.Tensor))
        self.argument_count = len(arguments)
        # leaves that repeat a copy made per call (a constant, an argument's clone): one copy
        first = {}
        self.repeated_copies = tuple((k, first[id(leaf)]) for k, leaf in enumerate(leaves)
                                     if isinstance(leaf, (Constant, ArgumentCopy))
                                     and first.setdefault(id(leaf), k) != k)
        # The graph's inputs in one C call: pick them from (*args, *draws, *baked tensors).
        self.baked = tuple(p.tensor for p in input_plan if isinstance(p, Baked))
        draw_count = len(draws.recipes) if draws is not None else 0
        self.pick_order = tuple(_pick_order(input_plan, self.argument_count + draw_count))
        self.pick = picker(self.pick_order)

    @classmethod
    def capture(cls, fn, args, decompositions=None, expected_shapes=None,
                check_indices=False) -> "LazyGraph":
        """``decompositions``: ops traced as their decomposition (``decompose``);
        ``expected_shapes``: per output leaf, the shape it must have (None: any), checked before
        anything compiles (``LeafShapesDiffer``); ``check_indices``: the graph also computes
        whether every index it reads is in range, checked on every replay (``index_check``)."""
        xlac = dev.xlac()
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        dev.materialize([args[i] for i in positions])
        copies = dev.device_copies(args)   # fresh device data per argument: its own tensor id
        identities = dev.data_identities(copies)
        argument_data = _ArgumentData(copies, positions)

        try:
            leaves, treespec, in_range, drawn = _trace(fn, copies, decompositions, check_indices)
        except NotOneGraph as cut:         # the partitioner traces again: offer it the copies
            cut.spare_copies = dev.untouched(copies, identities)
            raise
        argument_data.add(drawn.tensors(), first_position=len(args))   # draws read as arguments
        if expected_shapes is not None:
            unlike = [k for k, (leaf, shape) in enumerate(zip(leaves, expected_shapes))
                      if shape is not None and tuple(leaf.shape) != tuple(shape)]
            if unlike:
                raise LeafShapesDiffer(unlike)
        mutated, data_writes = _writes(copies, positions, identities, argument_data)
        results = [copies[i] for i in mutated]
        leaf_plan = _plan_leaves(leaves, copies, positions, argument_data, results)
        index_check = None
        if in_range is not None:
            index_check = len(results)
            results.append(in_range)

        graph_hash, plan, casts = None, (), ()
        if results:
            dev.wait_device()
            casts = _logical_casts(results)
            plan = _plan_inputs(results, argument_data)
            if log_xla.isEnabledFor(logging.DEBUG):
                log_xla.debug("lazy IR of the captured graph:\n%s", xlac._get_xla_tensors_text(results))
            graph_hash = _compile(xlac, results)
        counters.compiles += 1
        graph = cls(graph_hash, plan, mutated, leaf_plan, treespec, args, casts, index_check, data_writes,
                    drawn.recipes())
        log_xla.debug("captured graph %s: %d inputs (%s), %d results, leaves %s",
                      describe_hash(graph_hash), len(plan), describe_plan(plan), len(results),
                      describe_leaves(leaf_plan))
        return graph

    def replay(self, args) -> list:
        """Run the compiled graph on ``args``; write in-place updates back; return the leaves.
        A graph that draws makes this call's random numbers first, read after the arguments;
        if the call then fails (an index out of range: it runs eagerly; an evicted hash: it is
        captured and replayed again), the draws are put back, to be made once more."""
        if self.draws is None:
            return self._replay(args)
        rewind = GeneratorRewind(True)
        try:
            return self._replay([*args, *self.draws.make()])
        except (IndexOutOfRange, RuntimeError):
            rewind.rewind()
            raise

    def _replay(self, args) -> list:
        results = ()
        # a copy of an argument is of its value before the graph's in-place writes
        early = {k: leaf.read(args, results) for k, leaf in enumerate(self.leaves)
                 if isinstance(leaf, ArgumentCopy)} if self.written else {}
        data = [(position, source.read(args, results)) for position, source in self.data_writes]
        if self.graph_hash is not None:
            xlac = dev.xlac()
            results = xlac._run_cached_graph(self.graph_hash, self.pick((*args, *self.baked)))
            counters.replays += 1
            if self.index_check is not None and not dev.to_host([results[self.index_check]])[0].item():
                raise IndexOutOfRange()           # before anything is written back
            if self.casts:
                results = list(results)
                for k, dtype in self.casts:
                    results[k] = results[k].to(dtype)
            for k, position in enumerate(self.mutated):
                _write(args[position], results[k])
        for position, value in data:
            _write(args[position], value)
        out = [early[k] if k in early else leaf.read(args, results) for k, leaf in enumerate(self.leaves)]
        for k, first in self.repeated_copies:
            out[k] = out[first]
        return out


def _pick_order(input_plan, argument_count):
    """Per graph parameter, its index in ``(*args, *baked tensors)`` (``argument_count``
    counts the draws, read as arguments)."""
    baked = argument_count
    for source in input_plan:
        if isinstance(source, FromArgument):
            yield source.position
        else:
            yield baked
            baked += 1


def describe_hash(graph_hash) -> str:
    """A graph hash in hex (``_get_graph_hash`` gives raw bytes), or "none"."""
    if graph_hash is None:
        return "none"
    return graph_hash.hex() if isinstance(graph_hash, bytes) else str(graph_hash)


def describe_plan(plan) -> str:
    return ", ".join(f"arg {p.position}" if isinstance(p, FromArgument) else
                     f"baked {tuple(p.tensor.shape)}" for p in plan)


def describe_leaves(leaves) -> str:
    return ", ".join(f"result {leaf.index}" if isinstance(leaf, Result) else
                     f"arg {leaf.position}" if isinstance(leaf, Argument) else
                     f"copy of arg {leaf.position}" if isinstance(leaf, ArgumentCopy) else
                     "constant" if isinstance(leaf, Constant) else f"value {leaf.value!r}"
                     for leaf in leaves)


def _write(target: torch.Tensor, result: torch.Tensor) -> None:
    """An in-place update of a device argument: a plain tensor takes the result's device data;
    a view is written through (a lazy ``copy_``) so that its base sees the update too.

    Views the caller made of a plain tensor earlier (``rows = x.unbind(0)`` before a call that
    writes ``x``) hold functionalization's record of ``x``'s storage, which the data swap does
    not touch: the swap is committed as an update of that storage, so they read the new data
    (device fuzz seed 406)."""
    if torch.Tensor._is_view(target):
        with torch.no_grad():
            torch.Tensor.copy_(target, result)
    else:
        dev.xlac()._replace_xla_tensor(target, result)
        if torch._is_functional_tensor(target):
            torch._functionalize_commit_update(target)
            torch._functionalize_sync(target)        # (applied at once: no updates pile up)


def _writes(copies, positions, identities, argument_data) -> tuple:
    """The arguments the trace wrote in place, in two kinds: (positions whose copy now holds
    pending computation: the graph computes their new value; (position, source) for each whose
    copy now holds other plain device data). A write is a changed identity (``data_identities``),
    not pending computation: ``x.copy_(y)`` of another argument, or of a tensor made on the
    host, leaves ``x`` holding data, no computation. That data is another argument's (read
    before the graph writes anything, like any ``ArgumentCopy``) or was made while tracing (a
    constant). Only the version changed (``x.copy_(x)``): the same data, nothing to write."""
    after = dev.data_identities(copies)
    written = [i for i in positions if after[i] != identities[i]]
    if not written:
        return (), ()
    pending = dev.xlac()._check_tensor_need_materialization([copies[i] for i in written])
    computed = tuple(i for i, needs in zip(written, pending) if needs)
    data_writes = []
    for i, needs in zip(written, pending):
        if needs or after[i][0] == identities[i][0]:
            continue
        ids, data = dev.xlac()._get_tensors_xla_device_data_node([copies[i]])
        source = argument_data.position(ids[0], data[0]) if len(ids) == 1 else None
        data_writes.append((i, ArgumentCopy(source) if source is not None else Constant(copies[i])))
    return computed, tuple(data_writes)


def _trace(fn, copies, decompositions=None, check_indices=False):
    """Run ``fn`` lazily (ops in ``decompositions`` as their decomposition); raise NotOneGraph
    if that did more than build one pending graph. Returns (leaves, treespec, the lazy flag
    "every index in range" or None)."""
    dev.wait_device()   # an execution still finishing (the copies' sync) must not count as ours
    before, fallbacks = dev.device_activity(), dev.fallback_counts()
    indices = watching_indices(check_indices)
    # (the trace's draws are throwaway: a capture in the middle of a call, for new shapes, must
    # leave the host generator where the call's replay will draw from)
    with dev.host_random_kept(), torch.no_grad(), CopiesFromHost(), HostRandomWatch() as watch, \
            HostDraws() as drawn, decomposing(decompositions), DtypeWatch() as dtypes, indices:
        out = run_noting_nodes(fn, copies, drawn.layouts)
    if drawn.reason():
        raise DrawReadsValues(drawn.reason())
    if dtypes.reason():
        raise NotOneGraph(dtypes.reason())
    if watch.ops:
        raise NotOneGraph(f"random ops on host tensors ({', '.join(watch.ops)}) "
                          "would be frozen into the graph")
    if dev.device_activity() != before:
        ops = dev.fallbacks_since(fallbacks)
        raise NotOneGraph("the device ran while tracing (CPU-fallback ops: "
                          f"{', '.join(ops) if ops else 'none'}; or a value was read back)")
    leaves, treespec = pytree.tree_flatten(out)
    return leaves, treespec, indices.all_in_range(), drawn


def _plan_leaves(leaves, copies, positions, argument_data, results) -> tuple:
    """Say where each output leaf comes from; append the distinct computed ones to results."""
    xlac = dev.xlac()
    device_leaves = [leaf for leaf in leaves if dev.is_xla(leaf)]
    needs_compute = {}
    if device_leaves:
        needs_compute = dict(zip(map(id, device_leaves),
                                 xlac._check_tensor_need_materialization(device_leaves)))
    position_of_copy = {id(copies[i]): i for i in positions}
    index_of_result = {id(r): k for k, r in enumerate(results)}
    ir_index = {xlac._unique_id_for_ir_and_data(r): k for k, r in enumerate(results) if dev.is_xla(r)}
    plan, copy_of_leaf = [], {}     # a tensor returned twice is one copy, returned twice
    for leaf in leaves:
        if not isinstance(leaf, torch.Tensor):
            plan.append(Value(leaf))
        elif id(leaf) in position_of_copy:
            plan.append(Argument(position_of_copy[id(leaf)]))
        elif id(leaf) in copy_of_leaf:
            plan.append(copy_of_leaf[id(leaf)])
        elif not needs_compute.get(id(leaf), False):   # plain data: an argument's, or a constant
            ids, data = xlac._get_tensors_xla_device_data_node([leaf]) if dev.is_xla(leaf) else ([], [])
            source = argument_data.position(ids[0], data[0]) if len(ids) == 1 else None
            if source is not None:
                plan.append(ArgumentCopy(source))
            else:
                plan.append(Constant(leaf))
            copy_of_leaf[id(leaf)] = plan[-1]
        else:
            if id(leaf) not in index_of_result:
                # the same pending value as a result already there (``x.add_(1); return
                # x.detach()``: the runtime gives one output for both): read that one
                same = ir_index.get(xlac._unique_id_for_ir_and_data(leaf)) if dev.is_xla(leaf) else None
                if same is None:
                    same = len(results)
                    results.append(leaf)
                index_of_result[id(leaf)] = same
            plan.append(Result(index_of_result[id(leaf)]))
    return tuple(plan)


def _logical_casts(results) -> tuple:
    """(index, dtype) for each result whose HLO element type is not its PyTorch dtype.

    torch_xla computes an op's dtype the PyTorch way (``at::result_type``: a 0-dim tensor does
    not promote a dimensioned one of the same category, so f32[2,3] + f64[] is f32) and keeps it
    as the tensor's logical type, but lowers the op with XLA's own promotion, which treats the
    0-dim operand as any other (the HLO computes f64[2,3]). The lazy runtime reconciles the two
    only when it hands a tensor over (to the host, or as data after a sync), while
    ``_run_cached_graph`` returns the HLO's buffers as they are: such a result is converted on
    replay (a lazy convert of the device data, what the runtime would hand over). Not inside the
    compiled graph: torch_xla's own cast lowers wrongly from some logical types (uint8)."""
    xlac = dev.xlac()
    casts = []
    for k, result in enumerate(results):
        expected = _hlo_type_of(result.dtype)
        if expected is not None and xlac._get_xla_tensor_shape_type(result) != expected:
            casts.append((k, result.dtype))
    return tuple(casts)


_hlo_types = {}


def _hlo_type_of(dtype: torch.dtype):
    """The HLO element type the device gives a tensor of ``dtype`` (read off a fresh device
    tensor once per dtype, so the runtime's own mapping, e.g. a downcast setting, is kept)."""
    if dtype not in _hlo_types:
        try:
            probe = torch.empty((), dtype=dtype, device=dev.xla_device())
            _hlo_types[dtype] = dev.xlac()._get_xla_tensor_shape_type(probe)
        except Exception:           # a dtype the device has no type for: leave results as is
            _hlo_types[dtype] = None
    return _hlo_types[dtype]


def _plan_inputs(results, argument_data) -> tuple:
    """Map each device-data parameter of the graph to an argument (or a draw), or baked data.
    A graph reading the device's random seed would draw from XLA's generator, not eager's
    (an op ``host_random`` does not know): it runs eagerly."""
    xlac = dev.xlac()
    ids, values = xlac._get_tensors_xla_device_data_node(results)
    if xlac._get_seed_info_id() in ids:
        raise DrawReadsValues("the graph reads the device's random seed (XLA's generator, "
                              "not the host's that eager draws from)")
    positions = [argument_data.position(tensor_id, value) for tensor_id, value in zip(ids, values)]
    return tuple(FromArgument(position) if position is not None else Baked(value)
                 for value, position in zip(values, positions))


class _ArgumentData:
    """Which device data is an argument's own, as its copy was made: the copy's tensor id and
    its data handle. A write of new data (``x.copy_`` of a tensor made while tracing) keeps the
    tensor id but not the handle: that data is a constant of the graph, not the argument."""

    def __init__(self, copies, positions):
        self.position_of_id, self.handle = {}, {}
        self._add([copies[i] for i in positions], positions)

    def add(self, tensors, first_position: int) -> None:
        """More device data read as arguments (a graph's draws), from ``first_position`` on."""
        self._add(tensors, range(first_position, first_position + len(tensors)))

    def _add(self, tensors, positions) -> None:
        if not tensors:
            return
        xlac = dev.xlac()
        self.position_of_id.update((xlac._xla_get_tensor_id(t), i) for t, i in zip(tensors, positions))
        self.handle.update(zip(positions, xlac._get_tensors_handle(tensors)))

    def position(self, tensor_id, data):
        """The argument whose untouched data ``data`` (with ``tensor_id``) is, or None."""
        position = self.position_of_id.get(tensor_id)
        if position is None or dev.xlac()._get_tensors_handle([data])[0] != self.handle[position]:
            return None
        return position


class HostRandomWatch(TorchDispatchMode):
    """Notes random ops that ran on host tensors while tracing.

    A tensor made on the host inside the graph (``torch.rand(3)`` without a device) reaches the
    XLA graph as constant device data: replaying would repeat the same numbers forever.
    """

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = dev.run_functionally(func, args, kwargs or {})
        if torch.Tag.nondeterministic_seeded in func.tags and not any(
                dev.is_xla(t) for t in pytree.tree_leaves((args, kwargs, out))):
            self.ops.append(str(func.overloadpacket.__name__))
        return out


# Graph hash -> a digest of the lazy IR compiled under it. torch_xla's hash does not tell apart
# device-data inputs of one shape and dtype: two graphs that differ only in which of two such
# inputs an op reads (``(b.t() @ a, b.sum(0))`` and ``(b.t() @ a, a.sum(0))``) share one hash,
# and ``_run_cached_graph`` would run the first one's program for the second.
_IR_OF_HASH: dict = {}


def _compile(xlac, results):
    """Hash and compile the graph computing ``results`` in XLA's "alias only buffers marked for
    donation" mode, so the compiled program never reuses the memory of an input updated in
    place: replay inputs are the caller's tensors and cached weights, which must stay valid.
    A hash some other graph holds already gets the graph a salt: a trailing result of a shape of
    its own (zeros, no input), which the leaves never read, until the hash is its own."""
    saved = xlac._xla_get_enable_alias_with_buffer_donor_config()
    xlac._xla_set_enable_alias_with_buffer_donor_config(True)
    try:
        ir = hashlib.sha256(xlac._get_xla_tensors_text(results).encode()).digest()
        graph_hash = xlac._get_graph_hash(results)
        while _IR_OF_HASH.setdefault(graph_hash, ir) != ir:
            results.append(torch.zeros(len(results), device=results[0].device))
            ir = hashlib.sha256(xlac._get_xla_tensors_text(results).encode()).digest()
            graph_hash = xlac._get_graph_hash(results)
        xlac._xla_warm_up_cache(results, [])
    finally:
        xlac._xla_set_enable_alias_with_buffer_donor_config(saved)
    return graph_hash


def is_evicted(error: RuntimeError) -> bool:
    """True when ``_run_cached_graph`` failed because the hash left XLA's compilation cache."""
    return "Failed to get computation by hash" in str(error)
