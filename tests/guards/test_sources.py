"""Sources are hashable expressions with readable names, and read the value they name."""

import torch

from guards import AttrSource, BuiltinSource, ClosureSource, GlobalSource, ItemSource, LocalSource
from guards.source import FrameValues

SELF = LocalSource("self")


def test_names_read_like_python():
    assert LocalSource("x").name() == "L['x']"
    assert GlobalSource("torch").name() == "G['torch']"
    assert BuiltinSource("len").name() == "B['len']"
    assert ClosureSource(0, "scale").name() == "C['scale']"
    assert AttrSource(ItemSource(AttrSource(SELF, "layer1"), 0), "weight").name() == "L['self'].layer1[0].weight"
    assert ItemSource(LocalSource("d"), "key").name() == "L['d']['key']"


def test_equal_sources_are_one_dict_key():
    a = AttrSource(SELF, "weight")
    b = AttrSource(LocalSource("self"), "weight")
    assert a == b and hash(a) == hash(b)
    assert len({a, b, AttrSource(SELF, "bias")}) == 2


def test_read_follows_the_chain():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    scale = 3.0

    def f(self):
        return scale

    frame = FrameValues(f, {"self": model}, {"torch": torch}, {"len": len})
    assert AttrSource(ItemSource(SELF, 0), "weight").read(frame) is model[0].weight
    assert GlobalSource("torch").read(frame) is torch
    assert BuiltinSource("len").read(frame) is len
    assert ClosureSource(0, "scale").read(frame) == 3.0
