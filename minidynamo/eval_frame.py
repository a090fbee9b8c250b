"""The user-facing switches: ``optimize`` (watch frames), ``disable`` (never watch), ``reset``.

Watching is per thread: ``optimize(backend)`` sets the hook's callback for the duration of a
call (decorator) or a block (context manager). The C hook is installed only while some thread
has a callback, so unwatched programs run at full speed.
"""

from __future__ import annotations

import copyreg
import functools
import inspect
import sys
import threading
import types

import torch

from . import _eval_frame, _module_call, counting
from .convert_frame import FrameConverter, codes_with_cache
from .module_call import ModuleCall, call_without_global_hooks
from .skipfiles import disabled_codes

try:        # optional (C++): the JIT tracer's state, read without a Python call by the frame hook
    from ._jit_state import is_tracing as _jit_is_tracing    # (which runs frames as CPython does
except ImportError:                                          # while torch.jit.trace records) and
    _jit_is_tracing = None                                   # by the nn.Module call shortcut
else:
    _eval_frame.set_jit_state(_jit_is_tracing)
    _module_call.set_jit_state(_jit_is_tracing)


class OptimizeContext:
    """What ``optimize(...)`` returns: a decorator and a context manager at once."""

    def __init__(self, backend="eager", *, nopython: bool = False, recorder=None):
        self.converter = FrameConverter(backend, nopython=nopython, recorder=recorder)
        self._restore = _CallbackStack()

    def __enter__(self):
        self._restore.push(self.converter)
        return self

    def __exit__(self, *exc):
        self._restore.pop()
        return False

    def __call__(self, fn):
        if isinstance(fn, torch.nn.Module):
            return OptimizedModule(fn, self.converter)
        if isinstance(fn, (staticmethod, classmethod)):   # in a class body: keep how it binds
            return type(fn)(self(fn.__func__))
        if not callable(fn):
            raise TypeError(f"optimize(...) expects a function or an nn.Module, got {type(fn).__name__}")
        if inspect.isclass(fn):
            raise TypeError(f"optimize(...) expects a function or an nn.Module instance, got the class {fn.__name__}")
        return watch(fn, self.converter)


def watch(fn, callback):
    """``fn`` wrapped so that its frame, and the frames it calls, go through the hook.

    The wrapper is a C object (``_eval_frame.Watched``): setting and restoring the thread's
    callback around the call costs tens of nanoseconds, not a Python frame.
    """
    code = getattr(fn, "__code__", None)
    if callback is not None and code is not None:
        callback.add_root(code)
    watched = _eval_frame.Watched(fn, callback)
    # A function's attributes are copied as functools.wraps copies them; a callable object's
    # __dict__ is its state, which a copy would freeze: the wrapper keeps only its names.
    functools.update_wrapper(watched, fn, updated=("__dict__",) if isinstance(fn, types.FunctionType) else ())
    return watched


def _reduce_watched(watched):
    """Copied and pickled as a function is: by reference (copy keeps the object itself; pickle
    saves ``module.qualname``, so a decorated module-level function loads as itself).  A wrapped
    callable with no name (a partial) is remade around a copy of it."""
    name = getattr(watched, "__qualname__", None)
    if isinstance(name, str):
        return name
    return watch, (watched.fn, watched.callback)


copyreg.pickle(_eval_frame.Watched, _reduce_watched)


class OptimizedModule(torch.nn.Module):
    """An nn.Module whose calls are watched; its forward is the wrapped module's.

    ``forward`` is an instance attribute, a C ``Watched`` around the wrapped module: the
    wrapper's own ``nn.Module.__call__`` still runs (hooks registered on the wrapper fire), then
    the wrapped module is called with the hook's callback set, with no Python frame between.
    Both module calls are ``ModuleCall``s (module_call.py): with no hooks they go straight to
    forward, so a hit runs no Python frame of ``nn.Module.__call__``.  Global module hooks fire
    in the wrapped module's call only, for that module, once, as in eager
    (``call_without_global_hooks`` is the wrapper's usual call).
    """

    __call__ = ModuleCall(None, call_without_global_hooks)

    def __init__(self, module: torch.nn.Module, converter: FrameConverter):
        super().__init__()
        self._orig_mod = module
        self.__dict__["training"] = module.training
        self._minidynamo_converter = converter
        self._watch()

    def _watch(self) -> None:
        module, converter = self._modules["_orig_mod"], self.__dict__["_minidynamo_converter"]
        forward_code = _forward_code(module)
        if forward_code is not None and converter is not None:   # (None: disable(module))
            converter.add_root(forward_code)
        self.__dict__["forward"] = _eval_frame.Watched(ModuleCall(module), converter)

    # The wrapper stands for the module: what the program sets or deletes on it lands on the
    # wrapped module (whose forward the guards watch), except the wrapper's own state.  Its
    # ``training`` flag is its own too (an nn.Module's, read by whatever traces a call of it),
    # set with the module's (``train()`` and ``eval()`` set both: the module is its child).
    _OWN = frozenset({"_orig_mod", "_minidynamo_converter", "forward"})

    def _owns(self, name) -> bool:
        return name in self._OWN or (name in self.__dict__ and name != "training") or hasattr(type(self), name)

    def __setattr__(self, name, value):
        if not self._owns(name):
            setattr(self._modules["_orig_mod"], name, value)
            if name != "training":
                return
        super().__setattr__(name, value)
        if name == "_orig_mod" and "forward" in self.__dict__:   # another module wrapped
            self._watch()

    def __delattr__(self, name):
        if not self._owns(name):
            delattr(self._modules["_orig_mod"], name)
            return
        super().__delattr__(name)

    def __getstate__(self):
        state = super().__getstate__()
        state.pop("forward", None)             # a C object: remade on restore
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._watch()

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


def _forward_code(module):
    """The code of the module class's ``forward``, or None.  Read statically: a TorchScript
    module's class attribute raises when read from the class, a property is not a function."""
    forward = inspect.getattr_static(type(module), "forward", None)
    forward = getattr(forward, "__func__", forward)      # a staticmethod's function
    return getattr(forward, "__code__", None)


def optimize(backend="eager", *, nopython: bool = False) -> OptimizeContext:
    """Capture the frames of a function (or module, or ``with`` block) and run them compiled.

    ``backend`` is a registered name (``minidynamo.list_backends()``) or a callable
    ``backend(gm, example_inputs) -> callable``. With ``nopython=True`` a frame that cannot be
    captured raises ``Unsupported`` instead of running eagerly.
    """
    return OptimizeContext(backend, nopython=nopython)


def disable(fn=None):
    """Never trace ``fn`` (or, as a context manager with no argument, the frames of a block)."""
    if fn is None:
        return _Disabled()
    if isinstance(fn, (staticmethod, classmethod)):   # in a class body: keep how it binds
        return type(fn)(disable(fn.__func__))
    if not callable(fn):
        raise TypeError(f"disable(...) expects a callable, got {type(fn).__name__}")
    if isinstance(fn, torch.nn.Module):       # still the module (parameters, eval(), state_dict)
        return OptimizedModule(fn, None)
    if isinstance(fn, types.FunctionType):
        # The function's code is marked, so that no traced caller inlines it.  A bound method
        # (``disable(lin.forward)``) is not: its code is every instance's; its wrapper alone runs
        # untraced (a traced caller breaks at a call of the wrapper).
        disabled_codes.add(fn.__code__)
        _mark_disabled(fn.__code__)
    return watch(fn, None)


def _mark_disabled(code) -> None:
    _eval_frame.set_cache(code, "disabled by minidynamo.disable")
    codes_with_cache.add(code)


class _OpenBlocks(threading.local):
    """The ``with`` blocks open in this thread, oldest first, each as ``[the callback it
    replaced]``.  Blocks exit last-in first-out, except where the program interleaves them
    (two coroutines each in a block across an ``await``, or generators): a block that exits
    while a later one is still open is unlinked, and the later one will restore what the
    earlier had replaced, so the thread ends as it was before both."""

    def __init__(self):
        self.blocks = []

    def enter(self, callback) -> list:
        block = [_eval_frame.set_callback(callback)]
        self.blocks.append(block)
        return block

    def exit(self, block: list) -> None:
        index = next(i for i, open_block in enumerate(self.blocks) if open_block is block)
        if index == len(self.blocks) - 1:
            self.blocks.pop()
            _eval_frame.set_callback(block[0])
        else:
            self.blocks[index + 1][0] = block[0]
            del self.blocks[index]


_open_blocks = _OpenBlocks()


class _CallbackStack(threading.local):
    """A context object's own open blocks, per thread: the same context object may be entered
    by several threads (or re-entered), and each block must restore its own."""

    def __init__(self):
        self.open = []

    def push(self, callback) -> None:
        self.open.append(_open_blocks.enter(callback))

    def pop(self) -> None:
        if self.open:                # (none: a generator opened the block in another thread)
            _open_blocks.exit(self.open.pop())


class _Disabled:
    def __init__(self):
        self._restore = _CallbackStack()

    def __enter__(self):
        self._restore.push(None)

    def __exit__(self, *exc):
        self._restore.pop()
        return False


class profiling_minidynamo:
    """``with profiling_minidynamo(): cProfile...``: frames are watched and compiled as usual
    while a trace or profile function is set, so a profiler measures minidynamo itself (its
    compile, its hits).  Outside such a block they run as CPython runs them while one is set
    (a debugger, coverage or a profiler of the program is owed the program's own lines)."""

    def __enter__(self):
        self._previous = _eval_frame.set_eager_when_traced(False)
        return self

    def __exit__(self, *exc):
        _eval_frame.set_eager_when_traced(self._previous)
        return False


def reset() -> None:
    """Forget every compiled entry and skip mark, and zero the counters."""
    for code in list(codes_with_cache):
        _eval_frame.set_cache(code, None)
    codes_with_cache.clear()
    for code in list(disabled_codes):
        _mark_disabled(code)
    counting.reset()
    sharing = sys.modules.get("minidynamo.tracer.module_sharing")   # loaded with the tracer, if ever
    if sharing is not None:
        sharing.forget()                   # the first module seen at each place: seen again


def cache_entries(fn) -> list:
    """The cache entries of a function's (or module's) code, most recently hit first: each a
    ``CacheEntry`` with fields ``owner``, ``guard_fn``, ``compiled_fn``."""
    if isinstance(fn, _eval_frame.Watched):
        fn = fn.fn
    if isinstance(fn, ModuleCall) and fn.module is not None:
        fn = fn.module
    if isinstance(fn, OptimizedModule):
        fn = fn._orig_mod
    code = _forward_code(fn) if isinstance(fn, torch.nn.Module) else getattr(fn, "__code__", None)
    if code is None:
        raise TypeError(f"{fn!r} has no code object")
    entries = _eval_frame.get_cache(code)
    return list(entries) if isinstance(entries, list) else []
