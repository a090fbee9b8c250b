"""``with <TorchFunctionMode instance>:``: a mode's ``__torch_function__`` inlined at every
torch call the trace records inside the block.

Eager PyTorch routes every overridable call (``torch.add``, ``Tensor.add``, ``t[i]``, ``a + b``,
``t.shape``) through the innermost active mode's ``__torch_function__(func, types, args,
kwargs)``, with that mode popped while its handler runs (so the handler's own torch calls reach
the next mode, or torch).  The trace does the same, symbolically: entering the block pushes the
mode's tracker on ``OutputGraph.function_modes``; each hook below calls ``dispatch``, which
inlines the handler (the mode popped meanwhile) or, with no mode active, does the default.  The
graph then holds what the handler did (an autograd.Function node instead of ``t[i]``); no mode is
entered at run time.

``func`` is the public callable torch itself would pass: ``torch.add`` for ``torch.add(...)``,
``torch.Tensor.<name>`` for a method, ``Tensor.__getitem__`` / ``__setitem__`` for indexing,
``Tensor.<name>.__get__`` for an attribute, and for operators whatever torch passes, learnt by
running the operator once on the meta examples under a recording mode (``a + b`` passes
``Tensor.add``, ``2 - t`` passes ``Tensor.__rsub__`` with the tensor first).

torch's own Python functions ask ``has_torch_function(...)`` first: inside a block the answer is
True (as in torch), and their ``handle_torch_function(public_api, ...)`` call dispatches here,
so the mode sees ``public_api`` once, as in eager (nn.MultiheadAttention leaves its fast path).

Accepted: a mode object made in the frame or read from outside (guarded like any object), of a
class that keeps TorchFunctionMode's own ``__enter__`` / ``__exit__`` (a Python override runs
code the trace does not model: refused).  A handler returning ``NotImplemented`` is refused.
"""

from __future__ import annotations

import types

import torch
from torch.overrides import TorchFunctionMode

from ...exc import Unsupported
from .base import KnownObjectVariable, VariableTracker
from .constant import ConstantVariable
from .ctx_managers import ContextManagerVariable, RestoredExit


def is_function_mode(vt) -> bool:
    try:
        kind = vt.python_type()
    except Unsupported:
        return False
    return isinstance(kind, type) and issubclass(kind, TorchFunctionMode)


class TorchFunctionModeVariable(ContextManagerVariable):
    """BEFORE_WITH's view of a TorchFunctionMode object (``mode`` is its tracker)."""

    def __init__(self, mode: VariableTracker):
        super().__init__()
        kind = mode.python_type()
        for name in ("__enter__", "__exit__"):
            if getattr(kind, name) is not getattr(TorchFunctionMode, name):
                raise Unsupported(f"{kind.__name__} overrides {name} (only TorchFunctionMode's own is modelled)")
        self.mode = mode

    def python_type(self):
        return self.mode.python_type()

    def enter(self, tx):
        tx.output.function_modes.append(self.mode)
        return self.mode                       # TorchFunctionMode.__enter__ returns self

    def exit_callable(self):
        return _ModeExitVariable(self)


class _ModeExitVariable(RestoredExit):
    def __init__(self, manager: TorchFunctionModeVariable):
        super().__init__()
        self.manager = manager

    def call_function(self, tx, args, kwargs):
        modes = tx.output.function_modes
        if not modes or modes[-1] is not self.manager.mode:
            raise Unsupported("TorchFunctionMode blocks left out of order")
        modes.pop()
        return ConstantVariable(None)


def dispatch(tx, func, args: list, kwargs: dict, default, types_=()):
    """``func(*args, **kwargs)`` as torch runs it: through the innermost active mode's
    ``__torch_function__`` when there is one, else ``default()``."""
    modes = tx.output.function_modes
    if not modes:
        return default()
    from ..builder import wrap_object
    from .containers import TupleVariable
    from .dicts import DictVariable
    from .objects import ClassVariable

    mode = modes.pop()                       # inactive while its handler runs, as in torch
    try:
        func_vt = func if isinstance(func, VariableTracker) else wrap_object(func, None)
        handler = mode.var_getattr(tx, "__torch_function__")
        result = handler.call_function(tx, [func_vt, TupleVariable([ClassVariable(t) for t in types_]),
                                             TupleVariable(list(args)),
                                             DictVariable(dict(kwargs)) if kwargs else ConstantVariable(None)], {})
    finally:
        modes.append(mode)
    if isinstance(result, ConstantVariable) and result.value is NotImplemented:
        raise Unsupported(f"{mode.python_type().__name__}.__torch_function__ returned NotImplemented")
    return result


def tensor_method(tx, tensor, name: str, args: list, kwargs: dict, default):
    """``tensor.name(*args, **kwargs)``: torch passes ``torch.Tensor.name``."""
    if not tx.output.function_modes:
        return default()
    func = getattr(torch.Tensor, name, None)
    if func is None:
        return default()
    return dispatch(tx, func, [tensor, *args], kwargs, default)


def tensor_attribute(tx, tensor, name: str, default):
    """``tensor.name`` for an attribute torch implements as a getter (``shape``, ``dtype``):
    torch passes ``Tensor.name.__get__``, with ``types`` holding the tensor's class."""
    if not tx.output.function_modes:
        return default()
    descriptor = _getset(name)
    if descriptor is None:
        return default()
    return dispatch(tx, TensorGetterVariable(name, descriptor), [tensor], {}, default, (tensor.python_type(),))


def _getset(name):
    for klass in torch.Tensor.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            return attr if isinstance(attr, types.GetSetDescriptorType) else None
    return None


class TensorGetterVariable(KnownObjectVariable):
    """``torch.Tensor.<name>.__get__``, the ``func`` a mode sees for an attribute read."""

    def __init__(self, name, descriptor):
        super().__init__(descriptor.__get__)
        self.name = name

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            raise Unsupported(f"Tensor.{self.name}.__get__ with other than one argument")
        return args[0].var_getattr(tx, self.name)


class _Stop(Exception):
    pass


class _FirstCall(TorchFunctionMode):
    """Records the first overridable call made under it, and stops there."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen = (func, args, kwargs or {})
        raise _Stop


def operator_call(tx, fn, args: list, default):
    """A Python operator over tensors (``a + b``, ``2 - t``, ``a <= b``): the call torch passes
    to the mode, learnt from torch by running ``fn`` once on the meta examples."""
    if not tx.output.function_modes:
        return default()
    from .tensor import TensorVariable

    examples, trackers = [], {}
    for a in args:
        if isinstance(a, TensorVariable):
            examples.append(a.example)
            trackers[id(a.example)] = a
        else:
            examples.append(a.as_python_constant())
    recorder = _FirstCall()
    try:
        with recorder:
            fn(*examples)
    except _Stop:
        pass
    except Exception as e:
        raise Unsupported(f"operator {fn.__name__} on the example values raised {type(e).__name__}") from e
    seen = getattr(recorder, "seen", None)
    if seen is None:
        return default()
    func, passed, passed_kwargs = seen

    def back(value):
        if isinstance(value, torch.Tensor):
            if id(value) not in trackers:
                raise Unsupported(f"operator {fn.__name__} passes a tensor the trace does not know")
            return trackers[id(value)]
        from ..builder import wrap_constant_result

        return wrap_constant_result(value)

    return dispatch(tx, func, [back(v) for v in passed], {k: back(v) for k, v in passed_kwargs.items()}, default)


class HandleTorchFunctionVariable(KnownObjectVariable):
    """``torch.overrides.handle_torch_function(public_api, relevant_args, *args, **kwargs)``: what
    torch's Python functions call when ``has_torch_function`` says True (inside a mode block)."""

    def call_function(self, tx, args, kwargs):
        if len(args) < 2:
            raise Unsupported("handle_torch_function without its public function and relevant arguments")

        def no_mode():
            raise Unsupported("handle_torch_function reached without an active TorchFunctionMode")

        return dispatch(tx, args[0], list(args[2:]), kwargs, no_mode)
