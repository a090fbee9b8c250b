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
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import re
import sys
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


def make_args(spec: dict) -> tuple:
    g = torch.Generator().manual_seed(spec["seed"])
    dtype = getattr(torch, spec["dtype"])
    B, C = spec["B"], spec["C"]
    if spec.get("view"):
        base = torch.randn(B + 1, C, generator=g, dtype=dtype)
        x = base[1:]
    else:
        x = torch.randn(B, C, generator=g, dtype=dtype)
    y = x if spec.get("alias") else torch.randn(B, C, generator=g, dtype=dtype)
    if spec.get("grad"):
        x = x.detach().clone().requires_grad_(True)
    for name, row, col, value in spec.get("special", ()):   # a NaN, an infinity, a -0.0 planted
        target = x if name == "x" else y
        with torch.no_grad():
            target[row % B, col % C] = float(value)
    for name in spec.get("shadow", ()):   # attributes on the input that hide tensor methods
        setattr(x, name, SHADOWS[name])
    ts = [torch.randn(B, C, generator=g, dtype=dtype) for _ in range(spec["nts"])]
    if spec.get("alias") and ts:
        ts[0] = x
    return (x, y, spec["n"], list(spec["xs"]), ts)


def pick_args(args: tuple, names) -> tuple:
    full = dict(zip(("x", "y", "n", "xs", "ts"), args))
    return tuple(full[name] for name in names)


def build_namespace(source: str) -> dict:
    # dataclasses looks the defining module up in sys.modules; a stand-in is enough
    sys.modules.setdefault("fuzzprog", types.ModuleType("fuzzprog"))
    ns: dict = {"__name__": "fuzzprog"}
    exec(compile(source, FILENAME, "exec"), ns)
    return ns


# ----------------------------------------------------------------------------- comparison


class Diff(Exception):
    pass


def autograd_state(t: torch.Tensor):
    """``t.is_leaf``, or the error reading it raises (a view made in no_grad mode whose base
    was changed in place): both sides must agree on either."""
    try:
        return t.is_leaf
    except RuntimeError as e:
        return f"raises {str(e).splitlines()[0][:60]}"


class Comparer:
    """Structural equality of two object graphs (eager's and optimized's), aliasing included:
    each mutable object (and tensor storage) on one side must pair with exactly one on the other."""

    def __init__(self):
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
            sa, sb = a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()
        except Exception:
            return
        ka, kb = ("s", sa), ("s", sb)
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
            for attr in ("dtype", "shape", "requires_grad", "device"):
                if getattr(a, attr) != getattr(b, attr):
                    raise Diff(f"tensor: {path}.{attr}: eager {getattr(a, attr)}, optimized {getattr(b, attr)}")
            if a.stride() != b.stride() and a.numel() > 1:
                raise Diff(f"tensor: {path}.stride(): eager {a.stride()}, optimized {b.stride()}")
            if a.storage_offset() != b.storage_offset():
                raise Diff(f"tensor: {path}.storage_offset(): eager {a.storage_offset()}, optimized {b.storage_offset()}")
            leaf_a, leaf_b = autograd_state(a), autograd_state(b)
            if leaf_a != leaf_b:
                raise Diff(f"tensor: {path}.is_leaf: eager {leaf_a}, optimized {leaf_b}")
            da, db = a.detach(), b.detach()
            if da.is_floating_point() or da.is_complex():
                same = torch.allclose(da, db, rtol=1e-5, atol=1e-6, equal_nan=True)
            else:
                same = torch.equal(da, db)
            if not same:
                raise Diff(f"value: {path}: tensor values differ: eager {short(da)}, optimized {short(db)}")
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
        if is_user_object(a):
            self.compare(dict(vars(a)), dict(vars(b)), path + ".__dict__")
            return
        if isinstance(a, type):
            if type_key(a) != type_key(b):
                raise Diff(f"value: {path}: classes differ: {type_key(a)} vs {type_key(b)}")
            return
        if isinstance(a, float) and isinstance(b, float):
            # as close as tensors must be (a float read from a tensor after a graph break carries
            # the backend's rounding: XLA's reductions differ from eager's in the last bits)
            close = a == b or math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) or (math.isnan(a) and math.isnan(b))
            if not close or (a == 0 and b == 0 and math.copysign(1, a) != math.copysign(1, b)):
                raise Diff(f"value: {path}: eager {a!r}, optimized {b!r}")
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
    return type(a).__module__ == "fuzzprog" and hasattr(a, "__dict__") and not isinstance(a, type)


def module_state(m: torch.nn.Module) -> dict:
    out = {}
    for k, v in vars(m).items():
        if k in ("_parameters", "_buffers", "_modules"):
            out.update({f"{k}.{n}": val for n, val in v.items()})
        elif not k.startswith("_") or k == "_non_persistent_buffers_set":
            out[k] = v
    return out


def short(v, limit: int = 120) -> str:
    text = repr(v).replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


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


def gradients_of(value, args, ns) -> Optional[tuple]:
    """``("ok", grads)`` or ``("raise", error)``: the gradients of a weighted sum of the returned
    floating tensors that require grad, with respect to the argument tensors and the module's
    parameters that require grad (None where one is not used); None when there is nothing to
    differentiate.  ``retain_graph``: a later call may differentiate through the same tensors."""
    outputs = [t for t in tensor_leaves(value) if t.requires_grad and t.is_floating_point()]
    module = ns.get("MOD")
    parameters = list(module.parameters()) if isinstance(module, torch.nn.Module) else []
    wrt = [t for t in tensor_leaves(args) + parameters if t.requires_grad and t.is_leaf]
    if not outputs or not wrt:
        return None
    try:
        loss = sum((t.double() * (i + 1)).sum() for i, t in enumerate(outputs))
        grads = torch.autograd.grad(loss, wrt, retain_graph=True, allow_unused=True)
    except Exception as e:   # noqa: BLE001  (the error is the result)
        return ("raise", type(e).__name__)
    return ("ok", [None if g is None else g.detach() for g in grads])


def compare_gradients(g_e, g_o) -> Optional[str]:
    if (g_e is None) != (g_o is None):
        return f"grad: eager {'no' if g_e is None else 'a'} graph, optimized {'no' if g_o is None else 'a'} graph"
    if g_e is None:
        return None
    if g_e[0] != g_o[0] or (g_e[0] == "raise" and g_e[1] != g_o[1]):
        return f"grad: eager {g_e[0]} {g_e[1] if g_e[0] == 'raise' else ''}, optimized {g_o[0]} " \
               f"{g_o[1] if g_o[0] == 'raise' else ''}"
    if g_e[0] == "raise":
        return None
    for i, (a, b) in enumerate(zip(g_e[1], g_o[1])):
        if (a is None) != (b is None):
            return f"grad: input {i}: eager {'None' if a is None else 'a gradient'}, optimized {'None' if b is None else 'a gradient'}"
        if a is not None and (a.shape != b.shape or not torch.allclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)):
            return f"grad: input {i}: eager {short(a)}, optimized {short(b)}"
    return None


def exc_key(e: BaseException) -> str:
    msg = str(e).split("\n")[0]
    return f"{type(e).__name__}: {msg}"


# ----------------------------------------------------------------------------- running


def params_of(ns: dict) -> int:
    return ns["f"].__code__.co_argcount


def run_program(source: str, steps: list, backend="eager", compare_messages: bool = True) -> Outcome:
    outcome = Outcome()
    minidynamo.reset()
    dtype_before = torch.get_default_dtype()
    grad_before = torch.is_grad_enabled()
    try:
        try:
            ns_e = build_namespace(source)
            ns_o = build_namespace(source)
        except Exception as e:   # noqa: BLE001
            outcome.setup_error = exc_key(e)
            return outcome
        args_e = args_o = None
        f_o = minidynamo.optimize(backend)(ns_o["f"])
        for index, step in enumerate(steps):
            kind, what = step
            if kind == "exec":
                for ns in (ns_e, ns_o):
                    try:
                        exec(compile(what, "<fuzz-step>", "exec"), ns)
                    except Exception:   # noqa: BLE001 (both sides alike)
                        pass
                continue
            if not (what.get("reuse") and args_e is not None):
                names = ns_e["f"].__code__.co_varnames[:params_of(ns_e)]
                args_e, args_o = pick_args(make_args(what), names), pick_args(make_args(what), names)
            outcome.calls += 1
            torch.manual_seed(index)
            r_e = result_of(ns_e["f"], args_e)
            torch.manual_seed(index)
            r_o = result_of(f_o, args_o)
            why = compare_results(r_e, r_o, args_e, args_o, ns_e, ns_o, compare_messages)
            if not why and r_e[0] == "ok":
                g_e, g_o = gradients_of(r_e[1], args_e, ns_e), gradients_of(r_o[1], args_o, ns_o)
                outcome.grad_checks += g_e is not None
                why = compare_gradients(g_e, g_o)
            if r_e[0] == "raise":
                outcome.eager_errors += 1
            if why:
                outcome.mismatch, outcome.step = why, index
                break
    finally:
        torch.set_default_dtype(dtype_before)
        torch.set_grad_enabled(grad_before)
        snap = minidynamo.counters.snapshot()
        outcome.fallbacks = list(snap.get("fallback_reasons", []))
        outcome.f_fallbacks = sum(1 for r in outcome.fallbacks if is_of_f(r))
        outcome.breaks = list(snap.get("break_reasons", []))
        outcome.f_breaks = sum(1 for r in outcome.breaks if is_of_f(r))
        outcome.compiles = snap.get("cache_misses", 0) - snap.get("fallbacks", 0)
        minidynamo.reset()
    return outcome


def is_of_f(reason: str) -> bool:
    """A fallback or break reason about ``f`` or one of its resume functions (``f__resume_at_N``)."""
    return reason.startswith(("f (", "f__resume_at_"))


def compare_results(r_e, r_o, args_e, args_o, ns_e, ns_o, compare_messages=True) -> Optional[str]:
    if r_e[0] != r_o[0]:
        detail = exc_key(r_e[1]) if r_e[0] == "raise" else exc_key(r_o[1])
        return f"exception: eager {r_e[0]}, optimized {r_o[0]} ({detail})"
    if r_e[0] == "raise":
        ke, ko = exc_key(r_e[1]), exc_key(r_o[1])
        if type(r_e[1]) is not type(r_o[1]) or (compare_messages and ke != ko):
            return f"exception: eager {ke[:150]} / optimized {ko[:150]}"
    c = Comparer()
    try:
        # one comparer for all: identity between the return value, the arguments and the state
        c.compare(args_e, args_o, "args")
        c.compare(state_of(ns_e), state_of(ns_o), "G")
        if r_e[0] == "ok":
            c.compare(r_e[1], r_o[1], "return")
    except Diff as d:
        return str(d)
    if printed(r_e[2]) != printed(r_o[2]):
        return f"stdout: eager {r_e[2]!r}, optimized {r_o[2]!r}"
    return None


def printed(text: str) -> str:
    """Printed output, with the name of a printed tensor's ``grad_fn`` left out: a replayed
    backward is its own node (``_DeviceStepBackward`` for ``MulBackward0``), as in any compiler,
    and the longer name can wrap the line elsewhere; the values printed are compared."""
    return re.sub(r",\s*grad_fn=<\w+>", ", grad_fn=<...>", text)


def run_script(source: str, steps: list, backend="eager") -> str:
    """The repro entry point: 'MISMATCH <what>' or 'OK'."""
    out = run_program(source, steps, backend)
    if out.setup_error:
        return f"SETUP ERROR {out.setup_error}"
    return f"MISMATCH at step {out.step}: {out.mismatch}" if out.mismatch else "OK"
