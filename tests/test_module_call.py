"""ModuleCall: nn.Module calls straight to forward only when nn.Module.__call__ would do nothing else.

Every test compares against the plain ``module(x)``: a shortcut that skipped a hook, a compiled
call or JIT tracing would show up as a different answer or a hook that did not fire.
"""

import random

import pytest
import torch
import torch.nn.modules.module as module_py

import minidynamo
from minidynamo import _eval_frame as hook
from minidynamo.module_call import ModuleCall, direct_forward, stats


class Doubler(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, x, *, shift=0.0):
        return x * self.scale + shift


def _direct_calls(call):
    before = stats()["direct"]
    result = call()
    return result, stats()["direct"] - before


def test_no_hooks_goes_straight_to_forward_with_the_same_answer():
    module, x = Doubler(), torch.randn(3)
    call = ModuleCall(module)
    result, direct = _direct_calls(lambda: call(x, shift=1.0))
    assert direct == 1
    torch.testing.assert_close(result, module(x, shift=1.0))
    assert direct_forward(module) is not None


def _add_forward_hook(module, seen):
    module.register_forward_hook(lambda m, args, out: seen.append("forward hook") or out + 100)


def _add_pre_hook(module, seen):
    module.register_forward_pre_hook(lambda m, args: seen.append("pre hook") or (args[0] * 10,))


def _add_backward_hook(module, seen):
    module.register_full_backward_hook(lambda m, gin, gout: seen.append("backward hook"))


def _add_backward_pre_hook(module, seen):
    module.register_full_backward_pre_hook(lambda m, gout: seen.append("backward pre hook"))


def _compile_call(module, seen):
    module._compiled_call_impl = lambda *args, **kwargs: seen.append("compiled") or module._call_impl(*args, **kwargs)


def _instance_forward(module, seen):
    module.forward = lambda x, shift=0.0: seen.append("instance forward") or x - 1


def _odd_hook_container(module, seen):
    class Hooks(dict):
        def __len__(self):
            return 0
    module._forward_hooks = Hooks({0: lambda m, args, out: seen.append("odd container") or out})


# Each entry changes a fresh module; the shortcut must answer as the plain call does.
MUTATIONS = {
    "forward hook": _add_forward_hook,
    "pre hook": _add_pre_hook,
    "backward hook": _add_backward_hook,
    "backward pre hook": _add_backward_pre_hook,
    "compiled call": _compile_call,
    "instance forward": _instance_forward,
    "hook dict of another type": _odd_hook_container,
}


def _run(call, x, seen):
    out = call(x)
    if out.requires_grad:
        out.sum().backward()
    return out.detach(), list(seen)


@pytest.mark.parametrize("seed", range(40))
def test_random_mutations_answer_as_the_plain_call(seed):
    rng = random.Random(seed)
    chosen = rng.sample(sorted(MUTATIONS), rng.randint(0, 3))
    answers = []
    for through_shortcut in (False, True):
        module, seen = Doubler(), []
        for name in chosen:
            MUTATIONS[name](module, seen)
        x = torch.arange(3.0)
        expect_direct = direct_forward(module) is not None
        call = ModuleCall(module) if through_shortcut else module
        (out, log), direct = _direct_calls(lambda: _run(call, x, seen))
        answers.append((out, log))
        if through_shortcut:
            assert direct == expect_direct, chosen     # C and the Python statement agree
    (plain, plain_log), (short, short_log) = answers
    torch.testing.assert_close(short, plain)
    assert short_log == plain_log, chosen


@pytest.mark.parametrize("hook_kind", ["forward", "forward_pre", "backward"])
def test_global_hooks_take_the_usual_call(hook_kind):
    module, seen = Doubler(), []
    register = getattr(module_py, f"register_module_{hook_kind}_hook")
    hook = {"forward": lambda m, args, out: seen.append(m) or out + 1,
            "forward_pre": lambda m, args: seen.append(m),
            "backward": lambda m, gin, gout: seen.append(m)}[hook_kind]
    handle = register(hook)
    try:
        assert direct_forward(module) is None
        out, direct = _direct_calls(lambda: ModuleCall(module)(torch.ones(2)))
        if hook_kind == "backward":
            out.sum().backward()
        assert direct == 0 and seen == [module]
        torch.testing.assert_close(out, module(torch.ones(2)) if hook_kind != "backward" else out)
    finally:
        handle.remove()


class OwnCall(Doubler):
    def __call__(self, x):
        return x * 0


class OwnCallImpl(Doubler):
    def _call_impl(self, x):
        return x * 0 - 1


class OwnGetattribute(Doubler):
    def __getattribute__(self, name):
        return super().__getattribute__(name)


class ForwardProperty(Doubler):
    @property
    def forward(self):
        return lambda x: x * 0 + 7


@pytest.mark.parametrize("cls", [OwnCall, OwnCallImpl, OwnGetattribute, ForwardProperty])
def test_classes_that_change_the_call_take_the_usual_call(cls):
    module, x = cls(), torch.ones(2)
    assert direct_forward(module) is None
    out, direct = _direct_calls(lambda: ModuleCall(module)(x))
    assert direct == 0
    torch.testing.assert_close(out, module(x))


def test_a_patched_module_call_is_the_one_that_runs(monkeypatch):
    """torch.fx patches nn.Module.__call__ while it traces: both kinds of ModuleCall defer to it."""
    calls = []
    original = torch.nn.Module.__call__

    def patched(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "__call__", patched)
    module = Doubler()
    ModuleCall(module)(torch.ones(2))
    assert calls == ["Doubler"]
    optimized = minidynamo.optimize("eager")(Doubler())
    optimized(torch.ones(2))
    assert calls[1:] == ["OptimizedModule", "Doubler"]
    assert direct_forward(optimized, as_method=True) is None


def test_jit_tracing_takes_the_usual_call():
    module = Doubler().requires_grad_(False)
    call = ModuleCall(module)
    traced, direct = _direct_calls(lambda: torch.jit.trace(lambda x: call(x), torch.ones(2), check_trace=False))
    assert direct == 0
    torch.testing.assert_close(traced(torch.full((2,), 3.0)), torch.full((2,), 6.0))


def test_an_optimized_module_hit_runs_no_module_call_frame():
    """Both the wrapper's and the wrapped module's nn.Module.__call__ go straight to forward (the
    direct path, twice), and forward's frame is the only one the hook sees: a hit, replaced by its
    cache entry.  (Not observed with sys.setprofile: while a profile function is set, frames run
    as CPython runs them.)"""
    minidynamo.reset()
    optimized = minidynamo.optimize("eager")(Doubler())
    x = torch.randn(4)
    optimized(x)                                  # capture
    before = hook.stats()
    out, direct = _direct_calls(lambda: optimized(x))
    after = hook.stats()
    assert direct == 2
    assert after["frames_seen"] - before["frames_seen"] == 1
    assert after["cache_hits"] - before["cache_hits"] == 1
    torch.testing.assert_close(out, optimized._orig_mod(x))
    minidynamo.reset()


def test_signatures_read_as_nn_module_calls():
    import inspect
    module = Doubler()
    optimized = minidynamo.optimize("eager")(module)
    assert str(inspect.signature(optimized)) == str(inspect.signature(module)) == "(*args, **kwargs)"
    assert str(inspect.signature(ModuleCall(module))) == "(*args, **kwargs)"


def test_a_method_needs_a_module():
    with pytest.raises(TypeError, match="nn.Module first"):
        ModuleCall()(torch.ones(1))


# ----------------------------------------------------------------------------- an optimized module's global hooks


GLOBAL_HOOKS = {   # kind -> a hook that notes, in the list given, each module it fires for
    "forward": lambda seen: lambda m, args, out: seen.append(m) or out * 2,
    "forward_pre": lambda seen: lambda m, args: seen.append(m) or (args[0] + 1,),
    "backward": lambda seen: lambda m, grad_in, grad_out: seen.append(m),
}


def _step(call, x):
    out = call(x.clone().requires_grad_())
    out.sum().backward()
    return out.detach()


@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once"])
@pytest.mark.parametrize("hook_kind", sorted(GLOBAL_HOOKS))
def test_an_optimized_module_fires_global_hooks_once_for_the_module_it_wraps(hook_kind, backend):
    """As eager: ``g(x)`` is ``m(x)``, each global hook firing once, given ``m`` (never the wrapper),
    whether it was registered before the first call, between calls, or removed since."""
    if backend != "eager":
        from xla_bridge import device as dev
        dev.torch_xla()
        dev.xla_device()
    minidynamo.reset()
    module, x = Doubler(), torch.randn(3)
    optimized = minidynamo.optimize(backend)(module)
    register = getattr(module_py, f"register_module_{hook_kind}_hook")
    seen, handle = [], None
    try:
        for phase in ("no hook", "registered", "still registered", "removed"):
            if phase == "registered":
                handle = register(GLOBAL_HOOKS[hook_kind](seen))
            if phase == "removed":
                handle.remove()
            expected, eager_seen = _step(module, x), seen[:]
            seen.clear()
            got = _step(optimized, x)
            torch.testing.assert_close(got.cpu(), expected, msg=phase)
            assert seen == eager_seen and all(m is module for m in seen), (phase, seen)
            seen.clear()
    finally:
        if handle is not None:
            handle.remove()
    minidynamo.reset()


def test_a_hook_on_the_wrapper_and_a_global_hook_each_fire_once():
    minidynamo.reset()
    module, x, seen = Doubler(), torch.randn(3), []
    optimized = minidynamo.optimize("eager")(module)
    optimized.register_forward_hook(lambda m, args, out: seen.append(("own", m)) or out + 100)
    handle = module_py.register_module_forward_hook(lambda m, args, out: seen.append(("global", m)) or out * 2)
    try:
        out = optimized(x)
        torch.testing.assert_close(out, module(x) + 100)   # module(x): the global hook doubles it
        assert seen == [("global", module), ("own", optimized), ("global", module)]
    finally:
        handle.remove()
    minidynamo.reset()


def test_the_tracing_check_reads_the_jit_state_without_python_when_built():
    """With minidynamo._jit_state built (it is, wherever torch imports at build time) the
    shortcut reads the tracer's thread state directly; the JIT test above checks its answer."""
    import importlib.util

    built = importlib.util.find_spec("minidynamo._jit_state") is not None
    assert stats()["native_tracing_check"] is built


JIT_TRACE_OF_OPTIMIZED = """
import sys, torch, torch.nn as nn, minidynamo
torch.manual_seed(0)
m = nn.Linear(4, 2).requires_grad_(False)
optimized = minidynamo.optimize(sys.argv[1])(m)
x = torch.randn(3, 4)
optimized(x)                                       # a cache entry ready to replay
traced = torch.jit.trace(lambda t: optimized(t) + 1, x, check_trace=False)
y = torch.randn(3, 4)
print(torch.allclose(traced(y), m(y) + 1))
m.requires_grad_(True)
optimized(x)
try:                                               # grad-requiring weights: eager's error
    torch.jit.trace(lambda t: optimized(t) + 1, x, check_trace=False)
except RuntimeError as error:
    print("RuntimeError", "as a constant" in str(error))
"""


@pytest.mark.parametrize("backend", ["eager", "torchxla_trace_once", "torchxla_trivial"])
def test_jit_trace_of_an_optimized_module_traces_its_ops_as_eager(backend):
    """Probe AC r4, r5: ``torch.jit.trace`` over an optimized module ran its cache entry inside
    the JIT tracer: the process crashed (``TracingState::getOutput``: a result the tracer never
    saw) or the trace baked the outputs in as constants. While the JIT traces, frames run as
    CPython runs them (a separate process: a crash must not end the suite)."""
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", JIT_TRACE_OF_OPTIMIZED, backend], capture_output=True, text=True,
                          timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": root, "PJRT_DEVICE": "CPU"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "RuntimeError", "True"], done.stdout
