"""Soundness at run time, beyond the guards:

- deep recursion through the frame hook never crashes (it behaves as eager, or raises
  RecursionError where Python would);
- ``reset()`` + compile, repeated, does not grow ``linecache`` or torch.fx's source registry;
- when the compiled graph raises, the program's state is exactly eager's: the Python side
  effects that precede the raising op are visible, later ones are not, grad mode / autocast
  blocks are left as the with-statements would leave them, and the exception is eager's.

Crash-prone cases run in a subprocess, so a segfault is a failing test, not a dead pytest.
"""

import gc
import linecache
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import minidynamo
from minidynamo.tracer.variables import ctx_managers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def fresh_caches():
    minidynamo.reset()
    yield
    minidynamo.reset()


# -- (1) deep recursion through the hook -------------------------------------------------------
PRELUDE = """
import sys, threading
import torch, minidynamo
from minidynamo import _eval_frame as hook
sys.setrecursionlimit(60000)

def deep(n):
    return 0 if n == 0 else 1 + deep(n - 1)

def forever(n):
    return forever(n + 1)
"""


def run_script(body: str, timeout: int = 300) -> str:
    script = PRELUDE + textwrap.dedent(body)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, f"exit code {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def test_deep_recursion_with_the_hook_merely_installed():
    out = run_script("""
        previous = hook.set_callback(lambda func, args: None)
        try:
            print(deep(20000))
        finally:
            hook.set_callback(previous)
        print("installed", hook.hook_installed())
    """)
    assert out.split() == ["20000", "installed", "False"]


def test_deep_recursion_under_an_optimized_function():
    out = run_script("""
        @minidynamo.optimize("eager")
        def f(x):
            return x + deep(20000)
        print(int(f(torch.zeros(())).item()), int(f(torch.ones(())).item()))
    """)
    assert out.split() == ["20000", "20001"]


def test_optimized_recursive_function_recursing_deeply():
    out = run_script("""
        opt = minidynamo.optimize("eager")(deep)
        print(opt(20000))
    """)
    assert out.split() == ["20000"]


def test_unbounded_recursion_under_the_hook_raises_recursion_error():
    out = run_script("""
        @minidynamo.optimize("eager")
        def f(x):
            return x + forever(0)
        try:
            f(torch.ones(()))
        except RecursionError:
            print("RecursionError")
        print(deep(10))           # and the program goes on
    """)
    assert out.split() == ["RecursionError", "10"]


def test_deep_recursion_in_threads_with_small_and_large_stacks():
    out = run_script("""
        results = []
        def work():
            try:
                results.append(deep(20000))
            except RecursionError:
                results.append("RecursionError")
        previous = hook.set_callback(lambda func, args: None)
        for size in (256 * 1024, 1 << 20, 64 << 20):
            threading.stack_size(size)
            t = threading.Thread(target=work)
            t.start()
            t.join()
        hook.set_callback(previous)
        print(*results)
    """)
    assert out.split() == ["20000", "20000", "20000"]


# -- (2) registries do not grow with reset() + compile ---------------------------------------------
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x)) + 1


def _compile_some(net, x):
    minidynamo.reset()
    opt = minidynamo.optimize("eager")(net)
    opt(x)
    opt(x)

    def g(a, b):
        return a * b + 1
    minidynamo.optimize("eager")(g)(x, x)


def _registry_sizes():
    from torch.fx.graph_module import _loader

    gc.collect()
    minidynamo_lines = [k for k in linecache.cache if isinstance(k, str) and k.startswith("<minidynamo")]
    return len(linecache.cache), len(minidynamo_lines), len(_loader.eval_cache)


def test_reset_then_compile_repeatedly_keeps_linecache_and_fx_sources_bounded():
    net, x = Net(), torch.randn(2, 4)
    for _ in range(3):
        _compile_some(net, x)
    before = _registry_sizes()
    for _ in range(20):
        _compile_some(net, x)
    after = _registry_sizes()
    assert after[0] <= before[0], (before, after)
    assert after[1] <= before[1], (before, after)
    assert after[2] <= before[2], (before, after)
    minidynamo.reset()
    gc.collect()
    leftover = [k for k in linecache.cache if isinstance(k, str) and k.startswith("<minidynamo")]
    assert not leftover, leftover          # nothing of ours stays registered once the entries died


def test_a_kernel_refusal_learned_while_tracing_keeps_nothing_of_the_trace_alive():
    """The tracer remembers, per op and dtypes, an eager kernel's refusal (gelu of int64):
    that memory outlives every compile, so it must not hold the exception's traceback, whose
    frames would keep the trace, the call's values and the cache entries alive."""
    import weakref

    def g(a):
        return torch.nn.functional.gelu(a) + 1

    value = torch.ones(3, dtype=torch.int64)
    alive = weakref.ref(value)
    with pytest.raises((RuntimeError, NotImplementedError)):
        minidynamo.optimize("eager")(g)(value)
    del value
    minidynamo.reset()
    gc.collect()
    assert alive() is None
    leftover = [k for k in linecache.cache if isinstance(k, str) and k.startswith("<minidynamo")]
    assert not leftover, leftover


@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once"])
def test_a_hit_keeps_nothing_of_its_call_alive(backend):
    """A passing guard may keep the values it read for the input reader that runs right after it
    (a HandOff).  An entry that reads no inputs (a frame that only reads tensor metadata) must
    not leave them held until the next call: the caller's object dies when the caller drops it."""
    import weakref

    class Batch:
        def __init__(self):
            self.data = torch.ones(4, 3)

    def rows(batch):
        return batch.data.shape[0]

    compiled = minidynamo.optimize(backend)(rows)
    assert compiled(Batch()) == compiled(Batch()) == 4            # compile, then a hit
    batch = Batch()
    alive = weakref.ref(batch)
    assert compiled(batch) == 4
    del batch
    gc.collect()
    assert alive() is None


def test_dropped_entry_unregisters_its_sources():
    from torch.fx.graph_module import _loader

    def h(a):
        return a.sin() + 2

    existing = set(_loader.eval_cache)
    opt = minidynamo.optimize("eager")(h)
    opt(torch.randn(3))
    (entry,) = minidynamo.cache_entries(h)
    guard_code = getattr(getattr(entry.guard_fn, "python", entry.guard_fn), "__code__")  # a FastGuard keeps its Python in .python
    graph_keys = [k for k in _loader.eval_cache if k not in existing]
    assert graph_keys, "the entry's graph module registered its source"
    del entry
    minidynamo.reset()
    gc.collect()
    assert not set(graph_keys) & set(_loader.eval_cache)
    assert not set(graph_keys) & set(linecache.cache)
    assert guard_code.co_filename not in linecache.cache


def test_reset_then_compile_keeps_rss_bounded():
    resource = pytest.importorskip("resource")
    net, x = Net(), torch.randn(2, 4)
    for _ in range(10):
        _compile_some(net, x)
    gc.collect()
    start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(60):
        _compile_some(net, x)
    gc.collect()
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - start
    assert grown_kib < 20 * 1024, grown_kib


# -- (3) the graph raises at run time --------------------------------------------------------------
class Box:
    pass


BOX = Box()
COUNT = 0


def outcome(fn, *args):
    """What a call did: its result or exception, and the program state it left."""
    global COUNT
    BOX.value = 0
    COUNT = 0
    items = []
    try:
        result = ("ok", fn(*args, items))
    except Exception as e:
        result = (type(e), str(e))
    return result, items, BOX.value, COUNT, torch.is_grad_enabled()


def assert_same_outcome(fn, *args):
    expected = outcome(fn, *args)
    got = outcome(minidynamo.optimize("eager")(fn), *args)
    if expected[0][0] == "ok":
        torch.testing.assert_close(got[0][1], expected[0][1])
        assert got[1:] == expected[1:]
    else:
        assert got == expected
    return got


def effects_then_index(x, idx, items):
    global COUNT
    y = x * 2
    items.append(1)
    BOX.value = 5
    COUNT = 7
    z = y[idx] + 1
    items.append(2)          # after the raising op: must not happen
    BOX.value = 6
    COUNT = 8
    return z


def test_effects_before_a_raising_index_are_kept_and_those_after_are_not():
    x = torch.randn(3)
    assert_same_outcome(effects_then_index, x, torch.tensor([0, 1]))        # compiles
    got = assert_same_outcome(effects_then_index, x, torch.tensor([0, 10]))  # guards pass, graph raises
    assert got[0][0] is IndexError and got[1:4] == ([1], 5, 7)
    assert minidynamo.counters["fallbacks"] == 0


@pytest.mark.parametrize("effect", ["append", "attribute", "global"])
def test_each_kind_of_side_effect_before_a_raising_gather(effect):
    def f(x, idx, items):
        global COUNT
        y = x + 1
        if effect == "append":
            items.append(y.shape[0])
        elif effect == "attribute":
            BOX.value = 3
        else:
            COUNT = 4
        return torch.gather(y, 0, idx)

    x = torch.randn(4)
    assert_same_outcome(f, x, torch.tensor([1, 2]))
    got = assert_same_outcome(f, x, torch.tensor([1, 9]))
    assert got[0][0] is RuntimeError


def test_no_grad_block_is_left_when_the_graph_raises():
    def f(x, idx, items):
        with torch.no_grad():
            items.append(0)
            y = x[idx] * 2
        return y

    x = torch.randn(3, requires_grad=True)
    assert_same_outcome(f, x, torch.tensor([1]))
    got = assert_same_outcome(f, x, torch.tensor([7]))
    assert got[0][0] is IndexError and got[-1] is True


def test_enable_grad_under_an_outer_no_grad_is_left_when_the_graph_raises():
    def f(x, idx, items):
        with torch.enable_grad():
            y = (x * 3)[idx]
        return y

    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        assert_same_outcome(f, x, torch.tensor([1]))
        got = assert_same_outcome(f, x, torch.tensor([3]))
        assert got[0][0] is IndexError and got[-1] is False
    assert torch.is_grad_enabled()


def test_no_grad_decorated_function_raising_leaves_grad_mode_on():
    @torch.no_grad()
    def inner(x, idx):
        return x[idx]

    def f(x, idx, items):
        return inner(x * 2, idx) + 1

    x = torch.randn(3, requires_grad=True)
    assert_same_outcome(f, x, torch.tensor([0]))
    got = assert_same_outcome(f, x, torch.tensor([4]))
    assert got[0][0] is IndexError and got[-1] is True


def _autocast_nesting() -> int:
    level = torch.autocast_increment_nesting()
    torch.autocast_decrement_nesting()
    return level


def test_autocast_block_is_left_when_the_graph_raises():
    def f(x, idx, items):
        with torch.autocast("cpu", enabled=False):
            y = (x + 1)[idx]
        return y

    x = torch.randn(3)
    level = _autocast_nesting()
    assert_same_outcome(f, x, torch.tensor([2]))
    got = assert_same_outcome(f, x, torch.tensor([5]))
    assert got[0][0] is IndexError
    assert _autocast_nesting() == level
    assert not torch.is_autocast_enabled("cpu")
    assert ctx_managers._open.managers == []


def test_in_place_change_before_a_raising_op_happens_exactly_once():
    def f(x, idx, items):
        x.add_(1)
        return x[idx] * 2

    def run(fn, idx):
        x = torch.zeros(3)
        try:
            fn(x, idx, [])
            return x, None
        except IndexError as e:
            return x, str(e)

    opt = minidynamo.optimize("eager")(f)
    for idx in (torch.tensor([0]), torch.tensor([9])):
        expected, got = run(f, idx), run(opt, idx)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    assert minidynamo.counters["fallbacks"] == 0


def test_in_place_change_with_python_effects_before_an_op_is_refused():
    def f(x, idx, items):
        x.mul_(2)
        items.append(1)
        return x[idx]

    optimized = minidynamo.optimize("eager")(f)
    for idx in (torch.tensor([0]), torch.tensor([9])):
        x1, x2 = torch.ones(3), torch.ones(3)
        items1, items2 = [], []
        try:
            expected = f(x1, idx, items1)
        except IndexError as e:
            expected = str(e)
        try:
            got = optimized(x2, idx, items2)
        except IndexError as e:
            got = str(e)
        assert type(got) is type(expected)
        torch.testing.assert_close(x2, x1)
        assert items2 == items1
    assert any("cannot be re-run" in r for r in minidynamo.counters["fallback_reasons"])


def _eager_and_compiled(f, compiled, args_of, seed=0):
    """(result or exception text, what it did to its list, the next random number) of eager
    and of the compiled function, each from the same seed and fresh arguments."""
    runs = []
    for fn in (f, compiled):
        torch.manual_seed(seed)
        args = args_of()
        try:
            result = fn(*args)
        except (IndexError, RuntimeError) as e:
            result = f"{type(e).__name__}: {e}"
        runs.append((result, args[-1], torch.rand(1)))
    return runs


def test_random_graph_with_python_effects_before_an_op_reruns_from_the_rewound_generator():
    # The list is changed before the dropout: if the index is out of range only at run time,
    # the frame re-runs eagerly, and its dropout must draw what eager's draws (the generator is
    # put back where it stood before the graph drew); a graph re-run without the rewind would
    # leave the generator one draw further.
    def f(x, idx, items):
        items.append(1)
        y = torch.nn.functional.dropout(x, 0.5, training=True)
        return y[idx] + torch.rand(2)

    compiled = minidynamo.optimize("eager")(f)
    for idx in ([0, 1], [3, 9], [1, 2], [9, 0]):
        (expected, eager_items, eager_next), (got, items, next_draw) = _eager_and_compiled(
            f, compiled, lambda: (torch.ones(4), torch.tensor(idx), []))
        if isinstance(expected, str):
            assert got == expected
        else:
            assert torch.equal(got, expected)
        assert items == eager_items == [1]
        assert torch.equal(next_draw, eager_next)
    assert minidynamo.counters["compiles"] == 1 and minidynamo.counters["fallbacks"] == 0
    assert minidynamo.counters["graph_errors_rerun"] == 2


def test_random_graph_writing_an_input_with_python_effects_before_an_op_is_still_refused():
    # a re-run would write the input twice: rewinding the generator does not make it re-runnable
    def f(x, idx, items):
        items.append(1)
        x.add_(torch.rand(4))
        return x[idx]

    (expected, eager_items, eager_next), (got, items, next_draw) = _eager_and_compiled(
        f, minidynamo.optimize("eager")(f), lambda: (torch.ones(4), torch.tensor([9]), []))
    assert got == expected and items == eager_items and torch.equal(next_draw, eager_next)
    assert any("cannot be re-run" in r for r in minidynamo.counters["fallback_reasons"])


@pytest.mark.parametrize("op", [
    lambda q: torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.5),   # random inside
    lambda q: torch.empty_like(q).bernoulli_(0.5) * q,
    lambda q: torch.multinomial(q.flatten().softmax(0), 2).float().sum() + q,
])
def test_any_op_that_draws_random_numbers_is_known_by_its_aten_tags(op):
    from minidynamo.tracer.capture import graph_effects
    from tests.tracer.helpers import run_traced

    def f(x, items, at):
        items.append(1)
        return op(x) + x.flatten()[at]      # an index by a tensor: it may raise, so a re-run must be possible

    capture, _ = run_traced(f, torch.ones(1, 2, 4), [], torch.tensor([1]))
    assert "draws random numbers" in graph_effects(capture.graph_module.graph)
    assert capture.rewind_devices == {torch.device("cpu")}    # re-run, if it raises, from the rewound generator


def test_a_kernel_writing_a_running_statistic_buffer_is_an_effect():
    from minidynamo.tracer.capture import graph_effects
    from tests.tracer.helpers import run_traced

    def f(x, mean, var, items):
        items.append(1)
        return torch.nn.functional.batch_norm(x, mean, var, training=True) + 1

    capture, _ = run_traced(f, torch.randn(4, 3), torch.zeros(3), torch.ones(3), [])
    assert "in place" in graph_effects(capture.graph_module.graph)


def test_python_effects_after_all_ops_of_an_in_place_graph_are_captured():
    def f(x, items):
        y = x.add_(1) * 2
        items.append(3)
        return y

    x1, x2 = torch.zeros(2), torch.zeros(2)
    i1, i2 = [], []
    expected = f(x1, i1)
    got = minidynamo.optimize("eager")(f)(x2, i2)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(x2, x1)
    assert i1 == i2 and minidynamo.counters["fallbacks"] == 0


def test_shape_mismatch_on_a_later_call_raises_eagers_error():
    def f(x, y, items):
        items.append(0)
        return x @ y

    assert_same_outcome(f, torch.randn(2, 3), torch.randn(3, 4))
    got = assert_same_outcome(f, torch.randn(2, 3), torch.randn(5, 4))
    assert got[0][0] is RuntimeError and got[1] == [0]


def test_embedding_index_out_of_range_inside_a_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(5, 3)
            self.calls = 0

        def forward(self, ids):
            self.calls = self.calls + 1
            return self.emb(ids).sum()

    m = M()
    opt = minidynamo.optimize("eager")(m)
    opt(torch.tensor([1, 2]))
    with pytest.raises(IndexError) as info:
        opt(torch.tensor([1, 50]))
    with pytest.raises(IndexError) as eager_info:
        m(torch.tensor([1, 50]))
    assert str(info.value) == str(eager_info.value)
    assert m.calls == 3        # each call counted once, the failing one included
    assert torch.is_grad_enabled()


def test_the_compiling_call_itself_raising_behaves_as_eager():
    got = assert_same_outcome(effects_then_index, torch.randn(3), torch.tensor([4]))
    assert got[0][0] is IndexError and got[1:4] == ([1], 5, 7)
    assert minidynamo.counters["compiles"] == 1 and minidynamo.counters["fallbacks"] == 0


def test_keyword_only_and_star_arguments_survive_the_eager_rerun():
    def f(x, *rest, idx, items, **extra):
        items.append(len(rest) + len(extra))
        return x[idx] + rest[0] + extra["k"]

    def call(fn, idx):
        items = []
        try:
            return fn(torch.ones(3), 1.0, 2.0, idx=idx, items=items, k=3.0), items
        except IndexError as e:
            return str(e), items

    opt = minidynamo.optimize("eager")(f)
    for idx in (torch.tensor([0]), torch.tensor([8])):
        expected, got = call(f, idx), call(opt, idx)
        if isinstance(expected[0], str):
            assert got == expected
        else:
            torch.testing.assert_close(got[0], expected[0])
            assert got[1] == expected[1]


@pytest.mark.parametrize("change", [
    lambda t: t.requires_grad_(not t.requires_grad),
    lambda t: t.unsqueeze_(0),
    lambda t: t.t_(),
])
def test_a_graph_that_changes_input_metadata_is_not_re_run_after_it_raises(change):
    def f(x, items):
        change(x) if x.is_leaf else None
        items.append(1)
        return x[torch.tensor([7])]

    def run(fn):
        x, items = torch.ones(3, 2), []
        try:
            fn(x, items)
        except IndexError as e:
            return str(e).splitlines()[0], x.shape, x.stride(), x.requires_grad, items
        raise AssertionError("no IndexError")

    assert run(minidynamo.optimize("eager")(f)) == run(f)


def test_set_grad_enabled_as_a_with_block_is_captured_and_restored():
    def f(x, mode):
        with torch.set_grad_enabled(mode):
            y = x * 2
        return y, y.requires_grad, torch.is_grad_enabled()

    backend_calls = []
    optimized = minidynamo.optimize(lambda gm, ex: backend_calls.append(1) or gm.forward)(f)
    x = torch.ones(2, requires_grad=True)
    for mode in (False, True, False):
        got, expected = optimized(x, mode), f(x, mode)
        assert got[1:] == expected[1:] and torch.equal(got[0], expected[0])
        assert torch.is_grad_enabled()
    assert minidynamo.counters["fallbacks"] == 0 and len(backend_calls) == 2


def test_set_grad_enabled_left_open_is_refused_and_runs_as_eager():
    def f(x):
        torch.set_grad_enabled(False)
        return x * 2

    x = torch.ones(2, requires_grad=True)
    try:
        y = minidynamo.optimize("eager")(f)(x)
        assert not torch.is_grad_enabled() and not y.requires_grad       # as eager leaves it
    finally:
        torch.set_grad_enabled(True)
    assert any("outside a with-statement" in r for r in minidynamo.counters["fallback_reasons"])


def test_set_grad_enabled_block_left_when_the_graph_raises():
    def f(x, i):
        with torch.set_grad_enabled(False):
            return x[i]

    optimized = minidynamo.optimize("eager")(f)
    x = torch.ones(3)
    optimized(x, torch.tensor([0]))
    with pytest.raises(IndexError):
        optimized(x, torch.tensor([7]))
    assert torch.is_grad_enabled()


def two_functions_with_equal_code():
    """Two programs with the same text: their code objects are equal (code compares by value)
    and distinct."""
    source = "import torch\n\ndef f(x):\n    return torch.relu(x * 2 + 1)\n"
    fns = []
    for _ in range(2):
        namespace = {}
        exec(compile(source, "<same text>", "exec"), namespace)
        fns.append(namespace["f"])
    assert fns[0].__code__ == fns[1].__code__ and fns[0].__code__ is not fns[1].__code__
    return fns


def test_reset_drops_the_entries_of_equal_code_objects_too():
    """Two programs with the same text have equal code objects (code compares by value): reset()
    must drop both caches, not the one a value-keyed set kept."""
    fns = two_functions_with_equal_code()
    x = torch.randn(3)
    compiled = [minidynamo.optimize("eager")(fn) for fn in fns]     # (kept: entries belong to them)
    for fn in compiled:
        fn(x)
    assert all(minidynamo.cache_entries(fn) for fn in fns)
    minidynamo.reset()
    assert not any(minidynamo.cache_entries(fn) for fn in fns)


def test_each_of_two_equal_disabled_code_objects_stays_disabled_after_reset():
    """minidynamo.disable marks a code object, and reset() marks every disabled code again: two
    equal codes (same text, two programs) are two disabled functions, each untraced after it."""
    fns = two_functions_with_equal_code()
    for fn in fns:
        minidynamo.disable(fn)
    minidynamo.reset()
    x = torch.randn(3)
    for fn in fns:
        assert torch.equal(minidynamo.optimize("eager")(fn)(x), fn(x))
        assert not minidynamo.cache_entries(fn)
    minidynamo.reset()


def test_a_code_set_holds_each_of_two_equal_code_objects_apart():
    """The sets of disabled, root and cached codes hold code objects by identity."""
    from minidynamo.code_sets import CodesByIdentity

    first = compile("x + 1", "<a>", "eval")
    second = compile("x + 1", "<b>", "eval")
    assert first == second and first is not second      # equal by value, two objects
    codes = CodesByIdentity()
    codes.add(first)
    assert first in codes and second not in codes
    codes.add(second)
    assert len(codes) == 2 and set(map(id, codes)) == {id(first), id(second)}
    del first
    assert len(codes) == 1                                # weak: a dead code leaves the set


def test_a_break_entry_reruns_outside_its_handler_so_the_error_has_no_context(capsys):
    """A graph that ends at a break raises inside the frame's ``try`` (an integer division by
    zero); the frame re-runs eagerly, and the error its handler catches must carry no
    ``__context__``: the re-run happens after the entry's own ``except`` (fuzz seed 375 i1386)."""
    def f(x, d):
        try:
            q = x // d                 # d holds a 0: raises at run time only
            print("after")
            return q + 1
        except Exception as e:
            return e.__context__ is None

    compiled = minidynamo.optimize("eager")(f)
    x = torch.tensor([4, 6])
    assert compiled(x, torch.tensor([2, 3])).tolist() == [3, 3]
    assert compiled(x, torch.tensor([2, 0])) is f(x, torch.tensor([2, 0])) is True
    assert minidynamo.counters["graph_errors_rerun"] >= 1
