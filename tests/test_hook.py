"""The C frame hook's protocol, tested with hand-made cache entries (no tracer involved).

A callback is called on a miss as callback(func, args); it may put an entry
(weakref(owner), guard_fn, compiled_fn) into the code object's cache and return it.
"""

import gc
import sys
import threading
import weakref

import pytest

from minidynamo import _eval_frame as hook


class Recorder:
    """A callback that records each miss and, for functions named in `compile`, caches an entry."""

    def __init__(self, compile=None, guard=None):
        self.misses = []
        self.compile = compile or {}
        self.guard = guard
        self.ref = weakref.ref(self)

    def __call__(self, func, args):
        if func.__name__ == "__exit__":      # the `with watching(...)` block's own exit
            return None
        self.misses.append((func.__name__, args))
        body = self.compile.get(func.__name__)
        if body is None:
            return None
        entries = hook.get_cache(func.__code__)
        if not isinstance(entries, list):
            entries = []
            hook.set_cache(func.__code__, entries)
        entry = (self.ref, self.guard, body)
        entries.insert(0, entry)
        return entry


class watching:
    def __init__(self, callback):
        self.callback = callback

    def __enter__(self):
        self.previous = hook.set_callback(self.callback)
        return self.callback

    def __exit__(self, *exc):
        hook.set_callback(self.previous)


def clear(*fns):
    for fn in fns:
        hook.set_cache(fn.__code__, None)


def add(x, y=10):
    return x + y


def test_hook_is_installed_only_while_a_callback_is_set():
    assert not hook.hook_installed()
    with watching(Recorder()):
        assert hook.hook_installed()
    assert not hook.hook_installed()


def test_miss_calls_the_callback_with_function_and_argument_slots():
    rec = Recorder()
    with watching(rec):
        assert add(1) == 11
    assert ("add", (1, 10)) in rec.misses  # defaults already applied


def test_hit_runs_compiled_fn_instead_of_the_frame():
    clear(add)
    rec = Recorder(compile={"add": lambda func, x, y: ("compiled", func.__name__, x, y)})
    with watching(rec):
        assert add(1, 2) == ("compiled", "add", 1, 2)   # miss: the new entry runs at once
        assert add(3) == ("compiled", "add", 3, 10)     # hit: no callback
    assert len(rec.misses) == 1
    clear(add)


@pytest.mark.parametrize("install", [sys.settrace, sys.setprofile], ids=["settrace", "setprofile"])
def test_a_trace_or_profile_function_sees_the_program_run_eagerly(install):
    """A debugger, coverage or cProfile is owed the program's own lines and calls (CPython's
    test_trace and test_cprofile): while one is set, frames run as CPython runs them, with no
    callback (no compile work to see) and no compiled code."""
    clear(add)
    rec = Recorder(compile={"add": lambda func, x, y: "compiled"})
    seen = []

    def tool(frame, event, arg):
        seen.append((frame.f_code.co_name, event))
        return tool

    with watching(rec):
        assert add(1) == "compiled"            # cached now
        install(tool)
        try:
            result = add(2)
        finally:
            install(None)
        assert add(3) == "compiled"            # the tool gone: the cache again
    assert result == 12 and ("add", "call") in seen
    assert [name for name, _ in rec.misses] == ["add"]
    clear(add)


def test_a_profiler_of_minidynamo_itself_sees_compiled_code_run():
    """``eval_frame.profiling_minidynamo`` (bench/first_call.py --profile): the rule above off."""
    from minidynamo.eval_frame import profiling_minidynamo

    clear(add)
    rec = Recorder(compile={"add": lambda func, x, y: "compiled"})
    with watching(rec), profiling_minidynamo():
        sys.setprofile(lambda frame, event, arg: None)
        try:
            assert add(2) == "compiled"
        finally:
            sys.setprofile(None)
    assert hook.set_eager_when_traced(True) is True      # the block put the default back
    clear(add)


def test_failing_guard_is_a_miss_and_passing_entry_moves_to_front():
    clear(add)
    guards = {}

    def compile_for_sign(func, args):
        sign = args[0] >= 0
        entry = (rec.ref, lambda f, x, y, sign=sign: (x >= 0) == sign, lambda f, x, y, sign=sign: sign)
        entries = hook.get_cache(func.__code__)
        if not isinstance(entries, list):
            entries = []
            hook.set_cache(func.__code__, entries)
        entries.insert(0, entry)
        guards[sign] = entry
        return entry

    rec = Recorder()
    rec.compile = {"add": True}
    rec.__class__ = type("R", (Recorder,), {"__call__": lambda self, f, a: compile_for_sign(f, a) if f.__name__ == "add" else None})
    with watching(rec):
        assert add(1) is True
        assert add(-1) is False
        assert hook.get_cache(add.__code__)[0] is guards[False]
        assert add(5) is True                   # hit on the second entry ...
        assert hook.get_cache(add.__code__)[0] is guards[True]   # ... which moves to the front
    assert len(guards) == 2
    clear(add)


def test_entries_of_another_owner_are_ignored():
    clear(add)
    first = Recorder(compile={"add": lambda f, x, y: "first"})
    second = Recorder(compile={"add": lambda f, x, y: "second"})
    with watching(first):
        assert add(1) == "first"
    with watching(second):
        assert add(1) == "second"
    with watching(first):
        assert add(1) == "first"
    assert len(first.misses) == 1 and len(second.misses) == 1
    clear(add)


def test_entry_with_none_compiled_fn_runs_the_frame_normally():
    clear(add)
    rec = Recorder(compile={"add": None})
    rec.compile = {}
    with watching(rec):
        hook.set_cache(add.__code__, [(rec.ref, None, None)])
        assert add(1, 2) == 3
    assert rec.misses == []
    clear(add)


def test_code_marked_with_a_reason_is_never_given_to_the_callback():
    rec = Recorder()
    hook.set_cache(add.__code__, "skipped in this test")
    with watching(rec):
        assert add(2, 3) == 5
    assert rec.misses == []
    assert hook.get_cache(add.__code__) == "skipped in this test"
    clear(add)


def test_callback_errors_reach_the_caller():
    def broken(func, args):
        if func is add:
            raise RuntimeError("callback failed")

    with watching(broken):
        with pytest.raises(RuntimeError, match="callback failed"):
            add(1)


def test_callback_must_return_an_entry_or_none():
    with watching(lambda func, args: 42 if func is add else None):
        with pytest.raises(TypeError, match="must return None"):
            add(1)


def test_generators_and_frames_inside_the_callback_are_not_watched():
    seen = []

    def gen(n):
        yield from range(n)

    def callback(func, args):
        seen.append(func.__name__)
        add(1, 1)           # runs while the hook is paused: not seen
        return None

    with watching(callback):
        assert list(gen(3)) == [0, 1, 2]
    assert "gen" not in seen and "add" not in seen


def _kw(a, b=2, *rest, c, d=4, **extra):
    return a, b, rest, c, d, extra


class Point:
    def __init__(self, x):
        self.x = x

    def shifted(self, dx=1):
        return Point(self.x + dx)

    @property
    def double(self):
        return 2 * self.x


def _fib(n):
    return n if n < 2 else _fib(n - 1) + _fib(n - 2)


def _make_counter():
    count = 0

    def bump(by=1):
        nonlocal count
        count += by
        return count

    return bump


def test_python_semantics_unchanged_under_the_hook():
    rec = Recorder()
    with watching(rec):
        assert _kw(1, c=3) == (1, 2, (), 3, 4, {})
        assert _kw(1, 5, 6, 7, c=3, z=9) == (1, 5, (6, 7), 3, 4, {"z": 9})
        assert Point(1).shifted().shifted(dx=3).x == 5
        assert Point(4).double == 8
        assert _fib(15) == 610
        bump = _make_counter()
        assert [bump(), bump(2), bump()] == [1, 3, 4]
        assert sorted([3, 1, 2], key=lambda v: -v) == [3, 2, 1]
    seen = {name for name, _ in rec.misses}
    assert {"_kw", "shifted", "double", "_fib", "bump"} <= seen
    assert ("_kw", (1, 5, 3, 4, (6, 7), {"z": 9})) in rec.misses   # the slot layout


def test_callback_is_per_thread():
    rec = Recorder()
    other_thread_result = []

    def add_in_worker(x, y):
        return x + y

    def worker():
        other_thread_result.append(hook.get_callback())
        add_in_worker(1, 1)

    with watching(rec):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    assert other_thread_result == [None]
    assert all(name != "add_in_worker" for name, _ in rec.misses)
    assert ("worker", ()) not in rec.misses


def test_million_hits_leak_neither_memory_nor_references():
    psutil = pytest.importorskip("psutil")
    clear(add)
    rec = Recorder(compile={"add": lambda f, x, y: x}, guard=lambda f, x, y: True)
    arg = object()
    process = psutil.Process()

    def run(n):
        for _ in range(n):
            add(arg, arg)

    with watching(rec):
        run(10_000)
        gc.collect()
        refs_before, rss_before = sys.getrefcount(arg), process.memory_info().rss
        run(1_000_000)
        gc.collect()
        refs_after, rss_after = sys.getrefcount(arg), process.memory_info().rss
    assert refs_after == refs_before
    assert rss_after - rss_before < 2 * 1024 * 1024
    assert [name for name, _ in rec.misses].count("add") == 1
    clear(add)


def test_set_cache_rejects_non_code():
    with pytest.raises(TypeError, match="code object"):
        hook.get_cache(add)


def test_replacing_a_cache_frees_the_old_one_after_the_new_one_is_in_place():
    """Freeing the old entries may run Python code that reads this very cache (a weakly pinned
    object dies with an entry's guard, and its listener looks for entries to drop: fuzz seed 5026
    i129, under ``minidynamo.reset()``).  CPython's ``_PyCode_SetExtra`` frees the old value before
    it stores the new one; read then, the cache was a list being freed: a crash."""
    def owner():
        pass

    code, seen = owner.__code__, []

    class ReadsTheCacheWhenFreed:
        def __del__(self):
            seen.append(hook.get_cache(code))

    hook.set_cache(code, [ReadsTheCacheWhenFreed()])
    hook.set_cache(code, None)
    assert seen == [None]
    replacement = ["new"]
    hook.set_cache(code, [ReadsTheCacheWhenFreed()])
    hook.set_cache(code, replacement)
    assert seen[-1] is replacement
    hook.set_cache(code, None)
