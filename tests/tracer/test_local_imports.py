"""``import m`` inside a traced function binds ``sys.modules['m']``: a program's own module is read
from there on every call (its identity guarded), so values read through it are guarded like
globals; a library module is taken as it is."""

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
