"""A Python attribute stored on a tensor (``t._tag = "static"``: what
``torch._dynamo.mark_static_address`` does to a cache tensor in Hugging Face's Mamba and static
caches) is an entry of the tensor's ``__dict__``.  The trace models it: later reads see it, and
after the graph the store is replayed on the real tensor, an input's own or the output a graph
made.  A name the tensor's class defines (a property, a method) or a class with its own
``__setattr__`` is refused: the class's code would run."""

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend


def tag(t):
    t._static = "guarded"


class Cache:
    def __init__(self, n):
        self.states = []
        for _ in range(n):
            state = torch.zeros(2, 3)
            tag(state)
            self.states.append(state)


def cache_made_in_the_frame(x):
    cache = Cache(2)
    cache.states[0].add_(x)
    return cache, cache.states[0]._static


def tag_input_and_output(x):
    x._seen = x.shape[0]
    y = x * 2
    y._made_by = "frame"
    return y, x._seen, getattr(y, "_other", None)


def tag_through_in_place_result(x):
    u = x * 1
    v = u.add_(1)                 # the same tensor as u
    v.flag = True
    return u, hasattr(u, "flag")


def _attrs(value):
    if isinstance(value, torch.Tensor):
        return (value.tolist(), vars(value))
    if isinstance(value, Cache):
        return [_attrs(s) for s in value.states]
    if isinstance(value, tuple):
        return tuple(_attrs(v) for v in value)
    return value


@pytest.mark.parametrize("fn", [cache_made_in_the_frame, tag_input_and_output, tag_through_in_place_result])
def test_attributes_stored_on_tensors_compile_and_replay(fn):
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(fn)
    for call in range(3):
        x_eager = torch.randn(2, 3, generator=torch.Generator().manual_seed(call))
        x_ours = x_eager.clone()
        assert _attrs(opt(x_ours)) == _attrs(fn(x_eager))
        assert vars(x_ours) == vars(x_eager)
    assert backend.compile_count == 1
    report = minidynamo.explain(fn)(torch.randn(2, 3))
    assert report.graph_break_count == 0 and report.fallback_count == 0


def store_a_property(x):
    y = x * 2
    y.names = ["a", None]         # a property of torch.Tensor: its setter would run
    return y


@pytest.mark.filterwarnings("ignore:Named tensors")
def test_a_name_the_tensor_class_defines_is_not_a_plain_attribute():
    report = minidynamo.explain(store_a_property)(torch.randn(2, 3))
    assert any("Tensor.names exists" in r for r in report.reasons)
    x = torch.randn(2, 3)
    ours, eager = minidynamo.optimize("eager")(store_a_property)(x.clone()), store_a_property(x)
    assert ours.names == eager.names == ("a", None)
    torch.testing.assert_close(ours.rename(None), eager.rename(None))
