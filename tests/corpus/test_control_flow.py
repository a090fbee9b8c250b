"""Control flow on Python values (if/for/while), specialised at trace time and guarded, and
iteration over ranges, lists, tuples, dict items, tensors and module containers. One graph each."""

import pytest
import torch
from torch import nn

from .helpers import check, params, single, tensor

torch.manual_seed(0)


# ---------------------------------------------------------------- if / else

def if_on_int_argument(x, n):
    if n > 0:
        return x + n
    else:
        return x - n


def if_on_string_mode(x, mode):
    if mode == "add":
        return x + 1
    elif mode == "mul":
        return x * 3
    return x


def if_on_keyword_flag(x, *, relu=False):
    y = x * 2
    if relu:
        y = y.relu()
    return y


def if_on_shape(x):
    if x.shape[0] > 2:
        return x[:2]
    return x * 2


def if_on_dtype(x):
    if x.dtype == torch.float32:
        return x.double() + 1
    return x


def conditional_expression(x, n):
    return x.sin() if n % 2 else x.cos()


def if_on_list_truthiness(x, extras):
    if extras:
        x = x + extras[0]
    if not []:
        x = x * 2
    return x


def early_return_inside_loop(x):
    for i in range(10):
        x = x + 1
        if i == 2:
            return x * 10
    return x


# ---------------------------------------------------------------- for / while

def for_over_range(x, n):
    total = x
    for i in range(n):
        total = total + x * i
    return total


def for_over_list_argument(xs):
    out = xs[0]
    for t in xs[1:]:
        out = out * t
    return out


def for_over_tuple_constant(x):
    for scale in (1.0, 2.0, 0.5):
        x = x * scale + 1
    return x


def for_over_dict_items(d):
    out = {}
    for name, t in d.items():
        out[name + "_sq"] = t * t
    return out


def for_over_tensor_rows(x):
    total = torch.zeros(x.shape[1])
    for row in x:
        total = total + row
    return total


def for_over_shape(x):
    y = x
    for size in x.shape:
        y = y + size
    return y


def for_with_break_continue(x):
    for i in range(10):
        if i % 2 == 0:
            continue
        if i > 6:
            break
        x = x + i
    return x


def for_else(x, items):
    for item in items:
        if item < 0:
            break
    else:
        return x + 100
    return x - 100


def nested_loops(x):
    out = x
    for i in range(2):
        for j in range(3):
            out = out + i * j
    return out


def while_counter(x):
    i = 0
    while i < 4:
        x = x * 1.5
        i += 1
    return x, i


def while_true_with_break(x):
    n = 1
    while True:
        n *= 2
        if n > 20:
            break
    return x + n


def loop_over_reversed_and_zip(x, ys):
    for a, b in zip(reversed(range(len(ys))), ys):
        x = x + b * a
    return x


IF_ELSE = [
    single(if_on_int_argument, tensor(3), 2).then(tensor(3), -2).named("if_on_int_true"),
    single(if_on_int_argument, tensor(3), -2).named("if_on_int_false"),
    single(if_on_string_mode, tensor(3), "add").then(tensor(3), "mul").named("if_on_string_add"),
    single(if_on_string_mode, tensor(3), "mul").named("if_on_string_mul"),
    single(if_on_keyword_flag, tensor(3), relu=True).then(tensor(3), relu=False),
    single(if_on_shape, tensor(4, 2)).then(tensor(2, 2)),
    single(if_on_dtype, tensor(3)).then(tensor(3, dtype=torch.float64)),
    single(conditional_expression, tensor(3), 3),
    single(if_on_list_truthiness, tensor(3), [tensor(3)]),
    single(early_return_inside_loop, tensor(3)),
]

LOOPS = [
    single(for_over_range, tensor(3), 4).then(tensor(3), 2),
    single(for_over_list_argument, [tensor(3), tensor(3), tensor(3)]).then([tensor(3), tensor(3)]),
    single(for_over_tuple_constant, tensor(3)),
    single(for_over_dict_items, {"a": tensor(2), "b": tensor(2)}).then({"b": tensor(2)}),
    single(for_over_tensor_rows, tensor(3, 2)),
    single(for_over_shape, tensor(2, 3)),
    single(for_with_break_continue, tensor(3)),
    single(for_else, tensor(3), [1, 2, 3]).named("for_else_no_break"),
    single(for_else, tensor(3), [1, -2, 3]).named("for_else_with_break"),
    single(nested_loops, tensor(3)),
    single(while_counter, tensor(3)),
    single(while_true_with_break, tensor(3)),
    single(loop_over_reversed_and_zip, tensor(2), [tensor(2), tensor(2), tensor(2)]),
]


# ---------------------------------------------------------------- iterating module containers

SEQUENTIAL = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
MODULE_LIST = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])
MODULE_DICT = nn.ModuleDict({"scale": nn.Linear(3, 3), "act": nn.Tanh()})


def iterate_sequential(seq, x):
    for layer in seq:
        x = layer(x)
    return x


def iterate_global_module_list(x):
    for layer in MODULE_LIST:
        x = layer(x) + x
    return x


def enumerate_module_list(layers, x):
    outs = []
    for i, layer in enumerate(layers):
        outs.append(layer(x) * i)
    return outs


def index_and_len_module_list(layers, x):
    return layers[len(layers) - 1](layers[0](x))


def module_dict_items(modules, x):
    names = []
    for name, module in modules.items():
        x = module(x)
        names.append(name)
    return x, names


def module_dict_values_and_keys(modules, x):
    for module in modules.values():
        x = module(x)
    return x, list(modules.keys()), "act" in modules


def module_dict_subscript(modules, x):
    return modules["act"](modules["scale"](x))


def sequential_index_and_len(seq, x):
    return seq[len(seq) - 1](seq[1](seq[0](x)))


def sequential_slices(seq, x):
    return seq[1:](seq[:1](x)), seq[::2](x)


def module_list_slice_loop(layers, x):
    for layer in layers[1:]:
        x = layer(x)
    return x


def try_except_key_error(x, options):
    try:
        scale = options["scale"]
    except KeyError:
        scale = 1.0
    try:
        y = x.relu() * scale
    except (KeyError, AttributeError):
        y = x
    return y


def catches_own_exception(x):
    try:
        raise KeyError("missing")
    except KeyError:
        return x + 1


def exception_from_inlined_helper(x):
    def check_positive(n):
        if n < 0:
            raise ValueError(f"negative: {n}")
        return n
    try:
        check_positive(-1)
    except ValueError as error:
        return x + 1, str(error)
    return x


MODULE_CONTAINERS = [
    single(iterate_sequential, SEQUENTIAL, tensor(2, 4)),
    single(iterate_global_module_list, tensor(2, 3)),
    single(enumerate_module_list, MODULE_LIST, tensor(2, 3)),
    single(index_and_len_module_list, MODULE_LIST, tensor(2, 3)),
    single(module_dict_items, MODULE_DICT, tensor(2, 3)),
    single(module_dict_values_and_keys, MODULE_DICT, tensor(2, 3)),
    single(module_dict_subscript, MODULE_DICT, tensor(2, 3)),
    single(sequential_index_and_len, SEQUENTIAL, tensor(2, 4)),
    single(sequential_slices, SEQUENTIAL, tensor(2, 4)),
    single(module_list_slice_loop, MODULE_LIST, tensor(2, 3)),
    single(try_except_key_error, tensor(3), {"scale": 2.0}),
    single(catches_own_exception, tensor(3)),
    single(exception_from_inlined_helper, tensor(3)),
]


@pytest.mark.parametrize("case", params(IF_ELSE))
def test_if_else(case):
    check(case)


@pytest.mark.parametrize("case", params(LOOPS))
def test_loops(case):
    check(case)


@pytest.mark.parametrize("case", params(MODULE_CONTAINERS))
def test_module_containers(case):
    check(case)
