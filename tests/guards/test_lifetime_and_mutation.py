"""Found by a probe of object lifetime, cache management and nn.Module mutations between calls.

Each family was a stale answer: a guard that held while what the trace relied on had changed.

- An attribute the trace found absent (``getattr(o, "w", 2)``, ``hasattr``) was guarded by the
  instance dict and the class MRO only: a ``__getattr__`` / ``__getattribute__`` added to the
  class later answers the name, and the default was still returned.
- ``module(...)`` runs ``_compiled_call_impl`` when set (``module.compile()``), a ``_call_impl``
  set on the instance or a class, and whatever ``__call__`` its class has now: the module-state
  guard checked only the training flag and the hook dicts.
"""

import pytest
import torch
import torch.nn as nn

import minidynamo
from guards import LocalSource, UnguardableValue, absent_match, module_state_match, type_match
from tests.guards.helpers import guard_fn_for, some_function as f

X = LocalSource("x")


def both_agree(guard_fn, *args):
    """The guard's answer, checked against its slow path (None exactly when it passes)."""
    ok = guard_fn(f, *args)
    assert ok == (guard_fn.failure_reason(f, *args) is None)
    return ok


def _getattr_hook(self, name):
    return 7


def _getattribute_hook(self, name):
    return 9 if name == "w" else object.__getattribute__(self, name)


@pytest.mark.parametrize("hook, function", [("__getattr__", _getattr_hook), ("__getattribute__", _getattribute_hook)])
def test_absent_attribute_fails_once_the_class_answers_missing_names(hook, function):
    class C:
        pass

    o = C()
    guard_fn = guard_fn_for([type_match(X, o), absent_match(X, o, "w")], "x")
    assert both_agree(guard_fn, o)
    setattr(C, hook, function)
    assert not both_agree(guard_fn, o)
    assert f"type(L['x']).{hook}" in guard_fn.failure_reason(f, o)
    delattr(C, hook)
    assert both_agree(guard_fn, o)


@pytest.mark.parametrize("hook, function, value", [("__getattr__", _getattr_hook, 7),
                                                   ("__getattribute__", _getattribute_hook, 9)])
def test_getattr_default_follows_a_hook_added_to_the_class(hook, function, value):
    class C:
        pass

    def fn(x, o):
        return x * getattr(o, "w", 2)

    minidynamo.reset()
    compiled, x, o = minidynamo.optimize("eager")(fn), torch.ones(2), C()
    assert torch.equal(compiled(x, o), x * 2)
    setattr(C, hook, function)
    assert torch.equal(compiled(x, o), x * value)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


def _replace_compiled_call(module):
    module._compiled_call_impl = lambda *args, **kwargs: args[0] + 100


def _replace_instance_call_impl(module):
    module._call_impl = lambda *args, **kwargs: args[0] - 100


def _replace_class_call(module):
    type(module).__call__ = lambda self, x: x * 5


def _replace_class_call_impl(module):
    type(module)._call_impl = lambda self, x: x * 6


REPLACEMENTS = [_replace_compiled_call, _replace_instance_call_impl, _replace_class_call, _replace_class_call_impl]


def _own_linear():
    """A Linear of a class of its own (the test may replace what its class's call finds)."""
    torch.manual_seed(0)
    return type("OwnLinear", (nn.Linear,), {})(4, 4)


@pytest.mark.parametrize("replace", REPLACEMENTS)
def test_module_state_fails_once_the_call_is_replaced(replace):
    module = _own_linear()
    guard_fn = guard_fn_for([type_match(X, module), module_state_match(X, module)], "x")
    assert both_agree(guard_fn, module)
    replace(module)
    assert not both_agree(guard_fn, module)


@pytest.mark.parametrize("replace", [_replace_compiled_call, _replace_instance_call_impl, _replace_class_call_impl])
def test_module_state_refuses_a_module_whose_call_is_replaced_already(replace):
    module = _own_linear()
    replace(module)
    with pytest.raises(UnguardableValue, match="call is replaced"):
        module_state_match(X, module)


@pytest.mark.parametrize("replace", REPLACEMENTS)
@pytest.mark.parametrize("where", ["optimized module", "pinned argument", "shared argument"])
def test_submodule_call_replaced_after_the_first_call_is_seen(replace, where):
    minidynamo.reset()
    x = torch.ones(2, 4)

    def block():
        made = Block()
        made.lin = _own_linear()
        return made

    if where == "optimized module":
        module = block()
        compiled = minidynamo.optimize("eager")(module)
        call = lambda: compiled(x)     # noqa: E731
    else:
        compiled = minidynamo.optimize("eager")(lambda b, x: b(x))
        if where == "shared argument":        # a second Block came first: guarded by type and state
            compiled(block(), x)
            compiled(block(), x)
        module = block()
        call = lambda: compiled(module, x)     # noqa: E731
    call()
    torch.testing.assert_close(call(), module(x))
    replace(module.lin)
    expected = module(x)
    torch.testing.assert_close(call(), expected)
    torch.testing.assert_close(call(), expected)
