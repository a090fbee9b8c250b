"""``OutputGraph``: the graph being built, shared by the root translator and every inlined call.

It owns the fx graph, the graph inputs (one placeholder per input Source, with the REAL value
that feeds it now), the guards collected so far, and the one way tensor operations enter the
graph: ``call_op`` records a node and runs the same op on meta example values.

Provenance: ``running`` is the stack of instructions being executed (the frame's, then those of
the calls inlined into it), so every node gets ``meta["stack_trace"]`` (``print_readable``
shows ``# File: f.py:4 in f, code: ...``) and every guard an ``origin`` (``f.py:4 in f``).
"""

from __future__ import annotations

import dataclasses
import keyword
import linecache
import operator
import os

import torch
import torch.fx

import guards

from ..exc import TraceTooLong, Unsupported
from . import autocast, kernel_flags, kernel_probe, value_ranges
from .graph_code import CallsTracedObjects
from .variables import constant_tensors
from .meta import FACTORIES, EffectProbe, elements_spanned, meta_examples, run_on_meta, to_meta
from .shared_storage import SharedStorages, as_view_kind
from .side_effects import SideEffects
from .subgraph import module_holding


class OutputGraph:
    def __init__(self, frame_info, code=None):
        self.code = code                    # the frame's code: provenance before its first instruction
        self.running: list = []             # (code, instruction) per translator inside step(), outermost first
        self.graph = StampedGraph(self.stack_trace)   # where nodes go now: the root graph, or a body
        self.root_graph = self.graph
        self.scopes: list = []              # sub-graphs being traced (vmap bodies), innermost last
        self.submodules: dict = {}          # name -> GraphModule the root graph reads by get_attr
        self.function_modes: list = []      # TorchFunctionModes entered by the trace, innermost last
        self.frame_info = frame_info
        self.guards: list = []
        self.input_sources: list = []
        self.example_inputs: list = []
        self.input_variables: dict = {}     # source -> TensorVariable (one placeholder per source)
        self._names: set = set()
        self.side_effects = SideEffects()
        self.wrapped_values: dict = {}      # source -> the real value wrapped from it (first read)
        self.open_grad_switches: list = []  # torch.set_grad_enabled(...) not left yet
        self.raw_grad_switches: list = []   # root positions of torch._C._set_grad_enabled(...) calls (switch_grad_mode)
        self.real_inputs: dict = {}         # source -> the real tensor behind each graph input
        self.shared_storages = SharedStorages()   # inputs in one storage get examples in one
        self.autocast = None                # AutocastRegions: the traced autocast state (capture.py)
        self.open_inference_blocks: list = []   # enter nodes of inference-mode blocks not yet left
        self._objects_by_type: dict = {}    # type -> {source: object} of type-guarded objects read
        self.metadata_mutated: set = set()  # input sources whose metadata an in-place op changes
        self.reads_storage_offset = False   # the trace read some tensor's storage_offset()
        self.caller_handling = False        # the frame's caller handles an exception (capture.py)
        self.guards_none_handled = False    # a guard that it handles none was added (exceptions.py)
        self.needs_rerun: list = []         # why a run-time error must re-run the frame (try_blocks.py)
        self.kernel_handlers: list = []     # (reason, ops): the same, unless the ops run on stand-ins (try_blocks.py)
        self.known_tensors: list = []       # TensorVariables whose value is known (variables/constant_tensors.py)
        self.python_steps = 0               # instructions traced since the last window check (translator)
        self._nodes_at_window = 0           # graph nodes at the start of that window
        # Factories without dtype=, int -> float promotion and meta example values all use the
        # default dtype: every entry checks it (one C call, next to the grad mode).
        self.add_guard(guards.default_dtype_match())

    def python_only_window(self) -> None:
        """Called every ``MAX_PYTHON_ONLY_STEPS`` instructions: refuse the frame when no tensor
        op was recorded in that window (the tracer is running a long plain-Python computation,
        which eager runs much faster)."""
        from .translator import MAX_PYTHON_ONLY_STEPS

        nodes = sum(len(graph.nodes) for graph in (self.root_graph, *[s.graph for s in self.scopes]))
        if nodes == self._nodes_at_window:
            raise TraceTooLong(f"{MAX_PYTHON_ONLY_STEPS} instructions traced without a tensor op: a long "
                               "computation in plain Python, faster eagerly")
        self._nodes_at_window, self.python_steps = nodes, 0

    def release_values(self) -> None:
        """Forget the real values the trace read (the call's arguments, what was read from
        them): the trace is over, and its objects sit in reference cycles that only a full
        collection would free; the values should die when the program drops them."""
        self.wrapped_values, self.real_inputs, self._objects_by_type = {}, {}, {}
        self.example_inputs, self.input_variables, self.known_tensors = [], {}, []

    # -- guards --------------------------------------------------------------------------
    def add_guard(self, guard):
        """Record ``guard`` (with where the trace was); the recorded guard is returned."""
        if not guard.origin:
            guard = dataclasses.replace(guard, origin=self.origin())
        self.guards.append(guard)
        return guard

    # -- provenance ----------------------------------------------------------------------
    def user_frames(self) -> list:
        """(filename, line, function) per frame now running, outermost first."""
        if not self.running:
            code = self.code
            return [(code.co_filename, code.co_firstlineno, code.co_name)] if code is not None else []
        return [(code.co_filename, inst.lineno, code.co_name) for code, inst in self.running]

    def stack_trace(self) -> str:
        """The running frames in traceback form (what fx's ``print_readable`` parses)."""
        return "".join(_frame_text(*frame) for frame in self.user_frames())

    def origin(self) -> str:
        """Where the trace is now, for a guard: ``f.py:4 in f`` (the innermost frame)."""
        frames = self.user_frames()
        if not frames:
            return ""
        filename, line, name = frames[-1]
        return f"{os.path.basename(filename)}:{line} in {name}" + ("" if self.running else ", on entry")

    def note_object_identity(self, source, value) -> None:
        """A plain object guarded only by its type: which objects of that type are one object
        is guarded at the end (``identity_guards``)."""
        self._objects_by_type.setdefault(type(value), {}).setdefault(source, value)

    def note_metadata_mutation(self, source) -> None:
        """An in-place op changes the metadata (shape, strides, requires_grad) of the input read
        from ``source``: every other tensor input must be another tensor, or the trace read stale
        metadata from its own example.  Guarded at the end; refused when it is the same now."""
        tensor = self.real_inputs[source]
        for other, real in self.real_inputs.items():
            if other != source and real is tensor:
                raise Unsupported(f"{source.name()} changes its metadata in place and is also read as "
                                  f"{other.name()} (the same tensor)")
        self.metadata_mutated.add(source)

    def identity_guards(self) -> list:
        """``a is b`` / ``a is not b`` between the sources of type-guarded objects of one type
        (the trace may have compared them, or stored through one and read through another),
        and between a tensor input whose metadata the graph changes in place and every other
        tensor input (the trace read the others' metadata from their own examples); and which
        tensor inputs share a storage, when the graph writes one (``shared_storage.py``)."""
        result = []
        for objects in self._objects_by_type.values():
            result += _partition_guards(list(objects.items()))
        for source in self.input_sources:
            if source in self.metadata_mutated:
                others = [(other, False) for other in self.input_sources if other != source]
                if others:
                    result.append(guards.alias_match(source, tuple(others)))
        written = self._written_inputs()
        if len(self.input_sources) > 1 and (written or self.metadata_mutated):
            tensors = [self.real_inputs[source] for source in self.input_sources]
            result.append(guards.storage_match(tuple(self.input_sources), tensors))
        # What kind of view an input is decides whether eager allowed the writes to it, and
        # whether autograd can read the history of an input that requires grad (a Parameter is
        # never a view: checked by its type)
        viewed = [s for s in self.input_sources if s in written or (
            self.real_inputs[s].requires_grad and type(self.real_inputs[s]) is not torch.nn.Parameter)]
        if viewed:
            result.append(guards.autograd_views_match(tuple(viewed), [self.real_inputs[s] for s in viewed]))
        if self.reads_storage_offset:
            for source in self.input_sources:
                offset_source = guards.CallSource(source, "storage_offset")
                result.append(guards.equals_match(offset_source, torch.Tensor.storage_offset(self.real_inputs[source])))
        return result

    def _written_inputs(self) -> tuple:
        """The sources of the inputs whose memory the graph writes in place: its example's
        version moved (a write through any view of it bumps the shared counter), or an op's
        writes reached its storage (an inference tensor keeps no version)."""
        written = {w.untyped_storage()._cdata for node in self.root_graph.nodes
                   for w in node.meta.get("writes", ()) if isinstance(w, torch.Tensor)}
        result = []
        for source, variable in self.input_variables.items():
            example = variable.node.meta["example_value"]
            if (not example.is_inference() and example._version != 0) or example.untyped_storage()._cdata in written:
                result.append(source)
        return tuple(result)

    # -- inputs --------------------------------------------------------------------------
    def add_input(self, source, tensor: torch.Tensor):
        """The graph input read from ``source`` (a real tensor now), made once per source."""
        existing = self.input_variables.get(source)
        if existing is not None:
            return existing
        # (the input's metadata read as the tensor's own: a subclass's __torch_function__ is the
        # program's code, which eager runs only for the ops the program calls)
        with torch._C.DisableTorchFunctionSubclass():
            return self._new_input(source, tensor)

    def _new_input(self, source, tensor: torch.Tensor):
        from .variables.tensor import TensorVariable

        self.real_inputs[source] = tensor
        self.add_guard(guards.tensor_match(source, tensor))
        node = self.root_graph.placeholder(self._fresh_name(source.name()))   # (even inside a body)
        # placeholders must come first: move the new one after the last placeholder
        placeholders = [n for n in self.root_graph.nodes if n.op == "placeholder" and n is not node]
        if placeholders:
            placeholders[-1].append(node)
        with torch.inference_mode(tensor.is_inference()):   # as the input is, whatever block is open
            example = self.shared_storages.example(tensor, _meta_like)
        if not example.is_leaf:       # eager lets it be written in place; a leaf that requires grad not
            self.add_guard(guards.equals_match(guards.AttrSource(source, "is_leaf"), False))
        variable = TensorVariable(node, example, tensor.device, source=source, python_class=type(tensor))
        node.meta["example_value"] = example
        node.meta["device"] = tensor.device
        node.meta["entry_metadata"] = tensor_metadata(example)   # what in-place metadata ops may change
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
        from .variables.numpy_values import refuse_in_dtype_inferring_factory
        from .variables.tensor import TensorVariable, wrap_op_result

        refuse_in_dtype_inferring_factory(target, args, kwargs)
        spelled = [k for k in kwargs if not k.isidentifier() or keyword.iskeyword(k)]
        if spelled:       # (x.random_(**{"from": 1}): the graph's Python code could not spell it)
            raise Unsupported(f"a keyword argument named {spelled[0]!r} (not writable in the graph's code)")
        if kind == "call_method" and args and isinstance(args[0], TensorVariable) and args[0].hides_method(self, target):
            raise Unsupported(f"the graph would call .{target}() on an input whose own attribute hides that method")
        node_args, example_args, devices = [], [], []
        for a in args:
            n, e = a.as_graph_arg(devices)
            node_args.append(n)
            example_args.append(e)
        node_kwargs, example_kwargs = {}, {}
        for k, v in kwargs.items():
            node_kwargs[k], example_kwargs[k] = v.as_graph_arg(devices)
        node_args, node_kwargs = torch.fx.node.map_arg((node_args, node_kwargs), self.lift)
        if target is operator.pow and _negative_number(node_args[0]):
            target = torch.pow    # (fx writes ``-2.0 ** x``, which Python reads as ``-(2.0 ** x)``)
        fn = example_fn or (_method_caller(target) if kind == "call_method" else target)
        if device is None and example_kwargs.get("device") is not None:
            device = torch.device(example_kwargs["device"])          # an explicit device= wins
        if device is None:
            device = devices[0] if devices else None
        if "device" in example_kwargs or (not devices and _accepts_device(target)):
            example_kwargs["device"] = "meta"                       # examples always live on meta
        if not devices:
            if device is None:            # a factory without device=: the default device decides
                guard = guards.torch_state_match("get_default_device")
                self.add_guard(guard)
                device = guard.obj
        probe = EffectProbe()
        # a call without tensors that ignores device="meta" runs for real: it must not draw from
        # the generator the program's own run draws from (``torch.normal(0., 1., size=...)``)
        host_rng = torch.random.get_rng_state() if not devices else None
        try:
            example, cast_to = autocast.run_in_region(self.autocast, (kind, target), fn, example_args, example_kwargs,
                                                      device, lambda a, k: run_on_meta(fn, a, k, probe))
        except Unsupported as error:        # it reads a tensor's data: known values may answer
            scalars = constant_tensors.scalar_arguments(args, kwargs) if constant_tensors.reads_data(error) else None
            if scalars is None:
                raise
            return self.call_op(kind, target, *scalars, device=device, example_fn=example_fn)
        finally:
            if host_rng is not None:
                torch.random.set_rng_state(host_rng)
        itself = _returns_an_argument_itself(target, example, example_args, probe)
        if itself is not None and same_device(device, args[itself].device):
            # ``F.dropout(t, p, training=False)`` is ``t`` itself in eager: a write to one is a
            # write to the other (a device op would answer with a copy)
            return args[itself]
        if itself is not None:
            # every example lives on meta, so a move to another device (``x.to('meta')``,
            # ``x.cpu()`` of a device tensor, ``torch.as_tensor(x, device=d)``) answered the
            # argument itself there: eager copies, with the layout ``to`` keeps
            example = example.clone(memory_format=torch.preserve_format)
        example = meta_examples(example)
        node = self.graph.create_node(kind, target, tuple(node_args), node_kwargs)
        if cast_to is not None:              # (the XLA bridge runs such a graph on the host)
            node.meta["autocast"] = cast_to
        node.meta["draws_random"] = probe.draws_random
        node.meta["writes"] = probe.written
        node.meta["silent_writes"] = probe.silent
        node.meta["python_kernel"] = probe.python_kernel
        kernel_flags.note(self, node)
        if self.scopes:                     # a body is re-run on meta as a whole (subgraph.MetaBody)
            node.meta["meta_call"] = (fn, "device" in example_kwargs)
        constant_tensors.forget_written(self, probe.written)
        result = wrap_op_result(self, node, example, device)
        written = _written_argument(example, probe, [*args, *kwargs.values()], [*example_args, *example_kwargs.values()])
        if written is not None:
            result.same_object = written.the_object()
        refused = kernel_probe.refused_across_devices(node)
        if refused is not None:              # (x.index_fill(1, torch.tensor([0]), v) of a device x)
            raise Unsupported(f"eager refuses the devices of its tensors: {refused}")
        if isinstance(example, torch.Tensor) and constant_tensors.pure_target(target):
            real_fn = _method_caller(target) if kind == "call_method" else target
            known = constant_tensors.known_result(real_fn, target, args, kwargs, example_args, example_kwargs,
                                                  probe, device, example)
            name = getattr(target, "__name__", str(target))
            value_ranges.note_draw(result, name)
            if known is None and not kwargs:
                known = value_ranges.decided(name, args, example)      # rand() < 0.0: False
            if known is not None:
                result.known = known
                self.known_tensors.append(result)
        return result

    def lift(self, node):
        """``node`` as an argument of a node of the current graph: a node of an enclosing graph
        read inside a body becomes an input of the body (subgraph.py), one of every graph in
        between; a node of a body that has ended cannot be read outside it."""
        return self._lift(node, len(self.scopes) - 1)

    def _lift(self, node, depth):
        if depth < 0:
            if node.graph is not self.root_graph:
                raise Unsupported("a tensor computed inside a vmap body is used outside it")
            return node
        scope = self.scopes[depth]
        if node.graph is scope.graph:
            return node
        return scope.lift(self._lift(node, depth - 1))

    def getitem_node(self, node, index):
        return self.graph.call_function(operator.getitem, (node, index))

    # -- the end -------------------------------------------------------------------------
    def finish(self, output_nodes: list) -> torch.fx.GraphModule:
        from .variables.ctx_managers import LeavesItsBlocks, enters_blocks, exit_block

        for guard in self.identity_guards():
            self.add_guard(guard)
        # An inference-mode block still open (the graph stops at a break inside it) is left
        # here: its real object restores the dispatch state it saw on entry, so it must be left
        # inside whatever contexts a backend runs the graph in (the resume re-enters it).
        for node in reversed(self.open_inference_blocks):
            self.root_graph.call_function(exit_block, (node,))
        output_nodes = torch.fx.node.map_arg(list(output_nodes), self.lift)
        self.graph.output(tuple(output_nodes))
        self.graph.stamp = None             # the graph outlives the trace: keep nothing of it
        self.graph.lint()
        self.graph.set_codegen(CallsTracedObjects())
        graph_module = LeavesItsBlocks if enters_blocks(self.graph) else torch.fx.GraphModule
        return graph_module(module_holding(self.submodules), self.graph)


def _negative_number(value) -> bool:
    """A number whose ``repr`` starts with a minus sign (-0.0 too)."""
    return type(value) in (int, float) and repr(value).startswith("-")


class StampedGraph(torch.fx.Graph):
    """An fx graph whose new nodes carry ``meta["stack_trace"]``: the user code that made them."""

    def __init__(self, stamp):
        super().__init__()
        self.stamp = stamp

    def create_node(self, *args, **kwargs):
        node = super().create_node(*args, **kwargs)
        if self.stamp is not None:
            node.meta["stack_trace"] = self.stamp()
        return node


def _frame_text(filename: str, line: int, name: str) -> str:
    code = linecache.getline(filename, line).strip() if line else ""
    return f'  File "{filename}", line {line}, in {name}\n    {code or "<source not available>"}\n'


def tensor_metadata(tensor: torch.Tensor) -> tuple:
    return (tuple(tensor.shape), torch.Tensor.stride(tensor), torch.Tensor.storage_offset(tensor), tensor.requires_grad,
            tensor.dtype)


def _partition_guards(items: list) -> list:
    """Guards that ``items`` ((source, object) pairs) split into the same groups of identical
    objects: each source is the first of its group, or is that first one."""
    result, firsts = [], []
    for source, value in items:
        first = next((s for s, v in firsts if v is value), None)
        if first is not None:
            result.append(guards.alias_match(source, ((first, True),)))
        else:
            firsts.append((source, value))
    if len(firsts) == 2:
        result.append(guards.alias_match(firsts[1][0], ((firsts[0][0], False),)))
    elif len(firsts) > 2:
        result.append(guards.distinct_match(tuple(s for s, _ in firsts)))
    return result


def _meta_like(tensor: torch.Tensor) -> torch.Tensor:
    """The meta example of an input: its metadata, including a view's storage offset (views of
    it then report the offsets the real ones have), and what autograd knows of it that decides
    whether eager lets it be written in place: an input that requires grad and is not a leaf
    (an activation handed to a resumed frame, a hidden state) gets a non-leaf example (on a leaf
    that requires grad, eager refuses in-place ops); a view gets a view of the same kind
    (``guards.autograd_view``: of a leaf or not, of a base that requires grad or not, made under
    no_grad or as one of several views), since eager refuses in-place ops on some of those too.
    (torch.Tensor's own methods: an attribute on the input may hide one.)"""
    made_by_autograd = tensor.requires_grad and not tensor.is_leaf
    view = guards.autograd_view(tensor)
    if view and not view[3]:
        raise Unsupported("an input view whose autograd history eager refuses to read (made under no_grad or as one "
                          "of several views, and written in place since): an op that records it raises")
    if view:
        return as_view_kind(_view_example(tensor, base_is_leaf=view[0], base_requires_grad=view[1]), view)
    example = to_meta(tensor)
    if torch.Tensor.storage_offset(tensor) == 0 and not made_by_autograd:
        return example
    if torch.Tensor.storage_offset(tensor) == 0:
        copy = torch.Tensor.clone(example, memory_format=torch.preserve_format)
        if copy.stride() == tuple(torch.Tensor.stride(tensor)):
            return copy
    if made_by_autograd:          # a view of a non-leaf: as writable in place as the input
        return _view_example(tensor, base_is_leaf=False, base_requires_grad=True)
    example = _view_example(tensor, base_is_leaf=True, base_requires_grad=False)
    return example.detach().requires_grad_(True) if tensor.requires_grad else example


def _view_example(tensor: torch.Tensor, base_is_leaf: bool, base_requires_grad: bool) -> torch.Tensor:
    """A meta tensor with ``tensor``'s sizes, strides and offset viewing a fresh storage, through
    autograd as ``tensor`` views its base: a leaf or a non-leaf, that requires grad or not.  A
    view without a grad_fn of a base that requires grad was made under no_grad (it still
    requires grad, through its base), and so is its example."""
    to_meta(tensor)     # (refuses what has no meta example)
    shape, stride, offset = tensor.shape, torch.Tensor.stride(tensor), torch.Tensor.storage_offset(tensor)
    base = torch.empty(offset + elements_spanned(tensor), dtype=tensor.dtype, device="meta")
    if base_requires_grad:
        base = base.requires_grad_(True) if base_is_leaf else base.requires_grad_(True).clone()
    try:
        made_without_grad = base_requires_grad and tensor.is_leaf
    except RuntimeError as error:   # a view made under no_grad whose base was since written
        raise Unsupported(f"an input view autograd refuses to read: {str(error).splitlines()[0]}") from error
    with torch.set_grad_enabled(not made_without_grad):
        example = base.as_strided(shape, stride, offset)
    return example.requires_grad_(True) if tensor.requires_grad and not example.requires_grad else example


def _method_caller(name: str):
    def call_method(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)

    call_method.__qualname__ = f"Tensor.{name}"
    return call_method


def _accepts_device(target) -> bool:
    return target in FACTORIES


def same_device(target, current) -> bool:
    """``x.to(target)`` keeps ``x`` (on ``current``): the same device type, and the same index
    unless the target names none (``'xla'`` is the tensor's own ``xla:0``)."""
    if target is None or current is None:
        return True
    target, current = torch.device(target), torch.device(current)
    return target.type == current.type and (target.index is None or target.index == current.index)


def _written_argument(example, probe, args, example_args):
    """The tensor argument an in-place op wrote and returned (``x.mul_(2)``, ``x *= 2``, ``out=``):
    the result is that very object in eager; None for any other op."""
    from .variables.tensor import TensorVariable

    if not probe.written or not isinstance(example, torch.Tensor):
        return None
    for arg, e in zip(args, example_args):
        if e is example and isinstance(arg, TensorVariable):
            return arg
    return None


def _returns_an_argument_itself(target, example, example_args, probe):
    """The position of the tensor argument an op returned as its very result object (no write,
    no draw, not an in-place op, whose result is its argument after the write), or None."""
    name = target if isinstance(target, str) else getattr(target, "__name__", "")
    if not isinstance(example, torch.Tensor) or probe.written or probe.draws_random or name.endswith("_"):
        return None
    return next((i for i, e in enumerate(example_args) if e is example), None)
