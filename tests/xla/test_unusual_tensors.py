"""Unusual tensors as arguments of the XLA backends, compared with eager call by call.

- Lazy conjugate / negative views (``x.conj()``, ``torch._neg_view(x)``): torch_xla refuses to
  copy them ("Unrecognized tensor type ID: Conjugate"), so a call with one after a call
  without one raised; such a call now runs eagerly (``device.HostOnlyArgument``). An output
  that is a conj / neg view of an argument or of a result came back without its bit, so
  ``x.conj()`` returned ``x``'s values (``HostView`` / ``EagerLayout`` keep the bits).
- Named tensors (``x.refine_names("N")``): refused by the same copy ("Unrecognized tensor type
  ID: Named") after a call without names raised; such a call runs eagerly, names kept.
- An argument written in place whose elements share memory (``as_strided`` rows that overlap):
  the device's dense copy was written back element by element, an old value last.
- ``as_strided`` of an argument or of a view reads the storage behind it, which the device's
  copy has not (``x[::2].as_strided((2, 2), (1, 1))``).
- int8 values torch_xla widens as if unsigned: ``int8 + uint8``, an int8 ``remainder``, int8
  ``//``.
"""

import pytest
import torch

import minidynamo
from tests.xla.xla_testing import BACKENDS


def _c(n=4, seed=0):
    return torch.randn(n, dtype=torch.complex64, generator=torch.Generator().manual_seed(seed))


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _flags(t):
    return (t.dtype, tuple(t.shape), t.stride(), t.storage_offset(), t.is_conj(), t.is_neg())


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert _flags(a) == _flags(b)
        assert torch.equal(a.resolve_conj().resolve_neg(), b.resolve_conj().resolve_neg())
    else:
        assert a == b


def _check(backend, f, makers):
    """Each maker's arguments, made twice: eager's call and the compiled call agree on the
    result and on what they leave in the arguments (or raise the same error)."""
    compiled = minidynamo.optimize(backend)(f)
    for make in makers:
        eager_args, args = make(), make()
        try:
            expected = f(*eager_args)
        except Exception as error:
            with pytest.raises(type(error)):
                compiled(*args)
            continue
        _same(compiled(*args), expected)
        _same(list(args), list(eager_args))


CONJ_CASES = {
    "add_ on a conj argument": (lambda x: x.add_(1), [lambda: (_c(),), lambda: (_c().conj(),)]),
    "write through a conj view": (lambda x: (x.conj().mul_(2j), x)[1], [lambda: (_c(),), lambda: (_c().conj(),)]),
    "copy_ into a conj argument": (lambda x: x.copy_(torch.ones(4, dtype=torch.complex64) * 1j),
                                   [lambda: (_c(),), lambda: (_c().conj(),)]),
    "write through a neg view": (lambda x: (torch._neg_view(x).add_(1), x)[1],
                                 [lambda: (_r(3),), lambda: (torch._neg_view(_r(3)),)]),
    "view_as_real of a conj argument raises": (lambda x: torch.view_as_real(x).sum(0),
                                               [lambda: (_c(),), lambda: (_c().conj(),)]),
    "conj argument first": (lambda x: x * 2, [lambda: (_c().conj(),), lambda: (_c(),), lambda: (_c().conj(),)]),
    "returned conj view": (lambda x: x.conj(), [lambda: (_c(),), lambda: (_c().conj(),)]),
    "returned conj().imag": (lambda x: x.conj().imag, [lambda: (_c(),), lambda: (_c().conj(),)]),
    "returned neg view": (lambda x: torch._neg_view(x), [lambda: (_r(3),), lambda: (torch._neg_view(_r(3)),)]),
    "conj view of a result": (lambda x: (x * 2).conj(), [lambda: (_c(),)]),
    "neg view of a result": (lambda x: torch._neg_view(x * 1), [lambda: (_r(3),)]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CONJ_CASES)
def test_conjugate_and_negative_views_answer_as_eager(backend, case):
    f, makers = CONJ_CASES[case]
    _check(backend, f, makers)


LAYOUT_CASES = {
    "write to a row of an overlapping argument": (
        lambda x: (x[0].fill_(7), x)[1], [lambda: (_r(10).as_strided((3, 3), (2, 1)),)] * 2),
    "as_strided of a step-sliced argument": (
        lambda x: x.as_strided((2, 2), (1, 1)) + 1, [lambda: (_r(6),), lambda: (_r(12)[::2],)]),
    "as_strided past the argument's elements": (
        lambda x: x.as_strided((8,), (1,)) * 1, [lambda: (_r(8),), lambda: (_r(12)[:8],)]),
    "as_strided at offset 0 of an offset view": (
        lambda x: x.as_strided((2,), (1,), 0) * 1, [lambda: (_r(6),), lambda: (_r(8)[2:],)]),
    # probe AI r14: the copy and scatter forms of it read the storage as much
    "as_strided_copy of a transposed view": (
        lambda x: torch.as_strided_copy(x, (2, 2), (1, 1)) * 1,
        [lambda: (_r(20)[4:16].view(4, 3).t(),)] * 2),
    "as_strided_scatter into a transposed view": (
        lambda x: torch.as_strided_scatter(x, torch.zeros(2), (2,), (1,)) * 1,
        [lambda: (_r(20)[4:16].view(4, 3).t(),)] * 2),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", LAYOUT_CASES)
def test_arguments_whose_storage_matters_answer_as_eager(backend, case):
    f, makers = LAYOUT_CASES[case]
    _check(backend, f, makers)


def _i8():
    return (torch.tensor([-14, -100, 5, 127, -128], dtype=torch.int8),
            torch.tensor([200, 3, 250, 1, 0], dtype=torch.uint8))


INT8_CASES = {
    "int8 + uint8": lambda x, u: x + u,
    "int8 * uint8, widened": lambda x, u: (x * u).long(),
    "int8 // 2": lambda x, u: x // 2,
    "int8 floor_divide_ of an argument": lambda x, u: x.floor_divide_(3),
    "int8 remainder widened": lambda x, u: (x % -3).long(),
    "int16 remainder widened": lambda x, u: (x.short() % 7 - 10).long(),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", INT8_CASES)
def test_int8_values_keep_their_sign(backend, case):
    _check(backend, INT8_CASES[case], [_i8, _i8])


def _adds_one_in_place(t, x):
    t.add_(1)
    return t * x


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_argument_that_gains_dimension_names_runs_eagerly(backend):
    """Probe AA r4: a graph compiled for a plain tensor, then called with a named one (names are
    no part of a tensor's guard): the copy to the device raised "Unrecognized tensor type ID:
    Named"; eager writes it and returns a named result."""
    def outcome(fn):
        t = torch.arange(4.0).rename(None)     # (a view, as the named tensor below is)
        fn(t, torch.ones(4))
        fn(t, torch.ones(4))
        named = torch.arange(4.0).rename(None).refine_names("N")
        out = fn(named, torch.ones(4))
        return out.names, out.rename(None), named.rename(None)

    got, expected = outcome(minidynamo.optimize(backend)(_adds_one_in_place)), outcome(_adds_one_in_place)
    assert got[0] == expected[0] == ("N",)
    for ours, theirs in zip(got[1:], expected[1:]):
        torch.testing.assert_close(ours, theirs)


class _AddsHundred(torch.Tensor):
    """Every add it meets gives 100 more (its own ``__torch_function__``)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        with torch._C.DisableTorchFunctionSubclass():
            result = func(*args, **(kwargs or {}))
        return result + 100 if getattr(func, "__name__", "") in ("add", "__add__") else result


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_subclass_with_its_own_torch_function_reaching_a_graph_runs_eagerly(backend):
    """Probe AI r20: ``x + x.as_subclass(C)`` breaks at ``as_subclass``; the resumed graph took
    the subclass instance as an input, whose ``__torch_function__`` the graph's ``+`` meets only
    where it runs on it (eager), and the device holds plain values: no +100."""
    def f(x):
        return x + x.as_subclass(_AddsHundred)

    x = torch.arange(4.0)
    expected = f(x)
    actual = minidynamo.optimize(backend)(f)(x)
    assert torch.equal(actual.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))
