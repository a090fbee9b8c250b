"""The two summaries the tables use."""

import math
import statistics


def median(values):
    """Median of a non-empty sequence; robust to the odd slow call a shared machine produces."""
    return statistics.median(values)


def geomean(values):
    """Geometric mean of positive numbers (the right mean for ratios); None when there are none."""
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))
