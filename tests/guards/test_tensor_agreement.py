"""Every way of checking a tensor gives the generated Python check's answer, on a table of tensors.

The oracle is the guard function generated in pure-Python mode.  The compiled mode ("cpp":
at::Tensor read in C++) builds the same guards, both as a whole native guard (a tensor
argument) and as generated code calling one TensorMatch (a tensor inside a list), and must agree on every (traced tensor, candidate) pair: dtypes, devices (XLA
on the CPU included), strides, requires_grad, Parameter vs Tensor, subclasses, 0-dim, inference
tensors, instance attributes that hide methods; also under a torch function mode, which sees
every metadata read, and inside inference mode.
"""

import os

import pytest
import torch
from torch.overrides import TorchFunctionMode

from guards import ItemSource, LocalSource, length_match, native, tensor_match, type_match
from tests.guards.helpers import guard_fn_for, some_function as f

COMPILED = list(native.TENSOR_CHECKERS)
pytestmark = pytest.mark.skipif(not COMPILED, reason="no compiled guard helper is built")


@pytest.fixture
def tensor_check_mode():
    """Each test here builds every mode itself: run it once."""


class Plain(torch.Tensor):
    """A subclass that changes nothing: torch's default __torch_function__."""


class Logged(torch.Tensor):
    """Overrides __torch_function__ (every getter goes through it)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


class Opaque(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl


class ClaimsDouble(torch.Tensor):
    """Metadata computed in Python: it says float64 whatever it holds."""

    @property
    def dtype(self):
        return torch.float64


def with_attr(tensor, **attrs):
    for name, value in attrs.items():
        setattr(tensor, name, value)
    return tensor


def without_attr(tensor, name):
    delattr(tensor, name)
    return tensor


def inference_tensor():
    with torch.inference_mode():
        return torch.ones(2, 3)


TENSORS = {
    "float32 [2, 3]": lambda: torch.ones(2, 3),
    "float16": lambda: torch.ones(2, 3, dtype=torch.float16),
    "bfloat16": lambda: torch.ones(2, 3, dtype=torch.bfloat16),
    "int64": lambda: torch.ones(2, 3, dtype=torch.int64),
    "bool": lambda: torch.ones(2, 3, dtype=torch.bool),
    "complex64": lambda: torch.ones(2, 3, dtype=torch.complex64),
    "[3, 2]": lambda: torch.ones(3, 2),
    "transposed": lambda: torch.ones(3, 2).t(),
    "every other column": lambda: torch.ones(2, 6)[:, ::2],
    "a view at an offset": lambda: torch.ones(3, 3)[1:],
    "expanded": lambda: torch.ones(1, 3).expand(2, 3),
    "[1, 3]": lambda: torch.ones(1, 3),
    "[3, 1]": lambda: torch.ones(3, 1),
    "[0, 3]": lambda: torch.ones(0, 3),
    "0-dim": lambda: torch.tensor(1.0),
    "4-d": lambda: torch.ones(2, 3, 4, 5),
    "6-d": lambda: torch.ones(1, 2, 1, 2, 1, 2),
    "7-d": lambda: torch.ones(1, 2, 1, 2, 1, 2, 1),
    "7-d, last two swapped": lambda: torch.ones(1, 2, 1, 2, 1, 1, 2).transpose(5, 6),
    "8-d": lambda: torch.ones(1, 2, 1, 2, 1, 2, 1, 1),
    "channels_last": lambda: torch.ones(2, 3, 4, 5).to(memory_format=torch.channels_last),
    "requires_grad": lambda: torch.ones(2, 3, requires_grad=True),
    "non-leaf": lambda: torch.ones(2, 3, requires_grad=True) * 2,
    "Parameter": lambda: torch.nn.Parameter(torch.ones(2, 3)),
    "frozen Parameter": lambda: torch.nn.Parameter(torch.ones(2, 3), requires_grad=False),
    "meta": lambda: torch.ones(2, 3, device="meta"),
    "inference tensor": inference_tensor,
    "subclass": lambda: torch.ones(2, 3).as_subclass(Plain),
    "subclass with __torch_function__": lambda: torch.ones(2, 3).as_subclass(Logged),
    "subclass without torch function": lambda: torch.ones(2, 3).as_subclass(Opaque),
    "subclass with a dtype property": lambda: torch.ones(2, 3).as_subclass(ClaimsDouble),
    "stride() hidden by an attribute": lambda: with_attr(torch.ones(2, 3), stride=lambda: (1, 2)),
    "is_contiguous() hidden by an attribute": lambda: with_attr(torch.ones(2, 3), is_contiguous=lambda: False),
    "an unrelated attribute": lambda: with_attr(torch.ones(2, 3), note="hello"),
    "Parameter, stride() hidden": lambda: with_attr(torch.nn.Parameter(torch.ones(2, 3)), stride=lambda: (1, 2)),
    "an attribute set, then deleted": lambda: without_attr(with_attr(torch.ones(2, 3), stride=lambda: (1, 2)), "stride"),
}
# Only ever candidates: tensor_match refuses to describe them, or they are not tensors.
OTHERS = {
    "complex64 with a conjugate bit": lambda: torch.ones(2, 3, dtype=torch.complex64).conj(),
    "float32 with a negative bit": lambda: torch.ones(2, 3, dtype=torch.complex64).conj().imag,
    "sparse": lambda: torch.ones(2, 3).to_sparse(),
    "mkldnn (is_contiguous() says True)": lambda: torch.ones(2, 3).to_mkldnn(),
    "mkldnn [3, 2]": lambda: torch.ones(3, 2).to_mkldnn(),
    "None": lambda: None,
    "int": lambda: 3,
    "list": lambda: [2, 3],
}


@pytest.fixture(scope="module")
def tensors():
    made = {name: make() for name, make in TENSORS.items()}
    made.update(xla_tensors())
    return made


def xla_tensors() -> dict:
    """XLA tensors on the CPU device (torch_xla is a dependency; this costs a few seconds once)."""
    os.environ.setdefault("PJRT_DEVICE", "CPU")
    import torch_xla  # noqa: F401

    return {name: make() for name, make in XLA_TENSORS.items()}


def _changed(make, change):
    def made():
        t = make()
        change(t)
        return t
    return made


def _data_replaced(t):
    t.data = torch.zeros(4, 1, device="xla")


# A device tensor is a functional wrapper around torch_xla's own tensor: its sizes, strides and
# device are the inner tensor's (some changed in place after the wrapper was made).
XLA_TENSORS = {
    "xla": lambda: torch.ones(2, 3, device="xla"),
    "xla transposed": lambda: torch.ones(3, 2, device="xla").t(),
    "xla transposed in place": _changed(lambda: torch.ones(3, 2, device="xla"), torch.Tensor.t_),
    "xla unsqueezed in place": _changed(lambda: torch.ones(2, 3, device="xla"), lambda t: t.unsqueeze_(0)),
    "xla data replaced": _changed(lambda: torch.ones(2, 3, device="xla"), _data_replaced),
    "xla pending": lambda: torch.ones(2, 3, device="xla") * 2,
    "xla column view": lambda: torch.ones(2, 3, device="xla")[:, 1:],
}


class ReversedStrides(TorchFunctionMode):
    """A mode that reports every tensor's strides reversed: only Python-level reads see it."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        return tuple(reversed(result)) if func is torch.Tensor.stride and not kwargs else result


def guards_in_mode(mode: str, traced):
    """(a compiled-or-not guard on argument x, a generated guard on x[0]) built in ``mode``."""
    saved, native.mode = native.mode, mode
    try:
        x = LocalSource("x")
        whole = guard_fn_for([tensor_match(x, traced)], "x")
        items = [traced]
        nested = guard_fn_for([type_match(x, items), length_match(x, items),
                               tensor_match(ItemSource(x, 0), traced)], "x")
    finally:
        native.mode = saved
    return whole, nested


def answers(guards, candidates):
    whole, nested = guards
    return {name: (whole(f, value), nested(f, [value])) for name, value in candidates.items()}


ENVIRONMENTS = {
    "plain": lambda: torch.enable_grad(),
    "torch function mode": ReversedStrides,
    "inference mode": torch.inference_mode,
}


@pytest.mark.parametrize("environment", ENVIRONMENTS)
@pytest.mark.parametrize("traced_name", list(TENSORS) + list(XLA_TENSORS))
def test_every_mode_agrees_with_the_generated_python(tensors, traced_name, environment):
    traced = tensors[traced_name]
    candidates = {**tensors, **{name: make() for name, make in OTHERS.items()}}
    oracle = guards_in_mode("python", traced)
    compiled = {mode: guards_in_mode(mode, traced) for mode in COMPILED}
    with ENVIRONMENTS[environment]():
        expected = answers(oracle, candidates)
        for mode, guards in compiled.items():
            got = answers(guards, candidates)
            wrong = {name: (got[name], expected[name]) for name in candidates if got[name] != expected[name]}
            assert not wrong, f"{mode} disagrees with Python on (got, expected): {wrong}"
    if environment == "plain":
        assert expected[traced_name] == (True, True)    # a tensor matches the guard made from it


def test_the_table_tells_tensors_apart(tensors):
    """The agreement above is not vacuous: the oracle tells apart tensors that differ."""
    whole, _ = guards_in_mode("python", tensors["float32 [2, 3]"])
    matching = sorted(name for name, value in tensors.items() if whole(f, value))
    # Same metadata (the storage offset is not guarded); its strides are checked as contiguity.
    # An attribute hiding a method does not change the metadata the check reads through
    # torch.Tensor's own methods (a trace that calls the method guards the attribute apart).
    assert matching == ["a view at an offset", "an attribute set, then deleted", "an unrelated attribute",
                        "float32 [2, 3]", "inference tensor", "is_contiguous() hidden by an attribute",
                        "stride() hidden by an attribute"]
    strided = tensors["every other column"]
    whole, _ = guards_in_mode("python", strided)
    assert whole(f, strided) is True
    with ReversedStrides():
        assert whole(f, strided) is False


@pytest.mark.skipif("cpp" not in COMPILED, reason="guards/_tensor_match.cpp is not built")
def test_cpp_reads_plain_tensors_directly(tensors):
    """The fast path is taken where it should be (else the agreement could hold by asking Python)."""
    check = native.TENSOR_CHECKERS["cpp"].TensorMatch
    direct = {name: check([native_spec(t)]).direct()[0] for name, t in tensors.items()}
    assert [name for name, is_direct in direct.items() if not is_direct] == \
        ["subclass with __torch_function__", "subclass with a dtype property"]


def native_spec(t):
    return (type(t), t.dtype, t.device, tuple(t.shape), tuple(t.stride()), t.requires_grad)
