"""Values the frame makes, stored where they outlive it: an attribute of a module or of a caller's
object, a global.  The store is replayed after the graph with the value the output templates
rebuild (``templates.Templates``), the same object wherever else the frame put it.  A store of
anything but a tensor, a constant or a plain container used to be a graph break at the store
(torchvision's ``MultiScaleRoIAlign`` builds its ``LevelMapper`` on the first call like this)."""

import functools

import pytest
import torch

import minidynamo

from .test_values_at_breaks import Scaler


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


class LazyHead(torch.nn.Module):
    """Builds a helper object on its first call and keeps it (a cache filled lazily)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.scaler = None

    def forward(self, x):
        if self.scaler is None:
            self.scaler = Scaler(x.shape[-1])
        return self.scaler.apply(self.linear(x))


class Holder:
    pass


def stores_what_it_made(x, holder):
    made = Scaler(2)
    holder.made = made
    holder.shifted = lambda t: t + made.k              # a closure over the object it stored
    holder.doubled = functools.partial(torch.mul, other=2)
    holder.rest = iter([x, x + 1])
    next(holder.rest)
    return made, made.apply(x)


LAST = None


def stores_a_global(x):
    global LAST
    LAST = Scaler(3)
    LAST.seen = x + 1
    return LAST.apply(x)


def test_a_module_keeps_the_helper_its_first_call_made():
    eager, model = LazyHead(), LazyHead()
    model.load_state_dict(eager.state_dict())
    compiled = minidynamo.optimize("eager")(model)
    for _ in range(3):
        x = torch.randn(2, 3)
        torch.testing.assert_close(compiled(x), eager(x))
    assert type(model.scaler) is Scaler and model.scaler.k == 3
    assert not minidynamo.counters["break_reasons"] and not minidynamo.counters["fallback_reasons"]
    assert minidynamo.counters["compiles"] == 2          # before and after the helper exists


def test_stored_on_a_callers_object_it_is_one_object_with_what_is_returned():
    compiled = minidynamo.optimize("eager")(stores_what_it_made)
    for _ in range(3):
        x = torch.randn(2)
        ours, theirs = Holder(), Holder()
        made, y = compiled(x, ours)
        expected_made, expected_y = stores_what_it_made(x, theirs)
        torch.testing.assert_close(y, expected_y)
        assert ours.made is made and made is not expected_made and made.k == expected_made.k
        assert ours.shifted.__closure__[0].cell_contents is made
        torch.testing.assert_close(ours.shifted(x), theirs.shifted(x))
        torch.testing.assert_close(ours.doubled(x), theirs.doubled(x))
        torch.testing.assert_close(next(ours.rest), next(theirs.rest))
        assert next(ours.rest, None) is None
    assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["break_reasons"]


def test_a_global_holds_the_object_the_frame_made():
    compiled = minidynamo.optimize("eager")(stores_a_global)
    for _ in range(2):
        x = torch.randn(2)
        expected = stores_a_global(x)
        eager_last = LAST
        torch.testing.assert_close(compiled(x), expected)
        assert LAST is not eager_last and type(LAST) is Scaler and LAST.k == 3
        torch.testing.assert_close(LAST.seen, x + 1)
    assert minidynamo.counters["compiles"] == 1 and not minidynamo.counters["fallback_reasons"]


def a_generator(t):
    yield t


def stores_a_generator(x, holder):
    holder.gen = a_generator(x)          # the templates cannot rebuild a generator
    return x + 1


def test_what_cannot_be_rebuilt_is_refused_at_the_store():
    compiled = minidynamo.optimize("eager")(stores_a_generator)
    holder = Holder()
    torch.testing.assert_close(compiled(torch.ones(2), holder), torch.ones(2) + 1)
    assert next(holder.gen).tolist() == [1.0, 1.0]
    # (a paused generator cannot be handed to a resume function either: the frame runs eagerly)
    (reason,) = minidynamo.counters["fallback_reasons"]
    assert "assignment of GeneratorVariable(a_generator) to Holder.gen" in reason
