"""The word shortcut of the C++ tensor check (guards/csrc/impl_words.h) never outlives a change.

Once a plain tensor passes, its spec keeps a few words of the TensorImpl, and a later tensor
whose words are those passes without the field-by-field check.  These tests change tensors in
place after they passed (dtype, device, shape, strides, layout, requires_grad, the impl itself)
and ask, after every change, both the compiled check and the generated Python check: the
answers must agree, and the shortcut must have been taken where it may (else agreement could
hold only because it never ran).
"""

import random

import pytest
import torch

from guards import LocalSource, native, tensor_match
from tests.guards.helpers import guard_fn_for, some_function as f

pytestmark = pytest.mark.skipif("cpp" not in native.TENSOR_CHECKERS, reason="guards/_tensor_match.cpp is not built")


@pytest.fixture
def tensor_check_mode():
    """Each test here builds both modes itself: run it once."""


def python_guard(traced):
    saved, native.mode = native.mode, "python"
    try:
        return guard_fn_for([tensor_match(LocalSource("x"), traced)], "x")
    finally:
        native.mode = saved


def compiled_check(traced):
    saved, native.mode = native.mode, "cpp"
    try:
        spec = native.tensor_spec(tensor_match(LocalSource("x"), traced).expected)
    finally:
        native.mode = saved
    return native.TENSOR_CHECKERS["cpp"].TensorMatch([spec])


def replace_data(make):
    def change(t):
        t.data = make(t)
    return change


# Each changes a tensor in place (the object stays; its metadata may not).
CHANGES = {
    "as double": replace_data(lambda t: t.data.double()),
    "as float": replace_data(lambda t: t.data.float()),
    "on the meta device": replace_data(lambda t: torch.empty(t.shape, device="meta")),
    "back on the cpu": replace_data(lambda t: torch.zeros(t.shape)),
    "2x3": replace_data(lambda t: torch.zeros(2, 3, dtype=t.dtype)),
    "3x2": replace_data(lambda t: torch.zeros(3, 2, dtype=t.dtype)),
    "2x3x4x5": replace_data(lambda t: torch.zeros(2, 3, 4, 5, dtype=t.dtype)),
    "six dims": replace_data(lambda t: torch.zeros(1, 2, 1, 3, 1, 1, dtype=t.dtype)),
    "channels last": replace_data(lambda t: torch.zeros(2, 3, 4, 5, dtype=t.dtype).to(memory_format=torch.channels_last)),
    "every other column": replace_data(lambda t: torch.zeros(2, 6, dtype=t.dtype)[:, ::2]),
    "transposed in place": lambda t: t.t_() if t.dim() == 2 else None,
    "unsqueezed in place": lambda t: t.unsqueeze_(0) if t.dim() < 6 else None,
    "squeezed in place": lambda t: t.squeeze_(),
    "resized to 3x2": lambda t: t.resize_(3, 2),
    "resized to six dims": lambda t: t.resize_(1, 3, 1, 2, 1, 1),
    "column-major in place": lambda t: t.as_strided_((2, 3), (1, 2)) if t.untyped_storage().nbytes() >= 6 * t.element_size() else None,
    # Neither dense nor contiguous, as each other: only the strides tell them apart.
    "strides 6, 2": replace_data(lambda t: torch.zeros(64, dtype=t.dtype).as_strided((2, 3), (6, 2))),
    "strides 7, 2": replace_data(lambda t: torch.zeros(64, dtype=t.dtype).as_strided((2, 3), (7, 2))),
    "requires grad": lambda t: t.requires_grad_(True) if t.is_leaf and t.is_floating_point() else None,
    "no grad": lambda t: t.requires_grad_(False) if t.is_leaf else None,
}


def tensors():
    return [torch.zeros(2, 3), torch.nn.Parameter(torch.zeros(2, 3)), torch.zeros(2, 3, 4, 5),
            torch.zeros(1, 2, 1, 3, 1, 1), torch.zeros(3, 2).t(), torch.zeros(64).as_strided((2, 3), (6, 2)),
            torch.zeros(())]


@pytest.mark.parametrize("seed", range(6))
def test_random_changes_after_a_pass_agree_with_python(seed):
    rng = random.Random(seed)
    pool = tensors()
    # Guards made from each tensor's metadata as it is now, each asked about every tensor.
    guards = [(python_guard(t), compiled_check(t)) for t in pool]
    took_shortcut = False
    for step in range(60):
        t = rng.choice(pool)
        name = rng.choice(list(CHANGES))
        try:
            with torch.no_grad():
                CHANGES[name](t)
        except RuntimeError:   # a change this tensor does not allow (a leaf view, a 0-dim t_())
            pass
        for candidate in pool:
            for oracle, check in guards:
                expected = oracle(f, candidate)
                assert check(candidate) == expected == check(candidate), f"step {step}: {name}"
                took_shortcut |= check.seen()[0]
    assert took_shortcut


def test_a_swapped_impl_is_checked_anew():
    a, b = torch.zeros(2, 3), torch.zeros(3, 2)
    check = compiled_check(a)
    assert check(a) and check.seen() == (True,)
    torch.utils.swap_tensors(a, b)       # a's Python object now holds b's impl (3x2)
    assert not check(a) and check(b)


def test_the_shortcut_keeps_only_what_passed():
    t = torch.zeros(2, 3)
    check = compiled_check(t)
    assert check.seen() == (False,)
    assert not check(torch.zeros(2, 3, dtype=torch.float64)) and check.seen() == (False,)
    assert check(t) and check.seen() == (True,)
    t.data = t.data.double()
    assert not check(t)
    t.data = t.data.float()
    assert check(t)


def test_six_dims_never_take_the_shortcut():
    """Past five dimensions the sizes live outside the TensorImpl: no words stand for them."""
    t = torch.zeros(1, 2, 1, 3, 1, 1)
    check = compiled_check(t)
    assert check(t) and check.seen() == (False,)
    t.resize_(1, 2, 1, 3, 1, 2)
    assert not check(t)


class _ShapeWithEffect(torch.Tensor):
    """Its ``shape`` is Python code (the compiled check asks Python), which changes ``OTHER``."""

    @property
    def shape(self):
        OTHER[0].requires_grad_(True)
        return super().shape


OTHER = []


def test_a_check_that_runs_python_rereads_the_tensors_after_it():
    OTHER[:] = [torch.ones(3)]
    first, second = torch.ones(2).as_subclass(_ShapeWithEffect), torch.ones(3)
    guards = [tensor_match(LocalSource("x"), first), tensor_match(LocalSource("y"), second)]
    saved, native.mode = native.mode, "cpp"
    try:
        spec = native.tensor_spec(guards[0].expected), native.tensor_spec(guards[1].expected)
        check = native.tensor_match(list(spec))
    finally:
        native.mode = saved
    OTHER[:] = [torch.ones(3)]                   # no autograd meta yet: the first read says none
    assert not check(torch.ones(2).as_subclass(_ShapeWithEffect), OTHER[0])
    assert OTHER[0].requires_grad                # what the Python check would see too
