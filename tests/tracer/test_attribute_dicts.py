"""An object's ``__dict__`` is a dict the trace may write as a container (``d = o.__dict__;
d["m"] = 5``, or the dict handed in as an argument of its own, or returned by a call at a
graph break).  Attribute reads and stores on the object go through another path, replayed
apart: reading ``o.m`` after such a write would answer from before it.  So an attribute read or
store on an object whose ``__dict__`` the trace wrote is refused, and so is a write to the dict
of an object whose attributes the trace assigned: the frame runs eagerly."""

import os
import subprocess
import sys

import pytest
import torch

import minidynamo

from ..corpus.helpers import CountingBackend

REPRO = os.path.join(os.path.dirname(__file__), "..", "fuzz", "repros", "repro_dict_alias_after_break.py")


class Obj:
    def __init__(self):
        self.n, self.m = 0, 0


def through_dict_then_attribute(x, o, d):
    d["m"] = 5
    return x + 1, o.m


def attribute_then_through_dict(x, o, d):
    o.m = 1
    d["m"] = 9
    return x + 1, o.m


def through_dict_then_store(x, o, d):
    d["m"] = 5
    o.m = 3
    return x + 1, vars(o).copy()


def own_dict_then_attribute(x, o, d):
    o.__dict__["m"] = 7
    return x + 1, o.m


@pytest.mark.parametrize("fn", [through_dict_then_attribute, attribute_then_through_dict,
                                through_dict_then_store, own_dict_then_attribute])
def test_attribute_reads_and_stores_see_writes_to_the_objects_dict(fn):
    minidynamo.reset()
    want_obj = Obj()
    want = fn(torch.ones(1), want_obj, want_obj.__dict__)
    opt = minidynamo.optimize(CountingBackend())(fn)
    for _ in range(2):
        obj = Obj()
        got = opt(torch.ones(1), obj, obj.__dict__)
        assert got[1] == want[1] and vars(obj) == vars(want_obj)
    minidynamo.reset()


def test_a_dict_returned_at_a_graph_break_is_the_objects_own():
    done = subprocess.run([sys.executable, REPRO], capture_output=True, text=True, timeout=300)
    assert done.stdout.strip().splitlines()[-1] == "OK", done.stdout + done.stderr
