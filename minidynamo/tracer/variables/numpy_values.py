"""NumPy in research code: scalars are constants, and NumPy callables on constants are folded.

    np.float32(2.0), np.sqrt(8), np.int64(n) ...   -> ConstantVariable holding the numpy scalar
    read from the frame                            -> guarded by exact type and by ``.item()``'s value
    passed to a tensor op (x * np.float32(2))      -> the Python number torch's argument parser
                                                      sees (np.integer -> int, np.floating and
                                                      np.bool_ -> float), so the graph holds plain
                                                      numbers and the result dtype is eager's
    numpy callable, every argument a number        -> run now: the result must be an immutable
                                                      scalar (or np.finfo / np.iinfo), no warning

A numpy scalar is immutable and its type fixes every operator on it, so folding runs NumPy's
own arithmetic: the trace computes exactly what eager computes.  The callables folded are those
that are pure by construction: ufuncs, the scalar types themselves, np.finfo / np.iinfo, and the
array functions NumPy dispatches through ``__array_function__`` (np.prod, np.round, ...), and
only on numbers (no strings: np.save("f", 3) is one of those functions).  ``np.random`` draws from
NumPy's global state: refused.  ndarrays are mutable containers with no guard or rebuild here:
a callable returning one is refused.  A fold whose floating-point error (``np.log(0.0)``'s divide
by zero) NumPy's error state decides (``np.seterr``: ignore, warn, raise) is refused too
(``errstate_free``): the program may set another state before its next call.
"""

from __future__ import annotations

import contextlib
import sys
import types

from ... import compile_warnings
from ...exc import Unsupported
from .base import NO_CONSTANT, VariableTracker, describe, maybe_constant


def _numpy():
    return sys.modules.get("numpy")       # numpy values exist only once numpy was imported


# -- scalars ---------------------------------------------------------------------------------------
def is_numpy_scalar(value) -> bool:
    """A numpy number or bool scalar whose ``.item()`` is a plain Python number (not a
    datetime, a string or np.longdouble, which has no exact Python twin)."""
    np = _numpy()
    if np is None or not isinstance(value, (np.number, np.bool_)):
        return False
    return type(value.item()) in (int, float, bool, complex)


def scalar_guards(source, value) -> list:
    """Exact type, and the value through ``.item()`` (lossless for these types; ``equals_match``
    spells floats exactly, so NaN and -0.0 are told apart as for Python floats)."""
    import guards as G

    return [G.type_match(source, value), G.equals_match(G.CallSource(source, "item"), value.item())]


def as_torch_number(value):
    """The Python number torch's argument parser turns a numpy scalar into (checked against
    eager: ``int64_tensor * np.bool_(True)`` is float32, so np.bool_ counts as a float)."""
    np = _numpy()
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, np.bool_)):
        return float(value)
    raise Unsupported(f"a numpy {type(value).__name__} as an argument of a tensor operation "
                      "(torch drops its imaginary part with a warning)")


# torch functions that take the dtype from the data they are given: a numpy scalar there keeps its
# own dtype (torch.tensor(np.float64(1)) is float64), which a plain Python number would not.
def refuse_in_dtype_inferring_factory(target, args, kwargs) -> None:
    import torch

    if target not in (torch.tensor, torch.as_tensor, torch.asarray):
        return
    if any(_holds_numpy_scalar(v) for v in [*args, *kwargs.values()]):
        raise Unsupported(f"{describe(target)} of a numpy scalar (the dtype would come from numpy)")


def _holds_numpy_scalar(vt) -> bool:
    value = maybe_constant(vt, NO_CONSTANT)
    if value is NO_CONSTANT:
        items = getattr(vt, "items", None)
        return isinstance(items, list) and any(_holds_numpy_scalar(i) for i in items)
    return _any_numpy_scalar(value)


def _any_numpy_scalar(value) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_any_numpy_scalar(v) for v in value)
    return is_numpy_scalar(value)


# -- callables -------------------------------------------------------------------------------------
def numpy_callable_kind(value) -> str | None:
    """Why ``value`` is a foldable numpy callable ("ufunc", "scalar type", ...), "random" for
    numpy.random's, None when it is not numpy's or not known to be pure.  Only numpy's own
    types are asked anything (a program object's ``__getattr__`` / ``__eq__`` never runs)."""
    np = _numpy()
    if np is None:
        return None
    if value is np.finfo or value is np.iinfo:
        return "type info"
    if isinstance(value, type):
        return "scalar type" if issubclass(value, (np.number, np.bool_)) else None
    if isinstance(value, np.ufunc):
        return "ufunc"
    kind = type(value)
    if kind in (types.BuiltinFunctionType, types.FunctionType, types.MethodType):   # np.random.rand: bound
        owner, module = getattr(value, "__self__", None), getattr(value, "__module__", None) or ""
        if module.startswith("numpy.random") or type(owner).__module__.startswith("numpy.random"):
            return "random"
        return None
    if kind.__module__.startswith("numpy") and getattr(value, "__module__", None) == "numpy" \
            and hasattr(value, "_implementation"):
        return "array function"          # dispatched through __array_function__: NumPy's API
    return None


def _is_number_argument(value) -> bool:
    """Numbers, None, numpy scalar types and tuples/lists of them: no strings (file names,
    error-mode names) reach a folded numpy call."""
    np = _numpy()
    if value is None or type(value) in (int, float, bool, complex) or is_numpy_scalar(value):
        return True
    if isinstance(value, type) and issubclass(value, (np.number, np.bool_)):
        return True
    if type(value) in (tuple, list):
        return all(_is_number_argument(v) for v in value)
    return False


def is_type_info(value) -> bool:
    """np.finfo / np.iinfo: read-only facts about a dtype, like torch.finfo."""
    np = _numpy()
    return np is not None and isinstance(value, (np.finfo, np.iinfo))


def _is_immutable_result(value) -> bool:
    if type(value) in (int, float, bool, complex) or is_numpy_scalar(value):
        return True
    if is_type_info(value):
        return True
    return type(value) is tuple and all(_is_immutable_result(v) for v in value)


class NumpyCallableVariable(VariableTracker):
    """A pure numpy callable (see ``numpy_callable_kind``): called on numbers, run now."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        if isinstance(self.value, type):       # np.float32 as an argument: np.finfo(np.float32)
            return self.value
        return super().as_python_constant()

    def var_getattr(self, tx, name):
        from ..builder import wrap_constant_result

        attr = getattr(self.value, name, None)     # np.float32.__name__, np.sqrt.nin
        if type(attr) in (int, float, bool, str):
            return wrap_constant_result(attr)
        raise Unsupported(f"attribute {name!r} of {describe(self.value)}")

    def call_function(self, tx, args, kwargs):
        what = describe(self.value)
        values = [maybe_constant(a, NO_CONSTANT) for a in args]
        kw = {k: maybe_constant(v, NO_CONSTANT) for k, v in kwargs.items()}
        if not all(v is not NO_CONSTANT and _is_number_argument(v) for v in [*values, *kw.values()]):
            raise Unsupported(f"call to {what} on something other than numbers (only numbers are folded)")
        with compile_warnings.recorded() as warned, errstate_free(what):     # eager would warn on every call
            try:
                result = self.value(*values, **kw)
            except (Unsupported, FloatingPointError):
                raise
            except Exception as e:
                raise Unsupported(f"{what} on constants raised {type(e).__name__}: {e}") from e
        if warned:
            raise Unsupported(f"{what} on constants warned: {warned[0].message}")
        if not _is_immutable_result(result):
            raise Unsupported(f"{what} returned a {type(result).__name__} (ndarrays are mutable: not modelled)")
        from ..builder import wrap_constant_result

        return wrap_constant_result(result)

    def __repr__(self):
        return f"NumpyCallableVariable({describe(self.value)})"


@contextlib.contextmanager
def errstate_free(what: str):
    """A fold that NumPy's error state cannot change: run under "raise" for every kind of
    floating-point error; one that raises there is refused (eager decides it at each call)."""
    numpy = sys.modules.get("numpy")
    if numpy is None:
        yield
        return
    with numpy.errstate(all="raise"):
        try:
            yield
        except FloatingPointError as error:
            raise Unsupported(f"{what} on constants: NumPy's error state decides it ({error})") from error


class TypeInfoVariable(VariableTracker):
    """np.finfo(...) / np.iinfo(...) computed at trace time: facts about a dtype, read now."""

    def __init__(self, value):
        super().__init__()
        self.value = value

    def python_type(self):
        return type(self.value)

    def var_getattr(self, tx, name):
        from ..builder import wrap_constant_result

        attr = getattr(self.value, name, None)     # .max, .min, .eps, .bits, .tiny
        if _is_immutable_result(attr) or type(attr) is str:
            return wrap_constant_result(attr)
        raise Unsupported(f"attribute {name!r} of {type(self.value).__name__}")


def wrap_numpy_callable(tx, value, source, kind) -> VariableTracker:
    """The tracker for a numpy callable read from ``source`` (guarded by identity: numpy is not
    one of the libraries assumed unpatched)."""
    import guards as G

    from .base import OpaqueCallableVariable

    if source is not None:
        tx.output.add_guard(G.id_match(source, value) if kind != "random" else G.type_match(source, value))
    if kind == "random":
        return OpaqueCallableVariable(value, source, f"call to {describe(value)} (draws from NumPy's global random state)")
    return NumpyCallableVariable(value, source)
