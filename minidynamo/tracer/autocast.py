"""Autocast in the trace: the dtypes an op's result has inside a ``torch.autocast`` region.

Example values are meta tensors, and autocast acts only on tensors of its own device (a CPU
region casts CPU tensors): an op traced on meta examples would get the dtype it has without
autocast.  Which ops a region casts, and to what, is PyTorch's policy, kept in C++ lists per
device.  Rather than copy those lists, the trace asks PyTorch: the first time an op is called
with given dtypes in a region, it runs once for real on CPU zeros of the examples' shapes inside
that region (random state saved and restored around it), and the dtypes of its result are
remembered: the policy depends on the op, its arguments' dtypes and the region's dtype, never
on values or shapes.  Where they differ from the meta result's, the region cast the op's
floating arguments to one dtype (the region's, float32 or the widest), and the meta op runs
again on arguments cast so (``run_in_region``).

The graph itself needs nothing: its ops run in the caller's region, and regions the frame opens
are entered and left by graph nodes (``ctx_managers``), so the kernels cast as eager's do.  What
the trace relies on is guarded: which devices have autocast on when the frame is entered, and
the CPU region's dtype.  Only CPU regions are traced, the one device here whose policy can be
asked; a region of another device sends the frame to eager.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Optional

import torch
from torch.utils._pytree import tree_flatten, tree_map

import guards

from ..exc import Unsupported

TRACED_DEVICE = "cpu"


@dataclasses.dataclass(frozen=True)
class Region:
    """The autocast state of one device type at some point of the trace."""

    enabled: bool
    dtype: torch.dtype


class AutocastRegions:
    """The CPU autocast state as the traced program sets it: the caller's region at entry, then
    the regions the frame's ``with torch.autocast(...)`` blocks open and close."""

    def __init__(self, output):
        self.stack = [Region(torch.is_autocast_enabled(TRACED_DEVICE), torch.get_autocast_dtype(TRACED_DEVICE))]
        enabled = guards.source.autocast_enabled_devices()
        if enabled not in ("", TRACED_DEVICE):
            raise Unsupported(f"autocast is enabled for {enabled} (only a CPU autocast region is traced)")
        if self.stack[0].enabled:
            output.add_guard(guards.torch_state_match("autocast_enabled_devices()"))
            output.add_guard(guards.torch_state_match("torch.get_autocast_dtype('cpu')"))
        self.output = output

    @property
    def current(self) -> Region:
        return self.stack[-1]

    def enter(self, device_type: str, enabled: bool, dtype: Optional[torch.dtype]) -> None:
        """A ``with torch.autocast(device_type, dtype, enabled)`` block begins."""
        if device_type != TRACED_DEVICE:
            if enabled:
                raise Unsupported(f"torch.autocast({device_type!r}) inside the traced code (only CPU regions are traced)")
            self.stack.append(self.current)
            return
        if dtype is None:              # the region's dtype is the device's setting when it is made
            self.output.add_guard(guards.torch_state_match("torch.get_autocast_dtype('cpu')"))
            dtype = torch.get_autocast_dtype(TRACED_DEVICE)
        self.stack.append(Region(bool(enabled), dtype) if enabled else Region(False, self.current.dtype))

    def leave(self) -> None:
        self.stack.pop()

    def is_enabled(self, device_type: str) -> bool:
        """What ``torch.is_autocast_enabled(device_type)`` answers here (other devices: off, as
        the entry guard requires)."""
        return device_type == TRACED_DEVICE and self.current.enabled


_result_dtypes: dict = {}     # (op, argument signature, region dtype) -> the result's dtypes


def run_in_region(regions: AutocastRegions, key: tuple, fn, args, kwargs, device, run_meta: Callable) -> tuple:
    """``(example, dtype)``: the op's meta result as the current region makes it, and the dtype
    the region cast its floating arguments to (None when it cast nothing).  ``run_meta(args,
    kwargs)`` computes a meta result; outside a region, or for an op not on the CPU, that is all."""
    region = regions.current if regions is not None else None
    if region is None or not region.enabled or device is None or torch.device(device).type != TRACED_DEVICE \
            or not any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in tree_flatten((args, kwargs))[0]):
        return run_meta(args, kwargs), None   # (a region casts floating tensors only)
    dtypes = _dtypes_in_region(key, fn, args, kwargs, region.dtype)
    failure = None
    try:
        example = run_meta(args, kwargs)
        if _dtypes_of(example) == dtypes:
            return example, None
    except Unsupported as error:        # e.g. a kernel the uncast dtype lacks (cdist of bfloat16)
        failure = error
    # The region cast the floating arguments to one dtype (the region's, float32, or the widest
    # of them), which its result has: run the meta op on arguments cast so.
    target = next((d for d in dtypes if d is not None and d.is_floating_point), None)
    if target is None:
        raise failure or Unsupported(f"{_name(fn)} in an autocast region: its result's dtypes differ "
                                     "without a floating one")
    cast = functools.partial(tree_map, lambda t: t.to(target) if isinstance(t, torch.Tensor) and t.is_floating_point() else t)
    example = run_meta(cast(list(args)), cast(dict(kwargs)))
    if _dtypes_of(example) != dtypes:
        raise Unsupported(f"{_name(fn)} in an autocast region: its arguments cast to {target} do not give "
                          f"the dtypes {dtypes} eager's region gives")
    return example, target


def _dtypes_of(value) -> list:
    return [t.dtype if isinstance(t, torch.Tensor) else None for t in tree_flatten(value)[0]]


def _dtypes_in_region(key: tuple, fn, args, kwargs, dtype: torch.dtype) -> list:
    signature = _signature((args, kwargs))
    cache_key = (key, signature, dtype) if signature is not None else None
    if cache_key is not None and cache_key in _result_dtypes:
        return _result_dtypes[cache_key]

    error = None
    for fill in (0, 1):               # zeros are indices in range; ones, divisors that are not 0
        def on_cpu(value):
            if isinstance(value, torch.Tensor) and value.is_meta:
                return torch.full(value.shape, fill, dtype=value.dtype)
            return value

        try:
            cpu_args, cpu_kwargs = tree_map(on_cpu, (list(args), dict(kwargs)))
            with torch.random.fork_rng(devices=[]), torch._C.DisableTorchFunction(), torch.no_grad(), \
                    torch.autocast(TRACED_DEVICE, dtype=dtype):
                result = fn(*cpu_args, **cpu_kwargs)
            break
        except Exception as failure:   # noqa: BLE001 - the next fill, then Unsupported
            error = failure
    else:
        raise Unsupported(f"{_name(fn)} in an autocast region: its dtypes could not be learned "
                          f"({type(error).__name__}: {error})") from error
    dtypes = _dtypes_of(result)
    if cache_key is not None:
        _result_dtypes[cache_key] = dtypes
    return dtypes


def _signature(value) -> Optional[tuple]:
    """What the policy may depend on: each tensor's dtype, every other argument as it is; None
    when some argument cannot be a dict key."""
    leaves, spec = tree_flatten(value)
    parts = tuple((torch.Tensor, leaf.dtype) if isinstance(leaf, torch.Tensor) else (type(leaf), leaf) for leaf in leaves)
    try:
        hash(parts)
    except TypeError:
        return None
    return (str(spec), parts)


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
