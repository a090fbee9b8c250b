"""Run one program eagerly and optimized, side by side, and say where they differ.

The source is executed twice into two fresh module namespaces (one eager, one optimized), so
both start from identical state.  Then the same script of steps runs on both: a call builds
fresh arguments from its spec (or reuses the previous call's objects) and calls ``f``; an exec
step runs a snippet (a state mutation) in the namespace.  After every call the two sides are
compared: the return value (or the exception), the arguments after the call, the program's
globals (including the plain object's and the module's state and the class attributes) and what
was printed.  Aliasing is compared too: if eager returns the caller's list, optimized must
return the caller's list, not a copy.  When the returned tensors carry a graph, the gradients
of a weighted sum of them (with respect to the inputs and the module's parameters that require
grad) are compared as well, or the error computing them raises.

``run_program(source, steps, backend)`` -> :class:`Outcome` (``mismatch`` is None when all
agree).  ``run_script`` is the entry point of the written repro files.

Device mode (``device="xla"``): every tensor the program receives (arguments, ``MOD``'s
parameters and buffers, tensors in globals and on ``OBJ``) lives on the XLA device, so the
"eager" side is plain lazy torch_xla and the optimized side minidynamo with an XLA backend;
values are compared on the host with XLA:CPU float32 tolerances (tests/fuzz/README.md).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import gc
import io
import logging
import math
import re
import sys
import threading
import types
from typing import Any, Optional

import torch

import minidynamo
from tests.test_soundness import CountingBackend

FILENAME = "<fuzz>"


@dataclasses.dataclass
class Outcome:
    mismatch: Optional[str] = None       # "category: detail"
    step: int = -1
    calls: int = 0
    eager_errors: int = 0                # calls where eager raised (the same on both sides)
    fallbacks: list = dataclasses.field(default_factory=list)
    f_fallbacks: int = 0                 # fallbacks of f itself or its resume functions (not of helpers)
    breaks: list = dataclasses.field(default_factory=list)
    f_breaks: int = 0                    # graph breaks taken in f or its resume functions
    compiles: int = 0
    grad_checks: int = 0                 # calls whose gradients were compared too
    setup_error: Optional[str] = None
    reference_error: Optional[str] = None   # device mode: lazy torch_xla's own result unreadable (not compared)
    host_agreed: int = 0                     # device mode: calls where only eager on the host agreed

    @property
    def category(self) -> Optional[str]:
        return self.mismatch.split(":", 1)[0] if self.mismatch else None


# ----------------------------------------------------------------------------- inputs


# Attributes set on an input tensor that hide its methods (``x.size(-1)`` then calls the lambda).
SHADOWS = {
    "size": lambda *args: 5,
    "dim": lambda: 3,
    "sum": lambda *args, **kwargs: torch.tensor(-2.0),
    "relu": lambda: torch.zeros(()),
    "abs": lambda: torch.ones(1),
}


def torch_device(device: str) -> torch.device:
    """``"cpu"`` or ``"xla"`` (torch_xla imported through the bridge, which keeps torch's names)."""
    if device == "cpu":
        return torch.device("cpu")
    from xla_bridge import device as dev
    return dev.xla_device()


def seed_generators(index: int, device: str) -> None:
    """Each side of a call starts from the same random state: the host generator's, and in
    device mode the device's (a frame that runs eagerly draws its device tensors' numbers there,
    as lazy torch_xla does; it is not reseeded by ``torch.manual_seed``)."""
    torch.manual_seed(index)
    if device == "xla":
        import torch_xla

        torch_xla.manual_seed(index)


def reference_unreadable(device: str) -> Optional[str]:
    """Device mode: run lazy torch_xla's pending graph now; why it cannot be run, or None.
    Left pending, a graph torch_xla cannot lower (its own ``copy_`` of a host tensor into a
    view) would raise in the optimized side's first sync instead."""
    if device == "cpu":
        return None
    try:
        # garbage first: a pending tensor in a reference cycle (the frames of a call that
        # raised) would join this sync of every live tensor or not by the collector's timing;
        # one torch_xla cannot lower then broke it (seed 411 i137: ``gelu`` of an int64 tensor)
        gc.collect()
        xla_device_sync()
    except Exception as e:   # noqa: BLE001
        return f"lazy torch_xla cannot run its own graph: {exc_key(e)[:150]}"
    return None


def xla_device_sync() -> None:
    import torch_xla

    torch_xla.sync()


def make_args(spec: dict, device: str = "cpu") -> tuple:
    g = torch.Generator().manual_seed(spec["seed"])
    dtype = getattr(torch, spec["dtype"])
    B, C = spec["B"], spec["C"]
    where = torch_device(device)

    def randn(*shape):   # drawn on the host (the same values in both modes), then moved
        return torch.randn(*shape, generator=g, dtype=dtype).to(where)

    if spec.get("autograd_view"):
        x = autograd_view_of(randn(B + 1, C), spec["autograd_view"])
    elif spec.get("view"):
        base = randn(B + 1, C)
        x = base[1:]
    else:
        x = randn(B, C)
    y = x if spec.get("alias") else randn(B, C)
    if spec.get("grad") and not spec.get("autograd_view"):
        x = x.detach().clone().requires_grad_(True)
    for name, row, col, value in spec.get("special", ()):   # a NaN, an infinity, a -0.0 planted
        target = x if name == "x" else y
        with torch.no_grad():
            target[row % B, col % C] = float(value)
    for name in spec.get("shadow", ()):   # attributes on the input that hide tensor methods
        setattr(x, name, SHADOWS[name])
    ts = [randn(B, C) for _ in range(spec["nts"])]
    if spec.get("alias") and ts:
        ts[0] = x
    return (x, y, spec["n"], list(spec["xs"]), ts)


def autograd_view_of(base: torch.Tensor, kind: str) -> torch.Tensor:
    """``base[1:]`` as a kind of view eager may refuse to write in place: of a leaf that requires
    grad, made under no_grad, one of several views one op returned, or of an activation."""
    rows = base.shape[0] - 1
    if kind == "no_grad":
        base.requires_grad_(True)
        with torch.no_grad():
            return base[1:]
    if kind == "leaf":
        return base.requires_grad_(True)[1:]
    made = base.requires_grad_(True) * 1
    return made.split([1, rows])[1] if kind == "multi" else made[1:]


def pick_args(args: tuple, names) -> tuple:
    full = dict(zip(("x", "y", "n", "xs", "ts"), args))
    return tuple(full[name] for name in names)


def place_state(ns: dict, device: str) -> None:
    """Device mode: move the tensors of the program's state (``MOD``'s parameters and buffers,
    tensor globals, tensors on ``OBJ``) to the device; run after setup and after each mutation
    step (``MOD.shift = torch.tensor(1.0)`` makes a host tensor).  Tensors already there are left
    alone (``Module.to`` would reassign every ``.data``)."""
    if device == "cpu":
        return
    where = torch_device(device)
    for k, v in list(ns.items()):
        if isinstance(v, torch.Tensor) and v.device != where:
            ns[k] = v.to(where)
        elif isinstance(v, torch.nn.Module):
            if any(t.device != where for t in list(v.parameters()) + list(v.buffers())):
                v.to(where)
        elif is_user_object(v) and hasattr(v, "__dict__"):
            for a, t in list(vars(v).items()):
                if isinstance(t, torch.Tensor) and t.device != where:
                    setattr(v, a, t.to(where))


def build_namespace(source: str) -> dict:
    # dataclasses looks the defining module up in sys.modules; a stand-in is enough
    sys.modules.setdefault("fuzzprog", types.ModuleType("fuzzprog"))
    ns: dict = {"__name__": "fuzzprog"}
    exec(compile(source, FILENAME, "exec"), ns)
    return ns


# ----------------------------------------------------------------------------- comparison


class Diff(Exception):
    pass


class ReferenceBroken(Exception):
    """Device mode: a tensor of the reference side (plain lazy torch_xla) cannot be read back, or
    reads back in another shape than it reports (torch_xla 2.9's ``copy_`` from a host tensor that
    broadcasts): there is nothing to compare against, so the program stops there, uncompared."""


def host_copy(t: torch.Tensor, side: str, path: str) -> torch.Tensor:
    """``t``'s values on the host (a no-op on the CPU), checked against the shape it reports."""
    try:
        h = t.detach().cpu()
        problem = None if h.shape == t.shape else f"reports {tuple(t.shape)}, reads back as {tuple(h.shape)}"
    except Exception as e:   # noqa: BLE001
        problem = exc_key(e)[:200]
    if problem is None:
        return h
    if side == "eager":
        raise ReferenceBroken(f"{path}: {problem}")
    raise Diff(f"tensor: {path}: the optimized tensor {problem}")


def autograd_state(t: torch.Tensor):
    """``t.is_leaf``, or the error reading it raises (a view made in no_grad mode whose base
    was changed in place): both sides must agree on either."""
    try:
        return t.is_leaf
    except RuntimeError as e:
        return f"raises {str(e).splitlines()[0][:60]}"


def storage_key(t: torch.Tensor) -> tuple:
    if t.device.type == "cpu":
        return ("s", t.untyped_storage().data_ptr())
    return ("c", t.untyped_storage()._cdata)   # no data pointer on XLA; views share the storage object


class Comparer:
    """Structural equality of two object graphs (eager's and optimized's), aliasing included:
    each mutable object (and tensor storage) on one side must pair with exactly one on the other."""

    def __init__(self, device: str = "cpu", across: bool = False):
        # XLA:CPU float32 (lazy vs compiled graphs fuse differently): tests/xla/xla_testing.assert_same
        self.rtol, self.atol = (1e-5, 1e-6) if device == "cpu" else (1e-4, 1e-5)
        self.across = across   # host tensors against device ones: devices and strides not compared
        self.fwd: dict = {}
        self.bwd: dict = {}
        self.keep: list = []   # keep compared objects alive so ids stay unique

    def pair(self, a, b, path: str) -> bool:
        """Record that ``a`` corresponds to ``b``; True if seen before (stop recursing)."""
        ka, kb = id(a), id(b)
        self.keep += [a, b]
        if ka in self.fwd or kb in self.bwd:
            if self.fwd.get(ka) != kb or self.bwd.get(kb) != ka:
                raise Diff(f"aliasing: {path}: eager and optimized disagree on which objects are the same")
            return True
        self.fwd[ka], self.bwd[kb] = kb, ka
        return False

    def storage(self, a: torch.Tensor, b: torch.Tensor, path: str) -> None:
        if a.numel() == 0 or b.numel() == 0 or a.is_meta or b.is_meta:
            return
        try:
            ka, kb = storage_key(a), storage_key(b)
        except Exception:
            return
        if ka in self.fwd or kb in self.bwd:
            if self.fwd.get(ka) != kb or self.bwd.get(kb) != ka:
                raise Diff(f"aliasing: {path}: tensor storage shared on one side only")
            return
        self.fwd[ka], self.bwd[kb] = kb, ka

    def compare(self, a: Any, b: Any, path: str) -> None:
        ta, tb = type(a), type(b)
        if type_key(ta) != type_key(tb):
            raise Diff(f"type: {path}: eager {type_key(ta)}, optimized {type_key(tb)}")
        if isinstance(a, torch.Tensor):
            if self.pair(a, b, path):
                return
            self.storage(a, b, path)
            for attr in ("dtype", "shape", "requires_grad") + (() if self.across else ("device",)):
                if getattr(a, attr) != getattr(b, attr):
                    raise Diff(f"tensor: {path}.{attr}: eager {getattr(a, attr)}, optimized {getattr(b, attr)}")
            if self.across:
                pass
            elif a.stride() != b.stride() and a.numel() > 1:
                raise Diff(f"tensor: {path}.stride(): eager {a.stride()}, optimized {b.stride()}")
            elif a.storage_offset() != b.storage_offset():
                raise Diff(f"tensor: {path}.storage_offset(): eager {a.storage_offset()}, optimized {b.storage_offset()}")
            leaf_a, leaf_b = autograd_state(a), autograd_state(b)
            if leaf_a != leaf_b:
                raise Diff(f"tensor: {path}.is_leaf: eager {leaf_a}, optimized {leaf_b}")
            da, db = host_copy(a, "eager", path), host_copy(b, "optimized", path)
            if da.is_floating_point() or da.is_complex():
                same = torch.allclose(da, db, rtol=self.rtol, atol=self.atol, equal_nan=True)
            else:
                same = torch.equal(da, db)
            if not same:
                raise Diff(f"value: {path}: tensor values differ: eager {short(da)}, optimized {short(db)}")
            if vars(a) or vars(b):          # Python attributes stored on the tensor
                self.compare(dict(vars(a)), dict(vars(b)), path + ".__dict__")
            return
        if isinstance(a, (list, dict, set)) or is_user_object(a) or isinstance(a, torch.nn.Module):
            if self.pair(a, b, path):
                return
        if isinstance(a, (type({}.keys()), type({}.values()), type({}.items()))):
            a, b = list(a), list(b)
        if isinstance(a, (list, tuple)):
            if len(a) != len(b):
                raise Diff(f"value: {path}: length eager {len(a)}, optimized {len(b)}: {short(a)} vs {short(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                self.compare(x, y, f"{path}[{i}]")
            return
        if isinstance(a, dict):
            if list(a.keys()) != list(b.keys()):
                raise Diff(f"value: {path}: keys eager {list(a)}, optimized {list(b)}")
            for k in a:
                self.compare(a[k], b[k], f"{path}[{k!r}]")
            return
        if isinstance(a, (types.FunctionType, types.MethodType)):
            ca = getattr(a, "__code__", None) or a.__func__.__code__
            cb = getattr(b, "__code__", None) or b.__func__.__code__
            if (ca.co_name, ca.co_firstlineno, ca.co_code) != (cb.co_name, cb.co_firstlineno, cb.co_code):
                raise Diff(f"value: {path}: functions differ: {ca.co_name} vs {cb.co_name}")
            return
        if isinstance(a, torch.nn.Module):
            self.compare(module_state(a), module_state(b), path)
            return
        if isinstance(a, property):
            self.compare(a.fget, b.fget, path + ".fget")
            return
        if isinstance(a, (classmethod, staticmethod)):
            self.compare(a.__func__, b.__func__, path + ".__func__")
            return
        if isinstance(a, logging.Logger):                  # a program's own logger: its name and level
            if (a.name, a.level) != (b.name, b.level):
                raise Diff(f"value: {path}: eager {a!r}, optimized {b!r}")
            return
        if isinstance(a, functools.cached_property):      # by the function and the name it caches under
            if a.attrname != b.attrname:
                raise Diff(f"value: {path}: caches under {a.attrname!r} vs {b.attrname!r}")
            self.compare(a.func, b.func, path + ".func")
            return
        if type(a) is NAMEDTUPLE_FIELD:                   # a namedtuple's field getter: its index
            if a.__reduce__()[1] != b.__reduce__()[1]:
                raise Diff(f"value: {path}: eager {a.__reduce__()[1]}, optimized {b.__reduce__()[1]}")
            return
        if isinstance(a, types.MemberDescriptorType):     # a class's __slots__ entry
            if (a.__name__, type_key(a.__objclass__)) != (b.__name__, type_key(b.__objclass__)):
                raise Diff(f"value: {path}: eager {a!r}, optimized {b!r}")
            return
        if is_user_object(a):
            self.compare(object_state(a), object_state(b), path + ".__dict__")
            return
        if isinstance(a, type):
            if type_key(a) != type_key(b):
                raise Diff(f"value: {path}: classes differ: {type_key(a)} vs {type_key(b)}")
            return
        if isinstance(a, float) and isinstance(b, float):
            # as close as tensors must be (a float read from a tensor after a graph break carries
            # the backend's rounding: XLA's reductions differ from eager's in the last bits)
            close = a == b or math.isclose(a, b, rel_tol=self.rtol, abs_tol=self.atol) or (math.isnan(a) and math.isnan(b))
            if not close or (a == 0 and b == 0 and math.copysign(1, a) != math.copysign(1, b)):
                raise Diff(f"value: {path}: eager {a!r}, optimized {b!r}")
            return
        if isinstance(a, torch.utils.hooks.RemovableHandle):   # ids count every handle the process made
            return
        if isinstance(a, LOCK_TYPES):      # each side's own lock: held or not
            if a.locked() != b.locked():
                raise Diff(f"value: {path}: lock held: eager {a.locked()}, optimized {b.locked()}")
            return
        if isinstance(a, (types.ModuleType, types.BuiltinFunctionType)) or callable(a) and not hasattr(a, "__dict__"):
            if a is not b:
                raise Diff(f"value: {path}: eager {a!r}, optimized {b!r}")
            return
        try:
            same = a == b
            same = bool(same)
        except Exception:
            same = repr(a) == repr(b)
        if not same:
            raise Diff(f"value: {path}: eager {short(a)}, optimized {short(b)}")


def type_key(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def is_user_object(a) -> bool:
    return type(a).__module__ == "fuzzprog" and not isinstance(a, type) and \
        (hasattr(a, "__dict__") or any("__slots__" in vars(k) for k in type(a).__mro__))


UNSET = "<unset slot>"
NAMEDTUPLE_FIELD = type(collections.namedtuple("_Probe", "a").a)


def object_state(a) -> dict:
    """A program object's attributes: its ``__dict__`` and its filled ``__slots__``."""
    state = dict(vars(a)) if hasattr(a, "__dict__") else {}
    for k in type(a).__mro__:
        for name in vars(k).get("__slots__", ()):
            state[f"slot {name}"] = getattr(a, name, UNSET)
    return state


def module_state(m: torch.nn.Module) -> dict:
    out = {}
    for k, v in vars(m).items():
        if k in ("_parameters", "_buffers", "_modules"):
            out.update({f"{k}.{n}": val for n, val in v.items()})
            if k == "_parameters":
                out.update({f"{k}.{n}.grad": val.grad for n, val in v.items() if val is not None})
        elif not k.startswith("_") or k == "_non_persistent_buffers_set":
            out[k] = v
    return out


def short(v, limit: int = 120) -> str:
    text = repr(v).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


LOCK_TYPES = (type(threading.Lock()),)


def state_of(ns: dict) -> dict:
    """The program's watched state: globals (minus imports and f), class attributes."""
    out = {}
    for k, v in ns.items():
        if k.startswith("__") or isinstance(v, types.ModuleType) or k == "f":
            continue
        if isinstance(v, type):
            out[k] = {a: val for a, val in vars(v).items() if not a.startswith("__")}
        else:
            out[k] = v
    return out


def result_of(fn, args) -> tuple:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            value = fn(*args)
        return ("ok", value, out.getvalue())
    except Exception as e:   # noqa: BLE001  (the exception is the result)
        return ("raise", e, out.getvalue())


def tensor_leaves(value, seen=None) -> list:
    """The tensors in a value, through lists, tuples and dicts (in order; each once)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in tensor_leaves(item, seen)]
    return []


def gradients_of(value, args, ns, second_order: bool = False) -> Optional[tuple]:
    """``("ok", grads, second)`` or ``("raise", error)``: the gradients of a weighted sum of the
    returned floating tensors that require grad, with respect to the argument tensors and the
    module's parameters that require grad (None where one is not used); None when there is
    nothing to differentiate.  ``retain_graph``: a later call may differentiate through the same
    tensors.  ``second`` (with ``second_order``; else None): the gradients of a penalty on those
    gradients (taken with ``create_graph=True``) with respect to the same tensors, ``("raise",
    error)`` where that second backward raises, or None where no gradient has a graph."""
    outputs = [t for t in tensor_leaves(value) if t.requires_grad and t.is_floating_point()]
    module = ns.get("MOD")
    parameters = list(module.parameters()) if isinstance(module, torch.nn.Module) else []
    wrt = [t for t in tensor_leaves(args) + parameters if t.requires_grad and autograd_state(t) is True]
    if not outputs or not wrt:
        return None
    try:
        loss = sum((t.double() * (i + 1) * element_weights(t)).sum() for i, t in enumerate(outputs))
        grads = torch.autograd.grad(loss, wrt, retain_graph=True, allow_unused=True,
                                    create_graph=second_order)
    except Exception as e:   # noqa: BLE001  (the error is the result)
        if second_order and type(e).__name__ == "DoubleBackwardUnsupported":
            first = gradients_of(value, args, ns)      # refused at the first: compare that alone
            return first if first[0] == "raise" else ("ok", first[1], ("raise", type(e).__name__))
        return ("raise", type(e).__name__)
    first = [None if g is None else g.detach() for g in grads]
    with_graph = [g for g in grads if g is not None and g.requires_grad]
    if not with_graph:
        return ("ok", first, None)
    try:
        penalty = sum((g.double() * element_weights(g)).pow(2).sum() for g in with_graph)
        second = torch.autograd.grad(penalty, wrt, retain_graph=True, allow_unused=True)
    except Exception as e:   # noqa: BLE001
        return ("ok", first, ("raise", type(e).__name__))
    return ("ok", first, [None if g is None else g.detach() for g in second])


def element_weights(t: torch.Tensor) -> torch.Tensor:
    """Distinct weights for ``t``'s elements (1.0, 1.3, ..., 2.8, then again), the same on both
    sides: a plain sum of a normalized row is a constant, whose gradient is all rounding."""
    return (1 + 0.3 * (torch.arange(t.numel(), device=t.device, dtype=torch.float64) % 7)).reshape(t.shape)


def compare_gradients(g_e, g_o) -> Optional[str]:
    """Gradients of both sides agree (``ReferenceBroken`` when eager's cannot be read back).  A
    second order the optimized side refuses with ``DoubleBackwardUnsupported`` (a documented
    refusal, with its reason) where eager's works is not compared."""
    if (g_e is None) != (g_o is None):
        return f"grad: eager {'no' if g_e is None else 'a'} graph, optimized {'no' if g_o is None else 'a'} graph"
    if g_e is None:
        return None
    if g_e[0] != g_o[0] or (g_e[0] == "raise" and g_e[1] != g_o[1]):
        return f"grad: eager {g_e[0]} {g_e[1] if g_e[0] == 'raise' else ''}, optimized {g_o[0]} " \
               f"{g_o[1] if g_o[0] == 'raise' else ''}"
    if g_e[0] == "raise":
        return None
    why = _compare_grad_lists(g_e[1], g_o[1], "grad")
    second_e, second_o = g_e[2], g_o[2]
    if why or (second_o == ("raise", "DoubleBackwardUnsupported") and second_e != second_o):
        return why
    if isinstance(second_e, list) and isinstance(second_o, list):
        return _compare_grad_lists(second_e, second_o, "second-order grad")
    if second_e != second_o:
        said = lambda second: "ok" if isinstance(second, list) else second   # noqa: E731
        return f"second-order grad: eager {said(second_e)}, optimized {said(second_o)}"
    return None


def _compare_grad_lists(g_e: list, g_o: list, what: str) -> Optional[str]:
    for i, (a, b) in enumerate(zip(g_e, g_o)):
        if (a is None) != (b is None):
            return f"{what}: input {i}: eager {'None' if a is None else 'a gradient'}, optimized {'None' if b is None else 'a gradient'}"
        if a is None:
            continue
        try:
            a, b = host_copy(a, "eager", f"{what} {i}"), host_copy(b, "optimized", f"{what} {i}")
        except Diff as d:
            return str(d)
        if a.shape != b.shape or not torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True):
            return f"{what}: input {i}: eager {short(a)}, optimized {short(b)}"
    return None


def same_class(a: type, b: type) -> bool:
    """The same class, or the same class statement of the program's prelude (each side runs
    the prelude in its own namespace)."""
    return a is b or (a.__qualname__, a.__module__) == (b.__qualname__, b.__module__)


def autograd_node_blind(message: str) -> str:
    """An error message without the name of the autograd node it cites (``Output 0 of
    TBackward0 is a view...``) and the version counts it quotes: the XLA bridge returns a graph's
    output views as ``as_strided`` views of their base, so autograd names another node for the
    same refusal, and writes an argument back with a copy of its own (one version more)."""
    return re.sub(r"\bversion \d+", "version N", re.sub(r"\bof \w+Backward\d*\b", "of <node>", message))


def exc_key(e: BaseException) -> str:
    msg = str(e).split("\n")[0]
    return f"{type(e).__name__}: {msg}"


# ----------------------------------------------------------------------------- running


def params_of(ns: dict) -> int:
    return ns["f"].__code__.co_argcount


def run_program(source: str, steps: list, backend="eager", compare_messages: bool = True,
                device: str = "cpu") -> Outcome:
    outcome = Outcome()
    minidynamo.reset()
    dtype_before = torch.get_default_dtype()
    grad_before = torch.is_grad_enabled()
    autocast_before = torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")
    try:
        try:
            ns_e = build_namespace(source)
            ns_o = build_namespace(source)
            ns_h = build_namespace(source) if device != "cpu" else None   # the second opinion: eager on the host
            place_state(ns_e, device)
            place_state(ns_o, device)
        except Exception as e:   # noqa: BLE001
            outcome.setup_error = exc_key(e)
            return outcome
        args_e = args_o = None
        f_o = minidynamo.optimize(backend)(ns_o["f"])
        for index, step in enumerate(steps):
            kind, what = step
            if kind == "exec":
                for ns in (ns_e, ns_o) + ((ns_h,) if ns_h else ()):
                    try:
                        exec(compile(what, "<fuzz-step>", "exec"), ns)
                    except Exception:   # noqa: BLE001 (both sides alike)
                        pass
                    place_state(ns, device if ns is not ns_h else "cpu")
                continue
            if not (what.get("reuse") and args_e is not None):
                names = ns_e["f"].__code__.co_varnames[:params_of(ns_e)]
                args_e, args_o = pick_args(make_args(what, device), names), pick_args(make_args(what, device), names)
                args_h = pick_args(make_args(what), names) if ns_h else None
            outcome.calls += 1
            seed_generators(index, device)
            r_e = result_of(ns_e["f"], args_e)
            broken = reference_unreadable(device)
            if broken:                        # its pending graph would break the next sync (ours)
                outcome.reference_error = broken
                break
            seed_generators(index, device)
            r_o = result_of(f_o, args_o)
            if ns_h:
                torch.manual_seed(index)
                r_h = result_of(ns_h["f"], args_h)
            broken = None
            try:
                why, graded = judge(r_e, r_o, args_e, args_o, ns_e, ns_o, compare_messages, device,
                                    second_order=what.get("second_order", False))
                outcome.grad_checks += graded
            except ReferenceBroken as e:
                why = broken = str(e)
            if why and ns_h and not judge(r_h, r_o, args_h, args_o, ns_h, ns_o, compare_messages, device, True,
                                          what.get("second_order", False))[0]:
                why = None                    # lazy torch_xla differs from eager PyTorch, minidynamo does not
                outcome.host_agreed += 1
            elif broken:
                outcome.reference_error = broken
                break
            elif why and ns_h and r_h[0] == "raise" and r_e[0] != "raise":
                # Eager on the host cannot arbitrate: it raised where the device computes (an
                # index out of range, which the device clamps). Reported, as its own family.
                why = f"unarbitrated ({type(r_h[1]).__name__} on the host): {why}"
            if r_e[0] == "raise":
                outcome.eager_errors += 1
            if why:
                outcome.mismatch, outcome.step = why, index
                break
    finally:
        torch.set_default_dtype(dtype_before)
        torch.set_grad_enabled(grad_before)
        torch.set_autocast_enabled("cpu", autocast_before[0])
        torch.set_autocast_dtype("cpu", autocast_before[1])
        snap = minidynamo.counters.snapshot()
        outcome.fallbacks = list(snap.get("fallback_reasons", []))
        outcome.f_fallbacks = sum(1 for r in outcome.fallbacks if is_of_f(r))
        outcome.breaks = list(snap.get("break_reasons", []))
        outcome.f_breaks = sum(1 for r in outcome.breaks if is_of_f(r))
        outcome.compiles = snap.get("cache_misses", 0) - snap.get("fallbacks", 0)
        minidynamo.reset()
    return outcome


def judge(r_e, r_o, args_e, args_o, ns_e, ns_o, compare_messages, device, across=False,
          second_order=False) -> tuple:
    """(what differs between a reference side and the optimized one or None, gradients compared;
    ``second_order``: a second backward through the first's gradients too)."""
    why = compare_results(r_e, r_o, args_e, args_o, ns_e, ns_o, compare_messages, device, across)
    if why or r_e[0] != "ok":
        return why, False
    g_e = gradients_of(r_e[1], args_e, ns_e, second_order)
    return compare_gradients(g_e, gradients_of(r_o[1], args_o, ns_o, second_order)), g_e is not None


def is_of_f(reason: str) -> bool:
    """A fallback or break reason about ``f`` or one of its resume functions (``f__resume_at_N``)."""
    return reason.startswith(("f (", "f__resume_at_"))


def compare_results(r_e, r_o, args_e, args_o, ns_e, ns_o, compare_messages=True, device="cpu",
                    across=False) -> Optional[str]:
    if r_e[0] != r_o[0]:
        detail = exc_key(r_e[1]) if r_e[0] == "raise" else exc_key(r_o[1])
        return f"exception: eager {r_e[0]}, optimized {r_o[0]} ({detail})"
    if r_e[0] == "raise":
        # across devices the same failing op words its error per device (a CPU kernel's message,
        # torch_xla's lowering's): the type must agree, the words need not
        ke, ko = exc_key(r_e[1]), exc_key(r_o[1])
        if not same_class(type(r_e[1]), type(r_o[1])) or (compare_messages and not across and
                                                            autograd_node_blind(ke) != autograd_node_blind(ko)):
            return f"exception: eager {ke[:150]} / optimized {ko[:150]}"
    c = Comparer(device, across)
    try:
        # one comparer for all: identity between the return value, the arguments and the state
        c.compare(args_e, args_o, "args")
        c.compare(state_of(ns_e), state_of(ns_o), "G")
        if r_e[0] == "ok":
            c.compare(r_e[1], r_o[1], "return")
    except Diff as d:
        return str(d)
    # across devices: the device's tensors print their device, and wrap ``dtype=`` once it is
    # gone onto a line of its own
    text_o = re.sub(r",\s*dtype=", ", dtype=", re.sub(r", device='xla:\d+'", "", r_o[2])) \
        if across else r_o[2]
    if not same_printed(printed(r_e[2]), printed(text_o), c.rtol, c.atol):
        return f"stdout: eager {r_e[2]!r}, optimized {r_o[2]!r}"
    return None


def printed(text: str) -> str:
    """Printed output, with the name of a printed tensor's ``grad_fn`` left out: a replayed
    backward is its own node (``_DeviceStepBackward`` for ``MulBackward0``), as in any compiler,
    and the longer name can wrap the line elsewhere; the values printed are compared."""
    return re.sub(r",\s*grad_fn=<\w+>", ", grad_fn=<...>", text)


NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?|nan|inf")


def same_printed(a: str, b: str, rtol: float, atol: float) -> bool:
    """Equal text; on the device, printed numbers within the tolerance (plus the last printed
    digit: ``0.1235`` vs ``0.1234`` is a rounding flip of the same value)."""
    if a == b or rtol <= 1e-5:
        return a == b
    if NUMBER.split(a) != NUMBER.split(b):
        return False
    na, nb = NUMBER.findall(a), NUMBER.findall(b)
    return len(na) == len(nb) and all(
        x == y or math.isclose(float(x), float(y), rel_tol=rtol, abs_tol=atol + 1.5 * 10 ** -digits(x))
        for x, y in zip(na, nb))


def digits(number: str) -> int:
    """Decimals printed: '0.1235' -> 4, '1.2e-03' -> 4 (scaled), '3' -> 0."""
    mantissa, _, exp = number.partition("e")
    decimals = len(mantissa.partition(".")[2])
    return decimals - int(exp or 0)


def run_script(source: str, steps: list, backend="eager", device: str = "cpu") -> str:
    """The repro entry point: 'MISMATCH <what>' or 'OK'."""
    out = run_program(source, steps, backend, device=device)
    if out.setup_error:
        return f"SETUP ERROR {out.setup_error}"
    if out.reference_error:
        return f"REFERENCE BROKEN {out.reference_error}"
    return f"MISMATCH at step {out.step}: {out.mismatch}" if out.mismatch else "OK"
