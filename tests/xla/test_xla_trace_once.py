"""torchxla_trace_once, one concern per test: what a replay must get right."""

import torch
import torch.fx as fx
import torch.nn.functional as F

import minidynamo
import xla_bridge
from xla_bridge import device as dev
from tests.xla.xla_testing import (assert_same, compile_with, to_xla, xla_lazy_baseline,
                                   xla_metric_samples)


def trace_once(program, *inputs):
    return compile_with("torchxla_trace_once", program, inputs)


def test_host_weights_as_graph_inputs_move_with_the_input_in_one_transfer():
    """minidynamo passes weights as inputs: host ones are copied every call (a change that
    skips ``_version`` must be seen), batched with the input into one transfer."""
    def linear_relu(x, weight, bias):
        return F.relu(F.linear(x, weight, bias))

    layer = torch.nn.Linear(4, 3)
    weight, bias = layer.weight.detach(), layer.bias.detach()
    compiled = trace_once(linear_relu, torch.randn(2, 4), weight, bias)
    transfers = xla_metric_samples("TransferToDeviceTime")
    x = torch.randn(2, 4)
    assert_same(compiled(x, weight, bias), linear_relu(x, weight, bias))
    assert xla_metric_samples("TransferToDeviceTime") - transfers == 1      # x, weight, bias
    weight.mul_(-1)                                                         # bumps its _version
    assert_same(compiled(x, weight, bias), linear_relu(x, weight, bias))


def test_constants_made_inside_the_graph():
    def with_constants(x):
        return x * 3.7 + torch.arange(4, device=x.device) + torch.ones_like(x) * 0, x * 1

    x = torch.randn(2, 4)
    compiled = trace_once(with_constants, x)
    for _ in range(2):
        assert_same(compiled(x), xla_lazy_baseline(with_constants, [x]))


def test_outputs_that_alias_inputs_or_repeat_and_python_values():
    def mixed(x, y):
        z = x * y
        return {"x": x, "z": z, "again": z, "n": 7, "none": None, "view": y.t()}

    x, y = torch.randn(3, 3), torch.randn(3, 3)
    out = trace_once(mixed, x, y)(x, y)
    assert out["x"] is x
    assert out["z"] is out["again"]
    assert out["n"] == 7 and out["none"] is None
    assert_same(out, mixed(x, y))


def test_in_place_update_of_device_inputs_without_copies():
    def accumulate(total, x):
        total.add_(x)
        return total * 2

    total, x = to_xla([torch.zeros(3), torch.ones(3)])
    compiled = trace_once(accumulate, total, x)
    transfers = xla_metric_samples("TransferToDeviceTime")
    out = compiled(total, x)
    out = compiled(total, x)
    assert xla_metric_samples("TransferToDeviceTime") == transfers       # nothing moved in
    assert out.device.type == "xla" and total.device.type == "xla"
    assert_same(total.cpu(), torch.full((3,), 2.0))
    assert_same(out.cpu(), torch.full((3,), 4.0))


def test_random_ops_draw_fresh_numbers_every_call():
    def noisy(x):
        return F.dropout(x, 0.5, training=True), torch.rand_like(x)

    x = torch.ones(64)
    compiled = trace_once(noisy, x)
    (drop1, rand1), (drop2, rand2) = compiled(x), compiled(x)
    assert not torch.equal(rand1, rand2) and not torch.equal(drop1, drop2)
    assert set(drop1.unique().tolist()) <= {0.0, 2.0}
    assert 0.0 <= rand1.min() and rand1.max() < 1.0


def test_several_graphs_alive_at_once():
    def double(x):
        return x * 2

    def shift(x):
        return x - 1

    x = torch.randn(5)
    compiled = [trace_once(double, x), trace_once(shift, x)]
    for _ in range(2):
        for program, f in zip((double, shift), compiled):
            assert_same(f(x), program(x))


def test_new_non_tensor_input_or_shape_retraces_once():
    def scale(x, factor):
        return x * factor

    x, longer = torch.randn(3), torch.randn(5)
    compiled = trace_once(fx.symbolic_trace(scale), x, 2)
    assert_same(compiled(x, 2), x * 2)
    retraces = xla_bridge.counters.retraces
    assert_same(compiled(x, 3), x * 3)
    assert_same(compiled(longer, 3), longer * 3)
    assert xla_bridge.counters.retraces == retraces + 2
    assert_same(compiled(x, 2), x * 2)                        # each kept: no new retrace
    assert_same(compiled(longer, 3), longer * 3)
    assert xla_bridge.counters.retraces == retraces + 2


def test_callers_pending_device_tensors_survive_a_compile():
    pending = torch.ones(3).to(dev.xla_device()) * 5         # lazy, not yet computed
    trace_once(lambda x: x.sin(), torch.randn(3))
    assert_same(pending.cpu(), torch.full((3,), 5.0))


def test_autograd_replays_a_forward_and_a_backward_graph():
    """(Calls needing autograd used to run eagerly; tests/xla/test_training.py has the rest.)"""
    def square(x):
        return x * x

    xla_bridge.reset_counters()
    x = torch.randn(3, requires_grad=True)
    compiled = trace_once(square, x)
    for _ in range(2):
        compiled(x).sum().backward()
    assert_same(x.grad, 4 * x.detach())
    assert xla_bridge.counters.compiles == 2 and xla_bridge.counters.fallbacks == 0


def test_phase_timer_splits_a_call():
    x = torch.randn(4)
    compiled = trace_once(lambda x: x.exp(), x)
    with xla_bridge.phase_timer() as timer:
        compiled(x)
    assert set(timer.totals) == {"transfer_in", "hash_lookup_dispatch", "execute", "transfer_out"}
    assert all(seconds >= 0 for seconds in timer.totals.values())
    from xla_bridge import timing
    assert timing.active is None


def test_any_change_of_an_argument_is_seen():
    """An in-place update, a new tensor, a new shape (even made in place) are all seen."""
    def project(x, w):
        return x @ w

    x, w = torch.randn(2, 3), torch.randn(3, 4)
    compiled = trace_once(project, x, w)
    assert_same(compiled(x, w), x @ w)
    w.mul_(-1)
    assert_same(compiled(x, w), x @ w)
    other = torch.randn(3, 4)
    assert_same(compiled(x, other), x @ other)
    wider = torch.randn(3, 6)
    assert_same(compiled(x, wider), x @ wider)
    wider.resize_(3, 5)                                  # a new shape, same tensor object
    assert_same(compiled(x, wider), x @ wider)
    assert_same(compiled(x, w), x @ w)


class ScaledByConfig(torch.autograd.Function):
    factor = 2.0                              # the program's state, read by forward and backward

    @staticmethod
    def forward(ctx, x):
        return x * ScaledByConfig.factor

    @staticmethod
    def backward(ctx, grad):
        return grad * ScaledByConfig.factor


def test_a_programs_autograd_function_reads_its_state_on_every_call():
    """A program's Function runs its own Python, which may read anything: a program replayed by
    hash would keep the factor it saw when traced, so such a graph runs eagerly."""
    import minidynamo

    def f(x):
        return ScaledByConfig.apply(x) + 1

    minidynamo.reset()
    optimized = minidynamo.optimize("torchxla_trace_once")(f)
    try:
        for factor in (2.0, 2.0, 5.0):
            ScaledByConfig.factor = factor
            x, y = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
            expected, got = f(x), optimized(y)
            expected.sum().backward()
            got.sum().backward()
            assert_same(got.detach(), expected.detach())
            assert_same(y.grad, x.grad)
    finally:
        ScaledByConfig.factor = 2.0
        minidynamo.reset()


def _reads_b(a, b):
    return b.t() @ a, b.sum(0)


def _reads_a(a, b):
    return b.t() @ a, a.sum(0)


def test_two_graphs_torch_xla_hashes_alike_replay_each_its_own_program():
    """Probe AL r1: torch_xla's graph hash does not tell apart device-data inputs of one shape:
    ``(b.t() @ a, b.sum(0))`` and ``(b.t() @ a, a.sum(0))`` share one hash, so the second
    replayed the first's program (``b.sum(0)`` for ``a.sum(0)``), silently, also across
    ``minidynamo.reset()``. The second gets a salt (a result of its own) and a hash of its own."""
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    for fn in (_reads_b, _reads_a, _reads_b):
        for _ in range(2):
            ours = minidynamo.optimize("torchxla_trace_once")(fn)(a, b)
            torch.testing.assert_close(ours, fn(a, b))
        minidynamo.reset()


def test_a_backward_graph_torch_xla_hashes_like_another_replays_its_own():
    """Probe AL r1's sibling: the backward of ``F.linear(x, w.t(), bias)`` hashes like that of
    ``F.linear(x, w, bias)`` (its grad_output and x, both [4, 8], swap roles): the bias gradient
    came from the other program."""
    results = []
    for transpose in (False, True):
        for fn in (None, "ours"):
            torch.manual_seed(0)
            x, w, bias = torch.randn(4, 8), torch.randn(8, 8, requires_grad=True), torch.randn(8, requires_grad=True)
            f = (lambda x, w, bias: F.linear(x, w.t() if transpose else w, bias))
            (minidynamo.optimize("torchxla_trace_once")(f) if fn else f)(x, w, bias).pow(2).sum().backward()
            results.append((w.grad, bias.grad))
    for k in (0, 2):
        torch.testing.assert_close(results[k + 1], results[k])
