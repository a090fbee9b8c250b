"""``torch.compiler.disable`` and ``torch.compile`` inside minidynamo: what the user marked for
torch.compile's compiler is not traced by minidynamo either, and a torch.compile'd function is
torch's to compile.  The wrappers they make switch torch's own frame hook; minidynamo recognises
them (``skipfiles.torch_wrapper_codes``): a traced caller breaks at the call, and the wrapper runs
unwatched by minidynamo with everything below it."""

import torch

import minidynamo


def scaled(x):
    return x * 3


@torch.compiler.disable
def host_side(x):
    return scaled(x.flip(-1)) + 1          # scaled too runs unwatched: the disable is recursive


def caller(x):
    return host_side(x * 2) - 1


def test_a_traced_caller_breaks_at_the_call_and_the_function_runs_eagerly():
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(caller)
    for shape in ((2, 3), (2, 3), (2, 5)):
        x = torch.randn(shape)
        torch.testing.assert_close(compiled(x), caller(x))
    assert any("host_side, which torch.compiler.disable marks" in reason
               for reason in minidynamo.counters["break_reasons"])
    assert minidynamo.cache_entries(host_side.__wrapped__) == []
    assert minidynamo.cache_entries(scaled) == []
    assert minidynamo.counters["frames_left_to_torch"] == 3
    minidynamo.reset()


def test_a_disabled_function_optimized_itself_compiles_nothing():
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(host_side)
    x = torch.randn(4)
    torch.testing.assert_close(compiled(x), host_side(x))
    assert minidynamo.counters["compiles"] == 0
    assert minidynamo.cache_entries(scaled) == []
    minidynamo.reset()


def test_an_optimize_region_inside_a_disabled_function_still_compiles():
    inner = minidynamo.optimize("eager")(scaled)

    @torch.compiler.disable
    def outer(x):
        return inner(x) + 1

    minidynamo.reset()
    x = torch.randn(3)
    torch.testing.assert_close(minidynamo.optimize("eager")(outer)(x), x * 3 + 1)
    assert minidynamo.counters["compiles"] == 1           # inner's own context, as asked
    minidynamo.reset()


def test_a_torch_compiled_function_called_in_a_traced_frame():
    """Torch's hook passes the frames it does not take to ours: torch's compiler's own frames
    (dataclass ``__init__``s, fake tensors) were traced by minidynamo, and torch's fullgraph
    compile failed ("Attempted to call function marked as skipped"), where eager runs."""
    inner = torch.compile(lambda y: y.sin() + 1, backend="eager", fullgraph=True)

    def f(x):
        return inner(x * 2) - 1

    minidynamo.reset()
    x = torch.randn(3)
    torch.testing.assert_close(minidynamo.optimize("eager")(f)(x), f(x))
    assert any("torch.compile compiles" in r for r in minidynamo.counters["break_reasons"])
    assert not minidynamo.counters["fallback_reasons"]
    minidynamo.reset()


def test_a_minidynamo_function_inside_a_torch_compiled_one():
    """The other way round: torch's hook is installed while the optimize'd function's callback is
    switched on and off, and is left in place (``update_hook`` replaces only its own or none)."""
    ours = minidynamo.optimize("eager")(lambda y: y.cos() * 3)

    def outer(x):
        return ours(x + 1) - 1

    minidynamo.reset()
    x = torch.randn(3)
    torch.testing.assert_close(torch.compile(outer, backend="eager")(x), outer(x))
    torch.testing.assert_close(torch.compile(outer, backend="eager")(x), outer(x))
    torch.testing.assert_close(ours(x), x.cos() * 3)          # and ours still compiles after it
    assert minidynamo.counters["compiles"] >= 1
    minidynamo.reset()


LEFT_BEHIND = """
import warnings
import torch, minidynamo

def bad(x):
    return x.nonexistent_method()

try:                                  # torch's hook stays installed after this raises
    torch.compile(bad, backend="eager")(torch.ones(2))
except Exception:
    pass

@minidynamo.optimize("eager")
def f(x):
    return x.sin() + 1

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        assert torch.equal(f(torch.ones(2)), torch.ones(2).sin() + 1)
print(len(caught), caught[0].category.__name__ if caught else None, caught[0].message if caught else None)
"""


def test_a_frame_hook_torch_left_installed_is_said_once():
    """After a torch.compile that raises, torch leaves its frame hook in place; minidynamo never
    replaces another's hook, so it captures nothing then: the program runs eagerly, and the
    first optimized call says why (in a process of its own: the hook stays for good)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LEFT_BEHIND], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    count, category, message = done.stdout.strip().split(" ", 2)
    assert (count, category) == ("1", "RuntimeWarning")
    assert "another frame evaluation hook (PEP 523) is installed" in message
