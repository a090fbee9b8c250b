"""``import m`` inside a traced function binds ``sys.modules['m']``: a module is read from there on
every call (its identity guarded, a library's too), so values read through it are guarded like
globals; the import runs the builtins' own ``__import__``, guarded to stay so."""

import sys
import types

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend

NAME = "minidynamo_test_local_module"


@pytest.fixture(autouse=True)
def _module():
    minidynamo.reset()
    module = types.ModuleType(NAME)
    module.K, module.scale = 3, (lambda t: t * 2)
    sys.modules[NAME] = module
    yield module
    sys.modules.pop(NAME, None)
    minidynamo.reset()


def _reads_a_local_import(x):
    import math
    import minidynamo_test_local_module as m
    from minidynamo_test_local_module import K
    return m.scale(x) + m.K * K + math.sqrt(4.0)


def test_values_read_through_a_local_import_are_guarded(_module):
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(_reads_a_local_import)
    x = torch.ones(2)
    changes = [lambda: None, lambda: setattr(_module, "K", 5), lambda: setattr(_module, "scale", lambda t: t - 1),
               lambda: sys.modules.__setitem__(NAME, types.SimpleNamespace(K=1, scale=lambda t: t))]
    for change in changes:
        change()
        torch.testing.assert_close(opt(x), _reads_a_local_import(x))
    assert backend.compile_count == 4 and minidynamo.counters["fallbacks"] == 0


def _reads_e_from_math(x):
    from math import e
    return x * e


def test_a_library_module_replaced_in_sys_modules_is_seen():
    """Probe AA r2: ``from math import e`` bound the math module of the first call for good (a
    library module was taken as it is): ``sys.modules['math']`` replaced gave 2.718, eager 7.0."""
    import math
    opt = minidynamo.optimize("eager")(_reads_e_from_math)
    x = torch.ones(2)
    opt(x)
    sys.modules["math"] = types.SimpleNamespace(e=7.0)
    try:
        torch.testing.assert_close(opt(x), _reads_e_from_math(x))
    finally:
        sys.modules["math"] = math
    torch.testing.assert_close(opt(x), _reads_e_from_math(x))


def test_an_import_after_builtins_import_is_replaced_runs_the_replacement():
    """Probe AA r1: an import hook (``builtins.__import__ = hook``) set between calls was never
    called: the import was only a binding to ``sys.modules``, taken without asking."""
    import builtins
    opt = minidynamo.optimize("eager")(_reads_e_from_math)
    x = torch.ones(2)
    opt(x)
    original = builtins.__import__

    def hook(name, *args, **kwargs):
        return types.SimpleNamespace(e=100.0) if name == "math" else original(name, *args, **kwargs)

    builtins.__import__ = hook
    try:
        got, expected = opt(x), _reads_e_from_math(x)
    finally:
        builtins.__import__ = original
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(opt(x), x * 2.718281828459045)
