"""Sources: how to re-read a value from a frame that is about to run.

A source is a small hashable expression tree.  Roots name where a frame gets values
(its arguments, its globals, the builtins, its function's closure cells, global torch
state); a ``DerivedSource`` (``AttrSource``, ``ItemSource``, ...) extends a chain one step.
``name()`` is the readable form users see in guards and logs::

    AttrSource(AttrSource(LocalSource("self"), "layer1"), "weight").name()
    # -> "L['self'].layer1.weight"

Sources know nothing about guards; ``codegen`` decides how each one is read fast.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import sys
import types
from typing import Any, Hashable, Optional


def frozen_source(cls):
    """``@dataclasses.dataclass(frozen=True)``, with each object's hash computed once: sources are
    hashed all the time (guard planning keys its tables by them) and a chain's hash walks the
    whole chain.  (The cached hash is left out of a pickle: str hashes differ between processes.)"""
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields_hash = cls.__hash__

    def __hash__(self):
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = fields_hash(self)
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self):
        return {name: value for name, value in self.__dict__.items() if name != "_hash"}

    cls.__hash__, cls.__getstate__ = __hash__, __getstate__
    return cls


@dataclasses.dataclass(frozen=True)
class Source:
    """Base class; every source is a frozen (hashable, comparable) dataclass (``frozen_source``)."""

    @property
    def base(self) -> Optional["Source"]:
        """The source this one is read from, or None for a root."""
        return None

    def name(self) -> str:
        raise NotImplementedError

    def read(self, frame: "FrameValues") -> Any:
        """Read the value the plain Python way (slow path: explanations and tests)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


@dataclasses.dataclass(frozen=True)
class FrameValues:
    """What a source may read from: the function, its arguments by name, its namespaces."""

    func: Any
    locals: dict
    f_globals: dict
    f_builtins: dict


@dataclasses.dataclass(frozen=True)
class DerivedSource(Source):
    """A source read from another one, ``base_source`` (an attribute, an item, a method's answer):
    the links of a chain.  Roots (arguments, globals, cells, global state) have no base."""

    base_source: Source

    @property
    def base(self) -> Source:
        return self.base_source


@frozen_source
class LocalSource(Source):
    """An argument slot of the frame, ``L['x']`` (only arguments are bound at frame start)."""

    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def read(self, frame: FrameValues) -> Any:
        return frame.locals[self.local_name]


@frozen_source
class GlobalSource(Source):
    """A name in the frame's module globals, ``G['torch']``."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def read(self, frame: FrameValues) -> Any:
        return frame.f_globals[self.global_name]


@frozen_source
class BuiltinSource(Source):
    """A name in the frame's builtins, ``B['len']``, as the frame sees it: a global of the same
    name shadows it (so a guard on it also fails when such a global appears)."""

    builtin_name: str
    # the globals of the (inlined) function that reads the name, when it is not the frame's
    namespace: Optional["NamespaceSource"] = None

    def name(self) -> str:
        where = f" in {self.namespace.name()}" if self.namespace is not None else ""
        return f"B[{self.builtin_name!r}]{where}"

    def read(self, frame: FrameValues) -> Any:
        shadow = self.namespace.namespace if self.namespace is not None else frame.func.__globals__
        builtins = namespace_builtins(shadow) if self.namespace is not None else frame.f_builtins
        return shadow[self.builtin_name] if self.builtin_name in shadow else builtins[self.builtin_name]


def namespace_builtins(namespace: dict) -> dict:
    """The builtins a function whose globals are ``namespace`` sees (as CPython picks them)."""
    found = namespace.get("__builtins__", builtins)
    return found.__dict__ if isinstance(found, types.ModuleType) else found


@frozen_source
class ClosureSource(Source):
    """The contents of cell ``func.__closure__[index]``: the free variable ``var_name``."""

    index: int
    var_name: str

    def name(self) -> str:
        return f"C[{self.var_name!r}]"

    def read(self, frame: FrameValues) -> Any:
        return frame.func.__closure__[self.index].cell_contents


@frozen_source
class NamespaceSource(Source):
    """The globals dict of a function the trace inlined, as the object itself: a function's
    ``__globals__`` cannot be rebound, so every function of one module shares this source
    (its entries are still read, and guarded, on every call)."""

    module: str
    ident: int
    namespace: dict = dataclasses.field(compare=False, hash=False, repr=False)

    @staticmethod
    def of(namespace: dict) -> "NamespaceSource":
        return NamespaceSource(str(namespace.get("__name__", "?")), id(namespace), namespace)

    def name(self) -> str:
        return f"globals of {self.module}"

    def read(self, frame: FrameValues) -> Any:
        return self.namespace


@frozen_source
class HeldSource(Source):
    """A long-lived object the trace met without a way to re-read it (an enum member made by
    ``E(1)`` or found by iterating ``E``), held as the object itself, so that what can change
    *on* it (its fields) can still be read, and guarded, on every call."""

    label: str
    ident: int
    obj: Any = dataclasses.field(compare=False, hash=False, repr=False)

    @staticmethod
    def of(obj: Any) -> "HeldSource":
        return HeldSource(f"{type(obj).__qualname__} object", id(obj), obj)

    def name(self) -> str:
        return f"held {self.label} at {self.ident:#x}"

    def read(self, frame: FrameValues) -> Any:
        return self.obj


@frozen_source
class ClassSource(Source):
    """A class an answer was read from (``isinstance(o, K)`` reads ``type(o)`` and ``K``), held as
    the object itself: which class it is was settled by another guard (``type(L['o']) is C``) or
    by the program's constant, so only what can change on the class itself is guarded."""

    qualname: str
    ident: int
    cls: type = dataclasses.field(compare=False, hash=False, repr=False)

    @staticmethod
    def of(cls: type) -> "ClassSource":
        qualname = type.__dict__["__qualname__"].__get__(cls, type)   # never a metaclass's code
        return ClassSource(str(qualname), id(cls), cls)

    def name(self) -> str:
        return f"class {self.qualname}"

    def read(self, frame: FrameValues) -> Any:
        return self.cls


@frozen_source
class GradModeSource(Source):
    """Global autograd state, ``torch.is_grad_enabled()`` (not a frame value, but guarded)."""

    def name(self) -> str:
        return "torch.is_grad_enabled()"

    def read(self, frame: FrameValues) -> Any:
        import torch

        return torch.is_grad_enabled()


@frozen_source
class AutocastSource(Source):
    """Global autocast state: whether autocast is on for any device (a graph traced without
    autocast computes in other dtypes than the same ops run under it)."""

    def name(self) -> str:
        return "torch autocast"

    def read(self, frame: FrameValues) -> Any:
        import torch

        return torch._C._is_any_autocast_enabled()


@frozen_source
class TorchStateSource(Source):
    """Global torch state the trace read or relied on, by the name of the torch function that
    reports it: ``torch.get_default_dtype()``, ``torch.is_inference_mode_enabled()``, ..."""

    function: str

    def name(self) -> str:
        if self.function in QUERY_READERS:
            return self.function
        return f"{self.function}()" if self.function in PROCESS_STATE_READERS else f"torch.{self.function}()"

    def read(self, frame: FrameValues) -> Any:
        return torch_state_function(self.function)()


def exception_being_handled() -> bool:
    """Whether the frame's caller is handling an exception (``sys.exc_info()``): a handler
    the trace ran pushed what it saw as the exception handled before (none), and an exception
    raised inside it took that as its ``__context__``."""
    return sys.exc_info()[1] is not None


# Process state that is not torch's, read like it (no argument; a bool).
PROCESS_STATE_READERS = {"exception_being_handled": exception_being_handled}

AUTOCAST_DEVICE_TYPES = ("cpu", "cuda", "xpu", "xla", "mps", "hpu", "ipu")


def autocast_enabled_devices() -> str:
    """The device types autocast is on for, comma-joined ('' when none)."""
    import torch

    if not torch._C._is_any_autocast_enabled():
        return ""
    return ",".join(device for device in AUTOCAST_DEVICE_TYPES if torch.is_autocast_enabled(device))


def _cpu_autocast_dtype():
    import torch

    return torch.get_autocast_dtype("cpu")


# Torch state read by a query with an argument, named as the query reads.
QUERY_READERS = {"autocast_enabled_devices()": autocast_enabled_devices,
                 "torch.get_autocast_dtype('cpu')": _cpu_autocast_dtype}


def torch_state_function(name: str):
    """The torch function a ``TorchStateSource`` calls (only these: they take no argument)."""
    import torch

    if name in PROCESS_STATE_READERS:
        return PROCESS_STATE_READERS[name]
    if name in QUERY_READERS:
        return QUERY_READERS[name]
    if name not in TORCH_STATE_FUNCTIONS:
        raise ValueError(f"not a guarded torch state: {name}")
    if name == "get_default_device":
        if _CPU is None:
            _bind_default_device_readers()
        return default_device
    return functools.reduce(getattr, name.split("."), torch)


def default_device():
    """``torch.get_default_device()``, answered without its Python walk (~µs) in the common
    case: no torch function mode active (a ``DeviceContext`` is one) and no global device
    context set by ``torch.set_default_device`` means the CPU, as torch itself decides."""
    if _function_stack_length() == 0 and _device_context.__dict__.get("device_context") is None:
        return _CPU
    import torch

    return torch.get_default_device()


def _bind_default_device_readers():
    global _function_stack_length, _device_context, _CPU
    import torch

    _function_stack_length = torch._C._len_torch_function_stack
    _device_context = torch._GLOBAL_DEVICE_CONTEXT
    _CPU = torch.device("cpu")


_function_stack_length = _device_context = _CPU = None


# Paths below ``torch``; each reader takes no argument and answers a bool, dtype, device or str.
TORCH_STATE_FUNCTIONS = ("get_default_dtype", "is_inference_mode_enabled", "get_default_device",
                         "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
                         "_C._get_cublas_allow_tf32", "_C._get_cudnn_allow_tf32", "_C._get_privateuse1_backend_name",
                         "autograd._is_checkpoint_valid", "autograd._profiler_enabled",
                         "_C._get_deterministic_fill_uninitialized_memory", "_C._get_flash_sdp_enabled",
                         "_C._get_math_sdp_enabled")


@frozen_source
class CallSource(DerivedSource):
    """``base.method()`` as the class defines it (``type(x).storage_offset(x)``: an attribute on the
    instance cannot stand in), no arguments: a tensor's metadata, a set's repr, a scalar's item."""

    method: str

    def name(self) -> str:
        return f"{self.base_source.name()}.{self.method}()"

    def read(self, frame: FrameValues) -> Any:
        base = self.base_source.read(frame)
        return getattr(type(base), self.method)(base)


@frozen_source
class GlobalModuleHooksSource(Source):
    """The global nn.Module hook dicts (``register_module_forward_hook`` and friends)."""

    def name(self) -> str:
        return "torch.nn.modules.module global hooks"

    def read(self, frame: FrameValues) -> Any:
        from . import module_facts

        return module_facts.global_hook_dicts()


@frozen_source
class AttrSource(DerivedSource):
    """``base.attr``."""

    attr: str

    def name(self) -> str:
        return f"{self.base_source.name()}.{self.attr}"

    def read(self, frame: FrameValues) -> Any:
        return getattr(self.base_source.read(frame), self.attr)


@frozen_source
class GenericAttrSource(DerivedSource):
    """``object.__getattribute__(base, attr)``: what object's own lookup finds (data descriptors,
    the instance dict, the class), for an object whose class answers reads in Python (its
    ``__getattribute__``, or ``__getattr__`` for a name that goes missing).  ``base.attr`` would
    run that code inside the guard, on every call, where eager runs it only where the program reads."""

    attr: str

    def name(self) -> str:
        return f"object.__getattribute__({self.base_source.name()}, {self.attr!r})"

    def read(self, frame: FrameValues) -> Any:
        return object.__getattribute__(self.base_source.read(frame), self.attr)


@frozen_source
class ItemSource(DerivedSource):
    """``base[key]`` for a constant key (int, str, or another hashable constant)."""

    key: Hashable

    def name(self) -> str:
        return f"{self.base_source.name()}[{self.key!r}]"

    def read(self, frame: FrameValues) -> Any:
        return self.base_source.read(frame)[self.key]


def chain_of(source: Source) -> list[Source]:
    """``[root, ..., source]``: every prefix of the chain, root first."""
    chain = []
    node: Optional[Source] = source
    while node is not None:
        chain.append(node)
        node = node.base
    return chain[::-1]


@dataclasses.dataclass(frozen=True, eq=False)
class FrameInfo:
    """What codegen needs to know about the frame: argument names, in slot order.

    ``f_globals`` / ``f_builtins`` are the trace-time namespaces, kept for reference:
    generated code reads ``func.__globals__`` at run time, since functions that share
    one code object (and so one cache) may have different globals.
    """

    arg_names: tuple[str, ...]
    f_globals: dict
    f_builtins: dict
