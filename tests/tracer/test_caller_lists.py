"""A caller's list the frame only appends to is not read, so its growth compiles nothing new.

Each case runs a compiled function and an eager twin on lists of their own and compares the
lists and the results call by call."""

import pytest
import torch
from torch import nn

import minidynamo

FEATURES: list = []
LOG: list = []


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    FEATURES.clear()
    LOG.clear()
    yield
    minidynamo.reset()


def assert_same_lists(got: list, expected: list):
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        if isinstance(b, torch.Tensor):
            torch.testing.assert_close(a, b)
        else:
            assert a == b


def test_a_hook_collecting_features_compiles_once():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    model[1].register_forward_hook(lambda module, args, out: FEATURES.append(out))
    compiled = minidynamo.optimize("eager")(model)
    x = torch.randn(3, 4)
    for call in range(10):
        torch.testing.assert_close(compiled(x), model(x))
        assert len(FEATURES) == 2 * (call + 1)
        torch.testing.assert_close(FEATURES[-2], FEATURES[-1])     # compiled's append, then eager's
    assert minidynamo.counters["compiles"] == 1
    assert minidynamo.counters["fallbacks"] == 0


def test_appending_to_a_global_list_compiles_once():
    def step(x):
        y = x.sin()
        LOG.append(y.sum())
        LOG.extend((y.shape[0], "done"))
        return y * 2

    compiled = minidynamo.optimize("eager")(step)
    expected_log = []
    for _ in range(6):
        x = torch.randn(3)
        out = compiled(x)
        expected_log += [x.sin().sum(), 3, "done"]
        torch.testing.assert_close(out, x.sin() * 2)
        assert_same_lists(LOG, expected_log)
    assert minidynamo.counters["compiles"] == 1


def test_reading_the_list_after_appending_guards_its_length():
    def step(x, history):
        history.append(x.sum())
        return x * len(history) + history[0]

    compiled = minidynamo.optimize("eager")(step)
    ours, theirs = [], []
    for _ in range(4):
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x, ours), step(x, theirs))
        assert_same_lists(ours, theirs)


def test_the_list_is_reread_every_call():
    """The append reaches this call's list, even one the caller replaced or emptied."""
    class Recorder(nn.Module):
        def __init__(self):
            super().__init__()
            self.losses = []

        def forward(self, x):
            loss = (x * x).mean()
            self.losses.append(loss)
            return loss

    ours, theirs = Recorder(), Recorder()
    compiled = minidynamo.optimize("eager")(ours)
    for call in range(5):
        x = torch.randn(3)
        if call == 2:
            ours.losses, theirs.losses = [], []
        if call == 3:
            ours.losses.clear()
            theirs.losses.clear()
        torch.testing.assert_close(compiled(x), theirs(x))
        assert_same_lists(ours.losses, theirs.losses)


def test_one_list_under_two_names():
    def step(x, a, b):
        a.append(x + 1)
        b.append(x + 2)
        return x

    compiled = minidynamo.optimize("eager")(step)
    x = torch.randn(2)
    shared, shared_eager = [], []
    compiled(x, shared, shared)
    step(x, shared_eager, shared_eager)
    assert_same_lists(shared, shared_eager)
    a, b, a_eager, b_eager = [], [], [], []
    compiled(x, a, b)
    step(x, a_eager, b_eager)
    assert_same_lists(a, a_eager)
    assert_same_lists(b, b_eager)
    compiled(x, shared, shared)
    step(x, shared_eager, shared_eager)
    assert_same_lists(shared, shared_eager)


@pytest.mark.parametrize("program", [
    lambda x, xs: (xs.append(x), xs.extend(xs), x + len(xs))[-1],
    lambda x, xs: (xs.append(x), xs.__iadd__([x * 2]), xs.reverse(), xs[0] + xs[-1])[-1],
    lambda x, xs: (xs.append(x), xs.extend(iter([x, x])), x * len(xs))[-1],
    lambda x, xs: (xs.append(x), xs.insert(0, x - 1), xs.pop(), x + xs[0])[-1],
    lambda x, xs: (xs.append(x), xs.sort(key=lambda t: 0), bool(xs) * x)[-1],
], ids=["extend-itself", "iadd-reverse", "extend-iterator", "insert-pop", "sort-truth"])
def test_other_list_operations_after_an_append(program):
    compiled = minidynamo.optimize("eager")(program)
    ours, theirs = [torch.ones(2)], [torch.ones(2)]
    for _ in range(3):
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x, ours), program(x, theirs))
        assert_same_lists(ours, theirs)


def test_appends_before_and_after_a_graph_break():
    def step(x):
        LOG.append(x + 1)
        print("", end="")          # a graph break
        LOG.append(x + 2)
        return x

    compiled = minidynamo.optimize("eager")(step)
    x = torch.randn(2)
    for call in range(3):
        compiled(x)
        assert_same_lists(LOG, [x + 1, x + 2] * (call + 1))


def test_logging_a_loss_item_breaks_the_graph_once():
    stats = {}

    def step(x):
        loss = (x * 2).sum()
        LOG.append(loss.item())          # the break: item() runs eagerly, then LOG.append in the resume
        stats.update(last=loss.item())
        return loss * 3

    compiled = minidynamo.optimize("eager")(step)
    for call in range(5):
        if call == 2:                    # stats gained its key on call 1 (its keys are guarded)
            compiles = minidynamo.counters["compiles"]
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), (x * 2).sum() * 3)
        assert LOG[-1] == stats["last"] == (x * 2).sum().item() and len(LOG) == call + 1
    assert not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["compiles"] == compiles   # LOG's growth compiles nothing
