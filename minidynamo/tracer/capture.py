"""``trace_frame``: run the symbolic interpreter over one frame and package what it captured.

    capture = trace_frame(func, args)
    outputs = capture.graph_module(*capture.example_inputs)
    result  = capture.build_output(outputs)        # == func(*args), computed by the graph
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable, Optional

import torch
import torch.fx
from torch.utils._pytree import tree_leaves as pytree_leaves

import guards as G
from .. import random_rewind
from ..exc import Unsupported, raised_by_program
from .builder import wrap
from .meta import no_dynamo_import
from .autocast import AutocastRegions
from .variables.ctx_managers import TRACED_BLOCKS, switches_state
from .output_graph import OutputGraph, tensor_metadata
from . import try_blocks
from .templates import OutputBuilder, Templates
from .translator import InstructionTranslator, decoded
from .value_errors import may_raise_on_values
from .variables.base import UnreadArgument
from .variables.generators import check_left_generators


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


def _grad_switch_refusal(output, why: str) -> Unsupported:
    """A program's own grad-mode switch the trace cannot keep: the frame breaks at the root
    instruction that made the first one instead (ctx_managers.switch_grad_mode)."""
    error = Unsupported(f"torch._C._set_grad_enabled(...) {why}")
    first = output.raw_grad_switches[0]
    if first is not None:
        error.break_at = first
    return error


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
    if output.raw_grad_switches and torch.is_grad_enabled() != grad_enabled:
        raise _grad_switch_refusal(output, "leaves grad mode switched at the end of the frame (or at its "
                                           "graph break), which the compiled code cannot reproduce if the graph raises")
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
    if output.raw_grad_switches and effects is not None:
        # a graph that raises is re-run eagerly only when it has no effects; one that has them
        # restores the mode it began in, where eager leaves what the program switched last
        raise _grad_switch_refusal(output, f"in a graph with effects ({effects}): if it raised, the grad "
                                           "mode eager leaves could differ")
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
        if node.op in ("call_function", "call_method") and node.meta.get("python_kernel"):
            return f"{node.meta['python_kernel']} runs the program's own Python kernel"
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
