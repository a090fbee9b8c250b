import pytest

from bench.stats import geomean, median


def test_geomean_of_ratios():
    assert geomean([2.0, 0.5]) == pytest.approx(1.0)
    assert geomean([1.1, 1.1, 1.1]) == pytest.approx(1.1)


def test_geomean_skips_missing_values_and_is_none_when_nothing_is_left():
    assert geomean([4.0, None, 1.0]) == pytest.approx(2.0)
    assert geomean([None]) is None
    assert geomean([]) is None


def test_median_ignores_one_slow_outlier():
    assert median([1.0, 1.1, 0.9, 50.0, 1.0]) == 1.0
