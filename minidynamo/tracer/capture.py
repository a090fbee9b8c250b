"""``trace_frame``: run the symbolic interpreter over one frame and package what it captured.

    capture = trace_frame(func, args)
    outputs = capture.graph_module(*capture.example_inputs)
    result  = capture.build_output(outputs)        # == func(*args), computed by the graph
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

import torch
import torch.fx

import guards as G
from ..exc import MinidynamoError, Unsupported
from .builder import wrap
from .meta import no_dynamo_import
from .output_graph import OutputGraph
from .translator import InstructionTranslator
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable
from .variables.containers import (BaseListVariable, DictVariable, NamedTupleVariable, SetVariable, SizeVariable,
                                   SliceVariable, make_named_tuple)
from .variables.builtins import BuiltinVariable
from .variables.functions import UserFunctionVariable
from .variables.nn_module import NNModuleVariable
from .variables.objects import ClassVariable
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


def argument_names(code) -> tuple:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return tuple(code.co_varnames[:n])


def trace_frame(func, args) -> Capture:
    """Capture ``func`` called with the raw argument slots ``args``; Unsupported if we cannot."""
    grad_enabled = torch.is_grad_enabled()
    try:
        with no_dynamo_import():
            return _trace(func, tuple(args))
    except Unsupported:
        raise
    except G.UnguardableValue as e:
        raise Unsupported(f"cannot guard a value the trace relies on: {e.reason}") from e
    except RecursionError as e:
        raise Unsupported("the trace recursed too deeply") from e
    except Exception as e:
        raise Unsupported(f"internal tracer error: {type(e).__name__}: {e}") from e
    finally:
        torch._C._set_grad_enabled(grad_enabled)      # a with-block left open by an abort


def _trace(func, args) -> Capture:
    if torch._C._len_torch_dispatch_stack() != 0:
        raise Unsupported("a TorchDispatchMode is active")
    code = func.__code__
    names = argument_names(code)
    if len(names) != len(args):
        raise Unsupported(f"{code.co_name} expects {len(names)} argument slots, got {len(args)}")
    frame = G.FrameInfo(names, func.__globals__, func.__builtins__)
    output = OutputGraph(frame)
    output.add_guard(G.grad_mode_match())
    tx = InstructionTranslator(func, {}, output, G.GlobalSource)
    tx.locals = {name: wrap(tx, value, G.LocalSource(name)) for name, value in zip(names, args)}
    result = tx.run()
    output.side_effects.check_aliasing()
    output_nodes: list = []
    template = _output_template(result, output_nodes)
    replays = _replay_templates(output.side_effects, output_nodes)
    graph_module = output.finish(output_nodes)
    reader = G.compile_reader([r[1] for r in replays if r[0] != "global"], frame) if replays else None
    return Capture(graph_module, list(output.example_inputs), list(output.input_sources), list(output.guards),
                   frame, OutputBuilder(template, replays, reader))


def _replay_templates(effects, nodes) -> list:
    """(kind, source of the real object, key, template of the new value), in program order."""
    replays = []
    for source, vt in effects.mutated.items():
        if isinstance(vt, DictVariable):
            replays.append(("dict", source, None, [(k, _output_template(v, nodes)) for k, v in vt.items.items()]))
        else:
            replays.append(("list", source, None, [_output_template(v, nodes) for v in vt.items]))
    for (_, name), (source, vt) in effects.attribute_stores.items():
        replays.append(("attr", source, name, _output_template(vt, nodes)))
    for name, vt in effects.global_stores.items():
        replays.append(("global", None, name, _output_template(vt, nodes)))
    return replays


# -- the return value ------------------------------------------------------------------------
# A template mirrors the return value: ("tensor", i) is the i-th graph output, ("const", v) a
# constant, (kind, [children]) a container to rebuild.

def _output_template(vt: VariableTracker, nodes: list):
    if isinstance(vt, TensorVariable):
        nodes.append(vt.node)
        return ("tensor", len(nodes) - 1)
    if isinstance(vt, SizeVariable):
        return ("const", torch.Size(vt.as_python_constant()))
    if isinstance(vt, ConstantVariable):
        if isinstance(vt.value, slice):
            return ("const", vt.value)
        return ("const", vt.value)
    if isinstance(vt, NamedTupleVariable):
        return ("namedtuple", vt.tuple_type, [_output_template(i, nodes) for i in vt.items])
    if isinstance(vt, BaseListVariable):
        return (vt.python_type(), [_output_template(i, nodes) for i in vt.items])
    if isinstance(vt, DictVariable):
        return ("dict", vt.dict_type, [(k, _output_template(v, nodes)) for k, v in vt.items.items()])
    if isinstance(vt, SetVariable):
        return ("set", list(vt.values))
    if isinstance(vt, NNModuleVariable) and vt.source is not None:
        return ("const", vt.value)                       # id-guarded: the very same module
    if isinstance(vt, (SliceVariable, TorchFunctionVariable, BuiltinVariable, ClassVariable, UserFunctionVariable)):
        return ("const", vt.as_python_constant())        # immutable, or guarded by identity
    raise Unsupported(f"returning {vt} from the frame")


class OutputBuilder:
    """``build_output(graph_outputs)``: the frame's return value from the graph's outputs.

    When the frame changed the caller's Python objects (``needs_frame``), call it as
    ``build_output(graph_outputs, func, *args)``: it re-reads those objects from the new frame
    and replays the changes on them (see side_effects.py)."""

    def __init__(self, template, replays=(), reader=None):
        self.template = template
        self.replays = list(replays)
        self.reader = reader
        self.needs_frame = bool(self.replays)

    def __call__(self, outputs, func=None, *args):
        result = _build(self.template, outputs)
        if self.replays:
            if func is None:
                raise MinidynamoError("this capture replays side effects on the caller's objects: "
                                      "call build_output(outputs, func, *args)")
            self._replay(outputs, func, args)
        return result

    def _replay(self, outputs, func, args):
        real_objects = iter(self.reader(func, *args))
        for kind, source, key, template in self.replays:
            if kind == "list":
                next(real_objects)[:] = [_build(t, outputs) for t in template]
            elif kind == "dict":
                target = next(real_objects)
                target.clear()
                target.update((k, _build(t, outputs)) for k, t in template)
            elif kind == "attr":
                setattr(next(real_objects), key, _build(template, outputs))
            else:
                func.__globals__[key] = _build(template, outputs)

    def __repr__(self):
        return f"OutputBuilder({self.template!r})"


def _build(template, outputs):
    kind = template[0]
    if kind == "tensor":
        return outputs[template[1]]
    if kind == "const":
        return template[1]
    if kind == "namedtuple":
        return make_named_tuple(template[1], [_build(t, outputs) for t in template[2]])
    if kind == "set":
        return set(template[1])
    if kind == "dict":
        return template[1]((k, _build(t, outputs)) for k, t in template[2])
    return kind(_build(t, outputs) for t in template[1])
