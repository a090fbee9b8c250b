"""A graph that writes its inputs in place after a Python side effect of its frame compiles when
none of its ops can raise for the values it meets (value_errors.py); one that may (an index by a
tensor, an integer division) still runs its frame eagerly, since only a re-run would reproduce
eager's partial effects and such a graph cannot run twice."""

import pytest
import torch

import minidynamo
from minidynamo.tracer.capture import _target_name
from minidynamo.tracer.value_errors import may_raise_on_values

from .helpers import run_traced


class Cache(torch.nn.Module):
    """A KV-cache's pattern: a Python position advanced, then a buffer row written."""

    def __init__(self):
        super().__init__()
        self.register_buffer("store", torch.zeros(4, 3))
        self.pos = 0

    def forward(self, t):
        row = self.pos % 4
        self.pos += 1
        self.store[row, :t.shape[-1]] = t[0]
        return self.store.sum(0) * 2


class ConvCache(torch.nn.Module):
    """Mamba's cache pattern: a Python step counter advanced, the input padded to the kernel's
    width, and the cache buffer overwritten in place."""

    def __init__(self):
        super().__init__()
        self.register_buffer("conv_state", torch.zeros(2, 4))
        self.steps = 0

    def forward(self, x):
        self.steps += 1
        padded = torch.nn.functional.pad(x, (4 - x.shape[-1], 0))
        self.conv_state.copy_(padded)
        return self.conv_state * 2


def spectral_norm():
    torch.manual_seed(0)
    return torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(3, 3))


@pytest.mark.parametrize("make, state, compiles", [
    # a Python position advanced, then a buffer row written (one entry per position: ints are specialized)
    (Cache, lambda m: (torch.tensor(m.pos), m.store), 6),
    # the power iteration writes ``_u``/``_v`` in place after a grad-mode change
    (spectral_norm, lambda m: m.parametrizations.weight[0]._u, 1),
    # Mamba's: a step counted, the input padded (shape-decided), the cache overwritten in place
    (ConvCache, lambda m: (torch.tensor(m.steps), m.conv_state), 1),
], ids=["cache", "spectral_norm", "padded_cache"])
def test_a_module_written_in_place_after_a_python_effect_compiles(make, state, compiles):
    eager, ours = make(), make()
    minidynamo.reset()
    minidynamo.counters.reset()
    compiled = minidynamo.optimize("eager")(ours)
    for _ in range(6):
        x = torch.randn(2, 3)
        torch.testing.assert_close(compiled(x), eager(x))
        torch.testing.assert_close(state(ours), state(eager))
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["compiles"] == compiles


def test_an_integer_division_after_a_side_effect_still_runs_eagerly():
    def f(x, d, log):
        log.append(1)
        x.add_(1)
        return x // d                  # d may hold a 0: eager raises after its append and its add_

    x, log = torch.tensor([4, 6]), []
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        minidynamo.optimize("eager")(f)(x, torch.tensor([2, 0]), log)
    assert log == [1] and x.tolist() == [5, 7]
    assert any("floordiv" in r and "re-run" in r for r in minidynamo.counters["fallback_reasons"])


def test_the_frames_own_kwargs_dict_changed_before_such_an_op_is_no_effect():
    """CPython makes a ``**kwargs`` dict anew for every call: a change to it before an op that
    may raise is seen by no one else (transformers' ``check_model_inputs`` sets
    ``kwargs["use_cache"]``, then embeds); handed on to a caller's list, it is an effect again."""
    def f(x, d, log=None, **kwargs):
        kwargs["seen"] = True
        if log is not None:
            log.append(kwargs)
        x.add_(1)
        return x // d, kwargs

    minidynamo.reset()
    minidynamo.counters.reset()
    x, expected = torch.tensor([4, 6]), f(torch.tensor([4, 6]), torch.tensor([2, 3]), flag=1)
    got = minidynamo.optimize("eager")(f)(x, torch.tensor([2, 3]), flag=1)
    assert got[1] == expected[1] == {"flag": 1, "seen": True} and torch.equal(got[0], expected[0])
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["compiles"] == 1
    x, log = torch.tensor([4, 6]), []
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        minidynamo.optimize("eager")(f)(x, torch.tensor([2, 0]), log)
    assert log == [{"seen": True}] and x.tolist() == [5, 7]


def _nodes(fn, *args):
    capture, _ = run_traced(fn, *args)
    return {_target_name(n): n for n in capture.graph_module.graph.nodes if n.op in ("call_function", "call_method")}


@pytest.mark.parametrize("fn, args, name, may_raise", [
    (lambda x: x[1:3] * 2, (torch.randn(4),), "getitem", False),
    (lambda x, i: x[i] * 2, (torch.randn(4), torch.tensor([1, 3])), "getitem", True),
    (lambda x, y: x / y, (torch.randn(3), torch.randn(3)), "truediv", False),
    (lambda x, y: x / y, (torch.tensor([3, 4]), torch.tensor([1, 2])), "truediv", True),
    (lambda x, y: torch.div(x, y, rounding_mode="floor"), (torch.randn(3), torch.randn(3)), "div", False),
    (lambda x: torch.linalg.cholesky(x @ x.T), (torch.randn(3, 3),), "linalg_cholesky", True),
    (lambda x: x.softmax(-1).sum(), (torch.randn(3),), "softmax", False),
    (lambda x, y: x ** y, (torch.tensor([2, 3]), torch.tensor([1, 2])), "pow", True),
    (lambda x, y: x ** y, (torch.randn(2), torch.randn(2)), "pow", False),
    (lambda x, y: x // y, (torch.randn(2), torch.randn(2)), "floordiv", False),
    (lambda x, y: x % y, (torch.tensor([5, 7]), torch.tensor([2, 3])), "mod", True),
])
def test_which_ops_may_raise_for_their_values(fn, args, name, may_raise):
    node = _nodes(fn, *args)[name]
    assert may_raise_on_values(node, name) is may_raise


@pytest.mark.parametrize("fn, args, name, may_raise", [
    (lambda x: x.add_(1), (torch.randn(3),), "add_", False),
    (lambda x: x.zero_(), (torch.randn(3),), "zero_", False),
    (lambda x, i: x.index_add_(0, i, x * 2), (torch.randn(3), torch.tensor([0, 1, 2])), "index_add_", True),
    (lambda x: torch.nn.functional.pad(x, (1, 0)), (torch.randn(2, 3),), "pad", False),
    (lambda x, i: torch.nn.functional.embedding(i, x), (torch.randn(4, 3), torch.tensor([1, 3])), "embedding", True),
    (lambda x, t: torch.nn.functional.cross_entropy(x, t), (torch.randn(2, 3), torch.tensor([0, 2])),
     "cross_entropy", True),
])
def test_in_place_variants_and_functional_ops(fn, args, name, may_raise):
    node = _nodes(fn, *args)[name]
    assert may_raise_on_values(node, name) is may_raise
