import math

import torch

from bench.accuracy import compare


def test_identical_outputs_pass_with_zero_error():
    x = torch.randn(3, 4)
    result = compare(x, x.clone())
    assert result.ok and result.max_abs_error == 0.0


def test_tolerance_scales_with_the_output():
    tiny = torch.tensor([1e-9, -2e-9, 3e-9])
    assert compare(tiny, tiny * (1 + 1e-5)).ok
    assert not compare(tiny, tiny * 1.5).ok
    big = torch.tensor([100.0, 0.0])
    assert compare(big, big + torch.tensor([0.0, 0.05])).ok  # within 1e-3 of the largest value
    assert not compare(big, big + torch.tensor([0.0, 0.5])).ok


def test_a_wrong_output_says_where():
    ref = (torch.zeros(2), {"logits": torch.ones(3)})
    got = (torch.zeros(2), {"logits": torch.ones(3) * 2})
    result = compare(ref, got)
    assert not result.ok
    assert "out[1]['logits']" in result.reason
    assert result.max_abs_error == 1.0


def test_nans_must_sit_at_the_same_places():
    ref = torch.tensor([1.0, math.nan])
    assert compare(ref, ref.clone()).ok
    assert not compare(ref, torch.tensor([math.nan, 1.0])).ok


def test_shape_dtype_and_structure_mismatches_fail():
    assert not compare(torch.zeros(2, 3), torch.zeros(3, 2)).ok
    assert not compare(torch.zeros(2), torch.zeros(2, dtype=torch.float64)).ok
    assert not compare((torch.zeros(2),), (torch.zeros(2), torch.zeros(2))).ok
    assert not compare(torch.zeros(2), 0.0).ok


def test_integer_outputs_must_be_equal():
    assert compare(torch.arange(4), torch.arange(4)).ok
    assert not compare(torch.arange(4), torch.arange(4) + 1).ok


def test_worst_keeps_the_failure():
    good = compare(torch.zeros(1), torch.zeros(1))
    bad = compare(torch.zeros(1), torch.ones(1))
    assert good.worst(bad) is bad and bad.worst(good) is bad
