"""Frames minidynamo cannot capture. Each must run eagerly with eager's answer (and eager's
printing and mutations), count as a fallback or a graph break (docs/graph-breaks.md) with a
readable reason in ``explain``, not recompile on the second call, and raise ``MinidynamoError``
under ``nopython=True``."""

import collections
import os
import queue
import random
import threading
import zlib

import pytest
import torch

from .helpers import check, fallback, params, tensor

POSITIVE = tensor(3).abs() + 0.1


# ---------------------------------------------------------------- control flow on tensor data

def if_on_tensor_sum(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def while_on_tensor_max(x):
    while x.max() < 10:
        x = x * 2
    return x


def if_on_any(x):
    if (x > 1).any():
        return x.clamp(max=1)
    return x


def int_of_tensor(x):
    return x * int(x.sum())


def float_of_tensor(x):
    return x + float(x.mean())


def data_dependent_in_inlined_helper(x):
    def pick(t):
        return t if t.mean() > 0 else -t
    return pick(x) * 2


def boolean_mask_indexing(x):
    return x[x > 0] * 2


def nonzero_shape(x):
    return torch.nonzero(x > 0) + 1


DATA_DEPENDENT = [
    fallback(if_on_tensor_sum, POSITIVE),
    fallback(if_on_tensor_sum, -POSITIVE).named("if_on_tensor_sum_negative"),
    fallback(while_on_tensor_max, POSITIVE),
    fallback(if_on_any, tensor(4)),
    fallback(int_of_tensor, POSITIVE),
    fallback(float_of_tensor, tensor(3)),
    fallback(data_dependent_in_inlined_helper, tensor(3)),
    fallback(boolean_mask_indexing, tensor(5)),
    fallback(nonzero_shape, tensor(5)),
]


# ---------------------------------------------------------------- .item() / .tolist()

def item_as_python_number(x):
    return x * x.sum().item()


def tolist_values(x):
    values = x.tolist()
    return x + values[0], values


def item_in_module_like_helper(x, scale):
    return x * scale.item() + 1


ITEM_TOLIST = [
    fallback(item_as_python_number, tensor(3), mentions="item"),
    fallback(tolist_values, tensor(3), mentions="tolist"),
    fallback(item_in_module_like_helper, tensor(3), torch.tensor(2.0), mentions="item"),
]


# ---------------------------------------------------------------- print

def print_tensor(x):
    y = x + 1
    print(y)
    return y * 2


def print_constant(x):
    print("hello from the frame", 3)
    return x - 1


def print_in_inlined_helper(x):
    def log(msg):
        print(msg)
    log("step")
    return x * 3


PRINT = [
    fallback(print_tensor, tensor(3), mentions="print"),
    fallback(print_constant, tensor(3), mentions="print"),
    fallback(print_in_inlined_helper, tensor(3), mentions="print"),
]


# ---------------------------------------------------------------- generators
# Generators the frame drives to the end are captured (test_generators.py); these are not.

def pairs(x):
    yield x
    yield x + 1


def hands_a_paused_generator_over_a_graph_break(x):
    g = pairs(x * 2)
    first = next(g)
    print("between")                   # a break: the paused frame cannot be rebuilt for the rest
    return first + next(g)


def guarded_pairs(x, log):
    try:
        yield x
        yield x + 1
    finally:
        log.append("closed")           # runs when CPython collects the unfinished generator


def leaves_a_generator_inside_try_finally(x, log):
    first = next(guarded_pairs(x, log))
    log.append("after")
    return first * 2


GENERATORS = [
    fallback(hands_a_paused_generator_over_a_graph_break, tensor(3), mentions="print"),
    fallback(leaves_a_generator_inside_try_finally, tensor(3), [], mentions="finally"),
]


# ---------------------------------------------------------------- exceptions

def raises_value_error(x):
    y = x + 1
    if y.dim() == 1:
        raise ValueError("one-dimensional input is not allowed")
    return y


def catches_errors_of_a_graph_that_cannot_rerun(x):
    x.mul_(2)                          # a re-run of the frame would double twice
    try:
        return x @ x
    except RuntimeError:
        return x


EXCEPTIONS = [
    fallback(raises_value_error, tensor(3)),
    fallback(catches_errors_of_a_graph_that_cannot_rerun, tensor(3), mentions="try"),
]


# ---------------------------------------------------------------- unknown C functions and objects

LOCK = threading.Lock()


def unknown_c_function(x):
    return x * (zlib.crc32(b"minidynamo") % 7)


def unknown_os_function(x):
    return x + (os.getpid() > 0)


def unknown_c_method_on_object(x):
    rng = random.Random(0)
    return x * rng.random()


def unknown_object_simple_queue(x):      # (collections.deque is modelled: tests/tracer/test_stdlib_tables.py)
    q = queue.SimpleQueue()
    q.put(x + 1)
    return q.get()


def unknown_context_manager(x):
    with LOCK:
        return x + 1


def numpy_round_trip(x):
    return torch.from_numpy(x.numpy() * 2)


UNKNOWN_C = [
    fallback(unknown_c_function, tensor(3)),
    fallback(unknown_os_function, tensor(3)),
    fallback(unknown_c_method_on_object, tensor(3)),
    fallback(unknown_object_simple_queue, tensor(3)),
    fallback(unknown_context_manager, tensor(3)),
    fallback(numpy_round_trip, tensor(3)),
]


@pytest.mark.parametrize("case", params(DATA_DEPENDENT))
def test_data_dependent_control_flow(case):
    check(case)


@pytest.mark.parametrize("case", params(ITEM_TOLIST))
def test_item_tolist(case):
    check(case)


@pytest.mark.parametrize("case", params(PRINT))
def test_print(case):
    check(case)


@pytest.mark.parametrize("case", params(GENERATORS))
def test_generators(case):
    check(case)


@pytest.mark.parametrize("case", params(EXCEPTIONS))
def test_exceptions(case):
    check(case)


@pytest.mark.parametrize("case", params(UNKNOWN_C))
def test_unknown_c_functions_and_objects(case):
    check(case)
