"""A number of the caller's the frame only counts with is not guarded by value, so a counter
compiles once; any other use reads it and guards it.  Each case compares a compiled model or
function with an eager twin, call by call."""

import pytest
import torch
from torch import nn

import minidynamo

STEP = 0


@pytest.fixture(autouse=True)
def _fresh():
    global STEP
    minidynamo.reset()
    STEP = 0
    yield
    minidynamo.reset()


class Counting(nn.Module):
    def __init__(self, use):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)
        self.calls, self.total = 0, 0.0
        self.use = use

    def forward(self, x):
        self.calls += 1
        self.total = self.total + 0.5 * 2
        return self.use(self, self.lin(x))


USES = {
    "counted only": lambda m, y: y,
    "in a graph op": lambda m, y: y * m.calls,
    "in control flow": lambda m, y: y + 1 if m.calls % 2 == 0 else y - 1,
    "divided": lambda m, y: y / (m.calls / 2),
    "returned": lambda m, y: (y, m.calls - 1, [m.total * 3]),
}


@pytest.mark.parametrize("use", USES, ids=list(USES))
def test_a_module_counting_its_calls(use):
    ours, theirs = Counting(USES[use]), Counting(USES[use])
    compiled = minidynamo.optimize("eager")(ours)
    for _ in range(6):
        x = torch.randn(2, 3)
        got, expected = compiled(x), theirs(x)
        torch.testing.assert_close(got, expected)
        assert (ours.calls, ours.total) == (theirs.calls, theirs.total)
        assert type(ours.calls) is int and type(ours.total) is float
    if use in ("counted only", "returned"):
        assert minidynamo.counters["compiles"] == 1
    assert not minidynamo.counters["fallback_reasons"]


def test_a_global_step_counter():
    def train_step(x):
        global STEP
        STEP = STEP + 1
        return x.sin()

    compiled = minidynamo.optimize("eager")(train_step)
    for call in range(5):
        x = torch.randn(2)
        torch.testing.assert_close(compiled(x), x.sin())
        assert STEP == call + 1
    assert minidynamo.counters["compiles"] == 1


def test_a_counter_printed_at_a_graph_break(capsys):
    model = Counting(lambda m, y: (print("call", m.calls), y)[1])
    compiled = minidynamo.optimize("eager")(model)
    for _ in range(3):
        compiled(torch.randn(2, 3))
    assert capsys.readouterr().out.split("\n")[:3] == ["call 1", "call 2", "call 3"]


def test_the_counter_changed_or_removed_by_the_caller():
    ours, theirs = Counting(USES["counted only"]), Counting(USES["counted only"])
    compiled = minidynamo.optimize("eager")(ours)
    x = torch.randn(2, 3)
    compiled(x), theirs(x)
    ours.calls = theirs.calls = 2.5                      # another type: guarded
    compiled(x), theirs(x)
    assert ours.calls == theirs.calls == 3.5
    ours.calls = theirs.calls = torch.tensor(1)          # a tensor now: counted in the graph
    compiled(x), theirs(x)
    assert torch.equal(ours.calls, theirs.calls)
    del ours.calls, theirs.calls                         # gone: eager's AttributeError
    with pytest.raises(AttributeError):
        theirs(x)
    with pytest.raises(AttributeError):
        compiled(x)


def test_bools_and_int_subclasses_are_read_at_once():
    class Count(int):
        def __add__(self, other):
            return Count(int(self) + other + 100)

    def f(x, flag, n):
        flag = flag + 1
        n = n + 1
        return x, flag, n

    compiled = minidynamo.optimize("eager")(f)
    x = torch.zeros(1)
    for flag, n in ((True, Count(1)), (False, Count(2)), (True, Count(2))):
        got, expected = compiled(x, flag, n), f(x, flag, n)
        assert got[1:] == expected[1:] and type(got[2]) is type(expected[2])


# A number only compared: the outcome is guarded, not the value.

class Warmup(nn.Module):
    """A learning-rate-warmup-like branch on a step counter: two graphs in all, not one per step."""

    def __init__(self, compare):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)
        self.step = 0
        self.compare = compare

    def forward(self, x):
        self.step += 1
        y = self.lin(x)
        return y * 2 if self.compare(self.step) else y


COMPARES = {
    "step > 3": lambda step: step > 3,
    "3 < step (mirrored)": lambda step: 3 < step,
    "step - 1 >= 3": lambda step: step - 1 >= 3,
    "10 - step < 7 (negated)": lambda step: 10 - step < 7,
    "step == 4": lambda step: step == 4,
    "step != 4": lambda step: step != 4,
    "truth of step - 4": lambda step: bool(step - 4),
}


@pytest.mark.parametrize("compare", COMPARES, ids=list(COMPARES))
def test_a_counter_compared_with_a_threshold_compiles_once_per_side(compare):
    ours, theirs = Warmup(COMPARES[compare]), Warmup(COMPARES[compare])
    compiled = minidynamo.optimize("eager")(ours)
    for _ in range(9):
        x = torch.randn(2, 3)
        torch.testing.assert_close(compiled(x), theirs(x))
        assert ours.step == theirs.step and type(ours.step) is int
    outcomes = {bool(COMPARES[compare](step)) for step in range(1, 10)}
    assert minidynamo.counters["compiles"] == len(outcomes)
    assert not minidynamo.counters["fallback_reasons"]


def test_a_value_handed_over_at_a_break_and_compared_is_guarded_by_its_side():
    def clip(x):
        peak = x.abs().max().item()             # a graph break hands the float to the rest
        return x.clamp(-1.0, 1.0) if peak > 1.0 else x

    compiled = minidynamo.optimize("eager")(clip)
    for scale in (3.0, 5.0, 0.5, 7.0, 0.25, 2.0):
        x = torch.randn(4) * scale
        torch.testing.assert_close(compiled(x), clip(x))
    # the first frame, and its rest once per side of 1.0 (was once per value)
    assert minidynamo.counters["compiles"] == 3
    assert not minidynamo.counters["fallback_reasons"]


def test_a_compared_float_at_the_edges():
    def f(x, limit):
        return x + 1 if limit >= 0.5 else x - 1

    compiled = minidynamo.optimize("eager")(f)
    x = torch.zeros(2)
    for limit in (0.75, 0.5, 0.4999999999999999, float("nan"), float("inf"), -0.0, 1, 0.6):
        torch.testing.assert_close(compiled(x, limit), f(x, limit))


def test_the_recompile_reason_names_the_comparison():
    ours = Warmup(COMPARES["step > 3"])
    compiled = minidynamo.optimize("eager")(ours)
    for _ in range(4):
        compiled(torch.randn(2, 3))
    (reason,) = minidynamo.counters["recompile_reasons"]
    assert reason.endswith("L['self'].step > 2: expected False, got True")   # step + 1 > 3, on the number read
