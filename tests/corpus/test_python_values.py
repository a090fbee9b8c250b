"""Python values around tensor code: variables, attributes, constants, scalar operators,
containers, math/operator, builtins, ``is None``, assert, f-strings. Each must be one graph."""

import collections
import math
import operator

import pytest
import torch

from .helpers import check, fallback, params, single, tensor

SCALE = 2.5
OFFSET = torch.arange(3.0)
SIZES = [1, 2, 3]
Point = collections.namedtuple("Point", ["x", "y"])
Defaulted = collections.namedtuple("Defaulted", ["x", "y", "xy"], defaults=(None, 1, None))


def double(x):
    return x * 2


class Config:
    """A plain user object handed in as an argument."""

    def __init__(self, scale, name):
        self.scale = scale
        self.name = name


# ---------------------------------------------------------------- locals, globals, closures, cells

def local_assign(x):
    y = x + 1
    z = y * 2
    return z - x


def local_reassign(x):
    y = x
    y = y + 1
    y = y * y
    return y


def read_global_scalar(x):
    return x * SCALE


def read_global_tensor(x):
    return x + OFFSET


def read_global_list(x):
    return x * SIZES[-1] + len(SIZES)


def call_global_function(x):
    return double(x) + 1


def make_scaler(k):
    def scale(x):
        return x * k
    return scale


def make_adder(bias):
    def add(x):
        return x + bias
    return add


def cell_read_by_inner(x):
    y = x + 1

    def inner():
        return y * 2
    return inner()


def cell_written_by_inner(x):
    count = 0

    def bump():
        nonlocal count
        count += 1
    bump()
    bump()
    return x + count


def cell_captured_late(x):
    def inner():
        return y - 1
    y = x * 3
    return inner()


def two_level_closure(x):
    a = 2

    def middle():
        b = 3

        def innermost():
            return x * a + b
        return innermost()
    return middle()


LOCALS_GLOBALS_CLOSURES = [
    single(local_assign, tensor(3)),
    single(local_reassign, tensor(3)),
    single(read_global_scalar, tensor(3)),
    single(read_global_tensor, tensor(3)),
    single(read_global_list, tensor(3)),
    single(call_global_function, tensor(3)),
    single(make_scaler(3), tensor(3)).named("closure_over_int"),
    single(make_adder(tensor(3)), tensor(3)).named("closure_over_tensor"),
    single(cell_read_by_inner, tensor(3)),
    single(cell_written_by_inner, tensor(3)),
    single(cell_captured_late, tensor(3)),
    single(two_level_closure, tensor(3)),
]


# ---------------------------------------------------------------- attributes and subscripts

def tensor_shape_attribute(x):
    return x * x.shape[0] + x.shape[-1]


def tensor_size_method(x):
    return x.view(x.size(0) * x.size(1))


def tensor_transpose_attribute(x):
    return x.T + 1


def tensor_ndim_and_dtype(x):
    return x.to(torch.float64) * x.ndim, x.dtype


def user_object_attribute(x, cfg):
    return x * cfg.scale, cfg.name


def user_object_attribute_store(x, cfg):
    cfg.last = x * cfg.scale
    cfg.name = "seen"
    return cfg.last + 1, cfg.name


def tensor_index_int(x):
    return x[0] + x[-1]


def tensor_index_slices(x):
    return x[1:, ::2] * 2


def tensor_index_ellipsis_none(x):
    return x[..., 1][None] + 1


def tensor_index_by_tensor(x, idx):
    return x[idx] * 2


def tensor_setitem_on_copy(x):
    y = x.clone()
    y[0] = 7.0
    y[:, 1] = y[:, 2]
    return y


def dict_subscript(d):
    return d["a"] * d["b"]


def list_negative_subscript(xs):
    return xs[-1] - xs[-2]


def shape_tuple_arithmetic(x):
    return torch.zeros(x.shape + (1,)) + x.unsqueeze(-1), list(x.shape), tuple(x.size())


def view_with_star_shape(x):
    return x.view(*x.shape[:-1], 2, -1)


def size_unpack(x):
    rows, cols = x.size()
    return x * rows + cols


def tensor_unpack_rows(x):
    first, second = x
    return first - second


def slice_bound_from_shape(x):
    return x[: x.shape[0] // 2] * 2


ATTRIBUTES_SUBSCRIPTS = [
    single(tensor_shape_attribute, tensor(2, 3)),
    single(tensor_size_method, tensor(2, 3)),
    single(tensor_transpose_attribute, tensor(2, 3)),
    single(tensor_ndim_and_dtype, tensor(2, 3)),
    single(user_object_attribute, tensor(3), Config(1.5, "cfg"))
    .then(tensor(3), Config(-1.0, "other")),
    single(user_object_attribute_store, tensor(3), Config(1.5, "cfg")),
    single(tensor_index_int, tensor(4)),
    single(tensor_index_slices, tensor(3, 4)),
    single(tensor_index_ellipsis_none, tensor(2, 3)),
    single(tensor_index_by_tensor, tensor(5), torch.tensor([4, 0, 2])),
    single(tensor_setitem_on_copy, tensor(3, 3)),
    single(dict_subscript, {"a": tensor(3), "b": tensor(3)}),
    single(list_negative_subscript, [tensor(2), tensor(2), tensor(2)]),
    single(shape_tuple_arithmetic, tensor(2, 3)),
    single(view_with_star_shape, tensor(2, 4)),
    single(size_unpack, tensor(2, 3)),
    single(tensor_unpack_rows, tensor(2, 3)),
    single(slice_bound_from_shape, tensor(4)),
]


# ---------------------------------------------------------------- constants

def return_int_constant(x):
    return x + 1, 3


def return_none_constant(x):
    return x - 1, None


def return_string_constant(x):
    return "done", x.abs()


def float_constants(x):
    return x * 0.5 + 1e-3


def nested_constant_tuple(x):
    return x.exp(), (1, 2.0, (True, "three"))


def dtype_constant(x):
    return x.to(torch.float16).to(torch.float32)


CONSTANTS = [
    single(return_int_constant, tensor(3)),
    single(return_none_constant, tensor(3)),
    single(return_string_constant, tensor(3)),
    single(float_constants, tensor(3)),
    single(nested_constant_tuple, tensor(3)),
    single(dtype_constant, tensor(3)),
]


# ---------------------------------------------------------------- operators on Python scalars

def int_arithmetic(x, n):
    m = n * 4 - 1 + n
    return x * m, m


def int_floordiv_mod_pow(x, n):
    return x + (17 // n) + (17 % n) + n ** 3


def int_true_division(x, n):
    return x * (n / 4)


def int_bitwise(x, n):
    return x + ((n & 6) | (n ^ 1)) + (n << 2) + (n >> 1)


def chained_comparison(x, n):
    return x + 1 if 1 < n < 5 else x - 1


def scalar_unary(x, n):
    return x * -n + (+n) + (~n), not n


def scalar_inplace(x, n):
    n += 2
    n *= 3
    n -= 1
    n //= 2
    return x * n


def float_arithmetic(x, f):
    return x * (f * 2 + 1) - f / 3


def bool_short_circuit(x, a, b):
    flag = a and b or not a
    return x + 1 if flag else x - 1, flag


def scalar_comparisons(x, n):
    return x + n, (n == 3, n != 3, n < 2, n >= 3)


def number_plus_equals_tensor(x, n):
    total = 0
    for _ in range(n):
        total += x
    return total


SCALAR_OPERATORS = [
    single(int_arithmetic, tensor(3), 3),
    single(int_floordiv_mod_pow, tensor(3), 5),
    single(int_true_division, tensor(3), 3),
    single(int_bitwise, tensor(3), 5),
    single(chained_comparison, tensor(3), 3).then(tensor(3), 7),
    single(scalar_unary, tensor(3), 4),
    single(scalar_inplace, tensor(3), 5),
    single(float_arithmetic, tensor(3), 0.25),
    single(bool_short_circuit, tensor(3), True, False),
    single(scalar_comparisons, tensor(3), 3),
    single(number_plus_equals_tensor, tensor(3), 2),
]


# ---------------------------------------------------------------- tuples, lists, dicts, slices

def build_and_return_tuple(x):
    return (x + 1, x * 2)


def build_list_append(x):
    out = []
    out.append(x + 1)
    out.append(x - 1)
    out.extend([x * 3])
    return out


def list_pop_and_insert(x):
    items = [x, x + 1, x + 2]
    last = items.pop()
    items.insert(0, last)
    return items


def delete_items_and_pop_pairs(x, xs, d):
    items = [x, x + 1, x + 2, x + 3]
    del items[0]
    del items[-2:]
    del xs[0]                              # the caller's list and dict change as in eager
    key, value = d.popitem()
    d.clear()
    d["moved"] = key
    return items, x * value


def build_dict_and_update(x):
    d = {"a": x + 1}
    d["b"] = x * 2
    d.update(c=x - 1)
    return d


def tuple_unpack(x):
    a, b = x + 1, x * 2
    return b - a


def star_unpack_rest(x):
    first, *rest = (x, x + 1, x + 2)
    return first, rest


def star_unpack_middle(x):
    a, *mid, b = [x, x + 1, x + 2, x + 3]
    return a + b, mid


def unpack_argument_pair(pair):
    a, b = pair
    return a @ b


def star_in_tuple_display(xs):
    return (*xs, xs[0] + 1)


def star_in_list_display(xs):
    return [*xs, *xs, xs[0] * 2][1:]


def dict_double_star_merge(d, x):
    return {**d, "c": x + 1}


def list_slices(xs):
    return xs[1:3], xs[::-1], xs[-1] + sum(xs[:-1])


def slice_object(x):
    s = slice(1, 3)
    return x[s] + 1


def tuple_concat_and_repeat(x):
    t = (1, 2) + (3,)
    z = (0,) * 2
    return x * sum(t) + len(z), t + z


def containment_tests(x, n):
    in_tuple = n in (1, 2, 3)
    in_dict = "a" in {"a": 1}
    return (x + 1 if in_tuple and in_dict else x - 1), n not in [4, 5]


def dict_methods(d):
    total = d.get("missing", 0)
    for key in d.keys():
        total = total + d[key]
    return total, list(d.values())[0] * 2, [k for k, _ in d.items()]


def mutate_input_list(xs):
    xs.append(xs[0] + 1)
    return len(xs)


def list_sort_index_count(x):
    order = [3, 1, 2, 1]
    order.sort()
    return x * order.index(2) + order.count(1), order


def namedtuple_in_and_out(p):
    return Point(p.x + p.y, p[1] * 2)


def namedtuple_with_defaults(a, b):
    t = Defaulted(a, xy=b)
    return t.x + t.xy * t.y, t


def try_finally(x):                   # a graph free to run twice: a kernel error re-runs the frame
    out = []
    try:
        out.append(x * 2)
    finally:
        out.append(x - 1)
    return out


def mutate_input_dict(d):
    d["doubled"] = d["x"] * 2
    del d["drop"]
    return d["x"] - 1


CONTAINERS = [
    single(build_and_return_tuple, tensor(3)),
    single(build_list_append, tensor(3)),
    single(list_pop_and_insert, tensor(3)),
    single(build_dict_and_update, tensor(3)),
    single(tuple_unpack, tensor(3)),
    single(star_unpack_rest, tensor(3)),
    single(star_unpack_middle, tensor(3)),
    single(unpack_argument_pair, (tensor(2, 3), tensor(3, 2))),
    single(star_in_tuple_display, [tensor(2), tensor(2)]),
    single(star_in_list_display, [tensor(2), tensor(2)]),
    single(dict_double_star_merge, {"a": tensor(2), "b": 1}, tensor(2)),
    single(list_slices, [tensor(1), tensor(1), tensor(1), tensor(1)]),
    single(slice_object, tensor(4)),
    single(tuple_concat_and_repeat, tensor(3)),
    single(containment_tests, tensor(3), 2).then(tensor(3), 5),
    single(dict_methods, {"a": tensor(3), "b": tensor(3)}),
    single(list_sort_index_count, tensor(3)),
    single(namedtuple_in_and_out, Point(tensor(2), tensor(2))),
    single(namedtuple_with_defaults, tensor(2), tensor(2)),
    single(try_finally, tensor(3)),
    single(mutate_input_list, [tensor(3)]),
    single(mutate_input_dict, {"x": tensor(3), "drop": 1}),
    single(delete_items_and_pop_pairs, tensor(3), [1, 2, 3], {"a": 1, "b": 2}),
]


# ---------------------------------------------------------------- math.* on constants, operator

def math_functions_on_constants(x):
    return x * math.sqrt(2.0) + math.exp(1.0) - math.log(8, 2)


def math_constants_and_rounding(x):
    return x * math.pi + math.floor(2.7) + math.ceil(2.1) + math.cos(0.0)


def math_on_shape(x):
    return x.reshape(int(math.sqrt(x.numel())), -1)


def operator_arithmetic(x, y):
    return operator.add(x, y), operator.mul(x, 3), operator.truediv(x, 2), operator.neg(y)


def operator_getitem(x):
    return operator.getitem(x, 0) + operator.getitem((1, 2), 1)


def operator_comparisons(x, n):
    return x + 1 if operator.lt(n, 3) and operator.eq(n, 2) else x, operator.gt(x, 0)


def operator_inplace(x):
    y = x.clone()
    y = operator.iadd(y, 1)
    return operator.imul(y, 2)


def operator_itemgetter(x):
    pick_second = operator.itemgetter(1)
    return pick_second((x, x + 1, x + 2))


def operator_length_hint(x, xs, d):
    return x * operator.length_hint(xs) + operator.length_hint(d, 7) + operator.length_hint(x)


def operator_length_hint_of_a_0d_tensor(x):
    return x * operator.length_hint(x[0], 5)     # len() of a 0-d tensor raises TypeError: the default


MATH_AND_OPERATOR = [
    single(math_functions_on_constants, tensor(3)),
    single(math_constants_and_rounding, tensor(3)),
    single(math_on_shape, tensor(4, 4)),
    single(operator_arithmetic, tensor(3), tensor(3)),
    single(operator_getitem, tensor(3)),
    single(operator_comparisons, tensor(3), 2),
    single(operator_inplace, tensor(3)),
    single(operator_itemgetter, tensor(3)),
    single(operator_length_hint, tensor(3), [1, 2], {"a": 1}),
    fallback(operator_length_hint_of_a_0d_tensor, tensor(3), mentions="length_hint"),
]


# ---------------------------------------------------------------- builtins

def builtin_len(x, xs, d):
    return x * len(x) + len(xs) + len(d)


def builtin_isinstance(x, n, seq):
    a = isinstance(x, torch.Tensor)
    b = isinstance(n, int)
    c = isinstance(seq, (list, tuple))
    return x + 1 if a and b and c else x - 1, isinstance(n, float)


def builtin_getattr_hasattr(x, cfg):
    scale = getattr(cfg, "scale")
    bias = getattr(cfg, "bias", 0.5)
    return x * scale + bias, hasattr(cfg, "name"), hasattr(cfg, "bias"), hasattr(x, "shape")


def builtin_range_sum(x):
    return x + sum(range(1, 10, 3))


def builtin_enumerate(xs):
    total = 0
    for i, t in enumerate(xs):
        total = total + t * i
    return total


def builtin_zip(xs, ys):
    return [a * b for a, b in zip(xs, ys)]


def builtin_min_max_abs(x, n):
    return x * min(3, n) + max([1, 5, 2]) + abs(-n) + max(n, 2.5), min(n, -1)


def builtin_conversions(x):
    t = tuple([1, 2])
    lst = list((x, x + 1))
    d = dict(a=1, b=2)
    d2 = dict(zip(["p", "q"], [x, x * 2]))
    return t, lst, d, d2


def builtin_number_conversions(x, f):
    return x * int(f) + float(3) + round(f), bool(0), str(7)


def builtin_sum_of_tensors(xs):
    return sum(xs)


def builtin_sorted_reversed(x):
    order = sorted([3, 1, 2])
    back = list(reversed(order))
    return x * order[0] + back[0], order, back


def builtin_any_all_divmod(x, n):
    q, r = divmod(17, n)
    ok = all([n > 0, q > 1]) and any([False, r == 2])
    return x * q + r if ok else x


def str_methods_on_constants(x, n):
    joined = "-".join(["a", "b"])
    return x * len(joined), "{}:{}".format(n, 2), "%03d" % n, "abc".upper(), "a,b".split(",")


def builtin_map(xs):
    return list(map(torch.neg, xs))


def builtin_sum_of_generator_expression(xs):
    return sum(t * 2 for t in xs)


def builtins_consume_generator_expressions(x, xs):
    wide = any(d > 2 for d in x.shape)
    same = all(t.shape == x.shape for t in xs)
    return tuple(t * 2 for t in xs), list(t.sum() for t in xs), wide, same, max(len(t) for t in xs)


BUILTINS = [
    single(builtin_len, tensor(4), [1, 2], {"a": 1}),
    single(builtin_isinstance, tensor(3), 3, [1]).then(tensor(3), 3.0, (1,)),
    single(builtin_getattr_hasattr, tensor(3), Config(2.0, "c")),
    single(builtin_range_sum, tensor(3)),
    single(builtin_enumerate, [tensor(3), tensor(3), tensor(3)]),
    single(builtin_zip, [tensor(2), tensor(2)], [tensor(2), tensor(2)]),
    single(builtin_min_max_abs, tensor(3), 4),
    single(builtin_conversions, tensor(3)),
    single(builtin_number_conversions, tensor(3), 2.7),
    single(builtin_sum_of_tensors, [tensor(3), tensor(3), tensor(3)]),
    single(builtin_sorted_reversed, tensor(3)),
    single(builtin_any_all_divmod, tensor(3), 5),
    single(builtin_map, [tensor(2), tensor(2)]),
    single(str_methods_on_constants, tensor(2), 7),
    single(builtins_consume_generator_expressions, tensor(3), [tensor(3), tensor(3)]),
    single(builtin_sum_of_generator_expression, [tensor(3), tensor(3)]),
]


# ---------------------------------------------------------------- is None, assert, f-strings

def add_optional_bias(x, bias=None):
    if bias is None:
        return x + 1
    return x + bias


def is_not_none_branch(x, mask):
    if mask is not None:
        x = x * mask
    return x * 2


def assert_on_shape(x):
    assert x.dim() == 2, "expected a matrix"
    assert x.shape[1] == 3
    return x.sum(1)


def assert_on_python_value(x, n):
    assert isinstance(n, int) and n > 0, f"bad n: {n}"
    return x * n


def fstring_keys(x):
    return {f"layer{i}": x * i for i in range(3)}


def fstring_with_format_spec(x, n):
    label = f"{n:03d}-{SCALE:.1f}"
    return x + len(label), label


IS_NONE_ASSERT_FSTRING = [
    single(add_optional_bias, tensor(3)).then(tensor(3), tensor(3)).named("is_none_without_bias"),
    single(add_optional_bias, tensor(3), tensor(3)).named("is_none_with_bias"),
    single(is_not_none_branch, tensor(3), None).named("is_not_none_given_none"),
    single(is_not_none_branch, tensor(3), tensor(3)).named("is_not_none_given_tensor"),
    single(assert_on_shape, tensor(2, 3)),
    single(assert_on_python_value, tensor(3), 2),
    single(fstring_keys, tensor(3)),
    single(fstring_with_format_spec, tensor(3), 7),
]


@pytest.mark.parametrize("case", params(LOCALS_GLOBALS_CLOSURES))
def test_locals_globals_closures(case):
    check(case)


@pytest.mark.parametrize("case", params(ATTRIBUTES_SUBSCRIPTS))
def test_attributes_subscripts(case):
    check(case)


@pytest.mark.parametrize("case", params(CONSTANTS))
def test_constants(case):
    check(case)


@pytest.mark.parametrize("case", params(SCALAR_OPERATORS))
def test_scalar_operators(case):
    check(case)


@pytest.mark.parametrize("case", params(CONTAINERS))
def test_containers(case):
    check(case)


@pytest.mark.parametrize("case", params(MATH_AND_OPERATOR))
def test_math_and_operator(case):
    check(case)


@pytest.mark.parametrize("case", params(BUILTINS))
def test_builtins(case):
    check(case)


@pytest.mark.parametrize("case", params(IS_NONE_ASSERT_FSTRING))
def test_is_none_assert_fstring(case):
    check(case)
