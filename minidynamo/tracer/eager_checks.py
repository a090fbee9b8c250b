"""What eager's CPU kernels refuse and meta kernels let through.

The tracer learns each op's result from its meta kernel, which checks shapes but not
everything eager's own kernel checks at run time.  An op eager would refuse must not be
captured: a backend that computes functionally (XLA) would return a value where eager
raises.  ``check`` runs on every aten op of a meta run (``meta.EffectProbe``) and raises
eager's kind of error for the two families below; the tracer then refuses the op
(``Unsupported``), so it runs eagerly and raises there, as eager does.

- Overlapping writes: an op writing memory that overlaps one of its inputs, or itself
  (``y += y[0]``, ``y[0].expand(4, 4).add_(1)``).  Eager raises where it can see the overlap
  and computes in its own element order where it cannot (``y.mul_(y[:, :1])``, reading a
  column it has already written); both run eagerly here.  The same elements in the same
  layout (``y.add_(y)``) are fine.
- Dtype agreement: matrix products and convolutions take one dtype; a norm's parameters take
  the input's (or float32 for a bfloat16/float16 input); ``index_put`` writes values of the
  destination's dtype.  Meta kernels type the result instead (float64 @ float32 -> float64).
- Scalars and in-place results: an integer tensor divided by the Python int 0 or raised to a
  negative Python int; an in-place op whose result dtype cannot be cast to its own
  (``int64.mul_(0.5)``).  A divisor *tensor* holding a zero is data: the XLA bridge checks it
  on every run (``xla_bridge.index_check``).
- Numbers out of a dtype's range: a kernel that converts a ``Scalar`` with a range check
  (``masked_fill(uint8, 300)``, ``clamp(float16, max=1e6)``, ``pad(uint8, value=-1)``) raises
  where XLA wraps or saturates; a complex number given to a real tensor's op that has no complex
  kernel (``x > 1+1j``, ``x % (1+1j)``: XLA answered, or crashed the process).  Asked of the CPU
  kernel with the real numbers, only when one is out of range or complex.
- Dtypes a CPU kernel refuses: ops that draw random numbers (``torch.rand_like`` of an int64
  tensor: eager's ``uniform_`` has no integer kernel, its meta kernel does not care), and any op
  given a tensor that is not float32/float64 (``gelu``, ``hardswish``, ``lerp``, max pools of an
  integer tensor; ``dot`` of bools; ``topk`` of bools), and any op of integers only given
  any tensor (``7 << x`` of a float ``x``: its meta kernel takes it). Asked of the CPU kernel itself, once per
  op, dtypes and ranks, on one-element tensors with the random state put back (never with a
  ``torch.Generator`` argument, whose state it would move), or at the real shapes when those
  fail for their size (``topk(k=2)``, a 3-d pool's window) and are small: a refusal counts if its
  message is a dtype's ("not implemented for 'Long'", "does not support bool") and the same
  call in float32 passes (every tensor made float32, or only the floating ones: ``x[idx]`` of
  float8 keeps its indices).  The same question is asked of ops given two floating dtypes, which
  many CPU kernels refuse where their meta kernels promote (``index_copy_`` of a float32 source
  into float64, ``lerp``, ``cdist``, ``prelu``): with the floating stand-ins made float32 for
  the second call and integer ones zeros (in-range indices).
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_leaves, tree_map

from xla_bridge.generator_lock import cpu_state_kept

aten = torch.ops.aten
_REDUCED_FLOATS = (torch.bfloat16, torch.float16)
_MAX_ENUMERATED = 1 << 20    # beyond this many elements an undecided overlap counts as one


def check(func, args, kwargs, written) -> None:
    """Raise RuntimeError if eager's kernel would refuse ``func(*args, **kwargs)`` (meta
    tensors) or compute it in an order of its own; ``written``: the tensors it writes."""
    for tensor in written:
        _check_overlap(func, tensor, (args, kwargs))
    rule = _DTYPE_RULES.get(func.overloadpacket)
    if rule is not None:
        rule(func, _tensor_arguments(func, args, kwargs))
    if torch.Tag.nondeterministic_seeded in func.tags or _not_wide_float(args, kwargs) or _mixed_floats(args, kwargs) \
            or _integers_only(func):
        _cpu_kernel_exists(func, args, kwargs)
    if func.overloadpacket in _SCALAR_RULED:
        _scalar_arguments(func, args)
    if _number_out_of_range(func, args, kwargs):
        _number_refused(func, args, kwargs)
    if written and torch.Tag.pointwise in func.tags and func._schema.name.endswith("_"):
        _result_casts_to_self(func, args, kwargs)


# -- dtype agreement ----------------------------------------------------------------------------

def schema_arguments(func, args, kwargs) -> list:
    """[(schema argument, the value passed for it), ...] of an aten op's call."""
    return [(arg, args[i] if i < len(args) and not arg.kwarg_only else kwargs.get(arg.name))
            for i, arg in enumerate(func._schema.arguments)]


def _tensor_arguments(func, args, kwargs) -> dict:
    """{schema argument name: tensor} of the tensors passed to ``func``."""
    return {arg.name: value for arg, value in schema_arguments(func, args, kwargs)
            if isinstance(value, torch.Tensor)}


def _one_dtype(func, tensors: dict) -> None:
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        raise RuntimeError(f"{func}: expected its tensors to have one dtype, got "
                           f"{', '.join(f'{name} {t.dtype}' for name, t in tensors.items())}")


def _parameters_follow_input(func, tensors: dict) -> None:
    data = tensors.get("input")
    if data is None:
        return
    allowed = {data.dtype} | ({torch.float32} if data.dtype in _REDUCED_FLOATS else set())
    for name, t in tensors.items():
        if name != "input" and t.dtype not in allowed:
            raise RuntimeError(f"{func}: {name} is {t.dtype}, the input {data.dtype}")


def _values_follow_destination(func, tensors: dict) -> None:
    if "values" in tensors and tensors["values"].dtype != tensors["self"].dtype:
        raise RuntimeError(f"{func}: Index put requires the source and destination dtypes "
                           f"match, got {tensors['self'].dtype} for the destination and "
                           f"{tensors['values'].dtype} for the source")


_DTYPE_RULES = {
    **dict.fromkeys((aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.addbmm, aten.mv, aten.addmv,
                     aten.addr, aten.dot, aten.vdot, aten.convolution), _one_dtype),
    **dict.fromkeys((aten.native_layer_norm, aten.native_batch_norm, aten._native_batch_norm_legit,
                     aten._native_batch_norm_legit_no_training, aten.native_group_norm),
                    _parameters_follow_input),
    **dict.fromkeys((aten.index_put, aten.index_put_, aten._index_put_impl_), _values_follow_destination),
}


# -- scalars and in-place results -------------------------------------------------------------

_INTEGER_DIVISIONS = {aten.floor_divide, aten.floor_divide_, aten.remainder, aten.remainder_,
                      aten.fmod, aten.fmod_, aten.div, aten.div_}
_SCALAR_RULED = _INTEGER_DIVISIONS | {aten.pow, aten.pow_}


def _scalar_arguments(func, args) -> None:
    """An integer tensor divided by the Python int 0, or raised to a negative Python int."""
    if len(args) < 2 or not isinstance(args[0], torch.Tensor) or args[0].is_floating_point() \
            or args[0].is_complex() or type(args[1]) not in (int, bool):
        return
    packet = func.overloadpacket
    # (the number converted to the tensor's dtype, as eager does: 256 is 0 for an int8 tensor)
    divisor = int(torch.tensor(int(args[1])).to(torch.result_type(args[0], args[1])))
    if packet in _INTEGER_DIVISIONS and divisor == 0 and (packet not in (aten.div, aten.div_)
                                                          or "mode" in func._overloadname):
        raise RuntimeError("ZeroDivisionError")
    if packet in (aten.pow, aten.pow_) and args[1] < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")


def _result_casts_to_self(func, args, kwargs) -> None:
    """An in-place op writes its result into ``self``: eager refuses a result dtype that cannot
    be cast to it (``int64.mul_(0.5)``); meta kernels write it anyway."""
    self = args[0] if args and isinstance(args[0], torch.Tensor) else None
    functional = getattr(aten, func._schema.name.split("::")[-1][:-1], None)
    if self is None or functional is None:
        return
    try:
        result = functional(*args, **kwargs)
    except Exception:       # no out-of-place twin for these arguments: not decided here
        return
    if isinstance(result, torch.Tensor) and not torch.can_cast(result.dtype, self.dtype):
        raise RuntimeError(f"{func}: result type {_type_name(result.dtype)} can't be cast to the "
                           f"desired output type {_type_name(self.dtype)}")


def _type_name(dtype) -> str:
    return {torch.float32: "Float", torch.float64: "Double", torch.int64: "Long", torch.int32: "Int",
            torch.bool: "Bool"}.get(dtype, str(dtype))


# -- dtypes a CPU kernel lacks ---------------------------------------------------------------

_CPU_KERNEL_REFUSES: dict = {}   # (op, tensor dtypes and ranks) -> eager's error, or None


def _cpu_kernel_exists(func, args, kwargs) -> None:
    leaves = tree_leaves((args, kwargs))
    if any(isinstance(v, torch.Generator) for v in leaves):
        return
    tensors = [v for v in leaves if isinstance(v, torch.Tensor)]
    key = (func, tuple((t.dtype, t.dim()) for t in tensors))
    if key not in _CPU_KERNEL_REFUSES:
        _CPU_KERNEL_REFUSES[key] = _refusal(func, args, kwargs)
    refusal = _CPU_KERNEL_REFUSES[key]
    if refusal is not None:
        raise type(refusal)(f"{func}: {refusal}")


def _refusal(func, args, kwargs):
    """Eager's refusal of the dtypes in ``func``, asked on tensors of ones of the real shapes
    when they are small (the shapes the meta kernel accepted), else on one-element tensors;
    None when the kernel takes the dtypes (or nothing can tell).  One-element stand-ins can
    disagree in shape where the real arguments agree, and a kernel that trusts its arguments'
    sizes (the RNNs', over a list of weights) reads out of bounds on them: they are used only
    for ops without a list of tensors.  Of mixed floating dtypes alone (``index_copy_`` of a
    float32 source into float64, ``lerp`` with a float32 end) only the floating tensors are made
    float32 for the second call, and integer tensors stand in as zeros (indices in range)."""
    small = sum(t.numel() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)) <= _MAX_SHAPED_RUN
    reference = torch.int64 if _integers_only(func) else torch.float32   # a dtype every kernel of it takes
    for floats_only in ((True, False) if _mixed_floats(args, kwargs) else (False,)):
        for shaped in ((True,) if small else (False,) if not _takes_tensor_lists(func) else ()):
            outcome, refusal = _run_on_ones(func, args, kwargs, None, shaped, floats_only)
            if outcome == "dtype":
                # the same call in float32 passes (every tensor float32, or only the floating
                # ones, the integer ones staying indices): the dtype, not the values, is refused
                if any(_run_on_ones(func, args, kwargs, reference, shaped, only)[0] == "ran"
                       for only in dict.fromkeys((floats_only, True))):
                    return refusal
                break
            if outcome == "ran":
                return None
    return None


def _takes_tensor_lists(func) -> bool:
    return any(isinstance(arg.type, torch.ListType) and "Tensor" in str(arg.type.getElementType())
               for arg in func._schema.arguments)


# Ops whose CPU kernels take integers (and bools) only: a float tensor is refused there, where
# some meta kernels take it (``7 << x`` of a float ``x``: its lowering crashed XLA's compiler).
_INTEGER_OPS = ("bitwise_", "__lshift__", "__rshift__", "__ilshift__", "__irshift__", "__and__", "__or__",
                "__xor__", "__iand__", "__ior__", "__ixor__", "gcd", "lcm")


def _integers_only(func) -> bool:
    return func.overloadpacket.__name__.startswith(_INTEGER_OPS)


def _not_wide_float(args, kwargs) -> bool:
    """Is some tensor argument an integer, a bool or a reduced float (whose CPU kernels are the
    ones that may be missing)?"""
    return any(isinstance(v, torch.Tensor) and v.dtype not in _WIDE_FLOATS for v in tree_leaves((args, kwargs)))


def _mixed_floats(args, kwargs) -> bool:
    """Do two tensor arguments have different floating dtypes (which many CPU kernels refuse
    where their meta kernels promote)?"""
    return len({v.dtype for v in tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor) and _floating(v)}) > 1


def _floating(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


_WIDE_FLOATS = (torch.float32, torch.float64)
_DTYPE_REFUSALS = ("not implemented for", "does not support", "not supported", "no longer supported",
                   "not intended to support",   # "torch.sign is not intended to support complex numbers"
                   "only support",     # "std and var only support floating point and complex dtypes"
                   "dtype", "scalar type")   # mixed: "expected scalar type Double but found Float"
_MAX_SHAPED_RUN = 1 << 16    # elements: a run at the real shapes costs at most this much, once


def _run_on_ones(func, args, kwargs, dtype, shaped, floats_only=False):
    """``func`` on CPU tensors of ones (of their own dtype, or ``dtype``), one-element or of the
    real shapes: ("ran", None), ("dtype", eager's error about a dtype) or ("other", None): an
    error about a value or a shape the stand-ins lack, which says nothing of the dtype.
    ``floats_only``: only floating tensors take ``dtype``; integer ones are zeros."""
    def ones(v):
        if isinstance(v, complex) and dtype is not None and not dtype.is_complex:
            return v.real                      # (the reference call: a complex number refused too)
        if not isinstance(v, torch.Tensor):
            return v
        shape = v.shape if shaped else (1,) * v.dim()
        if floats_only and not _floating(v):
            return torch.zeros(shape, dtype=v.dtype)
        return torch.ones(shape, dtype=dtype or v.dtype)
    try:
        with cpu_state_kept():
            func(*tree_map(ones, args), **tree_map(ones, kwargs))
    except (RuntimeError, NotImplementedError) as error:
        if any(words in str(error) for words in _DTYPE_REFUSALS):
            # kept in _CPU_KERNEL_REFUSES for the process's life: without its traceback, whose
            # frames would keep the whole trace (and the cache entries of the frame) alive
            return "dtype", error.with_traceback(None)
        return "other", None
    except Exception:                 # noqa: BLE001  (an index or a value the stand-ins lack)
        return "other", None
    return "ran", None


# -- numbers a kernel converts with a range check ------------------------------------------------

def _number_out_of_range(func, args, kwargs) -> bool:
    """Does a Python number passed as a ``Scalar`` lie outside the range of the first tensor's
    dtype (an integer's, a 16-bit or 32-bit float's finite range)?  Eager's kernels that convert it with
    ``Scalar::to<T>()`` (``masked_fill``, ``fill_``, ``clamp``, ``pad``'s value) raise "value
    cannot be converted ... without overflow" where meta kernels do not; others wrap it."""
    tensor = next((v for v in tree_leaves((args, kwargs)) if isinstance(v, torch.Tensor)), None)
    if tensor is None or tensor.is_complex():
        return False
    for argument, value in schema_arguments(func, args, kwargs):
        if "number" not in str(argument.type):    # (a Scalar)
            continue
        if type(value) is complex:         # (``x > 1+1j`` of a real x: eager refuses to order it)
            return True
        if type(value) not in (int, float) or tensor.dtype == torch.float64:
            continue
        if tensor.dtype in _REDUCED_FLOATS or tensor.dtype == torch.float32:   # (addcmul(value=1e40))
            if value == value and abs(value) != float("inf") and abs(value) > torch.finfo(tensor.dtype).max:
                return True
        elif tensor.dtype != torch.bool:
            info = torch.iinfo(tensor.dtype)
            if not info.min <= value <= info.max:
                return True
    return False


def _number_refused(func, args, kwargs) -> None:
    """Ask the CPU kernel itself, on stand-ins with the real numbers (rare: only for a number out
    of range, or complex), and raise if it refuses the number (overflow, or no complex kernel)."""
    small = sum(t.numel() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)) <= _MAX_SHAPED_RUN

    def stand_in(v):
        return torch.zeros(v.shape if small else (1,) * v.dim(), dtype=v.dtype) if isinstance(v, torch.Tensor) else v
    try:
        with cpu_state_kept():
            func(*tree_map(stand_in, args), **tree_map(stand_in, kwargs))
    except NotImplementedError as error:
        raise RuntimeError(f"{func}: {error}") from None
    except RuntimeError as error:
        if "without overflow" in str(error) or "complex Scalar" in str(error):
            raise RuntimeError(f"{func}: {error}") from None
    except Exception:                 # noqa: BLE001  (something else the stand-ins lack)
        return


# -- overlapping writes -------------------------------------------------------------------------

def _check_overlap(func, written: torch.Tensor, inputs) -> None:
    """Eager's rules (``has_internal_overlap``, ``get_overlap_status``) where they decide;
    listed element offsets where they cannot (eager computes those in its own order)."""
    internal = torch._debug_has_internal_overlap(written)
    if internal == 1 or (internal == 2 and not _strides_apart(written) and _has_repeats(written)):
        raise RuntimeError(f"{func}: more than one element of the written-to tensor refers to a "
                           f"single memory location")
    for value in tree_leaves(inputs):
        if isinstance(value, torch.Tensor) and value is not written and _overlaps(written, value):
            raise RuntimeError(f"{func}: some elements of the input tensor and the written-to "
                               f"tensor refer to a single memory location")


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0 or a.untyped_storage()._cdata != b.untyped_storage()._cdata:
        return False
    if _layout(a) == _layout(b):
        return False                                 # the same elements: eager allows it
    if _dense(a) and _dense(b):                      # eager's own rule: byte ranges
        a_begin, b_begin = a.storage_offset() * a.element_size(), b.storage_offset() * b.element_size()
        a_end, b_end = a_begin + a.numel() * a.element_size(), b_begin + b.numel() * b.element_size()
        return a_begin < b_end and b_begin < a_end
    if a.element_size() != b.element_size():
        return True
    offsets = _offsets(a), _offsets(b)
    return any(o is None for o in offsets) or bool(torch.isin(*offsets).any())


def _layout(t: torch.Tensor) -> tuple:
    return t.storage_offset(), tuple(t.shape), t.stride(), t.dtype


def _strides_apart(t: torch.Tensor) -> bool:
    """No two elements share memory: each stride, in increasing order, is past everything the
    smaller ones reach (a slice such as ``x[:, 0]`` or ``x[..., ::2]``, whatever its size)."""
    reach = 0
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz > 1):
        if stride <= reach:
            return False
        reach += (size - 1) * stride
    return True


def _has_repeats(t: torch.Tensor) -> bool:
    offsets = _offsets(t)
    return offsets is None or offsets.unique().numel() != offsets.numel()


def _offsets(t: torch.Tensor):
    """The storage offset of each element of ``t`` (None when there are too many to list)."""
    if t.numel() > _MAX_ENUMERATED:
        return None
    offsets = torch.tensor(t.storage_offset())
    for size, stride in zip(t.shape, t.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(size) * stride
    return offsets.flatten()


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: the elements fill a block of memory, in some dim order."""
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True
