"""``storage_match``: which tensors share one storage.  It passes while the sharing is as seen,
fails when a view becomes a separate tensor or two separate tensors become views of one, says
which sources it relates, and the compiled twin answers as the Python one (every mode, conftest)."""

import torch

from guards import LocalSource, native, storage_match, tensor_match
from guards.guard import PyStorageGroups, storage_groups
from guards.reference import first_failure
from tests.guards.helpers import frame_of, guard_fn_for, some_function as f

X, Y, Z = LocalSource("x"), LocalSource("y"), LocalSource("z")


def both_agree(guard_fn, guards, *args):
    """The guard's answer, checked against its slow path and against the plain reference layer."""
    ok = guard_fn(f, *args)
    assert ok == (guard_fn.failure_reason(f, *args) is None)
    assert ok == (first_failure(guards, f, args, frame_of("x", "y", "z")) is None)
    return ok


def storage_guards(x, y, z):
    return [tensor_match(X, x), tensor_match(Y, y), tensor_match(Z, z), storage_match((X, Y, Z), (x, y, z))]


def test_a_view_and_its_base_must_stay_one_storage():
    base = torch.zeros(2, 3)
    guards = storage_guards(base, base[0], torch.ones(3))
    guard_fn = guard_fn_for(guards, "x", "y", "z")
    assert (type(guard_fn).__name__ == "FastGuard") == native.compiled()   # the relation runs natively
    assert both_agree(guard_fn, guards, base, base[1], torch.ones(3))
    other = torch.zeros(2, 3)
    assert both_agree(guard_fn, guards, other, other[0], torch.ones(3))
    assert not both_agree(guard_fn, guards, base, torch.zeros(3), torch.ones(3))   # y a tensor of its own
    reason = guard_fn.failure_reason(f, base, torch.zeros(3), torch.ones(3))
    assert "storage shared among L['x'], L['y'], L['z']" in reason and "(0, 0, 2)" in reason


def test_separate_tensors_must_stay_separate():
    guards = storage_guards(torch.zeros(6), torch.zeros(3), torch.zeros(3))
    guard_fn = guard_fn_for(guards, "x", "y", "z")
    assert both_agree(guard_fn, guards, torch.zeros(6), torch.zeros(3), torch.zeros(3))
    whole = torch.zeros(6)
    assert not both_agree(guard_fn, guards, whole, whole[:3], torch.zeros(3))
    assert not both_agree(guard_fn, guards, torch.zeros(6), whole[3:], whole[:3])   # y, z: one storage
    same = torch.zeros(3)
    assert not both_agree(guard_fn, guards, torch.zeros(6), same, same)


def test_groups_are_first_positions_and_the_twins_agree():
    a = torch.zeros(4)
    sparse = torch.zeros(3).to_sparse()       # no storage to read: shares with nothing
    cases = [(a, a[1:], a.view(2, 2), torch.ones(1)), (sparse, sparse, a), (a, a.view(torch.int32))]
    every_grouping = [(0, 0, 0, 3), (0, 1, 1, 3), (0, 1, 2, 3), (0, 0, 2, 2), (0, 1, 0, 1), (0, 1, 2), (0, 0, 0),
                      (0, 0, 2), (0, 0), (0, 1)]
    for tensors in cases:
        for groups in every_grouping:
            if len(groups) == len(tensors):
                want = storage_groups(tensors) == groups
                assert native.storage_groups(groups)(*tensors) == PyStorageGroups(groups)(*tensors) == want
    assert storage_groups(cases[0]) == (0, 0, 0, 3)
    assert storage_groups(cases[1]) == (0, 1, 2)
    for check in (native.storage_groups((0, 0)), PyStorageGroups((0, 0))):
        assert not check(a, 3)           # not a tensor
        assert not check(a, a, a)        # a tensor too many
