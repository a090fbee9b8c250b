"""The program's saved-tensor hooks see what eager's ops save, and nothing else: not the
tracer's example values (meta tensors, while a frame is captured), not a device step's copies
(the XLA training paths run such a call eagerly).  ``torch.utils.checkpoint`` counts and
compares what a forward saves with what its recomputation saves, so it is the sharpest user."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import minidynamo

BACKENDS = ["eager", "torchxla_trivial", "torchxla_trace_once"]


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def _device_if_needed(backend):
    if backend != "eager":
        from xla_bridge import device as dev
        dev.xla_device()


LAYER = torch.nn.Linear(4, 4)


def layer_then_relu(t):
    return LAYER(t).relu()


def checkpointed(x):
    return checkpoint(layer_then_relu, x, use_reentrant=False) * 2


def step(fn, x):
    LAYER.zero_grad()
    x = x.detach().requires_grad_()
    out = fn(x)
    out.sum().backward()
    return out.detach(), x.grad, LAYER.weight.grad.clone()


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_without_reentry_trains_as_eager(backend):
    _device_if_needed(backend)
    optimized = minidynamo.optimize(backend)(checkpointed)
    for seed in range(3):                                  # first call, then cache hits
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
        for got, expected in zip(step(optimized, x), step(checkpointed, x)):
            assert torch.allclose(got, expected, atol=1e-6)


def sin_of_double(x):
    return (x * 2).sin()


@pytest.mark.parametrize("backend", BACKENDS)
def test_saved_tensor_hooks_see_what_eager_saves(backend):
    _device_if_needed(backend)
    x = torch.randn(3, requires_grad=True)

    def saved_while(fn):
        seen = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: seen.append((t.device.type, tuple(t.shape))) or t,
                                                      lambda t: t):
            fn(x).sum().backward()
        return seen

    expected = saved_while(sin_of_double)
    optimized = minidynamo.optimize(backend)(sin_of_double)
    assert saved_while(optimized) == expected              # the call that captures
    assert saved_while(optimized) == expected              # a cache hit


# -- a graph whose ops ran the caller's hooks is never run a second time ----------------------
# Eager runs each op once.  When a compiled graph raises, minidynamo re-runs the frame eagerly to
# give eager's error, but only if nothing of the caller's ran inside the graph: a pack hook (or
# a TorchDispatchMode) ran once per saving op already, and its error is the caller's to see.


def sum_of_sin_doubled(x):
    return (x.sin() * 2).sum()


def test_a_checkpointed_compiled_function_stops_its_recomputation_early():
    """Non-reentrant checkpoint recomputes the forward in backward and stops it, once every
    saved tensor is back, by raising from its pack hook: that stop must reach checkpoint."""
    optimized = minidynamo.optimize("eager")(sum_of_sin_doubled)

    def grad_through_checkpoint(fn):
        x = torch.ones(3, requires_grad=True)
        checkpoint(fn, x, use_reentrant=False).backward()
        return x.grad

    for _ in range(2):
        assert torch.allclose(grad_through_checkpoint(optimized), grad_through_checkpoint(sum_of_sin_doubled))


def test_a_pack_hook_that_raises_is_seen_raising_and_runs_as_often_as_in_eager():
    def run(fn):
        calls, outcomes = [0], []

        def pack(t):
            calls[0] += 1
            if calls[0] == armed[0]:
                raise RuntimeError("pack hook refused")
            return t

        armed = [0]
        for i in range(3):
            x = torch.ones(3, requires_grad=True)
            armed[0] = calls[0] + 1 if i == 2 else 0      # the third call: its first save raises
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                try:
                    fn(x)
                    outcomes.append("returned")
                except RuntimeError as error:
                    outcomes.append(str(error))
        return outcomes, calls[0]

    expected = run(sum_of_sin_doubled)
    assert expected[0][-1] == "pack hook refused"
    assert run(minidynamo.optimize("eager")(sum_of_sin_doubled)) == expected


@torch.library.custom_op("minidynamo_tests::count_then_check", mutates_args=())
def count_then_check(x: torch.Tensor) -> torch.Tensor:
    OP_RUNS[0] += 1
    if x.sum() > 100:
        raise ValueError("too big")
    return x.clone()


@count_then_check.register_fake
def _(x):
    return torch.empty_like(x)


OP_RUNS = [0]


def plus_one_of_the_custom_op(x):
    return count_then_check(x) + 1


def test_an_operator_with_a_python_kernel_that_raises_runs_once():
    """A ``torch.library`` operator's kernel is the program's code: when it raises inside the
    graph, the error goes out as is (the frame is not run again, which would run it twice)."""
    def runs_of_failing_call(fn):
        fn(torch.ones(3))
        fn(torch.ones(3))
        OP_RUNS[0] = 0
        with pytest.raises(ValueError, match="too big"):
            fn(torch.full((3,), 100.0))
        return OP_RUNS[0]

    assert runs_of_failing_call(plus_one_of_the_custom_op) == 1
    assert runs_of_failing_call(minidynamo.optimize("eager")(plus_one_of_the_custom_op)) == 1


def sin_then_gather(x, index):
    return torch.gather(x.sin(), 0, index) + 1


def test_a_torch_function_mode_sees_each_op_once_when_the_graph_raises():
    """A TorchFunctionMode active around the call sees the graph's torch calls as they run: when
    one raises (an index out of range), the frame is not run again (the mode saw them already)."""
    from torch.overrides import TorchFunctionMode

    class Counts(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.calls += func in (torch.sin, torch.Tensor.sin)      # (the guard's reads are seen too)
            return func(*args, **(kwargs or {}))

    def calls_of(fn):
        fn(torch.ones(3), torch.tensor([0, 1]))
        with Counts() as mode:
            with pytest.raises(RuntimeError):
                fn(torch.ones(3), torch.tensor([0, 7]))
        return mode.calls

    assert calls_of(sin_then_gather) == 1
    assert calls_of(minidynamo.optimize("eager")(sin_then_gather)) == 1
