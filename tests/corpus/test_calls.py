"""Calls: positional, keyword, ``*args``, ``**kwargs``, and inlining of user functions
(closures, defaults, nested functions, lambdas, comprehensions, recursion). One graph each."""

import functools

import pytest
import torch

from .helpers import check, params, single, tensor


def scale_and_shift(x, scale, shift):
    return x * scale + shift


def with_defaults(x, scale=2.0, shift=None):
    if shift is not None:
        x = x + shift
    return x * scale


def keyword_only(x, *, power, offset=1):
    return x ** power + offset


def star_args(*tensors):
    total = tensors[0]
    for t in tensors[1:]:
        total = total + t
    return total, len(tensors)


def star_kwargs(x, **options):
    if options.get("negate", False):
        x = -x
    return x * options["scale"], sorted(options)


def everything(a, b=1, *rest, c, d=4, **extra):
    return a * b + sum(rest) + c * d + len(extra)


# ---------------------------------------------------------------- calls with arguments

def call_positional(x):
    return scale_and_shift(x, 2, 1)


def call_keywords(x):
    return scale_and_shift(x, shift=1, scale=3)


def call_using_defaults(x):
    return with_defaults(x) + with_defaults(x, 3.0, x)


def call_keyword_only(x):
    return keyword_only(x, power=2) - keyword_only(x, offset=0, power=3)


def call_star_args_def(x, y):
    return star_args(x, y, x * y)


def call_splat_list(xs):
    return star_args(*xs)


def call_star_kwargs_def(x):
    return star_kwargs(x, scale=2, negate=True)


def call_splat_dict(x, opts):
    return star_kwargs(x, **opts)


def call_mixed_everything(x):
    return everything(x, 2, 3, 4, c=x, e=5, f=6)


def call_splat_both(x, args, kwargs):
    return scale_and_shift(x, *args, **kwargs)


def top_level_splat(*args, **kwargs):
    return args[0] * kwargs["k"], len(args), sorted(kwargs)


CALL_ARGUMENTS = [
    single(call_positional, tensor(3)),
    single(call_keywords, tensor(3)),
    single(call_using_defaults, tensor(3)),
    single(call_keyword_only, tensor(3)),
    single(call_star_args_def, tensor(3), tensor(3)),
    single(call_splat_list, [tensor(3), tensor(3), tensor(3)]),
    single(call_star_kwargs_def, tensor(3)),
    single(call_splat_dict, tensor(3), {"scale": 3}).then(tensor(3), {"scale": 3, "negate": True}),
    single(call_mixed_everything, tensor(3)),
    single(call_splat_both, tensor(3), (2,), {"shift": 1}),
    single(top_level_splat, tensor(3), 1, k=2, j=3),
    single(keyword_only, tensor(3), power=2).named("top_level_keyword_only"),
]


# ---------------------------------------------------------------- inlining user functions

def make_affine(w, b):
    def affine(x):
        return x * w + b
    return affine


def use_returned_closure(x):
    f = make_affine(2.0, 1.0)
    return f(x) + f(x + 1)


def nested_function_with_default(x):
    def inner(y, k=3):
        return y * k
    return inner(x) + inner(x, k=5)


def closure_over_outer_tensor(x, y):
    def add_y(t):
        return t + y
    return add_y(add_y(x))


def lambda_call(x):
    square = lambda t: t * t  # noqa: E731
    return square(x) + (lambda t, k=2: t * k)(x)


def lambda_closure_in_loop(x):
    fns = [lambda t, i=i: t + i for i in range(3)]
    return [f(x) for f in fns]


def higher_order_apply(x):
    def apply(fn, *args):
        return fn(*args)
    return apply(torch.relu, x) + apply(lambda t: t * 2, x)


def list_comprehension(xs):
    return [t * 2 for t in xs if t.dim() == 1]


def dict_comprehension(x):
    return {str(i): x * i for i in range(3)}


def set_comprehension(x, ns):
    sizes = {n % 3 for n in ns}
    return x + len(sizes), sizes


def nested_comprehension(x):
    return [[x * i + j for j in range(2)] for i in range(2)]


def power(x, n):
    return x if n == 0 else x * power(x, n - 1)


def call_recursive(x):
    return power(x, 3)


def is_even(n):
    return True if n == 0 else is_odd(n - 1)


def is_odd(n):
    return False if n == 0 else is_even(n - 1)


def call_mutual_recursion(x):
    return x + 1 if is_even(4) else x - 1


def three_level_chain(x):
    def a(t):
        return b(t) + 1

    def b(t):
        return c(t) * 2

    def c(t):
        return t.sin()
    return a(x)


def traced(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@traced
def decorated(x, scale=2):
    return x * scale


def call_decorated_function(x):
    return decorated(x, scale=3)


class Scaler:
    """A plain (non-module) user class with methods of each kind."""

    factor = 3

    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k

    @staticmethod
    def shift(x):
        return x + 1

    @classmethod
    def triple(cls, x):
        return x * cls.factor


def call_user_methods(x, scaler):
    return scaler.apply(x) + Scaler.shift(x) + scaler.triple(x)


def call_bound_method_reference(x, scaler):
    f = scaler.apply
    return f(f(x))


INLINING = [
    single(use_returned_closure, tensor(3)),
    single(nested_function_with_default, tensor(3)),
    single(closure_over_outer_tensor, tensor(3), tensor(3)),
    single(lambda_call, tensor(3)),
    single(lambda_closure_in_loop, tensor(3)),
    single(higher_order_apply, tensor(3)),
    single(list_comprehension, [tensor(2), tensor(2, 2), tensor(3)]),
    single(dict_comprehension, tensor(3)),
    single(set_comprehension, tensor(3), [1, 4, 5]),
    single(nested_comprehension, tensor(2)),
    single(call_recursive, tensor(3)),
    single(call_mutual_recursion, tensor(3)),
    single(three_level_chain, tensor(3)),
    single(call_decorated_function, tensor(3)),
    single(call_user_methods, tensor(3), Scaler(2)),
    single(call_bound_method_reference, tensor(3), Scaler(2)),
]


@pytest.mark.parametrize("case", params(CALL_ARGUMENTS))
def test_call_arguments(case):
    check(case)


@pytest.mark.parametrize("case", params(INLINING))
def test_inlining(case):
    check(case)
