"""Namedtuples made in the frame bind their fields as their ``__new__`` does: by position, by
name, then the defaults, which are guarded; arguments that do not fit raise eager's TypeError."""

import collections

import pytest
import torch

import minidynamo

Config = collections.namedtuple("Config", ["scale", "shift", "name"], defaults=(0.5, "c"))


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()
    Config.__new__.__defaults__ = (0.5, "c")


def test_defaults_are_used_and_guarded():
    def f(x):
        c = Config(2.0)
        return x * c.scale + c.shift, c.name

    compiled = minidynamo.optimize("eager")(f)
    x = torch.randn(3)
    assert compiled(x)[1] == "c"
    torch.testing.assert_close(compiled(x)[0], x * 2.0 + 0.5)
    Config.__new__.__defaults__ = (1.5, "d")                 # the defaults replaced: recompiled
    got, expected = compiled(x), f(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] == "d"
    assert minidynamo.counters["compiles"] == 2 and not minidynamo.counters["fallback_reasons"]


@pytest.mark.parametrize("make", [
    lambda x: Config(x, 1.0, "n", scale=2.0),     # scale twice
    lambda x: Config(x, bias=1.0),                # no such field
    lambda x: Config(x, 1.0, "n", "extra"),       # too many
    lambda x: Config(shift=x),                    # scale has no default
], ids=["twice", "unknown", "too-many", "missing"])
def test_arguments_that_do_not_fit_raise_as_in_eager(make):
    compiled = minidynamo.optimize("eager")(make)
    with pytest.raises(TypeError):
        make(torch.ones(1))
    with pytest.raises(TypeError):
        compiled(torch.ones(1))
