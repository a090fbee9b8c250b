"""The two XLA backends: ``backend(gm, example_inputs) -> callable(*inputs)``.

``BridgedCall`` is the host side shared by both: it re-reads the module state the graph uses,
moves host tensors to the device (on every call, see HostInputs; tensors already on the device
are used as they are), runs a device program, writes in-place updates back to the caller's
host tensors and brings outputs back to the device the inputs came from. Graphs it cannot run
soundly run eagerly instead, with the reason recorded in ``counters``.

A call in grad mode with a tensor that requires grad takes the backend's training path
(``training``): trace_once replays a forward and a backward graph by hash inside one
``autograd.Function``; trivial runs the graph lazily with autograd on. A call the training path
cannot take runs eagerly, with the reason recorded.
"""

import contextlib
import weakref
from dataclasses import dataclass

import torch
from torch.autograd import forward_ad
from torch.utils import _pytree as pytree

from . import config
from . import device as dev
from . import replay_path, timing
from .aliasing import analyse_memory, may_overlap, meta_like, rebuild_output_views, silently_written
from .guarded_views import guard_views_as_eager
from .generator_lock import cpu_state, set_cpu_state
from .device_views import DeviceViews
from .counters import counters
from .decompose import decomposing, decompositions_on_stand_ins, describe
from .device_redirect import CopiesFromHost
from .host_random import EagerHostDraws
from .host_inputs import HostInputs, picker, _dtype_of, _shape_of
from .index_check import IndexOutOfRange
from .eager_copies import force_eager_copies
from .eager_faithful import FormulaProbe, eager_faithful, linear_paths_as_eager
from .dead_code import empty_graph_like, own_class, without_dead_code
from .graph_refusals import _requires_grad, unfit_for_the_device
from .graph_warnings import GraphWarnings, WarningIsError, reissue
from .lazy_graph import DrawReadsValues, NotOneGraph
from .lifting import FlatProgram
from .partition import PartitionedProgram, find_eager_nodes
from .programs import ReplayedGraph, TracedEveryCall
from .joint_graph import NotDifferentiable
from .lazy_training import LazyTraining
from .training import NO_GRAD_NEEDED, ReplayedTraining


def torchxla_trivial(gm: torch.fx.GraphModule, example_inputs, *, cache_host_weights=None):
    """Run ``gm`` lazily on the XLA device on every call, then sync: it traces every call.

    ``cache_host_weights``: see ``xla_bridge.config`` (None: the config's value, default off)."""
    return _build(gm, example_inputs, TracedEveryCall, cache_host_weights, LazyTraining)


def torchxla_trace_once(gm: torch.fx.GraphModule, example_inputs, *, cache_host_weights=None):
    """Trace ``gm`` on the XLA device once, compile it, then replay it by hash on every call.

    ``cache_host_weights``: see ``xla_bridge.config`` (None: the config's value, default off)."""
    return _build(gm, example_inputs, _trace_once_program, cache_host_weights, ReplayedTraining)


def _trace_once_program(flat, device_args, check_indices=False):
    """One replayed graph, with the ops that would run on the CPU traced as their decomposition
    where that keeps them on the device (``decompose``: found on stand-ins first, so no trace
    is cut by them); a graph that still does not stay one lazy graph is split around the ops
    that leave it (``partition``), on the first trace's device copies while none of the traces
    writes to them."""
    user_tensors = [i for i, a in enumerate(device_args[:flat.user_input_count])
                    if isinstance(a, torch.Tensor)]
    decompositions = decompositions_on_stand_ins(flat, device_args)
    try:
        with GraphWarnings() as warned:
            program = ReplayedGraph(flat, device_args, shape_positions=user_tensors,
                                    decompositions=decompositions, check_indices=check_indices)
    except DrawReadsValues:
        raise                     # (split around, the op would run on the device's generator)
    except NotOneGraph as cut:
        return _partitioned_program(flat, device_args, cut, cut.spare_copies, decompositions, check_indices)
    program.warnings = tuple(warned.caught)     # issued again by every replay (graph_warnings)
    if decompositions:
        counters.record("decompositions", "ops without an XLA lowering (or whose lowering answers "
                                          f"otherwise) traced as their decomposition: {describe(decompositions)}")
    return program


def _partitioned_program(flat, device_args, cut, copies, decompositions, check_indices):
    if copies is None:
        copies = dev.device_copies(device_args)
    identities = dev.data_identities(copies)
    eager_nodes = find_eager_nodes(flat, device_args, copies, decompositions)
    if not eager_nodes:
        raise cut
    if flat.module_state_names:
        raise NotOneGraph(f"{cut.reason}; cannot split a graph whose call_module nodes hold "
                          f"state (ops {', '.join(eager_nodes)})") from None
    program = PartitionedProgram(flat, device_args, eager_nodes,
                                 dev.untouched(copies, identities), decompositions, check_indices)
    decomposed = f" (decomposed: {describe(decompositions)})" if decompositions else ""
    counters.record("partitions", f"ops run eagerly between replayed XLA segments: "
                                  f"{', '.join(eager_nodes)}{decomposed}")
    return program


def _build(gm, example_inputs, make_program, cache_host_weights=None, make_training=None):
    if any(dev.is_xla(a) for a in example_inputs):
        gm = without_dead_code(gm)    # lazy mode never computes them either (dead_code)
    unread = _unread_inputs(gm)
    if unread:
        return _WithoutUnreadInputs(gm, example_inputs, unread, make_program, cache_host_weights,
                                    make_training)
    if cache_host_weights is None:
        cache_host_weights = config.cache_host_weights
    gm = force_eager_copies(gm)       # a layout copy of eager stays a copy on the device (X10)
    dev.reductions_propagate_nan()    # asked before any trace watches the device's activity
    try:
        why = unfit_for_the_device(gm, example_inputs)
        if why is not None:
            raise NotOneGraph(why)
        with dev.host_random_kept(), dev.function_modes_set_aside(), dev.outside_inference_mode():
            call = BridgedCall(gm, list(example_inputs), make_program, bool(cache_host_weights),
                               make_training)
        # trace_once: the C++ replay path in front (``replay_path``; None without the extension)
        native = replay_path.native_entry(call) if make_program is _trace_once_program else None
        if native is None:
            return call
        call.attach_native(native)
        return native
    except NotOneGraph as error:
        reason = error.reason
    except Exception as error:   # a graph the device cannot run: eager is still right
        first_line = (str(error).splitlines() or [""])[0]
        reason = f"{type(error).__name__}: {first_line[:200]}"
    counters.record("fallbacks", f"graph runs eagerly: {reason}")
    return EagerGraph(gm, reason)


def _unread_inputs(gm) -> tuple:
    """Positions of the graph's inputs that nothing in it reads."""
    placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
    return tuple(i for i, node in enumerate(placeholders) if not node.users)


class _WithoutUnreadInputs:
    """A graph given inputs it never reads (a tensor a graph break stores to a local, passed
    along with the rest): built and called without them, so the device neither copies nor
    computes them. A pending device tensor stays pending, as in eager, which never reads it
    (device fuzz seed 411 i137: ``gelu`` of an int64 tensor, which torch_xla cannot lower)."""

    def __init__(self, gm, example_inputs, unread, *how):
        placeholders = [node for node in gm.graph.nodes if node.op == "placeholder"]
        dropped = {placeholders[i] for i in unread}
        graph, env = empty_graph_like(gm), {}
        for node in gm.graph.nodes:
            if node not in dropped:
                env[node] = graph.node_copy(node, env.__getitem__)
        self.read = picker(tuple(i for i in range(len(placeholders)) if i not in unread))
        self.inner = _build(own_class(gm)(gm, graph), list(self.read(example_inputs)), *how)

    def __call__(self, *inputs):
        return self.inner(*self.read(inputs))


def _enables_grad(gm) -> bool:
    """Whether ``gm`` turns grad mode on somewhere (``with torch.enable_grad():`` in the
    program).  Called without grad mode, such a graph records autograd history for what it
    computes inside the block, which only the training path could give, and that path is taken
    by the mode at the call: the bridge runs such calls eagerly."""
    return _sets_grad_mode(gm, True)


def _sets_grad_mode(gm, enabled: bool) -> bool:
    return any(node.op == "call_function" and node.target is torch._C._set_grad_enabled
               and node.args and node.args[0] is enabled for node in gm.graph.nodes)


def _detached_arguments(gm) -> tuple:
    """Argument positions the graph calls ``detach_`` on. Eager refuses ``detach_`` of a view,
    and a device copy of an argument is never a view: a call whose argument there is one runs
    eagerly (and raises eager's error).  The tensor detached is an argument when its node is the
    placeholder or any node whose example value is the argument's very tensor: the result of
    an in-place op on it (``y *= 2; y.detach_()``, host seed 295 i1997)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    def tensor_of(node):      # the tensor a node stands for (the node itself if none is known)
        example = node.meta.get("example_value")
        return example if isinstance(example, torch.Tensor) else node

    position_of = {id(tensor_of(n)): i for i, n in enumerate(placeholders)}

    def argument_position(value):
        return position_of.get(id(tensor_of(value))) if isinstance(value, torch.fx.Node) else None

    return tuple(sorted({position for node in gm.graph.nodes
                         if node.op in ("call_method", "call_function") and node.args
                         and getattr(node.target, "__name__", node.target) == "detach_"
                         for position in [argument_position(node.args[0])] if position is not None}))


class _AllOutputs(frozenset):
    """Every output position (``in`` is always true): a program whose outputs all go home to
    the host."""

    def __contains__(self, position) -> bool:
        return True

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "ALL_OUTPUTS"


ALL_OUTPUTS = _AllOutputs()


def _device_views(flat, args, memory, output_bases: dict):
    """The ``DeviceViews`` making again the outputs that view a device argument
    (``memory.device_views``) or another device output (``output_bases``: view leaf -> base
    leaf), or None when there are none."""
    leaves = tuple(memory.device_views) + tuple(output_bases)
    if not leaves:
        return None
    bases = tuple(sorted(set(output_bases.values())))
    return DeviceViews(flat, leaves, list(map(meta_like, args)), bases,
                       [meta_like(memory.leaves[b]) for b in bases])


def _host_outputs(gm, user_tensors, device_positions):
    """The output leaf positions eager makes on the host (the device program makes them on the
    device; they are moved back): ``ALL_OUTPUTS`` when every output is a host tensor in eager,
    an empty set when none is.

    A program whose tensor arguments all live on the host is a host program: every output goes
    back to the host (its devices are the host's, ``device_redirect``), but for one it makes on
    the lazy device by name (``torch.zeros_like(x, device=xla)``). A program with arguments
    on the device makes each output on the device eager's op makes it on, which the graph
    records per node (``meta["device"]``): a host tensor (``torch.rand([])`` for LayerDrop, a
    comparison of it, a host argument returned) stays on the host beside outputs computed on
    the device, whatever the order of the arguments. A graph without that record keeps the
    rule by the first tensor argument.  A program without tensor arguments at all (``torch.tensor(
    0.5, device=y.device)`` where ``y`` is read for its device only) makes each output where
    the graph says, as one with arguments on the device does."""
    devices = _output_devices(gm)
    if not device_positions and (devices is None or "xla" not in devices):
        return ALL_OUTPUTS
    if devices is None:                   # not recorded: the first tensor argument's device
        first_on_host = bool(user_tensors) and not dev.is_xla(user_tensors[0])
        return ALL_OUTPUTS if first_on_host else frozenset()
    host = frozenset(k for k, device in enumerate(devices) if device == "cpu")
    tensors = [k for k, device in enumerate(devices) if device is not None]
    if tensors and len(host) == len(tensors):
        return ALL_OUTPUTS
    return host


def _output_devices(gm):
    """Per flattened output leaf of ``gm``, the device type eager makes it on (None for a
    non-tensor leaf), from the graph's ``meta["device"]`` record; None when a tensor output
    has no record."""
    output = next((n for n in gm.graph.nodes if n.op == "output"), None)
    if output is None:
        return None
    devices = []
    for leaf in pytree.tree_leaves(output.args[0]):
        if not isinstance(leaf, torch.fx.Node):
            devices.append(None)
            continue
        value = leaf.meta.get("example_value")
        if value is None:
            return None                   # (a multi-output op returned whole: not recorded)
        if not isinstance(value, torch.Tensor):
            devices.append(None)          # a Python value the graph computed
            continue
        device = leaf.meta.get("device")
        if device is None:
            return None
        devices.append(torch.device(device).type)
    return devices


def _unwrapped(leaf):
    """A host tensor a lazy trace left inside torch_xla's functionalization wrapper (addmm with
    beta=0 of a tensor the graph made on the host: its storage cannot be read, ``.numpy()``
    raises) as the plain tensor it wraps; anything else as it is."""
    if isinstance(leaf, torch.Tensor) and not dev.is_xla(leaf) and torch._is_functional_tensor(leaf):
        torch._sync(leaf)
        return torch._from_functional_tensor(leaf)
    return leaf


def _draws_random(gm) -> bool:
    return any(node.meta.get("draws_random") for node in gm.graph.nodes)


@dataclass(frozen=True)
class EagerRun:
    """How the bridge runs a graph eagerly on the caller's tensors, as host eager would: a graph
    that draws random numbers draws those of its device tensors on the host generator
    (``host_random.EagerHostDraws``: the device's generator would give other numbers and leave
    the host's where it was), a graph that copies between tensors copies a host source to
    a device destination as eager does (``device_redirect.CopiesFromHost``: torch_xla's own
    ``copy_`` keeps the source's shape), and on device tensors the ops whose lowering answers
    otherwise run as the formulas a replayed graph traces (``eager_faithful``: batch norm's
    running variance, say, which a module carries from a replayed call to an eager one)."""
    draws_random: bool
    copies: bool
    faithful: dict

    @staticmethod
    def of(gm) -> "EagerRun":
        return EagerRun(_draws_random(gm), any(node.target in _COPY_TARGETS for node in gm.graph.nodes),
                        eager_faithful(gm))

    def __call__(self, gm, inputs):
        on_device = self.faithful and any(dev.is_xla(a) for a in pytree.tree_leaves(inputs))
        with EagerHostDraws.when(self.draws_random), \
                CopiesFromHost() if self.copies else contextlib.nullcontext(), \
                decomposing(self.faithful) if on_device else contextlib.nullcontext():
            return gm.forward(*inputs)      # (not gm(...): FX would print its traceback)


_COPY_TARGETS = ("copy_", torch.Tensor.copy_, torch.ops.aten.copy_.default)


class EagerGraph:
    """The eager backend, for graphs the bridge does not run; ``reason`` says why."""

    def __init__(self, gm, reason: str):
        self.gm = gm
        self.reason = reason
        self.eager_run = EagerRun.of(gm)

    def __call__(self, *inputs):
        return self.eager_run(self.gm, inputs)


class BridgedCall:
    """The callable a backend returns: host inputs in, device program, outputs back.

    Everything that does not change between calls is decided here, once: which arguments live
    on the host, which outputs are views of arguments, which arguments the graph writes in
    place. A call then maps its arguments (``HostInputs``: one batched copy of every host
    tensor), runs the program, writes in-place updates back and brings outputs home.
    """

    def __init__(self, gm, example_inputs, make_program, cache_host_weights=False,
                 make_training=None):
        self.gm = gm
        linear_paths_as_eager(gm)              # (the fused F.linear of eager's CPU kernel)
        self.flat = FlatProgram(gm)
        self.silent = silently_written(gm)     # batch norm's running statistics: no version moves
        self.has_state = bool(self.flat.state_names)
        args = example_inputs + self.flat.read_state()
        # The inference program computes no gradients: with grad mode on and a tensor that
        # requires grad, a call takes the training path (checked per call: grad mode can change).
        self.check_grad_mode = any(_requires_grad(a) for a in args)
        self.host_positions = tuple(i for i, a in enumerate(args)
                                    if isinstance(a, torch.Tensor) and not dev.is_xla(a))
        self.host_set = frozenset(self.host_positions)
        self.device_positions = tuple(i for i, a in enumerate(args) if dev.is_xla(a))
        self.read_device = picker(self.device_positions)
        self.value_positions = tuple(i for i, a in enumerate(args)
                                     if not isinstance(a, torch.Tensor))
        user_tensors = [a for a in example_inputs if isinstance(a, torch.Tensor)]
        # Each output goes to the device eager makes it on (``_host_outputs``): the host for
        # every output of a host program; with arguments on both, per output.
        self.host_outputs = _host_outputs(gm, user_tensors, self.device_positions)
        self.returns_to_host = self.host_outputs is ALL_OUTPUTS
        # Host tensors only: each run also checks the indices it reads, as eager does (index_check)
        self.check_indices = not self.device_positions
        # The one device the program's arguments live on is the device it names (device_redirect.py)
        homes = {a.device.type: a.device for a in args if isinstance(a, torch.Tensor)}
        if len(homes) == 1:
            self.flat.home_device = next(iter(homes.values()))
        with FormulaProbe() as formulas:   # (the meta run also tells which formulas it reaches)
            memory = analyse_memory(self.flat, args)
        self.flat.formulas_answered = frozenset(formulas.answered)
        self.views, self.written = memory.views, memory.written
        self.silent = self.silent | memory.quiet    # (written through ``.data``: no version moves)
        self.version_bumps = memory.bumps or {}     # eager's in-place ops per written argument
        self.own_version_leaves = memory.own_versions     # outputs made through ``.data``
        for position in self.written:         # (the guard pins shapes and strides)
            if may_overlap(args[position].shape, torch.Tensor.stride(args[position])):
                raise NotOneGraph(f"argument {position}, written in place, has elements sharing memory "
                                  "(expanded, or as_strided): the device's copy of it has not")
        self.layouts = memory.layouts or {}   # outputs eager lays out non-compactly
        self.creations = memory.creations or {}   # outputs that are views autograd guards
        # outputs eager returns as views of others: on the host rebuilt with as_strided, on
        # the device made again, like views of device arguments, by their own view ops
        views_of_outputs = memory.output_views or {}
        self.output_views = {k: v for k, v in views_of_outputs.items() if k in self.host_outputs}
        self.view_positions = tuple(sorted({v.position for v in self.views.values()}))
        self.device_views = _device_views(self.flat, args, memory, {
            k: v.base for k, v in views_of_outputs.items() if k not in self.host_outputs})
        # views eager made before writing through them: made before the write-back (HostView)
        self.views_made_first = tuple({id(v): v for v in self.views.values() if v.made_before_writes}.values())
        self.detached = _detached_arguments(gm)
        self.enables_grad = _enables_grad(gm)
        self.disables_grad = _sets_grad_mode(gm, False)
        cached = ()
        if cache_host_weights:                # opt-in: parameters, and module weights read here
            weight_state = [len(example_inputs) + k
                            for k, weight in enumerate(self.flat.state_is_weight) if weight]
            cached = tuple(i for i, a in enumerate(args) if isinstance(a, torch.nn.Parameter)) \
                + tuple(weight_state)
        self.host_inputs = HostInputs(len(args), self.host_positions, cached)
        self.eager_run = EagerRun.of(gm)
        self.draws_random = self.eager_run.draws_random
        self.last_signature = None            # of the device and Python-value arguments
        self.make_program = make_program
        self.training = make_training(self) if make_training and self.check_grad_mode else None
        self.program = None
        self.trace_failed = None      # why the program could not be made (then every call runs eagerly)
        self.sync = None
        self.eager_reasons = set()
        self.warning_registry = {}    # the "default" filter's memory for this graph's warnings
        self.native = None            # weak reference to the C++ replay path in front, if any
        self.armed_graph = None
        # Built in grad mode for a training path: the inference program waits for a call that
        # needs it (a training step never compiles a graph it does not run).
        if self.training is None or not torch.is_grad_enabled():
            try:
                self._make_program(args)
            except dev.HostOnlyArgument:       # made by the first call without such a tensor
                self.program = None

    def _make_program(self, args) -> None:
        # its trial runs draw nothing the call will not; the program records the graph's own
        # ops, not what a TorchFunctionMode active now makes of them (see __call__)
        with dev.host_random_kept(), dev.function_modes_set_aside():
            self.program = self.make_program(self.flat, self._device_args(args)[0],
                                             check_indices=self.check_indices)
        self.program_saw_last_args = True     # the program's current graph fits the last args
        # Meta kernels do not all bump the versions of what they update (batch norm's running
        # stats): the device trace's own account of in-place writes is added.
        self.written = tuple(sorted(set(self.written) | set(self.program.mutated)))
        self.sync = getattr(self.program, "sync", None)
        self._arm_native()

    def attach_native(self, native) -> None:
        """``native`` (a ``_replay.Replay`` calling this object for what it does not cover) is
        what the backend returns: kept weakly here (it holds this object), armed from here."""
        self.native = weakref.ref(native)
        if self.program is not None:
            self.armed_graph = None
            self._arm_native()

    def _arm_native(self) -> None:
        """Give the C++ path the recipe of the graph the program replays next, when it changed."""
        native = self.native() if self.native is not None else None
        graph = getattr(self.program, "graph", None)
        if native is not None and (graph is None or graph is not self.armed_graph):
            self.armed_graph = graph
            replay_path.arm(native, self)

    def __call__(self, *inputs):
        with dev.DEVICE_STEP:
            try:
                return self._call(*inputs)
            except dev.HostOnlyArgument as error:   # raised by the transfer in, before any run
                self.program_saw_last_args = False
                return self._eager(inputs, error.reason)

    def _call(self, *inputs):
        if self.detached and any(torch.Tensor._is_view(inputs[p]) for p in self.detached):
            return self._eager(inputs, "detach_ of an argument that is a view (eager refuses it)")
        if self.enables_grad and not torch.is_grad_enabled():
            return self._eager(inputs, "the graph turns grad mode on (enable_grad) inside a call made "
                                       "without it: its results must carry autograd history")
        if forward_ad._current_level != -1:
            return self._eager(inputs, "forward-mode AD is active (a dual level is open): the XLA program "
                                       "carries no tangents")
        if torch._C._is_torch_function_mode_enabled() or torch._C._len_torch_dispatch_stack():
            return self._eager(inputs, "a TorchFunctionMode or TorchDispatchMode is active: it sees (and may "
                                       "change) every op of an eager run, which a replayed or traced program "
                                       "bypasses")
        if self.check_grad_mode and torch.is_grad_enabled():
            if self.training is None:
                return self._eager(inputs, "grad mode is on and an input requires grad "
                                           "(this backend has no training path)")
            refused = None
            before = self._before_device_run()
            try:
                out = self.training(inputs)
            except (NotDifferentiable, NotOneGraph, dev.PendingInputRefused) as error:
                refused = f"training path: {error.reason}"
            except IndexOutOfRange as error:
                refused = error.reason
            except Exception as error:
                refused = self._raised_before_write_back(error, before)
            if refused is not None:           # eager runs outside the handler: its own error
                self._rewind_random(before)   # would otherwise carry ours as context
                return self._eager(inputs, refused)
            if out is not NO_GRAD_NEEDED:
                return out
        if self.program is None:
            if self.trace_failed is not None:
                return self._eager(inputs, self.trace_failed)
            try:
                self._make_program(list(inputs) + (self.flat.read_state() if self.has_state
                                                    else []))
            except (NotOneGraph, dev.PendingInputRefused) as error:
                return self._eager(inputs, error.reason)
            except Exception as error:    # the device's trace failed where eager's run may not: eager
                self.trace_failed = f"the device trace failed ({type(error).__name__}: {str(error)[:120]})"
                return self._eager(inputs, self.trace_failed)
        with timing.phase("transfer_in"):
            args = list(inputs)
            if self.has_state:
                args += self.flat.read_state()
            reason = self._unsound_call(args)
            if reason is not None:
                return self._eager(inputs, reason)
            try:
                device_args, same_signature = self._device_args(args)
            except dev.PendingInputRefused as error:    # lazy mode, which reads it as torch_xla does
                return self._eager(inputs, error.reason)
            same_signature = same_signature and self.program_saw_last_args
            self.program_saw_last_args = False
            if self.written and self.host_inputs.aliased(self.written, args,
                                                         self.device_positions):
                return self._eager(inputs, "an argument the graph writes in place shares "
                                           "memory with another argument")
        if getattr(self.program, "warnings", None):
            try:
                reissue(self.program.warnings, self.warning_registry)
            except WarningIsError as error:
                return self._eager(inputs, str(error))
        refused = None
        before = self._before_device_run()
        try:
            with timing.phase("trace" if self.sync is not None else "hash_lookup_dispatch"):
                leaves = self.program.run(device_args, same_signature)
            self.program_saw_last_args = True
            if self.sync is not None:       # trivial: the lazy trace ran; now dispatch it
                with timing.phase("hash_lookup_dispatch"):
                    self.sync()
        except IndexOutOfRange as error:    # nothing was written back: eager raises its error
            refused = error.reason
        except Exception as error:
            refused = self._raised_before_write_back(error, before)
        if refused is not None:
            self._rewind_random(before)
            self.host_inputs.forget_cached()
            return self._eager(inputs, refused)
        if timing.active is not None:
            with timing.phase("execute"):
                dev.wait_device()
        self._arm_native()
        with timing.phase("transfer_out"):
            made = {view: view.of(args[view.position]) for view in self.views_made_first}
            written_on_host = [p for p in self.program.mutated if p in self.host_set]
            if written_on_host:
                self.host_inputs.write_back(written_on_host, args, device_args, self.silent)
            # An in-place op that left the data as it was (``x.copy_(x)``) changes nothing on
            # the device, but eager counts it as a write: autograd sees the version move. So
            # does a device argument's write, made by swapping its data (device fuzz seed 407:
            # a tensor saved for backward, then ``x.relu_()``: eager's backward raises).
            self.move_versions_as_eager(self.written, args, written_on_host)
            out = self._outputs(leaves, args, made)
        return pytree.tree_unflatten(out, self.program.treespec)

    def _device_args(self, args):
        """(host tensors replaced by their device copies, same signature): the second is True
        when every argument has the shape and dtype (a Python value: the value) it had on the
        previous call (which counts only if the program ran on that call:
        ``program_saw_last_args``)."""
        device_args, shapes_changed = self.host_inputs(args)
        same = not shapes_changed
        if self.device_positions or self.value_positions:
            on_device = self.read_device(args)
            if on_device:
                dev.materialize(list(on_device))
            signature = (tuple(map(_shape_of, on_device)), tuple(map(_dtype_of, on_device)),
                         tuple(args[i] for i in self.value_positions))
            same = same and signature == self.last_signature
            self.last_signature = signature
        return device_args, same

    def _unsound_call(self, args):
        """Why this call cannot replay soundly (an output view's base changed layout, inference
        mode around a graph that returns views of its arguments), or None."""
        if (self.views or self.creations) and torch.is_inference_mode_enabled():
            # (eager's views of inference tensors carry no creation meta, and a view made again
            # after the write-back would see the write a second time)
            return "inference mode is on and the graph returns a view of an argument"
        if self.written and not torch.is_inference_mode_enabled():
            for position in self.written:      # (eager raises at that write, after the ones before)
                if position not in self.silent and args[position].is_inference():
                    return f"argument {position}, written in place, is an inference tensor"
        for position in self.view_positions:
            if not all(view.fits(args[position]) for view in self.views.values()
                       if view.position == position):
                return f"argument {position}, which an output views, changed shape or strides"
        return None

    def _outputs(self, leaves, args, made) -> list:
        """Leaves for the caller: views of arguments rebuilt on the caller's own tensors (after
        the write-back, unless ``made`` already holds them), device results moved to the host
        once each when the inputs came from the host (a repeated output stays one tensor)."""
        out = [_unwrapped(leaf) for leaf in leaves]
        for k, position in self.program.argument_leaves.items():
            out[k] = args[position]
        made = dict(made)                     # one tensor per HostView (a view returned twice)
        for k, view in self.views.items():
            if view not in made:
                made[view] = view.of(args[view.position])
            out[k] = made[view]
        if self.device_views is not None:
            out = self.device_views.into(out, args)
        if self.host_outputs:
            moving = {id(leaf): leaf for k, leaf in enumerate(out)
                      if dev.is_xla(leaf) and k in self.host_outputs
                      and k not in self.views and k not in self.output_views}
            if moving:
                moved = dict(zip(moving, dev.to_host(list(moving.values()))))
                out = [moved.get(id(leaf), leaf) for leaf in out]
            if self.layouts:                  # eager's strides and offset (a repeated leaf once)
                laid_out = {}
                for k, layout in self.layouts.items():
                    if k in self.host_outputs and id(out[k]) not in laid_out:
                        laid_out[id(out[k])] = layout.of(out[k])
                out = [laid_out.get(id(leaf), leaf) for leaf in out]
        rebuild_output_views(out, self.output_views)   # on the host or on the device alike
        guard_views_as_eager(out, self.creations)
        return out

    def _before_device_run(self):
        """What a device run may change that an eager run of the same call must find as it was:
        the host generator (a graph with random ops: a host factory such as ``torch.rand(2)``
        draws while the lazy trace runs) and how many calls wrote the caller's tensors back."""
        state = cpu_state() if self.draws_random else None
        return state, self.host_inputs.write_backs

    def _rewind_random(self, before) -> None:
        """Before a call runs eagerly after its device run: the eager run draws again, from where
        eager's generator stands."""
        if before[0] is not None:
            set_cpu_state(before[0])

    def move_versions_as_eager(self, written, args, written_on_host) -> None:
        """Move each written argument's version counter as eager's in-place ops move it: once
        per op (a host argument's write-back copy moved it once already); not at all for a
        write eager makes through ``.data`` (``silent``) or an inference tensor."""
        for position in written:
            if position in self.silent or args[position].is_inference():
                continue
            once = position in written_on_host
            for _ in range(self.version_bumps.get(position, 1) - once):
                torch.autograd.graph.increment_version(args[position])

    def _raised_before_write_back(self, error: Exception, before) -> str:
        """The reason to run a call eagerly whose device run raised (a CPU-fallback op such as
        ``linalg.cholesky`` refusing its data while the lazy trace runs), or ``error`` again.

        Eager would have made the graph's in-place writes that precede the failing op; the
        device run made them on device copies only.  When every tensor argument lives on the
        host and nothing was written back, the eager run is exact: it makes those writes on the
        caller's tensors and raises eager's own error.  A device-resident argument was written
        by the run itself: its error stands."""
        if not self.check_indices or self.host_inputs.write_backs != before[1]:
            raise error
        return (f"the device run raised {type(error).__name__} before anything was written back: "
                "eager makes its writes up to the failing op, then raises")

    def _eager(self, inputs, reason: str):
        """Run the original graph on the caller's tensors: eager semantics, whatever aliases."""
        if reason not in self.eager_reasons:
            self.eager_reasons.add(reason)
            counters.record("fallbacks", f"call runs eagerly: {reason}")
        return self.eager_run(self.gm, inputs)
