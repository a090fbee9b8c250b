"""The C++ check reads a torch_xla device tensor's strides right after its sizes (guards/csrc/
tensor_checks.h, wrapped_strides), and its sizes from its own fields while its lazy tensor's
generation is the one they were copied at (guards/csrc/xla_impl.h): the tensor inside the
functional wrapper refreshes both from its lazy tensor on each read, so those reads stand for the
getter calls only if the answers are the same.  These tests change device tensors in place after they passed (resize, unsqueeze,
transpose, .data swaps to other shapes and dtypes, requires_grad) and ask, after every change,
both the compiled check and the generated Python check: the answers must agree, and the read must
have been taken (else agreement could hold only because it never ran).
"""

import os
import random

import pytest
import torch

from guards import native
from tests.guards.helpers import some_function as f
from tests.guards.test_tensor_words import compiled_check, python_guard

pytestmark = pytest.mark.skipif("cpp" not in native.TENSOR_CHECKERS, reason="guards/_tensor_match.cpp is not built")


@pytest.fixture
def tensor_check_mode():
    """Each test here builds both modes itself: run it once."""


@pytest.fixture(scope="module")
def xla():
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    pytest.importorskip("torch_xla")
    return torch.device("xla")


def _xlac():
    import torch_xla

    return torch_xla._XLAC


def replace_data(make):
    def change(t):
        t.data = make(t)
    return change


# Each changes a device tensor in place (the object stays; its metadata may not).
CHANGES = {
    "2x3": replace_data(lambda t: torch.zeros(2, 3, device=t.device)),
    "3x2": replace_data(lambda t: torch.zeros(3, 2, device=t.device)),
    "as double": replace_data(lambda t: t.data.double()),
    "as float": replace_data(lambda t: t.data.float()),
    "2x3x4": replace_data(lambda t: torch.zeros(2, 3, 4, device=t.device)),
    "transposed": replace_data(lambda t: torch.zeros(3, 2, device=t.device).t()),
    "pending": replace_data(lambda t: torch.ones(2, 3, device=t.device) * 2),
    "transposed in place": lambda t: t.t_() if t.dim() == 2 else None,
    "unsqueezed in place": lambda t: t.unsqueeze_(0) if t.dim() < 5 else None,
    "squeezed in place": lambda t: t.squeeze_(),
    "resized to 3x2": lambda t: t.resize_(3, 2),
    "resized to 6": lambda t: t.resize_(6),
    "added to in place": lambda t: t.add_(1),
    "column-major in place": lambda t: t.as_strided_((3, 2), (1, 3)) if t.numel() == 6 else None,
    "set to a transposed tensor": lambda t: t.set_(torch.zeros(3, 2, device=t.device).t()),
    # torch_xla's own set_ below the functional wrapper: the very impl inside it takes the other
    # tensor's lazy value (a new generation), its cached sizes are stale until refreshed
    "replaced below the wrapper by 3x2": lambda t: _xlac()._replace_xla_tensor(t, torch.zeros(3, 2, device=t.device)),
    "replaced below the wrapper by 2x3": lambda t: _xlac()._replace_xla_tensor(t, torch.ones(2, 3, device=t.device)),
    "replaced below the wrapper by 6": lambda t: _xlac()._replace_xla_tensor(t, torch.ones(6, device=t.device)),
    "requires grad": lambda t: t.requires_grad_(True) if t.is_leaf and t.is_floating_point() else None,
    "no grad": lambda t: t.requires_grad_(False) if t.is_leaf else None,
}


def device_tensors(xla):
    return [torch.zeros(2, 3, device=xla), torch.nn.Parameter(torch.zeros(2, 3, device=xla)),
            torch.zeros(3, 2, device=xla).t(), torch.zeros(2, 3, 4, device=xla), torch.ones(2, 3, device=xla) * 3]


@pytest.mark.parametrize("seed", range(4))
def test_random_changes_after_a_pass_agree_with_python(xla, seed):
    rng = random.Random(seed)
    pool = device_tensors(xla)
    guards = [(python_guard(t), compiled_check(t)) for t in pool]
    for oracle, check in guards:           # each passes the tensor it was made from, once
        assert [oracle(f, t) for t in pool] == [check(t) for t in pool]
    assert native.TENSOR_CHECKERS["cpp"].reads_xla_strides()
    assert native.TENSOR_CHECKERS["cpp"].reads_xla_sizes()
    for step in range(40):
        t = rng.choice(pool)
        name = rng.choice(list(CHANGES))
        try:
            with torch.no_grad():
                CHANGES[name](t)
        except RuntimeError:   # a change this tensor does not allow (a view's resize, say)
            pass
        for candidate in pool:
            for oracle, check in guards:
                got = check(candidate)       # first: Python's getters would refresh what it reads
                assert got == oracle(f, candidate) == check(candidate), f"step {step}: {name}"
