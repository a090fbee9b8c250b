"""The miss path: what the hook calls when no cache entry of a code object matches.

    callback(func, args) -> trace the frame -> backend(gm, example_inputs) -> guard_fn
                         -> CacheEntry(owner, guard_fn, compiled_fn), run now and kept

A ``FrameConverter`` is one ``optimize(backend)`` context: it is the hook's callback, and the
owner of the entries it makes, so two contexts never share compiled code.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import inspect
import linecache
import numbers
import sys
import weakref
from typing import Any, Callable, NamedTuple, Optional

import torch
import torch.fx.graph_module

from . import _eval_frame, compile_warnings, config, counting
from .backends import checking_outputs, is_built_in, lookup_backend
from .code_sets import CodesByIdentity
from .exc import (BackendCompilerFailed, BackendOutputMismatch, BadSetting, MinidynamoError, Unsupported,
                  raised_by_program)
from .logs import get_logger
from .skipfiles import disabled_codes, has_torch_bits, left_to_torch, runs_unwatched, skip_reason, torch_wrapper_codes

log_recompiles = get_logger("recompiles")
log_fallbacks = get_logger("fallbacks")
log_graph = get_logger("graph")
log_guards = get_logger("guards")
log_breaks = get_logger("graph_breaks")
log_output_code = get_logger("output_code")

# Every code object that has a cache, so that reset() can drop them all.
codes_with_cache = CodesByIdentity()
# Code that some optimize(...) named explicitly: traced whatever file it lives in, so it is
# never given the global "never watch" mark (torch.nn.Sequential.forward, say).
root_codes = CodesByIdentity()


class CacheEntry(NamedTuple):
    """One entry of a code object's cache, as the C hook reads it on every call.

    A tuple subclass: the hook reads the fields by position (``_eval_frame.c``), as cheaply
    as from a plain tuple, and Python reads them by name.
    """

    owner: "weakref.ref"                       # the FrameConverter that made it: contexts never share
    guard_fn: Optional[Callable[..., Any]]     # guard_fn(func, *args) -> bool; None: always passes
    compiled_fn: Optional[Callable[..., Any]]  # compiled_fn(func, *args); None: run the frame eagerly


def cache_of(code) -> list:
    """The code object's entry list, created on first use."""
    entries = _eval_frame.get_cache(code)
    if not isinstance(entries, list):
        entries = []
        _eval_frame.set_cache(code, entries)
        codes_with_cache.add(code)
    return entries


def _drop_entries_of(owner_ref, codes) -> None:
    """Runs when a FrameConverter dies: its entries can never run again."""
    for code in list(codes):
        entries = _eval_frame.get_cache(code)
        if isinstance(entries, list):
            entries[:] = [e for e in entries if e.owner is not owner_ref]


def _watch_pins(code, guard_fn) -> None:
    """An object the guard holds weakly (``guards.pin``: a model passed in, a function called)
    can die; then no call passes the guard again.  Its entry is dropped at that moment, so that
    what it holds (the graph, the memo's dicts, the parameters they hold) dies with the object,
    as it would in eager."""
    pins = getattr(guard_fn, "weak_pins", ())
    if pins:
        listener = functools.partial(_drop_entries_with_dead_pins, weakref.ref(code))
        for pin in pins:
            pin.listeners.append(listener)


def _drop_entries_with_dead_pins(code_ref) -> None:
    code = code_ref()
    entries = _eval_frame.get_cache(code) if code is not None else None
    if not isinstance(entries, list):
        return
    dead = [e for e in entries if any(pin() is None for pin in getattr(e.guard_fn, "weak_pins", ()))]
    if dead:
        entries[:] = [e for e in entries if not any(e is d for d in dead)]
        for entry in dead:
            release = getattr(entry.guard_fn, "release", None)
            if release is not None:      # (a collection may have cleared the guard's attributes already)
                release()


def describe(code) -> str:
    # the last part of the qualified name: a resume function's co_name is its frame's own
    # (tracebacks show that), its qualname says which piece it is (``f__resume_at_12``)
    return f"{code.co_qualname.rpartition('.')[2]} ({code.co_filename}:{code.co_firstlineno})"


def _without_frames(error: BaseException) -> BaseException:
    """``error`` and the errors it was raised from, without their tracebacks.  The tracer's
    frames in them hold the call's arguments and what the trace read (the program's objects);
    kept, they would live until the exception does, which a reference cycle can make "until the
    next collection": a ``del`` in the frame then run eagerly would not free its object."""
    seen, todo = set(), [error]
    while todo:
        link = todo.pop()
        if link is None or id(link) in seen:
            continue
        seen.add(id(link))
        link.__traceback__ = None
        todo += [link.__cause__, link.__context__]
    return error


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector off while a frame compiles.  A compile makes a few hundred
    thousand objects that live until it ends (trackers, FX nodes, guard plans, the backend's
    trace); with the collector on, they survive young collections into the oldest generation and
    set off a full collection of the whole heap (0.2-0.3 s on a first call with torch and
    torch_xla loaded), after which reference counting frees nearly all of them anyway.  Paused,
    they never get there; the few cycles a compile leaves wait for the program's next
    collection.  Restored only by the outermost pause that found it on (compiles may nest)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class FrameConverter:
    """The hook's callback for one ``optimize(backend)`` context."""

    def __init__(self, backend, *, nopython: bool = False, recorder=None):
        self.backend = lookup_backend(backend)
        self._made_with = (backend, nopython)
        self.backend_name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
        self.nopython = nopython
        self.recorder = recorder            # explain() listens here
        self.ref = weakref.ref(self)        # what the entries name as their owner
        self._codes = CodesByIdentity()   # equal codes (fx's generated forwards) are still distinct
        self.roots = CodesByIdentity()
        weakref.finalize(self, _drop_entries_of, self.ref, self._codes)

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        """A new context with a copy of the backend.  (A field-by-field copy would keep
        ``ref``, the original's: its entries would name the original as owner, never be found,
        and each call would recompile, then drop the original's entries at the limit.)"""
        backend, nopython = self._made_with
        return FrameConverter(copy.deepcopy(backend, memo), nopython=nopython)

    def __reduce__(self):
        """Pickled as it was made: a fresh context once loaded (entries and weak references
        do not travel; a backend given as a callable must itself be picklable)."""
        return (FrameConverter._remade, self._made_with)

    @staticmethod
    def _remade(backend, nopython):
        return FrameConverter(backend, nopython=nopython)

    def add_root(self, code) -> None:
        """Trace this code even if it lives where code is normally skipped (torch, stdlib)."""
        self.roots.add(code)
        root_codes.add(code)
        if isinstance(_eval_frame.get_cache(code), str) and code not in disabled_codes:
            _eval_frame.set_cache(code, None)

    # -- the callback --------------------------------------------------------------------
    def __call__(self, func, args):
        """The hook's miss callback: an entry to run now, None (run the frame as it is) or
        ``_eval_frame.RUN_UNWATCHED``.  An error minidynamo did not mean to raise (its own bug, or its own
        Python meeting a program's patch of ``builtins``, the frame may be a resume function
        halfway through the program's ``try``) must not stop the frame: it runs unwatched, as
        eager, and the reason is recorded."""
        try:
            return self._on_miss(func, args)
        except MinidynamoError:
            raise                   # on purpose: fullgraph's Unsupported, a bad setting
        except Exception as error:  # noqa: BLE001
            if self.nopython:
                raise
            try:
                self._note_fallback(f"{describe(func.__code__)}: internal error in the frame callback: "
                                    f"{type(error).__name__}: {error}")
            except Exception:       # noqa: BLE001  (the same cause may fail the note itself)
                pass
            return _eval_frame.RUN_UNWATCHED

    def _on_miss(self, func, args):
        code = func.__code__
        if code in torch_wrapper_codes():     # (never marked skipped: each call is asked)
            if left_to_torch(func):
                counting.bump("frames_left_to_torch")
                return _eval_frame.RUN_UNWATCHED
            return None
        reason = skip_reason(code)
        if reason is not None and code not in self.roots and runs_unwatched(code):
            counting.bump("frames_left_unwatched")       # (asked on each call: never marked skipped)
            return _eval_frame.RUN_UNWATCHED
        if reason is not None and code not in self.roots:
            if code in root_codes:     # someone else's root: skip it for this context only
                cache_of(code).append(CacheEntry(self.ref, None, None))
                self._codes.add(code)
            else:
                _eval_frame.set_cache(code, reason)
                codes_with_cache.add(code)
            return None
        entries = cache_of(code)
        mine = [e for e in entries if e.owner is self.ref]
        self._codes.add(code)
        if not mine and code not in self.roots and not has_torch_bits(func, args):
            # nothing of torch in the frame: this context runs the code as it is from now on,
            # as torch.compile does (not a fallback: there was nothing to capture)
            counting.bump("frames_without_torch")
            entries.append(CacheEntry(self.ref, None, None))
            return None
        if mine:
            self._note_recompile(code, mine, func, args)
        if len(mine) >= _cache_size_limit():
            # the frame keeps changing what its guards check: its entries would only be checked
            # and missed on every later call; from now on it costs eager plus the hook
            entries[:] = [e for e in entries if e.owner is not self.ref]
            return self._give_up(entries, code, f"cache_size_limit ({config.cache_size_limit}) reached")
        # (read before any handler of ours runs: the trace and the guards see the caller's)
        self.caller_handling = sys.exc_info()[1] is not None
        try:
            # Nothing a compile runs is the program's own run (ops on meta values, trial traces):
            # what warns there is not shown (the call's real run shows it), though a filter that
            # makes a warning an error still raises, and the frame then falls back to eager.
            with compile_warnings.muted(), collector_paused():
                whole = None
                try:
                    entry = self._compile(func, args)
                except Unsupported as e:
                    whole = e if self.nopython else _without_frames(e)
                if whole is not None:     # (outside the handler: the break's trace and its guard
                    entry = self._compile_break(func, args, whole)    # check see the caller's state)
        except Unsupported as e:
            return self._fallback(entries, code, e.reason, e if self.nopython else _without_frames(e), func, args)
        except BackendCompilerFailed as e:
            return self._fallback(entries, code, str(e), e)
        entries.insert(0, entry)
        _watch_pins(code, entry.guard_fn)
        counting.bump("compiles")
        return entry

    def _compile(self, func, args, stop=None):
        from .tracer import trace_frame   # the tracer is heavy: import it on the first miss

        fx_mark = _fx_mark()
        try:
            return self._compile_traced(func, args, trace_frame, fx_mark, stop)
        except BaseException:
            _forget_fx_sources(fx_sources_since(fx_mark))    # nothing of this compile survives
            raise

    def _compile_break(self, func, args, error):
        from .tracer.variables.ctx_managers import RAW_SWITCHES

        RAW_SWITCHES.met = False
        try:
            return self._compile_break_at(func, args, error)
        except Unsupported as failed:
            if not RAW_SWITCHES.met or RAW_SWITCHES.refused:
                raise
            # a grad mode the program switched itself, which no break point let the traced part
            # end in: trace again with each switch a graph break (it runs eagerly)
            RAW_SWITCHES.refused = True
            try:
                try:
                    return self._compile(func, args)
                except Unsupported as whole:
                    return self._compile_break_at(func, args, whole)
            except Unsupported:
                raise failed from None
            finally:
                RAW_SWITCHES.refused = False

    def _compile_break_at(self, func, args, error):
        """The frame could not be traced whole.  If the root instruction that failed may be
        run eagerly (tracer/graph_break.py), compile a graph break there: trace again, stop
        right before it, and make an entry that runs the graph, the instruction, and a resume
        function.  Raises Unsupported (the fallback's reason) otherwise."""
        from .breaks.instructions import BREAKABLE
        from .tracer.graph_break import refusal
        from .tracer.translator import decoded

        where = getattr(error, "break_at", None)
        if where is None or self.nopython:
            raise error
        code = func.__code__
        while True:
            count, index = where
            if decoded(code)[0][index].name not in BREAKABLE:
                raise error
            why = refusal(code, index, func.__globals__, func.__builtins__)
            if why is not None:
                raise Unsupported(f"{error.reason}; no graph break: {why}") from error
            try:
                return self._compile(func, args, stop=(count, index, error.reason))
            except Unsupported as e:
                earlier = getattr(e, "break_at", None)
                if earlier is None or earlier[0] >= count:
                    raise Unsupported(f"{error.reason}; the graph break failed: {e.reason}") from e
                # the traced part itself must end earlier (a grad mode switched by the program and
                # not switched back before the break: capture._finish_trace): break there instead
                error, where = e, earlier

    def _compile_traced(self, func, args, trace_frame, fx_mark, stop=None):
        try:
            capture = trace_frame(func, args, stop[0] if stop else None, self.caller_handling)
        except Unsupported:
            raise
        except MinidynamoError as e:
            raise Unsupported(str(e)) from e
        except Exception as e:  # a tracer bug must not become the user's crash
            raise Unsupported(f"internal tracer error: {type(e).__name__}: {e}") from e
        state = capture.break_state
        if stop is not None and (state is None or state.index != stop[1]):
            raise Unsupported("the second trace did not reach the instruction the first one stopped at")
        if state is not None:
            state.reason, state.grad_enabled = stop[2], capture.grad_enabled
        from guards import UnguardableValue, build_guard_function, compile_reader

        has_ops = graph_has_ops(capture.graph_module)
        python_only = state is None and not has_ops      # its entry reads no inputs: nothing to hand off
        try:
            guard_fn = build_guard_function(capture.guards, capture.frame)
            read_inputs = compile_reader(capture.input_sources, capture.frame, capture.guards,
                                         None if python_only else guard_fn)
        except UnguardableValue as e:
            raise Unsupported(f"cannot guard a value the trace relies on: {e}") from e
        except Exception as e:  # a guard-building bug must not become the user's crash
            raise Unsupported(f"internal guard error: {type(e).__name__}: {e}") from e
        if not guard_fn(func, *args):   # the guards must accept the very call they came from
            why = guard_fn.failure_reason(func, *args)
            raise Unsupported(f"guards reject the traced call itself ({why}); refusing to cache")
        getattr(guard_fn, "drop_kept", lambda: None)()   # no reader follows this check
        try:
            # a graph with no operations is not worth a backend compile: fx runs it as it is
            compiled_graph = self.backend(capture.graph_module, capture.example_inputs) if has_ops \
                else capture.graph_module.forward      # (not the module: global module hooks would see it)
            if not callable(compiled_graph):    # else every call would fail inside and rerun eagerly
                raise TypeError(f"a backend must return a callable, got {type(compiled_graph).__name__}")
        except Exception as e:
            raise BackendCompilerFailed(self.backend_name, e) from e
        if has_ops and not is_built_in(self.backend):
            compiled_graph = checking_outputs(compiled_graph, self.backend_name, graph_output_specs(capture.graph_module))
        if capture.rewind_devices is not None and has_ops:
            compiled_graph = _rewinding(compiled_graph, capture.rewind_devices)
        if python_only:
            compiled_fn = make_python_only_fn(read_inputs)
        elif state is None:
            compiled_fn = make_compiled_fn(capture, compiled_graph, read_inputs)
        else:
            compiled_fn = self._break_fn(func, capture, compiled_graph, read_inputs)
        forget_fx_sources_with(compiled_fn, fx_sources_since(fx_mark))
        if log_graph.isEnabledFor(10) and has_ops:
            log_graph.debug("%s\n%s", describe(func.__code__), capture.graph_module.print_readable(print_output=False))
        if log_guards.isEnabledFor(10):
            log_guards.debug("%s\n%s", describe(func.__code__), guard_fn.source)
        if log_output_code.isEnabledFor(10) and state is None:     # a break logs its own (_break_fn)
            log_output_code.debug("%s\n%s\n%s", describe(func.__code__), read_inputs.source, compiled_fn.source)
        if self.recorder is not None:
            self.recorder.on_compile(capture, guard_fn, compiled_fn, has_ops=has_ops)
            if state is not None:
                self.recorder.on_break(state)
        return CacheEntry(self.ref, guard_fn, compiled_fn)

    def _break_fn(self, func, capture, compiled_graph, read_inputs):
        from .breaks.entry import make_break_fn, render

        state = capture.break_state
        try:
            compiled_fn = make_break_fn(capture, compiled_graph, read_inputs, _graph_raised_handler(capture), rerun_frame)
        except Exception as e:      # a code generation bug must not become the user's crash
            raise Unsupported(f"internal error generating the graph break: {type(e).__name__}: {e}") from e
        if func.__code__ in self.roots:        # traced wherever it lives: so is the rest of it
            for code in compiled_fn.resume_codes:
                self.add_root(code)
        counting.record_break(f"{describe(func.__code__)}: {state.inst.name} at {state.where}: {state.reason}")
        log_breaks.debug("graph break in %s at %s (%s): %s", func.__code__.co_qualname, state.where,
                         state.inst.name, state.reason)
        if log_output_code.isEnabledFor(10):
            log_output_code.debug("%s\n%s", describe(func.__code__), render(compiled_fn))
        return compiled_fn

    # -- the slow paths --------------------------------------------------------------------
    def _note_recompile(self, code, mine, func, args):
        guard_fn = mine[0].guard_fn
        why = guard_fn.failure_reason(func, *args) if guard_fn is not None else None
        reason = f"{describe(code)}: {why or 'guard failed'}"
        counting.record_recompile(reason)
        log_recompiles.debug("recompiling %s", reason)
        if self.recorder is not None:
            self.recorder.on_recompile(reason)

    def _fallback(self, entries, code, reason, error, func=None, args=()):
        if self.nopython:
            raise error
        path_guard = self._path_guard(error, func, args)
        if path_guard is None:
            return self._give_up(entries, code, reason)
        # the program raised on these values: run eagerly while they take the same path
        self._note_fallback(f"{describe(code)}: {reason}")
        entries.insert(0, CacheEntry(self.ref, path_guard, None))
        _watch_pins(code, path_guard)
        return None

    @staticmethod
    def _path_guard(error, func, args):
        """A guard passing the calls that take the traced path to the raise (exc.ProgramRaises),
        or None when there is none (the frame then runs eagerly from now on)."""
        raising = raised_by_program(error)
        if raising is None or raising.path_guards is None or func is None:
            return None
        from guards import build_guard_function

        try:
            guard_fn = build_guard_function(*raising.path_guards)
            if not guard_fn(func, *args):
                return None
        except Exception:   # noqa: BLE001 (an unguardable read: give up on the frame as before)
            return None
        getattr(guard_fn, "drop_kept", lambda: None)()
        return guard_fn

    def _note_fallback(self, full):
        counting.record_fallback(full)
        log_fallbacks.debug("running eagerly: %s", full)
        if self.recorder is not None:
            self.recorder.on_fallback(full)

    def _give_up(self, entries, code, reason):
        """From now on this context runs the code eagerly: an entry that always matches."""
        self._note_fallback(f"{describe(code)}: {reason}")
        entries.append(CacheEntry(self.ref, None, None))
        return None


def _cache_size_limit() -> int:
    """``config.cache_size_limit``, checked: a bad setting fails with its name, not inside a compare."""
    limit = config.cache_size_limit
    if not isinstance(limit, numbers.Real):     # an int; float("inf") means no limit
        raise BadSetting(f"minidynamo.config.cache_size_limit must be a number, got {limit!r}")
    return limit


def graph_output_specs(gm) -> list:
    """Per graph output, the (dtype, shape) of the tensor it is (None where it is no tensor)."""
    (output,) = [node for node in gm.graph.nodes if node.op == "output"]
    value = output.args[0]
    specs = []
    for item in value if isinstance(value, (tuple, list)) else [value]:
        example = item.meta.get("example_value") if isinstance(item, torch.fx.Node) else None
        specs.append((example.dtype, tuple(example.shape)) if isinstance(example, torch.Tensor) else None)
    return specs


def graph_has_ops(gm) -> bool:
    return any(node.op in ("call_function", "call_method", "call_module") for node in gm.graph.nodes)


def make_compiled_fn(capture, compiled_graph, read_inputs):
    """The cache entry's body: re-read the graph inputs, run the compiled graph, shape the result.

    Generated with the frame's exact argument names (no ``*args`` packing): it runs on every hit.

    If the graph raises, ``graph_raised`` puts back the state it switched (autocast blocks,
    grad mode) and either answers "re-run the frame" (the graph is free to run twice: the
    original function is then called eagerly, still unwatched because the hook is paused while
    an entry runs, so Python raises the exception with exactly eager's side effects) or lets
    the graph's exception through (see the comment above ``capture.graph_effects``).  The
    ``try`` costs nothing on the hit path.
    """
    build_output = capture.build_output
    arg_names = ", ".join(["___func", *(f"a{i}" for i in range(len(capture.frame.arg_names)))])
    if getattr(build_output, "needs_frame", False):
        # the frame changed the caller's Python objects: replay that on the new call's objects
        result = f"build_output(___outputs, {arg_names})"
    else:
        build_output = getattr(build_output, "specialized", lambda: build_output)()
        result = "build_output(___outputs)"
    namespace = {"build_output": build_output, "compiled_graph": compiled_graph, "read_inputs": read_inputs,
                 "graph_raised": _graph_raised_handler(capture), "rerun": rerun_frame}
    source = (f"def compiled_fn({arg_names}):\n"
              f"    try:\n"
              f"        ___outputs = compiled_graph(*read_inputs({arg_names}))\n"
              f"    except BaseException as ___error:\n"
              f"        if not graph_raised(___error):\n"
              f"            raise\n"
              f"    else:\n"
              f"        return {result}\n"
              f"    return rerun({arg_names})\n")
    exec(source, namespace)
    compiled_fn = namespace.pop("compiled_fn")     # no cycle through its globals: dies with its entry
    # (not the capture: its example inputs are the first call's real tensors, kept alive by it)
    # A backend whose compiled graph offers the same body in C (the XLA bridge's replay) runs it
    # with no Python frame; the generated function stays its readable twin.
    entry_fn = getattr(compiled_graph, "cache_entry_fn", None)
    if entry_fn is not None and config.native_cache_entry and not getattr(build_output, "needs_frame", False):
        python_fn = compiled_fn
        compiled_fn = entry_fn(read_inputs, build_output, namespace["graph_raised"], rerun_frame,
                               guard_promises(capture, read_inputs))
        compiled_fn.python = python_fn
        source = f"# Runs in C ({type(compiled_fn).__module__}.{type(compiled_fn).__name__}), like:\n" + source
    compiled_fn.compiled_graph = compiled_graph
    compiled_fn.read_inputs = read_inputs
    compiled_fn.source = source         # MINIDYNAMO_LOG=output_code, explain().compiled_fn_sources
    return compiled_fn


def guard_promises(capture, read_inputs):
    """Per graph input, the (dtype, device, shape) the entry's guard checks of it, when the
    reader hands over the very values that guard checked (a guard's HandOff: its ``handed`` flag
    says so per call); None otherwise.  A C entry body then need not check those again."""
    if not hasattr(read_inputs, "handed"):
        return None
    from guards.guard import TENSOR_MATCH

    specs = {guard.source: guard.expected for guard in capture.guards if guard.kind == TENSOR_MATCH}
    promised = [specs.get(source) for source in capture.input_sources]
    return [None if spec is None else (spec.dtype, spec.device, tuple(spec.shape)) for spec in promised]


def _rewinding(compiled_graph, devices):
    """The graph, with the generators it draws from rewound when it raises (so that the eager
    re-run of the frame draws eager's numbers: ``random_rewind.py``)."""
    from .random_rewind import RewindOnRaise, generators_of

    generators = generators_of(devices)
    if generators is None:
        raise Unsupported(f"the graph draws random numbers on {sorted(map(str, devices))}, whose generators "
                          "cannot be rewound for a re-run if it raises")
    return RewindOnRaise(compiled_graph, generators)


def make_python_only_fn(read_inputs):
    """The entry of a frame whose trace made no tensor operation: the frame itself is the
    cheapest exact replay of Python work (its side effects, its return value), so a hit calls
    the original function (unwatched: the hook is paused while an entry runs) instead of an empty
    graph plus the rebuilding of its outputs.  The guards still decide which path was traced."""
    def compiled_fn(func, *slots):
        return rerun_frame(func, *slots)

    compiled_fn.source = "def compiled_fn(___func, *slots):\n    return rerun(___func, *slots)   # no tensor operation: run the frame itself\n"
    compiled_fn.read_inputs = read_inputs
    return compiled_fn


def _graph_raised_handler(capture):
    """``graph_raised(error) -> bool``: restore what the graph switched; True: re-run the frame."""
    from .tracer.variables.ctx_managers import unwind_open_blocks

    grad_enabled = capture.grad_enabled
    rerun = capture.graph_effects is None
    set_grad_enabled = torch._C._set_grad_enabled

    def graph_raised(error):
        try:
            unwind_open_blocks(error)
        finally:
            set_grad_enabled(grad_enabled)
        if rerun and isinstance(error, Exception) and not isinstance(error, BackendOutputMismatch) \
                and not caller_code_ran_inside():
            counting.bump("graph_errors_rerun")
            return True
        return False

    return graph_raised


def caller_code_ran_inside() -> bool:
    """Whether the caller's Python may have run inside the graph, called by torch as its ops
    ran: saved-tensor hooks (each op that saves a tensor for backward packs it; the non-reentrant
    ``torch.utils.checkpoint`` stops its recomputation by raising from one), a torch function
    mode or a dispatch mode.  Their effects (and the error one of them raised) are the caller's:
    running the frame again would run them twice."""
    return (torch._C._autograd._top_saved_tensors_default_hooks(False) is not None
            or torch._C._len_torch_dispatch_stack() != 0 or torch._C._is_torch_function_mode_enabled())


def rerun_frame(func, *slots):
    """Call the original function with the frame's argument slots (positionals, keyword-only,
    ``*args``, ``**kwargs``, as the hook passes them).  Called from an entry, so the hook is
    paused: the frame and everything it calls run eagerly."""
    code = func.__code__
    n = code.co_argcount
    n_kw = code.co_kwonlyargcount
    args = slots[:n]
    kwargs = dict(zip(code.co_varnames[n:n + n_kw], slots[n:n + n_kw]))
    i = n + n_kw
    if code.co_flags & inspect.CO_VARARGS:
        args += tuple(slots[i])
        i += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(slots[i])
    return func(*args, **kwargs)


# -- sources torch.fx registers for the graph modules a compile makes -----------------------------
# torch.fx compiles each GraphModule's code under a key "<eval_with_key>.N" kept forever in its
# loader's ``eval_cache`` and in ``linecache``.  Those a compile created die with its entry.
_fx_loader = getattr(torch.fx.graph_module, "_loader", None)   # torch's private registry


def _fx_mark() -> int:
    return getattr(_fx_loader, "next_id", 0)


def fx_sources_since(mark: int) -> list:
    if _fx_loader is None or _fx_mark() == mark:
        return []
    made = range(mark, _fx_loader.next_id)
    keys = []
    for key in list(_fx_loader.eval_cache):
        number = key[len("<eval_with_key>."):].split(" ", 1)[0]
        if key.startswith("<eval_with_key>.") and number.isdigit() and int(number) in made:
            keys.append(key)
    return keys


def forget_fx_sources_with(owner, keys) -> None:
    if keys:
        weakref.finalize(owner, _forget_fx_sources, keys).atexit = False


def _forget_fx_sources(keys) -> None:
    for key in keys:
        getattr(_fx_loader, "eval_cache", {}).pop(key, None)
        linecache.cache.pop(key, None)
