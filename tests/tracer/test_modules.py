"""nn.Module inlining: forward, containers, super(), helper methods, properties, state."""

import logging

import pytest
import torch
from torch import nn

import minidynamo

from .helpers import check, run_traced

x = torch.randn(2, 4)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, a):
        return self.lin(a)


class Child(Base):
    scale = 3.0

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.ReLU()])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Identity()})
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
        self.register_buffer("offset", torch.ones(4))

    @property
    def width(self):
        return self.lin.out_features

    def helper(self, a, k=2):
        return a * k + self.offset

    def forward(self, a):
        a = super().forward(a)
        for block in self.blocks:
            a = block(a)
        for i in range(len(self.blocks)):
            a = self.blocks[i](a)
        a = self.seq(self.helper(a, k=self.width))
        outs = {name: head(a) for name, head in self.heads.items()}
        if self.training:
            a = a * 0
        return outs, a * self.scale, self.heads["a"](a)


def test_child_module_eval_and_train():
    torch.manual_seed(0)
    m = Child().eval()
    check(m, x)
    m.train()
    check(m, x)


def test_parameters_and_buffers_are_inputs():
    m = Child().eval()
    capture, _ = run_traced(m, x)
    names = {s.name() for s in capture.input_sources}
    assert "L['self'].offset" in names and "L['self'].lin.weight" in names


def test_python_call_override_is_inlined():
    """A module whose class overrides __call__ in Python (transformers' checkpointing layers):
    the override runs, not nn.Module's dispatch (its forward is never reached here)."""
    class Weird(nn.Module):
        def __call__(self, a):
            return a * 3

        def forward(self, a):
            return a

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = Weird()

        def forward(self, a):
            return self.w(a)

    check(Outer(), x)


def test_trace_log(caplog):
    with caplog.at_level(logging.DEBUG, logger="minidynamo.trace"):
        run_traced(lambda a: a + 1, x)
    assert any("BINARY_OP" in r.getMessage() for r in caplog.records)
    assert any("RETURN_VALUE" in r.getMessage() for r in caplog.records)


def test_parameter_type_is_seen():
    class UsesType(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(4))
            self.plain = torch.ones(4)

        def forward(self, a):
            flags = (isinstance(self.w, nn.Parameter), isinstance(self.plain, nn.Parameter),
                     isinstance(a, torch.Tensor))
            return a * self.w + self.plain, flags

    check(UsesType(), x)


def doubled(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) * 2
    return wrapper


class NoGradForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @torch.no_grad()
    def forward(self, a):
        return self.lin(a)


class DecoratedForward(NoGradForward):
    @doubled
    def forward(self, a):
        return self.lin(a)


class UsesBoth(nn.Module):
    def __init__(self):
        super().__init__()
        self.p, self.q = NoGradForward(), DecoratedForward()

    def forward(self, a):
        return self.p(a) + self.q(a)


@pytest.mark.parametrize("make", [NoGradForward, DecoratedForward, UsesBoth])
def test_decorated_forwards(make):
    torch.manual_seed(0)
    check(make(), torch.randn(2, 4, requires_grad=True))


@pytest.mark.parametrize("tie_weights", [False, True])
def test_functional_call_computes_with_the_tensors_it_is_given(tie_weights):
    """``torch.func.functional_call`` swaps the given tensors in with
    ``module._parameters[name] = t``; the module's forward then read its own weights, from
    before those writes (the override was ignored, probe Y r07).  A read through a module whose
    attribute tables the trace wrote now breaks the graph there."""
    from torch.func import functional_call

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))

    def f(params, x):
        return functional_call(model, params, (x,), tie_weights=tie_weights)

    compiled = minidynamo.optimize("eager")(f)
    for params in ({"0.weight": torch.ones(4, 4)}, {"1.bias": torch.zeros(4)}, {}):
        x = torch.randn(2, 4)
        torch.testing.assert_close(compiled(params, x), f(params, x))
    torch.testing.assert_close(model(x), compiled({}, x))
