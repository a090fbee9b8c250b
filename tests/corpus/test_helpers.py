"""The corpus helper must fail when the optimized run differs from eager: these tests hand it
deliberately wrong backends and check it notices (a helper that always passes proves nothing)."""

import pytest
import torch

from .helpers import CountingBackend, check, single, tensor
from .test_tensors import inplace_operator_on_input, output_view_of_input, tensor_arithmetic


class OffByOneBackend(CountingBackend):
    """Runs the graph, then adds one to every output tensor: a wrong answer."""

    def __call__(self, gm, example_inputs):
        run = super().__call__(gm, example_inputs)
        return lambda *args: [out + 1 for out in run(*args)]


class CopyingInputsBackend(CountingBackend):
    """Runs the graph on copies of its inputs: in-place updates never reach the caller."""

    def __call__(self, gm, example_inputs):
        run = super().__call__(gm, example_inputs)
        return lambda *args: run(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])


class CopyingOutputsBackend(CountingBackend):
    """Returns copies of the graph's outputs: right values, but eager's aliasing is lost."""

    def __call__(self, gm, example_inputs):
        run = super().__call__(gm, example_inputs)
        return lambda *args: [out.clone() for out in run(*args)]


def test_the_real_backend_passes():
    check(single(tensor_arithmetic, tensor(3), tensor(3)))


def test_a_wrong_answer_is_caught():
    with pytest.raises(AssertionError, match="first call"):
        check(single(tensor_arithmetic, tensor(3), tensor(3)), OffByOneBackend)


def test_a_lost_input_mutation_is_caught():
    with pytest.raises(AssertionError, match="inputs after the call"):
        check(single(inplace_operator_on_input, tensor(3), tensor(3)), CopyingInputsBackend)


def test_lost_aliasing_is_caught():
    with pytest.raises(AssertionError, match="alias"):
        check(single(output_view_of_input, tensor(2, 2)), CopyingOutputsBackend)


def printing(x):
    print("side effect")
    return x + 1


def test_a_fallback_declared_single_is_caught():
    with pytest.raises(AssertionError, match="one compiled graph|unexpected breaks"):
        check(single(printing, tensor(3)))
