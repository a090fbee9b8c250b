"""Sources: how to re-read a value from a frame that is about to run.

A source is a small hashable expression tree.  Roots name where a frame gets values
(its arguments, its globals, the builtins, its function's closure cells, global torch
state); ``AttrSource`` and ``ItemSource`` extend a chain one step.  ``name()`` is the
readable form users see in guards and logs::

    AttrSource(AttrSource(LocalSource("self"), "layer1"), "weight").name()
    # -> "L['self'].layer1.weight"

Sources know nothing about guards; ``codegen`` decides how each one is read fast.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Hashable, Optional


@dataclasses.dataclass(frozen=True)
class Source:
    """Base class; every source is a frozen (hashable, comparable) dataclass."""

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
class LocalSource(Source):
    """An argument slot of the frame, ``L['x']`` (only arguments are bound at frame start)."""

    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def read(self, frame: FrameValues) -> Any:
        return frame.locals[self.local_name]


@dataclasses.dataclass(frozen=True)
class GlobalSource(Source):
    """A name in the frame's module globals, ``G['torch']``."""

    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def read(self, frame: FrameValues) -> Any:
        return frame.f_globals[self.global_name]


@dataclasses.dataclass(frozen=True)
class BuiltinSource(Source):
    """A name in the frame's builtins, ``B['len']``, as the frame sees it: a global of the same
    name shadows it (so a guard on it also fails when such a global appears)."""

    builtin_name: str

    def name(self) -> str:
        return f"B[{self.builtin_name!r}]"

    def read(self, frame: FrameValues) -> Any:
        shadow = frame.func.__globals__
        return shadow[self.builtin_name] if self.builtin_name in shadow else frame.f_builtins[self.builtin_name]


@dataclasses.dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of cell ``func.__closure__[index]``: the free variable ``var_name``."""

    index: int
    var_name: str

    def name(self) -> str:
        return f"C[{self.var_name!r}]"

    def read(self, frame: FrameValues) -> Any:
        return frame.func.__closure__[self.index].cell_contents


@dataclasses.dataclass(frozen=True)
class GradModeSource(Source):
    """Global autograd state, ``torch.is_grad_enabled()`` (not a frame value, but guarded)."""

    def name(self) -> str:
        return "torch.is_grad_enabled()"

    def read(self, frame: FrameValues) -> Any:
        import torch

        return torch.is_grad_enabled()


@dataclasses.dataclass(frozen=True)
class AutocastSource(Source):
    """Global autocast state: whether autocast is on for any device (a graph traced without
    autocast computes in other dtypes than the same ops run under it)."""

    def name(self) -> str:
        return "torch autocast"

    def read(self, frame: FrameValues) -> Any:
        import torch

        return torch._C._is_any_autocast_enabled()


@dataclasses.dataclass(frozen=True)
class GlobalModuleHooksSource(Source):
    """The global nn.Module hook dicts (``register_module_forward_hook`` and friends)."""

    def name(self) -> str:
        return "torch.nn.modules.module global hooks"

    def read(self, frame: FrameValues) -> Any:
        from . import module_facts

        return module_facts.global_hook_dicts()


@dataclasses.dataclass(frozen=True)
class AttrSource(Source):
    """``base.attr``."""

    base_source: Source
    attr: str

    @property
    def base(self) -> Source:
        return self.base_source

    def name(self) -> str:
        return f"{self.base_source.name()}.{self.attr}"

    def read(self, frame: FrameValues) -> Any:
        return getattr(self.base_source.read(frame), self.attr)


@dataclasses.dataclass(frozen=True)
class ItemSource(Source):
    """``base[key]`` for a constant key (int, str, or another hashable constant)."""

    base_source: Source
    key: Hashable

    @property
    def base(self) -> Source:
        return self.base_source

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
