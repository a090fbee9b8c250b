"""The harness of the adversarial probes: a program and its compiled twin, each on state of its
own, called call by call with the state changed between calls; the results, the state
afterwards, the exceptions and the printed output must be the same.

    eager, ours, counts = run_twins(make, calls, backend)
    compare(eager, ours)

``make()`` -> (program, state); ``calls``: functions of the state giving each call's arguments
(they may change the state first).  ``snap`` makes a comparable picture of a value: types
included, shared and cyclic objects by label, tensors cloned.
"""

import collections
import contextlib
import enum
import io
import types

import numpy as np
import torch
from torch import nn

import minidynamo


class Globals:
    """Names of a twin's own globals dict to compare."""

    def __init__(self, namespace, names):
        self.namespace, self.names = namespace, names


def with_globals(fn, **values):
    """``fn`` with a globals dict of its own (the module's, copied, then ``values``); functions
    given in ``values`` are re-made on that dict too, so their global reads see it."""
    namespace = dict(fn.__globals__)
    for k, v in values.items():
        if isinstance(v, types.FunctionType):
            v = types.FunctionType(v.__code__, namespace, v.__name__, v.__defaults__, v.__closure__)
        namespace[k] = v
    return types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__), namespace


def snap(value, memo, modules_whole=False):
    """A comparable picture of ``value``.  ``modules_whole``: a module's training flag and state
    dict too (else its public attributes only)."""
    again = lambda v: snap(v, memo, modules_whole)   # noqa: E731
    if isinstance(value, Globals):
        return ("globals", [(n, again(value.namespace.get(n, "<missing>"))) for n in value.names])
    if isinstance(value, torch.Tensor):
        picture = ("tensor", value.detach().clone(), value.dtype, tuple(value.shape))
        return picture + (value.requires_grad,) if modules_whole else picture
    if isinstance(value, float):
        return ("float", repr(value))            # -0.0, nan and inf told apart
    if isinstance(value, (int, str, bytes, type(None), bool, enum.Enum, np.generic)):
        return (type(value), value)
    if isinstance(value, types.CellType):
        return ("cell", again(value.cell_contents) if value.cell_contents is not None else "<empty>")
    if isinstance(value, torch.utils.hooks.RemovableHandle):
        return ("handle",)
    if isinstance(value, types.GeneratorType):
        return ("generator", value.__name__)
    if isinstance(value, nn.Module) and not modules_whole:
        return ("module", type(value).__name__, again({k: v for k, v in vars(value).items()
                                                      if not k.startswith("_")}))
    if isinstance(value, (types.FunctionType, types.MethodType, type, types.ModuleType)):
        return ("callable", getattr(value, "__name__", repr(value)))
    key = id(value)
    if key in memo:
        return ("same", memo[key][0])
    memo[key] = (len(memo), value)          # keep it alive while ids are compared
    label = memo[key][0]
    if isinstance(value, nn.Module):
        return ("module", type(value).__name__, label, value.training,
                again({k: v for k, v in vars(value).items() if not k.startswith("_")}),
                again(dict(value.state_dict(keep_vars=True))))
    if isinstance(value, (list, tuple, collections.deque)):
        return (type(value), label, [again(v) for v in value])
    if isinstance(value, dict):
        return (type(value), label, [(again(k), again(v)) for k, v in value.items()])
    if isinstance(value, (set, frozenset)):
        return (type(value), label, sorted(map(repr, value)))
    if hasattr(value, "__dict__"):
        return (type(value).__name__, label, again(dict(vars(value))))
    if hasattr(type(value), "__slots__"):
        return (type(value).__name__, label, [(n, again(getattr(value, n, "<missing>")))
                                              for n in type(value).__slots__])
    return ("repr", repr(value))


def same(a, b, where):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        assert isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor), f"{where}: {a!r} != {b!r}"
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a!r} != {b!r}"
        torch.testing.assert_close(a, b, equal_nan=True, msg=lambda m: f"{where}: {m}")
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b), f"{where}: {a!r} != {b!r}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{where}[{i}]")
    else:
        assert type(a) is type(b) and a == b, f"{where}: {a!r} != {b!r}"


def run_twins(make, calls, backend, modules_whole=False):
    """(eager log, compiled log, the compiled twin's counters); a log holds, per call, the state
    afterwards, the result (or the exception) and what was printed."""
    logs = []
    for compiled in (False, True):
        minidynamo.reset()
        fn, state = make()
        if compiled:
            fn = minidynamo.optimize(backend)(fn)
        log = []
        for call in calls:
            args = call(state)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    result = ("returned", fn(*args))
                except Exception as e:          # noqa: BLE001 (the exception is what is compared)
                    result = ("raised", type(e), str(e))
            memo = {}
            log.append((snap(state, memo, modules_whole), snap(result, memo, modules_whole), out.getvalue()))
        logs.append(log)
        if compiled:
            counts = minidynamo.counters.snapshot()
    return logs[0], logs[1], counts


def compare(eager, ours):
    for i, (e, o) in enumerate(zip(eager, ours)):
        same(o[1], e[1], f"call {i}: result")
        same(o[0], e[0], f"call {i}: state")
        assert o[2] == e[2], f"call {i}: printed {o[2]!r}, eager printed {e[2]!r}"
