"""``trace_frame``: run the symbolic interpreter over one frame and package what it captured.

    capture = trace_frame(func, args)
    outputs = capture.graph_module(*capture.example_inputs)
    result  = capture.build_output(outputs)        # == func(*args), computed by the graph
"""

from __future__ import annotations

import collections
import dataclasses
import inspect
import operator
import types
from typing import Any, Callable, Optional

import torch
import torch.fx
from torch.utils._pytree import tree_leaves as pytree_leaves

import guards as G
from .. import random_rewind
from .._set_table import copy_exact
from ..exc import MinidynamoError, Unsupported, raised_by_program
from .builder import wrap
from .meta import no_dynamo_import
from .autocast import AutocastRegions
from .variables.ctx_managers import TRACED_BLOCKS, switches_state
from .variables.objects import has_own_attribute
from .output_graph import OutputGraph, tensor_metadata
from . import try_blocks
from .side_effects import DELETED
from .translator import InstructionTranslator, decoded
from .value_errors import may_raise_on_values
from .variables.base import OpaqueCallableVariable, UnreadArgument, VariableTracker
from .variables import iterator_rebuild, iterators, lazy_numbers
from .variables.constant import ConstantMethodVariable, ConstantVariable
from .variables.lazy_numbers import LazyNumberVariable
from .variables.containers import (BaseListVariable, ListVariable, NamedTupleVariable, SizeVariable,
                                   SliceVariable, TupleVariable, make_named_tuple)
from .variables.dicts import DictVariable, DictViewVariable
from .variables.sets import SetVariable
from .variables.builtins import BuiltinVariable, GetterVariable
from .variables.generators import check_left_generators
from .variables.functions import NestedFunctionVariable, PartialVariable, UserFunctionVariable, UserMethodVariable
from .variables.nn_module import NNModuleVariable
from .variables.objects import ClassVariable, PythonModuleVariable
from .variables.torch_fns import TorchFunctionVariable
from .variables.tensor import TensorVariable


@dataclasses.dataclass
class Capture:
    graph_module: torch.fx.GraphModule
    example_inputs: list
    input_sources: list
    guards: list
    frame: Any
    build_output: Callable
    # Why the graph is not free to run twice: it changes a graph input in place or draws
    # random numbers (None: only grad mode / autocast switches, restored on error).
    graph_effects: Optional[str] = None
    grad_enabled: bool = True          # grad mode at the frame's entry (guarded)
    break_state: Any = None            # a graph break's re-trace: graph_break.BreakState
    # The devices whose generators must be rewound when the graph raises, so that the frame's
    # eager re-run draws eager's numbers (``random_rewind.py``); None: no rewind is needed.
    rewind_devices: Optional[set] = None


def argument_names(code) -> tuple:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return tuple(code.co_varnames[:n])


def _keep(tensor):
    return tensor


def _program_hooks_unseen():
    """The tracer's own tensor work (example values on meta, constants) saves tensors for
    autograd as any op does; the program's saved-tensor hooks (``torch.utils.checkpoint``
    counts what it saves) must not see it, so an innermost pair that keeps tensors as they
    are stands in front of them while tracing."""
    return torch.autograd.graph.saved_tensors_hooks(_keep, _keep)


def trace_frame(func, args, stop_at=None, caller_handling=False) -> Capture:
    """Capture ``func`` called with the raw argument slots ``args``; Unsupported if we cannot.
    ``stop_at``: stop before that root instruction (a graph break, see graph_break.py).
    ``caller_handling``: the frame's caller is handling an exception (``sys.exc_info()`` as the
    hook found it, before minidynamo's own code ran)."""
    grad_enabled, blocks = torch.is_grad_enabled(), len(TRACED_BLOCKS.managers)
    try:
        with no_dynamo_import(), _program_hooks_unseen():
            return _trace(func, tuple(args), stop_at, caller_handling)
    except Unsupported:
        raise
    except G.UnguardableValue as e:
        raise Unsupported(f"cannot guard a value the trace relies on: {e.reason}") from e
    except RecursionError as e:
        raise Unsupported("the trace recursed too deeply") from e
    except Exception as e:
        raise Unsupported(f"internal tracer error: {type(e).__name__}: {e}") from e
    finally:
        TRACED_BLOCKS.unwind_to(blocks)               # with-blocks left open by an abort
        torch._C._set_grad_enabled(grad_enabled)


def _trace(func, args, stop_at=None, caller_handling=False) -> Capture:
    if torch._C._len_torch_dispatch_stack() != 0:
        raise Unsupported("a TorchDispatchMode is active")
    code = func.__code__
    names = argument_names(code)
    if len(names) != len(args):
        raise Unsupported(f"{code.co_name} expects {len(names)} argument slots, got {len(args)}")
    frame = G.FrameInfo(names, func.__globals__, func.__builtins__)
    output = OutputGraph(frame, code)
    output.caller_handling = caller_handling
    output.add_guard(G.grad_mode_match())
    output.add_guard(G.autocast_match())
    output.autocast = AutocastRegions(output)      # the caller's region (autocast.py)
    grad_enabled = torch.is_grad_enabled()
    output.side_effects.position = lambda: len(output.root_graph.nodes)
    if code.co_flags & inspect.CO_VARKEYWORDS:     # every call makes its **kwargs dict anew
        output.side_effects.private.add(G.LocalSource(names[-1]))
    tx = InstructionTranslator(func, {}, output, G.GlobalSource)
    read = names_read(code)
    tx.locals = {name: wrap(tx, value, G.LocalSource(name)) if name in read else UnreadArgument(G.LocalSource(name))
                 for name, value in zip(names, args)}
    tx.stop_at = stop_at
    try:
        return _finish_trace(func, tx, output, frame, grad_enabled, stop_at)
    except Unsupported as e:
        raising = raised_by_program(e)
        if raising is not None and raising.path_guards is None:   # what led the trace there
            raising.path_guards = (list(output.guards), frame)
        raise
    finally:
        # The trace's objects refer to each other (a reference cycle), which only a full
        # collection frees: let go of this call's real values now, as its frame would.
        tx.locals, tx.stack, tx.cells = {}, [], {}
        output.release_values()


def names_read(code) -> set:
    """The arguments the code may read: by LOAD_FAST or DELETE_FAST, through a cell (a closure
    over it), or implicitly (a zero-argument ``super()`` reads the first).  The others are not
    wrapped: nothing of them can reach the trace, so they get no guard and no graph input (an
    unused ``mask=None``, an unread local a resume function only keeps alive)."""
    from ..breaks.resume_code import uses_zero_arg_super

    read = {inst.arg for inst in decoded(code)[0] if inst.name in ("LOAD_FAST", "DELETE_FAST")}
    read |= set(code.co_cellvars)
    if uses_zero_arg_super(code):
        read.add(code.co_varnames[0])
    return read


def _finish_trace(func, tx, output, frame, grad_enabled, stop_at) -> Capture:
    result = tx.run()
    break_state = None
    if tx.stopped:                 # the graph ends at a break: it outputs the live stack and locals
        from .graph_break import BreakTemplates, stop_values

        result, break_state = stop_values(tx, stop_at)
    check_left_generators(output)       # no finally/with cleanup that CPython would run at collection
    if output.open_grad_switches:
        raise Unsupported("torch.set_grad_enabled(...) outside a with-statement: grad mode stays switched "
                          "after the frame, which the compiled code cannot reproduce if the graph raises")
    for guard in output.side_effects.aliasing_guards(output.wrapped_values):
        output.add_guard(guard)
    templates = Templates(output.side_effects) if break_state is None else BreakTemplates(output.side_effects)
    template = templates.of(result)
    replays = templates.replays_of(output.side_effects)
    if getattr(output, "module_sharing", None) is not None:    # modules guarded by structure or pinned
        output.module_sharing.finish(output)
    graph_module = output.finish(templates.nodes)
    effects = graph_effects(graph_module.graph)
    rewind = None
    if effects is not None:
        try_blocks.settle_kernel_handlers(output)
        needs_rerun = _why_rerun(graph_module.graph, output, replays)
        if needs_rerun is not None:
            rewind = draw_devices(graph_module.graph)    # only draws: rewound, the graph can run twice
            if rewind is None:
                raise Unsupported(f"{needs_rerun}, and the graph cannot be re-run ({effects})")
            effects = None
    reader = G.compile_reader(templates.reads, frame) if templates.reads else None
    return Capture(graph_module, list(output.example_inputs), list(output.input_sources), list(output.guards),
                   frame, OutputBuilder(template, replays, reader, templates.reads_frame_cells), effects,
                   grad_enabled, break_state, rewind)


# -- when the graph raises at run time ----------------------------------------------------------
# The compiled code runs the whole graph first and replays the Python side effects after it.
# If an op of the graph raises (an index out of range, a failing linalg op), eager Python would
# have made exactly the effects that precede that op, and none after it.  The compiled code
# (convert_frame.make_compiled_fn) then:
#   - always puts back what the graph switched: autocast blocks it entered are left (innermost
#     first) and grad mode is set to its value at the frame's entry, which is what the
#     program's with-statements would restore (grad mode is only switched by with-blocks and
#     decorators, which are balanced within the frame);
#   - if the graph is free to run twice (``graph_effects`` is None: it changes no graph input
#     in place and draws no random numbers), runs the original frame again, eagerly: Python
#     itself raises the exception, with exactly its side effects and its message;
#   - otherwise re-raises the graph's exception.  The graph's own in-place changes ran in
#     program order up to the failing op, as eager's would; that is exact only if no Python side
#     effect precedes an op of the graph (and no ``try`` surrounds one), which ``_why_rerun``
#     checks: such a frame is refused, unless drawing random numbers is the graph's only
#     effect.  Then the generators it draws from are rewound when it raises
#     (``random_rewind.RewindOnRaise``, ``Capture.rewind_devices``) and the frame is re-run.
def _target_name(node) -> str:
    if node.op == "call_method":
        return str(node.target)
    return getattr(node.target, "__name__", "") or str(node.target)


def _storage_root(tensor: torch.Tensor) -> torch.Tensor:
    return tensor._base if tensor._base is not None else tensor


def graph_effects(graph: torch.fx.Graph) -> Optional[str]:
    """None when running the graph changes nothing but its outputs (and grad mode / autocast,
    which the compiled code restores); otherwise why it does.  The facts come from the aten
    ops each node dispatched on its meta example (``meta.EffectProbe``): PyTorch's own schemas
    say what an op writes and its tags say whether it draws random numbers, so no list of op
    names has to be kept in step with PyTorch."""
    write = _first_write(graph)
    if write is not None:
        return write
    for node in graph.nodes:
        if node.op in ("call_function", "call_method") and node.meta.get("draws_random"):
            return f"{_target_name(node)} draws random numbers"
    return None


def _first_write(graph: torch.fx.Graph) -> Optional[str]:
    """Why the graph changes state beyond its outputs other than by drawing random numbers:
    a graph input (or its metadata) changed in place, or a module called; else None."""
    inputs = {}
    for node in graph.nodes:
        if node.op == "placeholder":
            example = node.meta.get("example_value")
            if isinstance(example, torch.Tensor):
                # a meta example starts at version 0; an in-place op on it (or on a view of
                # it) bumps the shared version counter (an inference tensor has none: its
                # writes are the nodes' own, below)
                if not example.is_inference() and example._version != 0:
                    return f"it changes the graph input {node.name} in place"
                if tensor_metadata(example) != node.meta.get("entry_metadata", tensor_metadata(example)):
                    return f"it changes the metadata of the graph input {node.name} in place"
                inputs[id(_storage_root(example))] = node.name
        elif node.op == "call_module":
            return f"it calls the module {node.target}"
        elif node.op in ("call_function", "call_method") and not switches_state(node):
            for written in node.meta.get("writes", ()):
                name = inputs.get(id(_storage_root(written)))
                if name is not None:
                    return f"{_target_name(node)} writes the graph input {name} in place"
    return None


def _why_rerun(graph: torch.fx.Graph, output, replays) -> Optional[str]:
    """Why an error of the graph at run time must re-run the frame (None: re-raising it is exact).

    A ``try`` around graph ops (``try_blocks.py``: only a re-run runs the handler), or a Python
    side effect that precedes an op of the graph that can raise for its values: if that op
    raised, only a re-run reproduces the effects eager made before it (value_errors.py)."""
    if output.needs_rerun:
        return output.needs_rerun[0]
    first_at = output.side_effects.first_at
    if not replays or first_at is None:
        return None
    for node in list(graph.nodes)[first_at:]:
        if node.op == "call_module" or (node.op in ("call_function", "call_method") and not switches_state(node)
                                        and may_raise_on_values(node, _target_name(node))):
            return (f"the frame changes Python state before the tensor op {_target_name(node)}: if that op "
                    "raised at run time, only a re-run reproduces eager's partial effects")
    return None


def draw_devices(graph: torch.fx.Graph) -> Optional[set]:
    """The devices the graph's random ops draw on, when drawing is its only effect (it writes no
    input in place and calls no module) and every draw is from a device's default generator;
    else None.  Rewinding those generators makes such a graph free to run twice."""
    if _first_write(graph) is not None:
        return None
    devices = set()
    for node in graph.nodes:
        if node.op in ("call_function", "call_method") and node.meta.get("draws_random"):
            explicit = [a for a in pytree_leaves((node.args, node.kwargs)) if isinstance(a, torch.Generator)]
            device = node.meta.get("device")
            if explicit or not isinstance(device, torch.device) or device.type not in random_rewind.DEVICE_TYPES:
                return None
            devices.add(device)
    return devices


# -- the return value and the side effects -----------------------------------------------------
class Templates:
    """Turns VariableTrackers into templates ``build_output`` can fill in at call time:

        ("tensor", i)        the i-th graph output          ("const", v)   a constant
        ("real", k)          the k-th object re-read from the frame (a caller's list/dict:
                             returned as itself, so identity matches eager)
        (kind, [children])   a container to rebuild (tuple, list, dict, namedtuple)
        ("set", snapshot)    a set made by the trace: an exact copy of its hash table
        ("call", fn, [args]) fn(*args) per call (a slice, a partial, an itemgetter, an
                             iterator at its position: iterator_rebuild.py)
        ("method", f, obj)   f bound to obj (a method of an object the frame made)
        ("getattr", obj, name)   obj.name read again (``"-".join`` of a constant, ``x.item``)
        ("fresh", k, t)      anything rebuilt: built from t once per call, so every place
                             that holds it (two locals, the return value, attributes stored,
                             other containers, a bound method) holds the same object, as in eager
        ("module", cls, args, kwargs)   a library module made in the frame, made anew
        ("frame_cell", i)    cell i of this call's function's closure (a closure the frame
                             made over its own free variable holds the very cell)
        ("tagged", t, [(name, v)])   a tensor the graph made, with the Python attributes the
                             trace stored on it (``t.name = v``)
    """

    def __init__(self, effects=None):
        self.effects = effects       # the trace's side effects: attributes stored on tensors it made
        self.nodes: list = []        # graph outputs, each node once
        self.output_index: dict = {}     # node -> its index in ``nodes``
        self.reads: list = []        # sources re-read at call time
        self.fresh: dict = {}        # id(VT) -> its "fresh" template
        self._keep: list = []        # those VTs, alive while ids are compared
        self.reads_frame_cells = False   # a ("frame_cell", i) template: the frame's own closure cell

    def read(self, source) -> int:
        if source not in self.reads:
            self.reads.append(source)
        return self.reads.index(source)

    def of(self, vt: VariableTracker):
        if isinstance(vt, LazyNumberVariable) and vt.unread:      # computed from this call's values
            return lazy_numbers.template(self, vt)
        if isinstance(vt, TensorVariable):
            attributes = self.effects.made_tensor_attributes(vt.example) if self.effects is not None else {}
            if attributes:
                return self.once(vt, lambda: ("tagged", self._output(vt), [(k, self.of(v)) for k, v in attributes.items()]))
            return self._output(vt)
        if isinstance(vt, SizeVariable):
            return ("const", torch.Size(vt.as_python_constant()))
        if isinstance(vt, ConstantVariable):
            return ("const", vt.value)
        if (isinstance(vt, (ListVariable, DictVariable)) or getattr(vt, "returns_real", False)) and vt.source is not None:
            return ("real", self.read(vt.source))
        if type(vt) in (TupleVariable, NamedTupleVariable) and vt.source is not None:
            return ("real", self.read(vt.source))          # a tuple read from the frame: that very tuple
        return self.once(vt, lambda: self._container(vt))

    def _output(self, vt: TensorVariable):
        # One output per node: a backend makes one object per output position, and eager holds
        # one object wherever the frame put this tensor (a local and an attribute stored).
        if vt.node not in self.output_index:
            self.output_index[vt.node] = len(self.nodes)
            self.nodes.append(vt.node)
        return ("tensor", self.output_index[vt.node])

    def once(self, vt: VariableTracker, make):
        """``make()``'s template for ``vt``, rebuilt once per call: every place that holds it (two
        locals, a container, a bound method's self) holds the same object, as in eager (``t is u``)."""
        key = id(vt)
        if key not in self.fresh:
            self._keep.append(vt)
            index = len(self._keep) - 1
            self.fresh[key] = None                         # a container holding itself: refused below
            try:
                template = make()
            except Unsupported:
                del self.fresh[key]
                raise
            if template[0] in ("const", "real", "fresh"):   # one object already
                del self.fresh[key]
                return template
            self.fresh[key] = ("fresh", index, template)
        if self.fresh[key] is None:
            raise Unsupported("a container that contains itself")
        return self.fresh[key]

    def _container(self, vt):
        if isinstance(vt, NestedFunctionVariable):          # a closure made in the trace
            from .variables.functions import function_template

            return function_template(self, vt)
        if getattr(vt, "rebuilt_by_call", False):            # a library module made in the frame
            return ("module", *vt.constructor)
        if getattr(vt, "is_new_object", False):              # a user object made in the trace
            items = None if vt.dict_part is None else [(k, self.of(v)) for k, v in vt.dict_part.items.items()]
            return ("object", vt.klass, items, [(k, self.of(v)) for k, v in vt.attrs.items()])
        if isinstance(vt, NamedTupleVariable):
            return ("namedtuple", vt.tuple_type, [self.of(i) for i in vt.items])
        if isinstance(vt, (UserMethodVariable, OpaqueCallableVariable, PartialVariable)) and vt.source is not None:
            return ("real", self.read(vt.source))            # a method, C callable or partial read from the frame
        if isinstance(vt, UserMethodVariable):               # obj.method of an object the frame made: bound anew
            return ("method", self.of(vt.fn), self.of(vt.self_vt))
        if isinstance(vt, ConstantMethodVariable):           # "-".join: read again from its constant
            return ("getattr", self.of(vt.owner), vt.name)
        if isinstance(vt, GetterVariable):                   # operator.itemgetter / attrgetter made here
            return ("call", getter_of, [("const", vt.kind), self.of(TupleVariable(vt.keys))])
        if isinstance(vt, PartialVariable):                  # one made here, anew
            return ("call", partial_of, [self.of(vt.fn), self.of(TupleVariable(vt.args)), self.of(vt.keywords)])
        if isinstance(vt, BaseListVariable):
            if getattr(vt, "maxlen", None) is not None:      # a bounded deque: deque(items, maxlen)
                return ("call", vt.python_type(), [(list, [self.of(i) for i in vt.items]), ("const", vt.maxlen)])
            return (vt.python_type(), [self.of(i) for i in vt.items])
        if isinstance(vt, DictVariable):
            if vt.cannot_rebuild():
                raise Unsupported(f"returning {vt.cannot_rebuild()} from the frame")
            return ("dict", vt.dict_type, [(k, self.of(v)) for k, v in vt.items.items()])
        if isinstance(vt, SetVariable):                      # its very table: eager's order (_set_table.c)
            return ("set", copy_exact(vt.values))
        if isinstance(vt, SliceVariable):                    # a new slice per call, as eager makes
            return ("call", slice, [self.of(part) for part in vt.parts])
        if isinstance(vt, iterators.DictWalkVariable):       # at a break: a loop's over the caller's dict
            it = vt.iterator
            return ("call", iterator_rebuild.dict_walk_at, [self.of(it.dict_vt), ("const", it.kind),
                                                            ("const", it.reverse), ("const", it.index)])
        if iterators.hands_over_live(vt):                    # at a break: the loop's real iterator
            if isinstance(vt, iterators.EnumerateVariable):
                return ("call", enumerate, [self.of(vt.iterator), ("const", vt.count)])
            if isinstance(vt, iterators.ZipVariable):
                return ("call", iterators.zip_of, [("const", vt.strict)] + [
                    self.of(it) if iterators.hands_over_live(it)
                    else ("call", iter, [self.of(TupleVariable(it.items[it.index:]))]) for it in vt.iterators])
            if isinstance(vt, iterators.ListReverseIteratorVariable):
                return ("call", iterator_rebuild.reverse_iterator_at, [self.of(vt.list_vt), ("const", vt.index)])
            return ("call", iterators.list_iterator_at,
                    [self.of(vt.list_vt), ("const", vt.index), ("const", vt.done)])
        if isinstance(vt, DictViewVariable):                 # d.keys(): a view of the real/rebuilt dict
            return ("view", vt.kind, self.of(vt.dict_vt))
        if isinstance(vt, (NNModuleVariable, PythonModuleVariable)) and vt.source is not None:
            # this call's own (the very object when guarded by identity), re-read before any
            # replay: held as a constant, it would live as long as the entry (a model the
            # program dropped, whose guard holds it weakly: guards.pin)
            return ("real", self.read(vt.source))
        if getattr(vt, "guarded_by_code", False) and vt.source is not None:
            return ("real", self.read(vt.source))           # a closure guarded by code: this call's own
        if isinstance(vt, (TorchFunctionVariable, BuiltinVariable, ClassVariable, UserFunctionVariable)):
            return ("const", vt.as_python_constant())        # immutable, or guarded by identity
        if isinstance(vt, PythonModuleVariable):             # a module: sys.modules' object (IMPORT_NAME)
            return ("const", vt.value)
        raise Unsupported(f"returning {vt} from the frame")

    def replays_of(self, effects) -> list:
        """(kind, index of the real object, key, template of the new value)."""
        replays = []
        for source, vt in effects.mutated.items():
            if isinstance(vt, DictVariable):
                if vt.cannot_rebuild():
                    raise Unsupported(f"storing {vt.cannot_rebuild()} into the caller's dict")
                new = [(k, self.of(v)) for k, v in vt.items.items()]
                replays.append(("dict", self.read(source), None, new))
            elif vt.python_type() is collections.deque:    # (no slice assignment): emptied, refilled
                replays.append(("deque", self.read(source), None, [self.of(v) for v in vt.items]))
            elif getattr(vt, "unread", False):     # appended to only: the caller's items stay
                replays.append(("extend", self.read(source), None, [self.of(v) for v in vt.appended]))
            else:
                replays.append(("list", self.read(source), None, [self.of(v) for v in vt.items]))
        for key, (source, vt, raw) in effects.attribute_stores.items():
            name = key[1]
            if vt is DELETED:
                if_present = key in effects.deleted_after_store
                replays.append(("delattr", self.read(source), (name, raw, if_present), None))
            else:
                replays.append(("attr", self.read(source), (name, raw, key in effects.reinserted), self.of(vt)))
        for name, vt in effects.global_stores.items():
            replays.append(("global", None, name, self.of(vt)))
        for index, vt in effects.cell_stores.items():
            replays.append(("cell", None, index, self.of(vt)))
        return replays


def getter_of(kind: str, keys: tuple):
    """``operator.itemgetter(*keys)`` or ``attrgetter(*keys)``, a ``("call", ...)`` template's function."""
    return (operator.itemgetter if kind == "item" else operator.attrgetter)(*keys)


def partial_of(fn, args: tuple, keywords: dict):
    """``functools.partial(fn, *args, **keywords)``, a ``("call", ...)`` template's function."""
    import functools

    return functools.partial(fn, *args, **keywords)


class OutputBuilder:
    """``build_output(graph_outputs)``: the frame's return value from the graph's outputs.

    When the frame changed the caller's Python objects, or returns one of them
    (``needs_frame``), call it as ``build_output(graph_outputs, func, *args)``: it re-reads
    those objects from the new frame and replays the changes on them (see side_effects.py)."""

    def __init__(self, template, replays=(), reader=None, reads_frame_cells=False):
        self.template = template
        self.replays = list(replays)
        self.reader = reader
        self.needs_frame = reader is not None or bool(self.replays) or reads_frame_cells

    def specialized(self):
        """An equivalent, faster callable for the common shapes of a return value.

        The hit path runs this on every call: a bare graph output is an ``itemgetter``, a
        tuple of all graph outputs in order is the outputs themselves."""
        if self.replays:
            return self
        template = self.template
        if template[0] == "fresh":       # the return value is held nowhere else: built once anyway
            template = template[2]
        kind = template[0]
        if kind == "tensor":
            return operator.itemgetter(template[1])
        if kind is tuple and [t for t in template[1]] == [("tensor", i) for i in range(len(template[1]))]:
            return tuple
        return self

    def __call__(self, outputs, func=None, *args):
        real, made = [], {FRAME_FUNCTION: func}
        if self.needs_frame:
            if func is None:
                raise MinidynamoError("this capture reads or changes the caller's objects: "
                                      "call build_output(outputs, func, *args)")
            real = self.reader(func, *args) if self.reader is not None else []
            self._replay(outputs, real, func, made)
        return _build(self.template, outputs, real, made)

    def _replay(self, outputs, real, func, made):
        for kind, index, key, template in self.replays:
            if kind == "list":
                real[index][:] = [_build(t, outputs, real, made) for t in template]
            elif kind == "deque":
                new = [_build(t, outputs, real, made) for t in template]
                real[index].clear()
                real[index].extend(new)
            elif kind == "extend":
                real[index].extend([_build(t, outputs, real, made) for t in template])
            elif kind == "dict":
                new = [(k, _build(t, outputs, real, made)) for k, t in template]
                real[index].clear()
                real[index].update(new)
            elif kind == "attr":
                name, raw, reinserted = key
                value = _build(template, outputs, real, made)
                if reinserted and name in getattr(real[index], "__dict__", ()):
                    (object.__delattr__ if raw else delattr)(real[index], name)
                (object.__setattr__ if raw else setattr)(real[index], name, value)
            elif kind == "delattr":
                name, raw, if_present = key
                if not if_present or has_own_attribute(real[index], name):
                    (object.__delattr__ if raw else delattr)(real[index], name)
            elif kind == "cell":
                func.__closure__[key].cell_contents = _build(template, outputs, real, made)
            else:
                func.__globals__[key] = _build(template, outputs, real, made)

    def __repr__(self):
        return f"OutputBuilder({self.template!r})"


FRAME_FUNCTION = "function"     # the key of this call's function in ``made``


def _build(template, outputs, real=(), made=None):
    """The value a template stands for; ``made`` holds this call's "fresh" containers."""
    kind = template[0]
    if kind == "tensor":
        return outputs[template[1]]
    if kind == "const":
        return template[1]
    if kind == "real":
        return real[template[1]]
    if kind == "arith":                                      # variables.lazy_numbers
        return template[1](_build(template[2], outputs, real, made), _build(template[3], outputs, real, made))
    if made is None:
        made = {}
    if kind == "fresh":
        if template[1] not in made:
            made[template[1]] = _build(template[2], outputs, real, made)
        return made[template[1]]
    if kind == "tagged":                                     # a made tensor with its stored attributes
        tensor = _build(template[1], outputs, real, made)
        for name, value in template[2]:
            setattr(tensor, name, _build(value, outputs, real, made))
        return tensor
    if kind == "frame_cell":                                 # a closure cell of the frame's own function
        return made[FRAME_FUNCTION].__closure__[template[1]]
    if kind == "cell":
        return types.CellType() if template[1] is None else types.CellType(_build(template[1], outputs, real, made))
    if kind == "function":                                   # variables.functions.function_template
        from .variables.functions import rebuild_function

        return rebuild_function(template[1], [_build(t, outputs, real, made) for t in template[2]],
                                [(k, _build(t, outputs, real, made)) for k, t in template[3]],
                                [_build(t, outputs, real, made) for t in template[4]])
    if kind == "object":
        from .variables.new_objects import rebuild

        items = None if template[2] is None else [(k, _build(t, outputs, real, made)) for k, t in template[2]]
        return rebuild(template[1], items, [(k, _build(t, outputs, real, made)) for k, t in template[3]])
    if kind == "module":                                     # variables.frame_modules
        from .variables.frame_modules import rebuild_module

        return rebuild_module(template[1], template[2], template[3])
    if kind == "namedtuple":
        return make_named_tuple(template[1], [_build(t, outputs, real, made) for t in template[2]])
    if kind == "set":
        return copy_exact(template[1])
    if kind == "call":
        return template[1](*(_build(t, outputs, real, made) for t in template[2]))
    if kind == "view":
        return getattr(_build(template[2], outputs, real, made), template[1])()
    if kind == "method":                                     # a bound method
        return types.MethodType(_build(template[1], outputs, real, made), _build(template[2], outputs, real, made))
    if kind == "getattr":                                    # "-".join, tensor.item before the call
        return getattr(_build(template[1], outputs, real, made), template[2])
    if kind == "dict":
        return template[1]((k, _build(t, outputs, real, made)) for k, t in template[2])
    return kind(_build(t, outputs, real, made) for t in template[1])
