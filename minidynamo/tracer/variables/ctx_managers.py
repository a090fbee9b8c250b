"""Context managers the trace can enter: ``torch.no_grad()``, ``torch.enable_grad()``,
``torch.set_grad_enabled(mode)``, ``torch.inference_mode(mode)`` and ``torch.autocast(...)``,
modelled here, and any object whose class defines ``__enter__``/``__exit__`` in Python, whose
methods are inlined (``enter_user_context``).

Entering a grad-mode block flips grad mode twice over: for real while tracing (so meta example
values get the right ``requires_grad``), and in the graph (a ``torch._C._set_grad_enabled``
node), so the compiled code switches mode at the same point the program did.  Leaving
restores both.  An inference-mode block is the same, its real object held while the block is
traced (``TRACED_BLOCKS``; an aborted trace leaves it) and entered and left by graph nodes.

``torch.autocast(device, ...)`` is entered and left by graph nodes that run the real
``autocast`` object at call time, so a region begins and ends (timm turns autocast off around
attention) exactly where eager's does.  The trace follows the regions to give its examples the
dtypes autocast gives (``tracer/autocast.py``: CPU regions only; another device's region
turned on is refused).

If the graph raises at run time, the compiled code leaves the autocast blocks it entered
(``unwind_open_blocks``, innermost first) and sets grad mode back to its value at the frame's
entry, which is what the with-statements would have restored on the way out: these blocks are
balanced within the frame.  A node switching any other global state must come as such a pair,
and be unwound there too.
"""

from __future__ import annotations

import threading

import torch
import torch.fx

import guards as G

from ...exc import Unsupported
from .base import VariableTracker
from .constant import ConstantVariable

GRAD_MODE_CLASSES = {torch.no_grad: False, torch.enable_grad: True}


class ContextManagerVariable(VariableTracker):
    """What BEFORE_WITH accepts: ``enter(tx)`` and the ``__exit__`` it leaves on the stack."""

    def enter(self, tx):
        raise NotImplementedError

    def exit_callable(self):
        raise NotImplementedError


class GradModeVariable(ContextManagerVariable):
    def __init__(self, enabled: bool):
        super().__init__()
        self.enabled = enabled
        self.previous = None

    def python_type(self):
        return torch.no_grad if not self.enabled else torch.enable_grad

    def enter(self, tx):
        self.previous = torch.is_grad_enabled()
        _switch(tx, self.enabled)
        return ConstantVariable(None)

    def exit_callable(self):
        return _ExitVariable(self)

    def call_function(self, tx, args, kwargs):
        """``@torch.no_grad()`` applied to a function during the trace."""
        if len(args) != 1 or kwargs:
            return super().call_function(tx, args, kwargs)
        return GradModeFunctionVariable(self.enabled, args[0])


class SetGradEnabledVariable(ContextManagerVariable):
    """``torch.set_grad_enabled(mode)``: unlike ``no_grad()``, constructing it already switches
    grad mode; ``__enter__`` does nothing and ``__exit__`` restores the mode seen at
    construction.  Accepted only when the trace also leaves it (a with-statement): a bare call
    leaves grad mode switched after the frame, and if the graph raised, the compiled code could
    not tell which mode eager would have left behind."""

    def __init__(self, tx, enabled: bool):
        super().__init__()
        self.enabled = enabled
        self.previous = torch.is_grad_enabled()
        _switch(tx, enabled)
        tx.output.open_grad_switches.append(self)

    def python_type(self):
        return torch.set_grad_enabled

    def enter(self, tx):
        return ConstantVariable(None)

    def exit_callable(self):
        return _ExitVariable(self)


class GradModeFunctionVariable(VariableTracker):
    """A function decorated with ``torch.no_grad()`` / ``torch.enable_grad()``: each call
    runs it inside a fresh grad-mode block."""

    def __init__(self, enabled: bool, fn: VariableTracker):
        super().__init__()
        self.enabled = enabled
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        manager = GradModeVariable(self.enabled)
        manager.enter(tx)
        from .generators import GeneratorVariable

        result = self.fn.call_function(tx, args, kwargs)
        if isinstance(result, GeneratorVariable):
            raise Unsupported("a generator function decorated with torch.no_grad()/enable_grad() (torch switches "
                              "grad mode around each resume of the generator)")
        manager.exit_callable().call_function(tx, [], {})
        return result


class NoEffectBlockVariable(ContextManagerVariable):
    """``with torch._C.DisableTorchFunctionSubclass():`` (torch's own ``record_function`` exit
    runs in one): it turns off ``__torch_function__`` of tensor subclasses, and the trace holds
    none (its inputs are checked), so the block changes nothing traced.  ``__enter__`` gives None."""

    def __init__(self, klass):
        super().__init__()
        self.klass = klass

    def python_type(self):
        return self.klass

    def enter(self, tx):
        return ConstantVariable(None)

    def exit_callable(self):
        return _NoEffectExit()


class _NoEffectExit(VariableTracker):
    def call_function(self, tx, args, kwargs):
        return ConstantVariable(None)


NO_EFFECT_BLOCKS = (torch._C.DisableTorchFunctionSubclass,)


class RestoredExit(VariableTracker):
    """The ``__exit__`` of a block the compiled code unwinds itself if the graph raises (see the
    module docstring): a run-time error needs no re-run for its sake (try_blocks.py)."""


class _ExitVariable(RestoredExit):
    """The ``__exit__`` BEFORE_WITH leaves on the stack; the with-block's end calls it."""

    def __init__(self, manager: GradModeVariable):
        super().__init__()
        self.manager = manager

    def call_function(self, tx, args, kwargs):
        _switch(tx, self.manager.previous)
        if self.manager in tx.output.open_grad_switches:
            tx.output.open_grad_switches.remove(self.manager)
        return ConstantVariable(None)


# What an autocast object's ``__enter__`` reads: the argument, and the attribute holding it.
_OBJECT_SETTINGS = {"device_type": "device", "dtype": "fast_dtype", "enabled": "_enabled",
                    "cache_enabled": "_cache_enabled"}

# The deprecated per-device classes (their parameters: enabled, dtype, cache_enabled): their
# device, and their default dtype.
_DEVICE_CLASSES = {torch.cpu.amp.autocast: ("cpu", torch.bfloat16), torch.cuda.amp.autocast: ("cuda", torch.float16)}


def is_autocast_object(manager) -> bool:
    """An autocast object the trace did not make (``AutocastVariable`` stands for those)."""
    from .objects import UserObjectVariable

    return isinstance(manager, UserObjectVariable) and type(manager.value) in (torch.autocast, *_DEVICE_CLASSES)


class AutocastVariable(ContextManagerVariable):
    """``torch.autocast(device_type, dtype, enabled, cache_enabled)`` (see the module docstring)."""

    def __init__(self, arguments: dict):
        super().__init__()
        self.arguments = arguments
        self.node = None

    @staticmethod
    def create(klass, args, kwargs):
        if klass in _DEVICE_CLASSES:
            device_type, dtype = _DEVICE_CLASSES[klass]
            names, arguments = ("enabled", "dtype", "cache_enabled"), {"device_type": device_type, "dtype": dtype}
        elif klass is torch.autocast:
            names, arguments = ("device_type", "dtype", "enabled", "cache_enabled"), {}
        else:
            raise Unsupported(f"with statement over a subclass of torch.autocast ({klass.__qualname__})")
        if len(args) > len(names):
            raise Unsupported("torch.autocast(...) with too many arguments")
        arguments.update({k: v.as_python_constant() for k, v in kwargs.items()})
        arguments.update({names[i]: a.as_python_constant() for i, a in enumerate(args)})
        if not isinstance(arguments.get("device_type"), str) or not isinstance(arguments.get("enabled", True), bool):
            raise Unsupported("torch.autocast(...) without a constant device type and enabled flag")
        return AutocastVariable(arguments)

    @staticmethod
    def of_object(tx, manager) -> "AutocastVariable":
        """``with a:`` over an autocast object made before the frame (``@torch.autocast(...)``
        decorates a function with one): a block made as that object was, its settings guarded."""
        value, source = manager.value, manager.source
        if source is None:
            raise Unsupported("with statement over an autocast object the trace cannot guard")
        arguments = {}
        for name, attribute in _OBJECT_SETTINGS.items():
            arguments[name] = getattr(value, attribute)
            tx.output.add_guard(G.equals_match(G.AttrSource(source, attribute), arguments[name]))
        return AutocastVariable(arguments)

    def python_type(self):
        return torch.autocast

    def enter(self, tx):
        a = self.arguments
        tx.output.autocast.enter(a["device_type"], a.get("enabled", True), a.get("dtype"))
        self.node = tx.output.graph.call_function(enter_autocast, (), dict(self.arguments))
        return _AutocastObjectVariable()

    def exit_callable(self):
        return _AutocastExitVariable(self)


class InferenceModeVariable(ContextManagerVariable):
    """``torch.inference_mode(mode)``: like a grad-mode block, switched for real while the block
    is traced (its examples are inference tensors, grad is off) and in the graph, by nodes that
    enter and leave a real ``torch.inference_mode`` object at call time."""

    def __init__(self, mode: bool):
        super().__init__()
        self.mode = mode
        self.node = None

    def python_type(self):
        return torch.inference_mode

    def enter(self, tx):
        TRACED_BLOCKS.enter(torch.inference_mode(self.mode))
        self.node = tx.output.graph.call_function(enter_inference_mode, (self.mode,))
        self.node.meta["inference_mode"] = self.mode      # (the XLA bridge runs such a graph eagerly)
        tx.output.open_inference_blocks.append(self.node)
        return ConstantVariable(None)

    def exit_callable(self):
        return _InferenceModeExit(self)


class _InferenceModeExit(RestoredExit):
    def __init__(self, manager: InferenceModeVariable):
        super().__init__()
        self.manager = manager

    def call_function(self, tx, args, kwargs):
        TRACED_BLOCKS.leave()
        tx.output.open_inference_blocks.remove(self.manager.node)
        tx.output.graph.call_function(exit_block, (self.manager.node,))
        return ConstantVariable(None)


class _TracedBlocks(threading.local):
    """Real blocks entered while their with-statement is traced (inference mode), innermost
    last: an aborted trace leaves them (``unwind_to``)."""

    def __init__(self):
        self.managers = []

    def enter(self, manager):
        manager.__enter__()
        self.managers.append(manager)

    def leave(self):
        self.managers.pop().__exit__(None, None, None)

    def unwind_to(self, depth: int) -> None:
        while len(self.managers) > depth:
            self.leave()


TRACED_BLOCKS = _TracedBlocks()


class _AutocastObjectVariable(VariableTracker):
    """What ``with torch.autocast(...) as a`` binds: eager's ``__enter__`` returns the autocast
    object itself (not None, as the grad-mode blocks do).  Not modelled: any use is refused."""

    def python_type(self):
        return torch.autocast


class _AutocastExitVariable(RestoredExit):
    def __init__(self, manager: AutocastVariable):
        super().__init__()
        self.manager = manager

    def call_function(self, tx, args, kwargs):
        tx.output.autocast.leave()
        tx.output.graph.call_function(exit_block, (self.manager.node,))
        return ConstantVariable(None)


class _OpenBlocks(threading.local):
    def __init__(self):
        self.managers = []


_open = _OpenBlocks()     # blocks (autocast, inference mode) a running graph entered and has not left (per thread)


def enter_autocast(**arguments):
    """Run by the compiled graph: enter a real autocast block, return it for ``exit_block``."""
    manager = torch.autocast(**arguments)
    manager.__enter__()
    _open.managers.append(manager)
    return manager


def enter_inference_mode(mode: bool):
    """Run by the compiled graph: enter a real inference-mode block, return it for ``exit_block``."""
    manager = torch.inference_mode(mode)
    manager.__enter__()
    _open.managers.append(manager)
    return manager


def exit_block(manager):
    if _open.managers and _open.managers[-1] is manager:
        _open.managers.pop()
    manager.__exit__(None, None, None)


def unwind_open_blocks(exc=None) -> None:
    """The graph raised: leave the autocast blocks it entered, innermost first, as the
    with-statements of the program would have on the way out of the exception.  (Only a
    graph runs enter/exit nodes, and no compiled frame runs inside another's graph, so every
    block still open on this thread belongs to the graph that raised.)"""
    while _open.managers:
        manager = _open.managers.pop()
        manager.__exit__(type(exc) if exc is not None else None, exc, getattr(exc, "__traceback__", None))


class LeavesItsBlocks(torch.fx.GraphModule):
    """A graph that enters blocks (autocast, inference mode): if it raises, it leaves them before
    the exception reaches whoever ran it.  A backend may run it inside contexts of its own, and an
    inference-mode block restores the dispatch state it saw on entry: left after those contexts
    ended, it would put theirs back for good."""

    def recompile(self):
        result = super().recompile()
        forward = type(self).forward

        def forward_leaving_blocks(self, *args, **kwargs):
            try:
                return forward(self, *args, **kwargs)
            except BaseException as error:
                unwind_open_blocks(error)
                raise

        type(self).forward = forward_leaving_blocks
        return result


def enters_blocks(graph: torch.fx.Graph) -> bool:
    return any(node.target in (enter_autocast, enter_inference_mode) for node in graph.nodes)


def switches_state(node: torch.fx.Node) -> bool:
    """A node the trace made to switch grad mode or enter or leave a block (constant arguments:
    it never raises, and it changes nothing the program's values hold)."""
    return node.op == "call_function" and node.target in (torch._C._set_grad_enabled, enter_autocast,
                                                         enter_inference_mode, exit_block)


class _RawSwitches(threading.local):
    refused = False       # set while a frame is traced again with each switch a graph break
    met = False           # a compile met a switch (convert_frame.FrameConverter._compile_break)


RAW_SWITCHES = _RawSwitches()


def switch_grad_mode(tx, enabled: bool):
    """``torch._C._set_grad_enabled(mode)`` called by the program (a context manager of its own
    switching the mode in ``__enter__`` and back in ``__exit__``): the mode switches in the trace
    and in the graph, as a with-block's do.  The traced part must end (at the frame's end or a
    graph break) in the mode it began with (``capture._finish_trace``), else the frame breaks at
    the root instruction that made the first switch, which then runs eagerly (a mode left
    switched is what ``open_grad_switches`` refuses too)."""
    if RAW_SWITCHES.refused:
        raise Unsupported("call to torch._C._set_grad_enabled (the frame could not break where it is "
                          "switched back: each switch runs eagerly)")
    RAW_SWITCHES.met = True
    _switch(tx, enabled)
    tx.output.raw_grad_switches.append(getattr(tx.output, "root_position", None))   # where: a break there


def _switch(tx, enabled: bool):
    torch._C._set_grad_enabled(enabled)
    tx.output.graph.call_function(torch._C._set_grad_enabled, (enabled,))


def enter_user_context(tx, manager):
    """``with obj:`` over an object whose class defines ``__enter__`` and ``__exit__`` in Python
    (a plain class, ``contextlib.contextmanager``'s): (the bound ``__exit__``, what ``__enter__``
    returned).  As in CPython's BEFORE_WITH both are looked up on the class, never the instance,
    and ``__enter__`` runs (inlined) at once.  The bound ``__exit__`` stays on the stack as any
    method: the block's normal end calls it like any call, and a graph break hands it over as a
    value.  Its exceptional end is a graph break at the raising instruction at trace time (the
    break's entry hands the exception to the real ``__exit__``: ``breaks/entry.py``) and a re-run
    at call time (``try_blocks.check_with_exits``)."""
    from ..operators import special_method
    from .objects import UserObjectVariable

    if not isinstance(manager, UserObjectVariable):
        raise Unsupported(f"with statement over {manager} (only torch.no_grad/enable_grad, torch.autocast, "
                          "TorchFunctionModes and objects whose class defines __enter__/__exit__ in Python)")
    methods = {}
    for name in ("__enter__", "__exit__"):
        kind, method = special_method(tx, manager, name)
        if kind != "python":
            what = "has no" if kind == "absent" else "has a C"
            raise Unsupported(f"with statement over a {type(manager.value).__name__}, which {what} {name}")
        methods[name] = method
    return methods["__exit__"], methods["__enter__"].call_function(tx, [], {})
