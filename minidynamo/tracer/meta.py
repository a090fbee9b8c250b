"""Example values: every tensor the tracer sees is mirrored by a tensor on the ``meta`` device.

A meta tensor has a shape, dtype, strides and autograd flags but no storage, so running an
op on it tells us the result's metadata without computing anything or touching user data.

Why not ``FakeTensorMode``?  It imports ``torch._dynamo``, which minidynamo must never load.
Plain meta tensors almost avoid it too, but many meta kernels are Python references
(``torch._refs``) wrapped by ``torch._disable_dynamo``, whose first call imports
``torch._dynamo`` just to mark the function "do not trace".  While we compute example values,
``no_dynamo_import`` puts a tiny stand-in module under that name whose ``disable`` returns
the function unchanged; afterwards the stand-in and the marks it left are removed again, so
torch is exactly as before (if real ``torch._dynamo`` is already loaded we leave it alone).
"""

from __future__ import annotations

import contextlib
import re
import sys
import types

from torch.utils._pytree import tree_map
from torch.utils._python_dispatch import TorchDispatchMode

import torch

from ..exc import Unsupported
from . import eager_checks

META = torch.device("meta")

# Factories: no tensor argument, yet they make a tensor.  The tracer lets them into the graph
# without a tensor argument (variables/torch_fns.py), and their example value is made with
# ``device="meta"`` (output_graph.py): run on a real device they would allocate memory and
# draw from the program's random state while tracing.
FACTORIES = frozenset({
    torch.zeros, torch.ones, torch.empty, torch.full, torch.arange, torch.tensor, torch.rand, torch.randn,
    torch.randint, torch.linspace, torch.logspace, torch.eye, torch.as_tensor, torch.scalar_tensor,
    torch.randperm, torch.empty_strided, torch.tril_indices, torch.triu_indices, torch.normal,
    torch.hann_window, torch.hamming_window, torch.bartlett_window, torch.blackman_window, torch.kaiser_window,
})


class _DynamoStandIn(types.ModuleType):
    """Answers ``torch._dynamo.disable(fn, ...)`` with ``fn`` and remembers whom it marked."""

    def __init__(self):
        super().__init__("torch._dynamo")
        self.marked = []

    def disable(self, fn=None, recursive=True, wrapping=True, **kwargs):
        if fn is not None:
            self.marked.append(fn)
        return fn


@contextlib.contextmanager
def no_dynamo_import():
    """Run meta kernels without loading ``torch._dynamo`` (see the module docstring)."""
    if "torch._dynamo" in sys.modules:
        yield
        return
    stand_in = _DynamoStandIn()
    sys.modules["torch._dynamo"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("torch._dynamo") is stand_in:
            del sys.modules["torch._dynamo"]
        if torch.__dict__.get("_dynamo") is stand_in:
            del torch._dynamo
        for fn in stand_in.marked:       # torch._compile caches the answer on the function
            fn.__dict__.pop("__dynamo_disable", None)


def to_meta(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with the same metadata as ``tensor`` (a new leaf; no data copied)."""
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        raise Unsupported(f"tensor subclass {type(tensor).__name__} as an input")
    if tensor.is_sparse or tensor.is_quantized or tensor.layout != torch.strided:
        raise Unsupported(f"tensor with layout {tensor.layout} as an input")
    if tensor.is_conj() or tensor.is_neg():      # (its meta twin would not carry the bit)
        raise Unsupported("a tensor with a lazy conjugate or negative bit (x.conj(), its .imag) as an input")
    meta = torch.empty_strided(tensor.shape, torch.Tensor.stride(tensor), dtype=tensor.dtype, device=META)
    if tensor.requires_grad:
        meta.requires_grad_(True)
    return meta


def elements_spanned(tensor: torch.Tensor) -> int:
    """How many elements of its storage ``tensor`` spans from its storage offset on (0 if empty)."""
    shape, stride = tensor.shape, torch.Tensor.stride(tensor)
    return 1 + sum((size - 1) * step for size, step in zip(shape, stride)) if all(size > 0 for size in shape) else 0


def meta_examples(value):
    """``value`` with every real tensor in it replaced by a meta one (a call without tensor
    arguments and without ``device=``, like ``torch.div(8, 4)``, computed its example for real)."""
    def to(t):
        if not isinstance(t, torch.Tensor) or t.is_meta:
            return t
        return torch.empty_strided(t.shape, torch.Tensor.stride(t), dtype=t.dtype, device=META).requires_grad_(t.requires_grad)
    return tree_map(to, value)


def _batch_norm_statistics(input, weight, bias, running_mean, running_var, training, *rest):
    return (running_mean, running_var) if training else ()


# The few kernels whose schema does not declare a write they make: the batch norms update
# their running statistics in training mode although the schema marks them read-only.
_SCHEMA_SILENT_WRITES = {
    op: _batch_norm_statistics
    for op in (torch.ops.aten.native_batch_norm.default, torch.ops.aten.cudnn_batch_norm.default,
               torch.ops.aten.miopen_batch_norm.default)
}


class EffectProbe(TorchDispatchMode):
    """Watches the aten ops a meta run dispatches, so the tracer learns from PyTorch's own op
    schemas and tags (not from a list of names) whether an op draws random numbers
    (``Tag.nondeterministic_seeded``), which tensors it writes (``Tensor(a!)`` arguments:
    ``add_``, ``bernoulli_``, batch norm's running statistics), and whether it is an operator
    whose kernel is the program's own Python (``python_kernel``: a ``torch.library`` custom op,
    whose code may do anything when the graph runs it)."""

    def __init__(self):
        super().__init__()
        self.draws_random = False
        self.written: list = []
        self.silent: list = []     # of those, written the way eager's kernel does it: no version bump
        self.python_kernel: str | None = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded in func.tags:
            self.draws_random = True
        if self.python_kernel is None and has_python_kernel(func):
            self.python_kernel = str(func)
        written = []
        silent = _SCHEMA_SILENT_WRITES.get(func)
        if silent is not None:
            written.extend(a for a in silent(*args) if isinstance(a, torch.Tensor))
            self.silent.extend(written)
        for arg, value in eager_checks.schema_arguments(func, args, kwargs):
            if arg.alias_info is not None and arg.alias_info.is_write and isinstance(value, torch.Tensor):
                written.append(value)
        self.written.extend(written)
        eager_checks.check(func, args, kwargs, written)   # what eager's kernel refuses, meta's not
        return func(*args, **kwargs)


# torch's own operator libraries: their Python kernels (the refs behind ``prims``) are pure
_TORCH_NAMESPACES = frozenset({"aten", "prims", "rngprims", "debugprims"})
_PYTHON_KERNEL: dict = {}


def has_python_kernel(op) -> bool:
    """Whether an operator outside torch's own libraries has a kernel registered from Python
    (``torch.library.custom_op``, ``Library.impl``): the dispatcher's own record names the file
    each kernel was registered from.  A C++ extension's operator (torchvision's) has none."""
    namespace = getattr(op, "namespace", "aten")
    if namespace in _TORCH_NAMESPACES:
        return False
    name = op._schema.name
    if name not in _PYTHON_KERNEL:
        try:
            dump = torch._C._dispatch_dump(name)
        except RuntimeError:              # no record to read: assume the worst
            _PYTHON_KERNEL[name] = True
            return True
        places = re.findall(r"^(\w+)(?:\[alias\])?: registered at (.*?):\d+", dump, re.M)
        _PYTHON_KERNEL[name] = any(key != "Meta" and (place.endswith(".py") or place.startswith("<"))
                                   for key, place in places)
    return _PYTHON_KERNEL[name]


def run_on_meta(fn, args, kwargs, probe: EffectProbe | None = None):
    """``fn(*args, **kwargs)`` on meta example values; a failure becomes ``Unsupported``."""
    try:
        with no_dynamo_import(), (probe if probe is not None else contextlib.nullcontext()):
            return fn(*args, **kwargs)
    except Unsupported:
        raise
    except NotImplementedError as e:
        overloads = _shape_only_aten_op(fn)
        if overloads is None:
            raise Unsupported(f"{_name(fn)} has no meta kernel: {_first_line(e)}") from e
        return _run_on_dummies(fn, args, kwargs)
    except Exception as e:
        raise Unsupported(f"{_name(fn)} fails on its example values: {type(e).__name__}: {_first_line(e)}") from e


# -- ops without a meta kernel ----------------------------------------------------------------
# Some aten ops (``_native_multi_head_attention``, nn.MultiheadAttention's inference fast path)
# have no meta kernel.  When PyTorch's own op tags say the output's metadata does not depend on
# the data, and the op neither mutates nor aliases its inputs, the example value comes from
# running the real CPU kernel on dummy tensors of the same metadata (zeros, then ones: both
# runs must agree).  Nothing of the user's is touched; the cost is one small real run.
# data-dependent outputs cannot come from dummies; seeded random ops would consume the
# program's random state while tracing
REFUSED_TAGS = (torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output, torch.Tag.nondeterministic_seeded)
MAX_DUMMY_ELEMENTS = 1 << 22


def _shape_only_aten_op(fn):
    """The aten overloads behind the torch builtin ``fn`` when all are shape-only, else None."""
    name = getattr(fn, "__name__", None)
    if not isinstance(fn, types.BuiltinFunctionType) or not name:
        return None
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return None
    overloads = [getattr(packet, o) for o in packet.overloads() if o != "out"]
    for op in overloads:
        schema = op._schema
        if any(t in op.tags for t in REFUSED_TAGS) or schema.is_mutable or \
                any(r.alias_info is not None for r in schema.returns):
            return None
    return overloads or None


def _run_on_dummies(fn, args, kwargs):
    metas = [t for t in _leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if sum(t.numel() for t in metas) > MAX_DUMMY_ELEMENTS:
        raise Unsupported(f"{_name(fn)} has no meta kernel (inputs too large to run on dummy values)")
    results = []
    for fill in (0, 1):
        def dummy(value):
            if not isinstance(value, torch.Tensor):
                return value
            real = torch.empty_strided(value.shape, torch.Tensor.stride(value), dtype=value.dtype, device="cpu").fill_(fill)
            return real.requires_grad_(True) if value.requires_grad else real
        try:
            out = fn(*tree_map(dummy, list(args)), **tree_map(dummy, dict(kwargs)))
        except Exception as e:
            raise Unsupported(f"{_name(fn)} has no meta kernel and fails on dummy values: {_first_line(e)}") from e
        results.append(out)
    signature = [[(t.shape, t.stride(), t.dtype, t.requires_grad) if isinstance(t, torch.Tensor) else t
                  for t in _leaves(r)] for r in results]
    if signature[0] != signature[1]:
        raise Unsupported(f"{_name(fn)} has no meta kernel and its output metadata depends on the data")
    return tree_map(lambda t: to_meta(t.detach()).requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor)
                    else t, results[0])


def _leaves(value) -> list:
    from torch.utils._pytree import tree_leaves

    return tree_leaves(value)


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else ""
