"""Random ops on the XLA backends follow ``torch.manual_seed`` as eager does (``host_random``).

Eager PyTorch on the CPU is the oracle: with the same seed, a compiled call returns eager's
random numbers (dropout masks, ``rand``, ``normal_``, ...), and afterwards the host generator
stands where eager's does, so the program's next draws agree too. Before, the device drew from
XLA's own generator: a dropout mask changed on every call whatever the seed, and the host
generator never moved (the ``torch.rand`` after a compiled dropout gave 0.4963 where eager's
gave 0.6977).
"""

import pytest
import torch
import torch.fx as fx
import torch.nn.functional as F

import minidynamo
import xla_bridge
from tests.xla.xla_testing import BACKENDS, fresh  # noqa: F401  (fixture)


# Random ops whose draw depends only on sizes: drawn on the host, the rest computed on the device.
DRAWN_ON_THE_HOST = {
    "dropout": lambda x: F.dropout(x, 0.3) * 2,
    "dropout2d": lambda x: F.dropout2d(x.reshape(3, 2, 2), 0.4),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.3, True),
    "feature_alpha_dropout": lambda x: F.feature_alpha_dropout(x.reshape(3, 2, 2), 0.3, True),
    "two dropouts": lambda x: F.dropout(F.dropout(x, 0.2) + 1, 0.6),
    "bernoulli of a probability": lambda x: torch.bernoulli(x.detach(), 0.3) + x,
    "bernoulli_": lambda x: x * torch.empty_like(x).bernoulli_(0.6),
    "rand": lambda x: x + torch.rand(x.shape, device=x.device),
    "randn": lambda x: x * torch.randn(3, 4, device=x.device),
    "randint": lambda x: x + torch.randint(0, 10, (3, 4), device=x.device),
    "randperm": lambda x: x[torch.randperm(3, device=x.device)],
    "normal of floats": lambda x: x + torch.normal(0.5, 2.0, (3, 4), device=x.device),
    "uniform_": lambda x: x + x.detach().clone().uniform_(-1, 2),
    "normal_": lambda x: x + x.detach().clone().normal_(1.0, 3.0),
    "exponential_": lambda x: x * x.detach().clone().exponential_(2.0),
    "rand_like": lambda x: x * torch.rand_like(x),
    "randn_like": lambda x: x + torch.randn_like(x),
    "a draw returned as it is": lambda x: (x + 1, torch.rand(3, device=x.device)),
}

# Random ops whose eager CPU kernel draws according to tensor values: the graph runs eagerly.
DRAWS_READ_VALUES = {
    "bernoulli of a tensor": lambda x: torch.bernoulli(torch.sigmoid(x)) * x,
    "normal of a tensor": lambda x: torch.normal(x, 0.5),
    "multinomial": lambda x: torch.multinomial(torch.softmax(x, -1), 2).float().sum() * x,
    "rrelu in training": lambda x: F.rrelu(x, training=True),
}


def assert_eager_draws(f, backend, grad):
    """Three calls, each after ``manual_seed``: eager's values, eager's generator state after
    the call, and with grad eager's gradient (the backward reads the forward's mask)."""
    compiled = minidynamo.optimize(backend)(f)
    for call in range(3):
        x_eager = torch.randn(3, 4, generator=torch.Generator().manual_seed(call)).requires_grad_(grad)
        x_ours = x_eager.detach().clone().requires_grad_(grad)
        torch.manual_seed(10 + call)
        expected, expected_state = f(x_eager), torch.get_rng_state()
        torch.manual_seed(10 + call)
        got, got_state = compiled(x_ours), torch.get_rng_state()
        torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
        assert torch.equal(got_state, expected_state), "the host generator moved otherwise than eager's"
        first_eager, first_ours = (expected[0], got[0]) if isinstance(expected, tuple) else (expected, got)
        if grad and first_eager.requires_grad:
            first_eager.sum().backward()
            first_ours.sum().backward()
            torch.testing.assert_close(x_ours.grad, x_eager.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True], ids=["no grad", "grad"])
@pytest.mark.parametrize("case", DRAWN_ON_THE_HOST)
def test_random_ops_draw_eagers_numbers_on_the_device_path(backend, grad, case):
    assert_eager_draws(DRAWN_ON_THE_HOST[case], backend, grad)
    assert xla_bridge.counters.fallbacks == 0, xla_bridge.counters.reasons


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True], ids=["no grad", "grad"])
@pytest.mark.parametrize("case", DRAWS_READ_VALUES)
def test_random_ops_drawing_by_tensor_values_run_eagerly(backend, grad, case):
    assert_eager_draws(DRAWS_READ_VALUES[case], backend, grad)
    assert "draw reads tensor values" in "\n".join(xla_bridge.counters.reasons)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dropout_module_follows_the_seed_and_the_next_draw_too(backend):
    """The probe's case: an ``nn.Dropout`` module called after the same seed gives the same
    mask every call, and the ``torch.rand`` after it gives eager's number."""
    module = torch.nn.Dropout(0.5)
    compiled = minidynamo.optimize(backend)(module)
    x = torch.ones(8)
    for _ in range(3):
        torch.manual_seed(0)
        expected, expected_next = module(x), torch.rand(1)
        torch.manual_seed(0)
        got, got_next = compiled(x), torch.rand(1)
        assert torch.equal(got, expected) and torch.equal(got_next, expected_next)
    assert xla_bridge.counters.fallbacks == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_that_ends_eagerly_draws_once(backend):
    """An out-of-range index found after the device ran sends the call to eager, which raises
    eager's IndexError: the draws the device run made are put back first, so the generator
    moved once, as eager's does."""
    def f(x, index):
        return F.dropout(x, 0.5)[index]

    compiled = minidynamo.optimize(backend)(f)
    x = torch.ones(4)
    compiled(x, torch.tensor([1]))
    torch.manual_seed(0)
    with pytest.raises(IndexError):
        f(x, torch.tensor([7]))
    expected_state = torch.get_rng_state()
    torch.manual_seed(0)
    with pytest.raises(IndexError):
        compiled(x, torch.tensor([7]))
    assert torch.equal(torch.get_rng_state(), expected_state)


@pytest.mark.parametrize("program, draws", [(lambda x: x * 2, False),
                                             (lambda x: F.dropout(x, 0.5), True)],
                         ids=["no random op", "dropout"])
def test_only_graphs_with_random_ops_draw(program, draws):
    """A replayed graph without random ops draws nothing and keeps the C++ replay path; one
    with them draws on every call, on the Python path."""
    from xla_bridge import device as dev, replay_path
    from xla_bridge.backends import BridgedCall, _trace_once_program

    x = torch.ones(4, device=dev.xla_device())
    bridged = BridgedCall(fx.symbolic_trace(program), [x], _trace_once_program)
    bridged(x)
    assert (bridged.program.graph.draws is not None) == draws
    assert (replay_path.recipe(bridged, bridged.program) is None) == draws


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_retrace_for_new_shapes_draws_once(backend):
    """A graph called with new shapes is traced again inside the call (trace_once): that
    trace's draws are thrown away, so the call still draws once, as eager does."""
    def f(x):
        return F.dropout(x, 0.5) * 3

    compiled = getattr(xla_bridge, backend)(fx.symbolic_trace(f), [torch.ones(6)])
    for n in (6, 7, 6, 8):
        torch.manual_seed(n)
        expected, expected_state = f(torch.ones(n)), torch.get_rng_state()
        torch.manual_seed(n)
        got, got_state = compiled(torch.ones(n)), torch.get_rng_state()
        assert torch.equal(got, expected) and torch.equal(got_state, expected_state)


# Draws over tensors eager lays out otherwise than contiguously (``eager_layouts``): eager's
# kernels fill them in memory order, and ``empty_like`` keeps its input's strides.
OVER_STRIDED_TENSORS = {
    "dropout of a transpose": lambda x: F.dropout(x.t(), 0.3) * 2,
    "rand_like of a transpose": lambda x: x.t() * torch.rand_like(x.t()),
    "bernoulli_ of a transposed view": lambda x: x * torch.empty_like(x).t().bernoulli_(0.6).t(),
    "bernoulli of a transpose (eager's result is contiguous)": lambda x: torch.bernoulli(x.detach().t(), 0.3) + x.t(),
    "dropout of a permuted 4-d view": lambda x: F.dropout(x.reshape(3, 2, 2, 1).permute(2, 0, 3, 1), 0.4),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("grad", [False, True], ids=["no grad", "grad"])
@pytest.mark.parametrize("case", OVER_STRIDED_TENSORS)
def test_a_draw_over_a_strided_tensor_puts_eagers_numbers_where_eager_does(backend, grad, case):
    """The device's tensors have no strides: the host draw filled a contiguous stand-in, so a
    dropout of a transposed tensor had eager's numbers at other places (seed 312 of the fuzzer)."""
    assert_eager_draws(OVER_STRIDED_TENSORS[case], backend, grad)
    assert xla_bridge.counters.fallbacks == 0, xla_bridge.counters.reasons


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_transposed_argument_gets_eagers_dropout_mask(backend):
    """The fuzzer's program: the argument itself arrives transposed (``x.t_()`` before a break)."""
    compiled = minidynamo.optimize(backend)(lambda x: F.dropout(x, 0.5) + 0)
    for call in range(2):
        x = torch.randn(3, 4, generator=torch.Generator().manual_seed(call)).t()
        torch.manual_seed(call)
        expected = F.dropout(x, 0.5) + 0
        torch.manual_seed(call)
        assert torch.equal(compiled(x), expected)


RANDOM_FILLS = {"uniform_": lambda x: x.uniform_(), "normal_": lambda x: x.normal_(),
                "bernoulli_": lambda x: x.bernoulli_(0.5), "random_": lambda x: x.random_(0, 10),
                "exponential_": lambda x: x.exponential_(), "init.normal_": lambda x: torch.nn.init.normal_(x)}


def test_an_argument_filled_by_random_ops_is_filled_on_every_call():
    """Probe N: the draw's device data, copied into the argument's own buffer, kept the
    argument's identity there: the bridge took it for unwritten, and the caller's tensor stayed
    zeros (every function but, at times, the first compiled in a process)."""
    for name, fill in RANDOM_FILLS.items():
        compiled = minidynamo.optimize("torchxla_trace_once")(fill)
        for _ in range(2):
            torch.manual_seed(0)
            expected = torch.zeros(4, 6)
            fill(expected)
            torch.manual_seed(0)
            x = torch.zeros(4, 6)
            compiled(x)
            assert torch.equal(x, expected), name
