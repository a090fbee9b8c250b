"""``TorchFunctionVariable``: ``torch.*``, ``torch.nn.functional.*``, ``Tensor.*`` and friends.

Calls become graph nodes whose target is the function itself; its meta example value comes
from running the same function on meta tensors.  A few functions only answer questions about
the tracing context (``torch.jit.is_scripting()``): those are answered now, as constants.
"""

from __future__ import annotations

import types

import torch

import guards as G
from ...exc import Unsupported
from ..meta import FACTORIES
from ..library import defined_where_it_says
from .base import KnownObjectVariable, VariableTracker, describe, maybe_constant
from .constant import ConstantVariable

# Modules whose functions are tensor operations we may put in the graph.
OP_MODULES = {"torch", "torch.functional", "torch.nn.functional", "torch._C._nn", "torch._C._linalg",
              "torch._C._fft", "torch._C._special", "torch.linalg", "torch.fft", "torch.special",
              "torch._tensor", "torch._C._VariableFunctions", "torch.nn.init", "torch._refs"}

# Functions whose answer while tracing is a plain constant (we are not scripting/tracing/compiling).
CONTEXT_QUERIES = {
    torch.jit.is_scripting: False,
    torch.jit.is_tracing: False,
    torch._C._get_tracing_state: None,
    torch.compiler.is_compiling: False,
    torch.compiler.is_dynamo_compiling: False,
    torch.fx._symbolic_trace.is_fx_tracing: False,
    torch._C._are_functorch_transforms_active: False,
}
for _name in ("is_scripting",):
    _fn = getattr(torch._jit_internal, _name, None)
    if _fn is not None:
        CONTEXT_QUERIES[_fn] = False
_is_compiling = getattr(torch._utils, "is_compiling", None)
if _is_compiling is not None:
    CONTEXT_QUERIES[_is_compiling] = False

_make_fx_check = getattr(torch.nn.modules.activation, "_is_make_fx_tracing", None)
if _make_fx_check is not None:
    CONTEXT_QUERIES[_make_fx_check] = False      # trace_frame refuses to run under dispatch modes

# __torch_function__ dispatch checks: traced tensors are never subclasses (inputs are checked),
# so the answer is False, unless the trace is inside a TorchFunctionMode block: then True, as in
# torch (the library then calls handle_torch_function: torch_function_modes.py).
HAS_TORCH_FUNCTION = (torch._C._has_torch_function, torch._C._has_torch_function_unary,
                      torch._C._has_torch_function_variadic)
for _fn in HAS_TORCH_FUNCTION:
    CONTEXT_QUERIES[_fn] = False

# Autocast queries: a trace under an enabled autocast is refused and every entry guards the
# autocast state, so the answer while tracing is False.
AUTOCAST_QUERIES = {torch.is_autocast_enabled, torch._C._is_any_autocast_enabled}

# Telemetry with no effect on results: skipped.
IGNORED_CALLS = {torch._C._log_api_usage_once}

# The profiler's range markers (``torch.profiler.record_function``'s enter and exit): no effect on
# results, and none at all while no profiler runs (guarded), so traced as nothing.  What enter
# gives is a handle only exit takes (``ProfilerRangeVariable``).
_profiler_ops = torch.ops.profiler
PROFILER_RANGE_ENTERS = (_profiler_ops._record_function_enter_new, _profiler_ops._record_function_enter)
PROFILER_RANGE_EXITS = (_profiler_ops._record_function_exit, _profiler_ops._record_function_exit._RecordFunction)

# Pure functions of constants (no tensors): evaluated at trace time.
CONSTANT_FUNCTIONS = {torch.device, torch.Size, torch.finfo, torch.iinfo,
                      torch.is_floating_point, torch.is_complex, torch.numel, torch.result_type,
                      torch.promote_types, torch.can_cast, torch.broadcast_shapes, torch._assert}

# Readers of global torch state: answered now, as constants, with a guard on the state.
STATE_QUERIES = {G.source.torch_state_function(name): name for name in G.source.TORCH_STATE_FUNCTIONS
                 if name != "get_default_device"}
STATE_QUERIES[torch.get_default_device] = "get_default_device"

# Dispatcher operators reached through ``torch.ops`` (their meta kernels give the examples, their
# schemas the effects: meta.EffectProbe).
OPERATOR_OBJECTS = (torch._ops.OpOverloadPacket, torch._ops.OpOverload)


def is_torch_callable(value) -> bool:
    """Is ``value`` a tensor operation from torch (not a class, not a torch utility)?"""
    if _hashable_in(value, CONSTANT_FUNCTIONS):           # incl. classes like torch.Size
        return True
    if isinstance(value, type) or not callable(value):
        return False
    if value is torch._C._set_grad_enabled:              # (ctx_managers.switch_grad_mode)
        return True
    if value in CONTEXT_QUERIES or value in IGNORED_CALLS or _hashable_in(value, AUTOCAST_QUERIES) or _hashable_in(value, STATE_QUERIES) or value is torch._C._len_torch_dispatch_stack or _hashable_in(value, CONSTANT_FUNCTIONS):
        return True
    if isinstance(value, OPERATOR_OBJECTS):              # torch.ops.aten.add, torch.ops.aten.add.Tensor
        return True
    if isinstance(value, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return getattr(value, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor)
    module = getattr(value, "__module__", None)
    if module in OP_MODULES:                  # (a program's functools.wraps(torch.relu) says so too)
        return defined_where_it_says(value) and (isinstance(value, types.FunctionType) or _torch_type(value))
    return isinstance(value, types.FunctionType) and getattr(torch.Tensor, getattr(value, "__name__", ""), None) is value


def _torch_type(value) -> bool:
    """A callable that is not a Python function: torch's own when its type is (a builtin; not a
    program's object given torch's ``__module__`` by ``functools.update_wrapper``)."""
    return isinstance(value, types.BuiltinFunctionType) or type(value).__module__.split(".")[0] == "torch"


def aten_binding(fn) -> bool:
    """Is ``fn`` torch's binding of an aten operator (``torch.div``) none of whose functional
    overloads writes anything?  Then a call on numbers alone is an operation like any other:
    what it writes or draws the meta run's EffectProbe sees, as for calls on tensors."""
    name = getattr(fn, "__name__", None)
    if not isinstance(fn, types.BuiltinFunctionType) or getattr(torch._C._VariableFunctions, name, None) is not fn:
        return False
    packet = getattr(torch.ops.aten, name, None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    return not any(getattr(packet, overload)._schema.is_mutable
                   for overload in packet.overloads() if "out" not in overload)


def _hashable_in(value, table) -> bool:
    try:
        return value in table
    except TypeError:
        return False


def _contains_tensor(vt) -> bool:
    from .containers import BaseListVariable
    from .dicts import DictVariable
    from .tensor import TensorVariable

    if isinstance(vt, TensorVariable):
        return True
    if isinstance(vt, BaseListVariable):
        return any(_contains_tensor(i) for i in vt.items)
    if isinstance(vt, DictVariable):
        return any(_contains_tensor(i) for i in vt.items.values())
    return False


class TorchFunctionVariable(KnownObjectVariable):
    def var_getattr(self, tx, name):
        if name in ("__name__", "__qualname__", "__module__"):
            return ConstantVariable(getattr(self.value, name))
        if isinstance(self.value, torch._ops.OpOverloadPacket) and name in self.value.overloads() + ["default"]:
            from ..builder import wrap

            overload = getattr(self.value, name)         # torch.ops.aten.add.Tensor
            return wrap(tx, overload, G.AttrSource(self.source, name) if self.source is not None else None)
        raise Unsupported(f"attribute {name!r} of {describe(self.value)}")

    def call_function(self, tx, args, kwargs):
        fn = self.value
        if fn in HAS_TORCH_FUNCTION and tx.output.function_modes:
            return ConstantVariable(True)
        if fn in CONTEXT_QUERIES:                       # (arguments are irrelevant to the answer)
            return ConstantVariable(CONTEXT_QUERIES[fn])
        if fn in IGNORED_CALLS:
            return ConstantVariable(None)
        if _hashable_in(fn, STATE_QUERIES):
            if args or kwargs:
                raise Unsupported(f"{describe(fn)} with arguments")
            from .ctx_managers import TRACED_BLOCKS

            if fn is torch.is_inference_mode_enabled and TRACED_BLOCKS.managers:
                return ConstantVariable(fn())    # inside a traced block: the block's mode
            guard = G.torch_state_match(STATE_QUERIES[fn])
            tx.output.add_guard(guard)
            return ConstantVariable(guard.obj)
        if fn is torch._C._set_grad_enabled:            # a context manager's own __enter__/__exit__
            from .ctx_managers import switch_grad_mode

            mode = maybe_constant(args[0], None) if len(args) == 1 and not kwargs else None
            if type(mode) is not bool:
                raise Unsupported("torch._C._set_grad_enabled(...) without one constant bool")
            switch_grad_mode(tx, mode)
            return ConstantVariable(None)
        if fn is torch.is_grad_enabled:
            # the live mode follows from the entry mode (always guarded, capture.py) and the with
            # blocks traced so far; guarding the live mode would demand no_grad at the frame's entry
            return ConstantVariable(torch.is_grad_enabled())
        if fn is torch._C._len_torch_dispatch_stack:
            if fn() != 0:
                raise Unsupported("a TorchDispatchMode is active")
            return ConstantVariable(0)
        if fn in AUTOCAST_QUERIES and len(args) <= 1 and not kwargs:
            # the traced regions (the caller's is guarded: autocast.py); no argument asks of CUDA
            device_type = args[0].as_python_constant() if args else "cuda"
            if fn is torch._C._is_any_autocast_enabled and not args:
                return ConstantVariable(tx.output.autocast.is_enabled("cpu"))
            if fn is torch.is_autocast_enabled and isinstance(device_type, str):
                return ConstantVariable(tx.output.autocast.is_enabled(device_type))
            raise Unsupported(f"{fn.__name__} asked of something other than a device type name")
        if fn is torch.is_tensor:
            from .tensor import TensorVariable

            return ConstantVariable(isinstance(args[0], TensorVariable))
        tensors_in = any(_contains_tensor(a) for a in [*args, *kwargs.values()])
        if _hashable_in(fn, CONSTANT_FUNCTIONS) and not tensors_in:
            from ..operators import fold      # operators imports the trackers: imported on use

            return fold(fn, args, kwargs)
        if fn in (torch.is_floating_point, torch.is_complex, torch.numel) and tensors_in:
            from .tensor import TensorMethodVariable

            if not args and "input" in kwargs:          # torch.is_floating_point(input=t)
                kwargs = dict(kwargs)
                args = [kwargs.pop("input")]
            return TensorMethodVariable(args[0], fn.__name__).call_function(tx, args[1:], kwargs)
        if isinstance(fn, types.FunctionType) and fn.__name__.startswith("_") and not fn.__name__.startswith("__") \
                and getattr(torch.Tensor, fn.__name__, None) is not fn:
            from .functions import UserFunctionVariable   # a private Python helper, not an op: its code

            return UserFunctionVariable(fn, self.source).call_function(tx, args, kwargs)
        if not tensors_in and isinstance(fn, types.FunctionType):
            from .functions import UserFunctionVariable   # Python helper on non-tensors: run its code

            return UserFunctionVariable(fn, self.source).call_function(tx, args, kwargs)
        marker = _profiler_range_marker(fn)
        if marker is not None:
            if torch.autograd._profiler_enabled():
                raise Unsupported("a profiler range while the profiler runs")
            tx.output.add_guard(G.torch_state_match("autograd._profiler_enabled", False))
            return ProfilerRangeVariable() if marker == "enter" else ConstantVariable(None)
        if not tensors_in and not _hashable_in(fn, FACTORIES) and not aten_binding(fn):
            raise Unsupported(f"{describe(fn)} called without tensor arguments (may have side effects)")
        if fn is torch.Tensor.item or getattr(fn, "__name__", "") in ("item", "tolist"):
            from .tensor import TensorMethodVariable, TensorVariable

            if len(args) == 1 and not kwargs and isinstance(args[0], TensorVariable):
                return TensorMethodVariable(args[0], fn.__name__).call_function(tx, [], {})
            raise Unsupported(f"{describe(fn)} needs the tensor's data")
        if isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)) or (
                isinstance(fn, types.FunctionType) and getattr(torch.Tensor, fn.__name__, None) is fn):
            from .tensor import TensorMethodVariable, TensorVariable

            if args and isinstance(args[0], TensorVariable):
                return TensorMethodVariable(args[0], fn.__name__).call_function(tx, args[1:], kwargs)
        from .torch_function_modes import dispatch

        return dispatch(tx, self, args, kwargs, lambda: tx.output.call_op("call_function", fn, args, kwargs))

    def __repr__(self):
        return f"TorchFunctionVariable({describe(self.value)})"


def _profiler_range_marker(fn):
    """"enter" or "exit" for the profiler's range markers, else None."""
    if any(fn is op for op in PROFILER_RANGE_ENTERS):
        return "enter"
    if any(fn is op for op in PROFILER_RANGE_EXITS):
        return "exit"
    return None


class ProfilerRangeVariable(VariableTracker):
    """The handle a profiler range's enter gives and its exit takes: nothing else may use it."""

    def python_type(self):
        return torch.ScriptObject
