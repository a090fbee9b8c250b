"""Is a peer's output the baseline's output? With tolerances stated once, here.

Two floating-point outputs agree when, element by element,

    |got - ref| <= RTOL * |ref| + ATOL * max(|ref|)

(the absolute part scales with the output, since random-weight models produce logits from 1e-9
to 1e2), NaNs sit at the same places, and shapes and dtypes match. Integer and bool outputs
must be equal. A peer that is fast but wrong is marked in the tables and left out of the geomean.
"""

import dataclasses

import torch

RTOL = 1e-3
ATOL = 1e-3
TOLERANCE_TEXT = f"|got-ref| <= {RTOL:g}*|ref| + {ATOL:g}*max|ref|"


@dataclasses.dataclass
class Comparison:
    """The outcome of one comparison: ``ok``, the largest error seen, and why not ok."""

    ok: bool
    max_abs_error: float = 0.0
    reason: str = ""

    def worst(self, other):
        """The worse of two comparisons (a failure beats a pass; else the larger error)."""
        if self.ok != other.ok:
            return self if not self.ok else other
        return self if self.max_abs_error >= other.max_abs_error else other


def flatten(value, path="out"):
    """``[(path, leaf)]`` of a nested output, so a mismatch can say where."""
    if isinstance(value, (tuple, list)):
        return [item for i, v in enumerate(value) for item in flatten(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [item for k in sorted(value, key=repr) for item in flatten(value[k], f"{path}[{k!r}]")]
    return [(path, value)]


def compare(ref, got):
    """Compare a peer's output ``got`` with the baseline's ``ref``."""
    ref_leaves, got_leaves = flatten(ref), flatten(got)
    if [p for p, _ in ref_leaves] != [p for p, _ in got_leaves]:
        return Comparison(False, float("inf"), "output structure differs")
    result = Comparison(True)
    for (path, r), (_, g) in zip(ref_leaves, got_leaves):
        result = result.worst(_compare_leaf(path, r, g))
    return result


def _compare_leaf(path, ref, got):
    if not isinstance(ref, torch.Tensor):
        same = type(ref) is type(got) and ref == got
        return Comparison(same, 0.0 if same else float("inf"), "" if same else f"{path}: {got!r} != {ref!r}")
    if not isinstance(got, torch.Tensor):
        return Comparison(False, float("inf"), f"{path}: expected a tensor, got {type(got).__name__}")
    if ref.shape != got.shape or ref.dtype != got.dtype:
        return Comparison(False, float("inf"),
                          f"{path}: {got.dtype} {list(got.shape)} != {ref.dtype} {list(ref.shape)}")
    ref, got = ref.detach().cpu(), got.detach().cpu()
    if not ref.is_floating_point():
        same = torch.equal(ref, got)
        return Comparison(same, 0.0 if same else float("inf"), "" if same else f"{path}: values differ")
    ref, got = ref.double(), got.double()
    if not torch.equal(ref.isnan(), got.isnan()):
        return Comparison(False, float("inf"), f"{path}: NaNs at different places")
    ref, got = ref.nan_to_num(0.0), got.nan_to_num(0.0)
    error = (got - ref).abs()
    max_error = float(error.max()) if error.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    allowed = RTOL * ref.abs() + ATOL * scale
    if bool((error <= allowed).all()):
        return Comparison(True, max_error)
    return Comparison(False, max_error, f"{path}: max error {max_error:.3g} (output scale {scale:.3g})")
