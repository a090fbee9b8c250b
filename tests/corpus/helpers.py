"""The one helper every corpus case runs through: eager PyTorch is the oracle.

A case is a plain function plus its inputs::

    def add_one(x):
        return x + 1

    single(add_one, tensor(3))            # must be captured as exactly one graph
    fallback(print_it, tensor(3), mentions="print")   # must run eagerly, with a reason

``check(case)`` then

1. resets minidynamo, and runs the function twice eagerly and twice optimized, each call on
   fresh deep copies of the inputs (modules and user objects among the inputs are copied once
   per side and reused, so a second call can hit the cache and their state evolves the same
   way on both sides);
2. after every call compares the result, the inputs (so in-place mutations match eager),
   what was printed, and the aliasing (an output that *is* an input, or shares its storage,
   in eager must do so when optimized, and vice versa);
3. checks the second call compiled nothing new (a cache hit), and for single-graph cases that
   exactly one graph was compiled and ``explain`` reports one graph and no breaks; then calls
   the same optimized function on the case's other inputs (``.then(...)``), if any, so a
   guard that misses a change shows up as a wrong answer;
4. for fallback cases, checks ``explain`` counts a break with a readable reason and that
   ``nopython=True`` raises.
"""

import contextlib
import copy
import dataclasses
import io
from typing import Any, Callable

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.exc import MinidynamoError

_generator = torch.Generator().manual_seed(0)


def tensor(*shape, dtype=torch.float32):
    """A small deterministic random input; integer dtypes hold values in [0, 10)."""
    if dtype.is_floating_point:
        return torch.randn(shape, generator=_generator, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=_generator).bool()
    return torch.randint(0, 10, shape, generator=_generator, dtype=dtype)


@dataclasses.dataclass
class Case:
    """A function, its inputs, and what minidynamo must do with it."""

    fn: Callable
    args: tuple
    kwargs: dict
    single_graph: bool  # True: one graph, no break. False: a fallback case.
    mentions: str | None = None  # a word the fallback reason must contain
    name: str = ""
    other_inputs: list = dataclasses.field(default_factory=list)  # see ``then``

    def __post_init__(self):
        self.name = self.name or self.fn.__name__

    def then(self, *args, **kwargs) -> "Case":
        """After the two calls, call the same optimized function on these other inputs too:
        guards must notice what changed (recompiling is allowed, a stale answer is not)."""
        self.other_inputs.append((args, kwargs))
        return self

    def named(self, name: str) -> "Case":
        """Give the case its own test id (e.g. the same function on other inputs)."""
        self.name = name
        return self


def single(fn, *args, **kwargs) -> Case:
    """``fn(*args, **kwargs)`` must be captured whole: one graph, no break, eager's answer."""
    return Case(fn, args, kwargs, single_graph=True)


def fallback(fn, *args, mentions=None, **kwargs) -> Case:
    """``fn`` cannot be captured: it must run eagerly with eager's answer and a reason."""
    return Case(fn, args, kwargs, single_graph=False, mentions=mentions)


def params(cases: list[Case]) -> list:
    """One pytest id per case (its function's name); names must be unique within a table."""
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"duplicate case names: {duplicates}"
    return [pytest.param(c, id=c.name) for c in cases]


class CountingBackend:
    """A backend that records every graph it is given and runs it with PyTorch."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    @property
    def compile_count(self) -> int:
        return len(self.graphs)


# ---------------------------------------------------------------- running one call

@dataclasses.dataclass
class Outcome:
    """What one call did: its result or the exception it raised, and what it printed."""

    value: Any = None
    error: BaseException | None = None
    stdout: str = ""


def run_call(fn, args, kwargs) -> Outcome:
    printed = io.StringIO()
    outcome = Outcome()
    with contextlib.redirect_stdout(printed):
        try:
            outcome.value = fn(*args, **kwargs)
        except MinidynamoError:
            raise  # minidynamo's own failure, never the program's answer
        except Exception as error:  # the program's own exception is part of its answer
            outcome.error = error
    outcome.stdout = printed.getvalue()
    return outcome


class Side:
    """One side of the comparison (eager or optimized). Tensors, lists and dicts are fresh
    copies on every call; modules and other user objects are copied once per side and reused,
    as a caller reuses its model, so a second call can hit the cache."""

    def __init__(self, case: Case):
        self.case = case
        every_input = [case.args, case.kwargs] + [inputs for inputs in case.other_inputs]
        originals = [v for v in _walk(every_input) if _is_persistent(v)]
        self._persistent = {id(v): copy.deepcopy(v) for v in originals}
        self._keep_alive = originals

    def fresh_inputs(self, inputs=None):
        """(args, kwargs): deep copies of the case's inputs (or of ``inputs``)."""
        memo = dict(self._persistent)
        return copy.deepcopy(inputs or (self.case.args, self.case.kwargs), memo)


def _is_persistent(value) -> bool:
    """Modules and plain user objects: kept across calls, unlike tensors and containers."""
    if isinstance(value, torch.Tensor):
        return False
    return isinstance(value, nn.Module) or (
        hasattr(value, "__dict__") and not callable(value) and not isinstance(value, type))


def _walk(value):
    """Every value reachable through tuples, lists and dict values (containers included)."""
    yield value
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _walk(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _walk(item)


# ---------------------------------------------------------------- comparing

def assert_same(actual, expected, where="output"):
    """Equal values of equal types, recursively; tensors through ``assert_close``."""
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: expected a tensor, got {actual!r}"
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{where}: {m}")
        assert actual.requires_grad == expected.requires_grad, f"{where}: requires_grad differs"
        return
    assert type(actual) is type(expected), (
        f"{where}: expected {type(expected).__name__} {expected!r}, "
        f"got {type(actual).__name__} {actual!r}")
    if isinstance(expected, nn.Module):
        assert actual.training == expected.training, f"{where}: training flag differs"
        assert _plain_attributes(actual) == _plain_attributes(expected), \
            f"{where}: Python attributes differ"
        assert_same(actual.state_dict(), expected.state_dict(), f"{where}.state_dict()")
    elif _is_persistent(expected):  # a plain user object
        assert_same(vars(actual), vars(expected), f"{where}.__dict__")
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{where}[{i}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    else:
        assert actual == expected, f"{where}: expected {expected!r}, got {actual!r}"


def _plain_attributes(module: nn.Module) -> dict:
    """A module's public int/float/str/bool attributes (a forward may change them)."""
    return {k: v for k, v in vars(module).items()
            if not k.startswith("_") and isinstance(v, (int, float, str, bool))}


def _tensor_leaves(value, path="output"):
    """(path, tensor) for every tensor inside nested tuples, lists, dicts and modules."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from _tensor_leaves(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensor_leaves(item, f"{path}[{key!r}]")
    elif isinstance(value, nn.Module):
        for name, item in value.state_dict(keep_vars=True).items():
            yield path + "." + name, item


def aliasing(output, inputs) -> list:
    """For each output tensor: which input it *is*, which inputs share its storage, and which
    earlier output it is. Two runs alias the same way iff these descriptions are equal."""
    input_leaves = list(_tensor_leaves(inputs, "input"))
    outputs = [t for _, t in _tensor_leaves(output)]
    description = []
    for out in outputs:
        storage = out.untyped_storage().data_ptr()
        description.append({
            "is input": [p for p, t in input_leaves if t is out],
            "shares storage with": [p for p, t in input_leaves
                                    if t.untyped_storage().data_ptr() == storage and storage],
            "is output": next(j for j, o in enumerate(outputs) if o is out),
        })
    return description


def assert_same_outcome(actual: Outcome, expected: Outcome, actual_inputs, expected_inputs):
    if expected.error is not None:
        assert actual.error is not None, f"eager raised {expected.error!r}, optimized returned"
        assert type(actual.error) is type(expected.error)
        assert str(actual.error) == str(expected.error)
    else:
        assert actual.error is None, f"optimized raised {actual.error!r}, eager did not"
        assert_same(actual.value, expected.value)
        assert aliasing(actual.value, actual_inputs) == aliasing(expected.value, expected_inputs), \
            "outputs alias the inputs differently from eager"
    assert_same(actual_inputs, expected_inputs, "inputs after the call")
    assert actual.stdout == expected.stdout, "printed output differs from eager"


# ---------------------------------------------------------------- the check

def check(case: Case, backend_class=None):
    """Run ``case`` eagerly and optimized; assert everything the module docstring promises.

    ``backend_class`` (a ``CountingBackend`` subclass) replaces the backend of the two
    optimized calls; the helper's own tests use it to show that a wrong backend is caught."""
    minidynamo.reset()
    try:
        _check_against_eager(case, backend_class or CountingBackend)
        minidynamo.reset()
        if case.single_graph:
            _check_single_graph(case)
        else:
            _check_fallback(case)
    finally:
        minidynamo.reset()


def _check_against_eager(case: Case, backend_class):
    eager, optimized = Side(case), Side(case)
    backend = backend_class()
    optimized_fn = minidynamo.optimize(backend)(case.fn)

    def compare_one_call(call: str, inputs=None):
        eager_args, eager_kwargs = eager.fresh_inputs(inputs)
        expected = run_call(case.fn, eager_args, eager_kwargs)
        opt_args, opt_kwargs = optimized.fresh_inputs(inputs)
        actual = run_call(optimized_fn, opt_args, opt_kwargs)
        try:
            assert_same_outcome(actual, expected,
                                (opt_args, opt_kwargs), (eager_args, eager_kwargs))
        except AssertionError as failure:
            raise AssertionError(f"{call}: {failure}") from failure

    compare_one_call("first call")
    compiled_by_first_call = backend.compile_count
    compare_one_call("second call")
    assert backend.compile_count == compiled_by_first_call, (
        f"the second call compiled again ({backend.compile_count - compiled_by_first_call} more "
        f"graphs): expected a cache hit")
    if case.single_graph:
        # one entry, one graph (a graph with no operations never reaches the backend)
        assert compiled_by_first_call <= 1, (
            f"expected one compiled graph at most, the backend got {compiled_by_first_call}")
    for i, inputs in enumerate(case.other_inputs):
        compare_one_call(f"call on other inputs #{i}", inputs)


def _check_single_graph(case: Case):
    args, kwargs = Side(case).fresh_inputs()
    explanation = minidynamo.explain(case.fn)(*args, **kwargs)
    assert explanation.reasons == [], f"unexpected breaks: {explanation.reasons}"
    # one graph, or none when the frame does no tensor operation (Python work only)
    assert explanation.graph_count <= 1, f"graph_count {explanation.graph_count}"
    assert explanation.graph_break_count == 0 and explanation.fallback_count == 0
    assert all(isinstance(g, torch.fx.GraphModule) for g in explanation.graphs)
    assert all(isinstance(g, str) for g in explanation.guards)


def _check_fallback(case: Case):
    raises = run_call(case.fn, *Side(case).fresh_inputs()).error is not None
    if not raises:  # explain cannot report on a call that raises the program's own error
        args, kwargs = Side(case).fresh_inputs()
        explanation = minidynamo.explain(case.fn)(*args, **kwargs)
        # the frame ran eagerly whole (a fallback) or split at a graph break around what it cannot trace
        assert explanation.graph_break_count + explanation.fallback_count >= 1, "a fallback or break must be reported"
        assert explanation.reasons, "a fallback must give a reason"
        assert all(isinstance(r, str) and len(r.strip()) > 5 for r in explanation.reasons), \
            f"unreadable reasons: {explanation.reasons}"
        if case.mentions:
            assert any(case.mentions.lower() in r.lower() for r in explanation.reasons), \
                f"no reason mentions {case.mentions!r}: {explanation.reasons}"
    minidynamo.reset()
    strict = minidynamo.optimize(CountingBackend(), nopython=True)(case.fn)
    args, kwargs = Side(case).fresh_inputs()
    with pytest.raises(MinidynamoError) as raised:
        with contextlib.redirect_stdout(io.StringIO()):
            strict(*args, **kwargs)
    assert len(str(raised.value).strip()) > 5, "nopython error without a readable reason"
    if case.mentions:
        assert case.mentions.lower() in str(raised.value).lower()
