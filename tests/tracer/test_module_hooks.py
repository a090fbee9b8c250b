"""Forward hooks on submodules are traced as nn.Module's call runs them: pre-hooks (which may
replace the arguments), ``forward``, then forward hooks (which may replace the result), each
hook guarded by identity and each hook dict by its keys.  Every case compares with eager over
several calls, and changes the hooks between calls (added, removed, replaced)."""

import pytest
import torch
from torch import nn
from torch.nn.utils import prune

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def tiny():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


def assert_calls_match(model, opt, calls=3):
    for i in range(calls):
        x = torch.randn(3, 4) + i
        torch.testing.assert_close(opt(x), model(x))


def test_hooks_on_submodules_are_traced_in_one_graph():
    model = tiny()
    model[0].register_forward_pre_hook(lambda module, args: (args[0] * 2,))
    model[1].register_forward_hook(lambda module, args, out: out + 1)
    model[2].register_forward_pre_hook(lambda module, args: args[0] - 3)        # not a tuple: wrapped
    model[2].register_forward_hook(lambda module, args, out: None)              # None keeps the result
    opt = minidynamo.optimize("eager")(model)
    assert_calls_match(model, opt)
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["compiles"] == 1


def test_hooks_with_kwargs_see_and_replace_the_keyword_arguments():
    class Scaled(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scaled()

        def forward(self, x):
            return self.inner(x, scale=2.0)

    model = Outer()
    model.inner.register_forward_pre_hook(lambda m, args, kwargs: (args, {"scale": kwargs["scale"] * 5}),
                                          with_kwargs=True)
    model.inner.register_forward_hook(lambda m, args, kwargs, out: out + kwargs["scale"], with_kwargs=True)
    opt = minidynamo.optimize("eager")(model)
    assert_calls_match(model, opt)
    assert minidynamo.counters["compiles"] == 1


def test_a_hook_added_removed_or_replaced_after_compiling_is_seen():
    model = tiny()
    opt = minidynamo.optimize("eager")(model)
    assert_calls_match(model, opt)
    handle = model[1].register_forward_hook(lambda module, args, out: out * 10)
    assert_calls_match(model, opt)
    handle.remove()
    assert_calls_match(model, opt)
    handle = model[1].register_forward_hook(lambda module, args, out: out - 1)
    assert_calls_match(model, opt)
    model[1]._forward_hooks[handle.id] = lambda module, args, out: out * -2    # same key, new hook
    assert_calls_match(model, opt)


def test_a_hook_switched_to_kwargs_or_always_call_is_seen():
    model = tiny()
    hook = model[1].register_forward_hook(lambda module, *rest: rest[-1] * 3)
    opt = minidynamo.optimize("eager")(model)
    assert_calls_match(model, opt)
    model[1]._forward_hooks_with_kwargs[hook.id] = True        # now called with (module, args, kwargs, out)
    assert_calls_match(model, opt)
    model[1].register_forward_hook(lambda module, args, out: out + 1, always_call=True)
    assert_calls_match(model, opt)


def test_hooks_with_side_effects_run_once_per_call():
    seen = []
    model = tiny()
    model[0].register_forward_hook(lambda module, args, out: seen.append(tuple(out.shape)))
    opt = minidynamo.optimize("eager")(model)
    for i in range(3):
        opt(torch.randn(i + 2, 4))
    expected = []
    model[0]._forward_hooks.clear()
    model[0].register_forward_hook(lambda module, args, out: expected.append(tuple(out.shape)))
    for i in range(3):
        model(torch.randn(i + 2, 4))
    assert seen == expected


def test_a_pruned_model_matches_eager():
    """torch.nn.utils.prune recomputes ``weight`` from ``weight_orig * weight_mask`` in a
    forward pre-hook (a callable object, not a function)."""
    model = tiny()
    prune.l1_unstructured(model[0], "weight", amount=0.5)
    opt = minidynamo.optimize("eager")(model)
    assert_calls_match(model, opt)
    assert minidynamo.counters["fallbacks"] == 0
    with torch.no_grad():
        model[0].weight_orig.mul_(-1)
    assert_calls_match(model, opt)


class Recorder(list):
    def record(self, name, out):
        self.append(name)     # (a C method of a list subclass: the frame breaks here)


def test_a_global_forward_hook_never_sees_minidynamos_own_graphs():
    """A global forward hook's own frame is captured too; where it breaks, the part before the
    break has no ops and ran as its ``GraphModule``, through ``nn.Module.__call__``: the global
    hook then fired for that GraphModule (probe Y r01)."""
    def run(optimized):
        optimized(torch.randn(3, 4))
        seen = Recorder()

        def hook(module, args, out):
            seen.record(type(module).__name__, out)

        handle = nn.modules.module.register_module_forward_hook(hook)
        try:
            optimized(torch.randn(3, 4))
        finally:
            handle.remove()
        return seen

    model = tiny()
    assert run(minidynamo.optimize("eager")(model)) == run(model)


class AssignsItsBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("stored", torch.zeros(3))

    def forward(self, x):
        self.stored = self.stored * 0.9 + x.mean(0)
        return x + self.stored


class AssignsAParameter(nn.Module):
    def forward(self, x):
        self.stored = nn.Parameter(torch.ones(3))
        return x * self.stored


@pytest.mark.parametrize("make, register", [
    (AssignsItsBuffer, nn.modules.module.register_module_buffer_registration_hook),
    (AssignsAParameter, nn.modules.module.register_module_parameter_registration_hook)])
def test_a_global_registration_hook_added_later_is_seen(make, register):
    """A global registration hook may replace what ``self.stored = t`` registers; eager then
    computes with its value.  One added after the compile must not leave the graph computing with
    ``t`` (probe Y r02, r04): the global hook dicts guarded empty include the registration hooks."""
    def run(make_optimized):
        model = make()
        optimized = make_optimized(model)
        outs = [optimized(torch.ones(2, 3))]
        handle = register(lambda module, name, value: type(value)(torch.full((3,), 42.0)))
        try:
            outs.append(optimized(torch.ones(2, 3)))
        finally:
            handle.remove()
        outs.append(optimized(torch.ones(2, 3)))
        return [out.detach() for out in outs], model.stored.detach()

    (expected, stored), (got, got_stored) = run(lambda m: m), run(minidynamo.optimize("eager"))
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got_stored, stored)
