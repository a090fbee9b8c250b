"""The miss path: what the hook calls when no cache entry of a code object matches.

    callback(func, args) -> trace the frame -> backend(gm, example_inputs) -> guard_fn
                         -> cache entry (owner, guard_fn, compiled_fn), run now and kept

A ``FrameConverter`` is one ``optimize(backend)`` context: it is the hook's callback, and the
owner of the entries it makes, so two contexts never share compiled code.
"""

from __future__ import annotations

import weakref

from . import _eval_frame, config, counting
from .backends import lookup_backend
from .exc import BackendCompilerFailed, MinidynamoError, Unsupported
from .logs import get_logger
from .skipfiles import disabled_codes, skip_reason

log_recompiles = get_logger("recompiles")
log_fallbacks = get_logger("fallbacks")
log_graph = get_logger("graph")
log_guards = get_logger("guards")

# Every code object that has a cache, so that reset() can drop them all.
codes_with_cache: "weakref.WeakSet" = weakref.WeakSet()
# Code that some optimize(...) named explicitly: traced whatever file it lives in, so it is
# never given the global "never watch" mark (torch.nn.Sequential.forward, say).
root_codes: "weakref.WeakSet" = weakref.WeakSet()


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
            entries[:] = [e for e in entries if e[0] is not owner_ref]


def describe(code) -> str:
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"


class FrameConverter:
    """The hook's callback for one ``optimize(backend)`` context."""

    def __init__(self, backend, *, nopython: bool = False, recorder=None):
        self.backend = lookup_backend(backend)
        self.backend_name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
        self.nopython = nopython
        self.recorder = recorder            # explain() listens here
        self.ref = weakref.ref(self)        # what the entries name as their owner
        self._codes: "weakref.WeakSet" = weakref.WeakSet()
        self.roots: "weakref.WeakSet" = weakref.WeakSet()
        weakref.finalize(self, _drop_entries_of, self.ref, self._codes)

    def add_root(self, code) -> None:
        """Trace this code even if it lives where code is normally skipped (torch, stdlib)."""
        self.roots.add(code)
        root_codes.add(code)
        if isinstance(_eval_frame.get_cache(code), str) and code not in disabled_codes:
            _eval_frame.set_cache(code, None)

    # -- the callback --------------------------------------------------------------------
    def __call__(self, func, args):
        code = func.__code__
        reason = skip_reason(code)
        if reason is not None and code not in self.roots:
            if code in root_codes:     # someone else's root: skip it for this context only
                cache_of(code).append((self.ref, None, None))
                self._codes.add(code)
            else:
                _eval_frame.set_cache(code, reason)
                codes_with_cache.add(code)
            return None
        entries = cache_of(code)
        mine = [e for e in entries if e[0] is self.ref]
        self._codes.add(code)
        if mine:
            self._note_recompile(code, mine, func, args)
        if len(mine) >= config.cache_size_limit:
            return self._give_up(entries, code, f"cache_size_limit ({config.cache_size_limit}) reached")
        try:
            entry = self._compile(func, args)
        except Unsupported as e:
            return self._fallback(entries, code, e.reason, e)
        except BackendCompilerFailed as e:
            return self._fallback(entries, code, str(e), e)
        entries.insert(0, entry)
        counting.bump("compiles")
        return entry

    def _compile(self, func, args):
        from .tracer import trace_frame   # the tracer is heavy: import it on the first miss

        try:
            capture = trace_frame(func, args)
        except Unsupported:
            raise
        except MinidynamoError as e:
            raise Unsupported(str(e)) from e
        except Exception as e:  # a tracer bug must not become the user's crash
            raise Unsupported(f"internal tracer error: {type(e).__name__}: {e}") from e
        from guards import UnguardableValue, build_guard_function, compile_reader

        try:
            guard_fn = build_guard_function(capture.guards, capture.frame)
            read_inputs = compile_reader(capture.input_sources, capture.frame, capture.guards)
        except UnguardableValue as e:
            raise Unsupported(f"cannot guard a value the trace relies on: {e}") from e
        if not guard_fn(func, *args):   # the guards must accept the very call they came from
            why = guard_fn.failure_reason(func, *args)
            raise Unsupported(f"guards reject the traced call itself ({why}); refusing to cache")
        try:
            compiled_graph = self.backend(capture.graph_module, capture.example_inputs)
        except Exception as e:
            raise BackendCompilerFailed(self.backend_name, e) from e
        compiled_fn = make_compiled_fn(capture, compiled_graph, read_inputs)
        if log_graph.isEnabledFor(10):
            log_graph.debug("%s\n%s", describe(func.__code__), capture.graph_module.print_readable(print_output=False))
        if log_guards.isEnabledFor(10):
            log_guards.debug("%s\n%s", describe(func.__code__), guard_fn.source)
        if self.recorder is not None:
            self.recorder.on_compile(capture, guard_fn)
        return (self.ref, guard_fn, compiled_fn)

    # -- the slow paths --------------------------------------------------------------------
    def _note_recompile(self, code, mine, func, args):
        guard_fn = mine[0][1]
        why = guard_fn.failure_reason(func, *args) if guard_fn is not None else None
        reason = f"{describe(code)}: {why or 'guard failed'}"
        counting.record_recompile(reason)
        log_recompiles.debug("recompiling %s", reason)
        if self.recorder is not None:
            self.recorder.on_recompile(reason)

    def _fallback(self, entries, code, reason, error):
        if self.nopython:
            raise error
        return self._give_up(entries, code, reason)

    def _give_up(self, entries, code, reason):
        """From now on this context runs the code eagerly: an entry that always matches."""
        full = f"{describe(code)}: {reason}"
        counting.record_fallback(full)
        log_fallbacks.debug("running eagerly: %s", full)
        if self.recorder is not None:
            self.recorder.on_fallback(full)
        entries.append((self.ref, None, None))
        return None


def make_compiled_fn(capture, compiled_graph, read_inputs):
    """The cache entry's body: re-read the graph inputs, run the compiled graph, shape the result.

    Generated with the frame's exact argument names (no ``*args`` packing): it runs on every hit.
    """
    build_output = capture.build_output
    arg_names = ", ".join(["___func", *(f"a{i}" for i in range(len(capture.frame.arg_names)))])
    if getattr(build_output, "needs_frame", False):
        # the frame changed the caller's Python objects: replay that on the new call's objects
        body = f"build_output(compiled_graph(*read_inputs({arg_names})), {arg_names})"
    else:
        build_output = getattr(build_output, "specialized", lambda: build_output)()
        body = f"build_output(compiled_graph(*read_inputs({arg_names})))"
    namespace = {"build_output": build_output, "compiled_graph": compiled_graph, "read_inputs": read_inputs}
    exec(f"def compiled_fn({arg_names}):\n    return {body}\n", namespace)
    compiled_fn = namespace["compiled_fn"]
    # (not the capture: its example inputs are the first call's real tensors, kept alive by it)
    compiled_fn.compiled_graph = compiled_graph
    compiled_fn.read_inputs = read_inputs
    return compiled_fn
