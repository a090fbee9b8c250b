"""A frame whose trace made no tensor operation: no backend compile, and a hit runs the frame
itself (the exact replay of its Python work) instead of an empty graph."""

import torch

import minidynamo
from tests.corpus.helpers import CountingBackend


def bookkeeping(x, log, n):
    log.append(n)                       # a side effect on the caller's list
    return {"x": x, "n": n * 2}


def test_python_only_frame_runs_itself_on_a_hit():
    backend = CountingBackend()
    opt = minidynamo.optimize(backend)(bookkeeping)
    x = torch.ones(2)
    for n in (1, 1, 1):
        eager_log, opt_log = [], []
        expected = bookkeeping(x, eager_log, n)
        got = opt(x, opt_log, n)
        assert got["x"] is x and got == expected and opt_log == eager_log
    assert backend.compile_count == 0                  # nothing was given to the backend
    (entry,) = minidynamo.cache_entries(bookkeeping)   # but the frame has its guarded entry
    assert "rerun" in entry[2].source
    log = []
    assert opt(x, log, 5)["n"] == 10 and log == [5]      # another number, only counted with: the
    assert len(minidynamo.cache_entries(bookkeeping)) == 1    # same entry computes it per call
    assert opt(x, [], "ab")["n"] == "abab"              # another type: a new entry
    assert len(minidynamo.cache_entries(bookkeeping)) == 2
    minidynamo.reset()
