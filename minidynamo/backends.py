"""The backend registry: a backend turns a captured graph into something to call.

    backend(gm: torch.fx.GraphModule, example_inputs: list) -> callable(*inputs)

The callable returns what ``gm`` returns. Backends are looked up by name; the XLA ones live in
the lower layer ``xla_bridge`` and are imported only when first asked for, so ``import
minidynamo`` stays light.
"""

from __future__ import annotations

import importlib
from typing import Callable, Dict

import torch

from .exc import BackendOutputMismatch, UnknownBackend

Backend = Callable
_registry: Dict[str, Backend] = {}
_built_in: set = set()      # names a user's registration may not take (filled below)
# name -> "module:function", imported on first lookup
_lazy: Dict[str, str] = {
    "torchxla_trivial": "xla_bridge:torchxla_trivial",
    "torchxla_trace_once": "xla_bridge:torchxla_trace_once",
}


def register_backend(name_or_fn=None, *, name: str | None = None):
    """Register a backend: ``@register_backend`` or ``@register_backend("name")``."""

    def register(fn: Backend, backend_name: str | None) -> Backend:
        if not callable(fn):
            raise TypeError(f"a backend must be callable, got {type(fn).__name__}")
        key = backend_name or fn.__name__
        if key in _built_in:
            raise ValueError(f"backend name {key!r} is built in and cannot be replaced; "
                             "register yours under another name")
        _registry[key] = fn    # a name of the user's own is replaced (re-running a notebook cell)
        return fn

    if callable(name_or_fn):
        return register(name_or_fn, name)
    if name_or_fn is not None and not isinstance(name_or_fn, str):
        raise TypeError(f"register_backend takes a name or a function, got {type(name_or_fn).__name__}")
    return lambda fn: register(fn, name_or_fn or name)


def list_backends() -> list[str]:
    return sorted(set(_registry) | set(_lazy))


def lookup_backend(backend) -> Backend:
    """A backend from a name or a callable; unknown names raise ``UnknownBackend``."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    if backend not in _registry and backend in _lazy:
        module_name, attr = _lazy[backend].split(":")
        _registry[backend] = getattr(importlib.import_module(module_name), attr)
    if backend not in _registry:
        raise UnknownBackend(f"unknown backend {backend!r}; known: {', '.join(list_backends())}")
    return _registry[backend]


def is_built_in(backend) -> bool:
    """A backend this package provides (its compiled graphs are trusted to return what the graph
    returns; a user's are checked: ``checking_outputs``)."""
    return any(backend is _registry.get(name) for name in _built_in)


def checking_outputs(compiled_graph, backend_name: str, expected: list):
    """A user backend's compiled graph, whose results are checked to be what the graph returns:
    a tuple or list of ``len(expected)`` values, each a tensor of the ``(dtype, shape)`` given
    (None: any value).  A wrong one raises ``BackendOutputMismatch`` naming the backend, not an
    error from deep inside the output's rebuilding."""
    def mismatch(what):
        return BackendOutputMismatch(f"backend {backend_name!r}: its compiled graph returned {what}")

    def run(*inputs):
        out = compiled_graph(*inputs)
        if type(out) not in (tuple, list) or len(out) != len(expected):
            what = f"a {type(out).__name__} of {len(out)}" if type(out) in (tuple, list) else f"an object of type {type(out).__name__}"
            raise mismatch(f"{what}, where the graph returns a tuple of {len(expected)}")
        for i, (value, spec) in enumerate(zip(out, expected)):
            if spec is None:
                continue
            if not isinstance(value, torch.Tensor):
                raise mismatch(f"a {type(value).__name__} as output {i}, where the graph returns a tensor")
            if (value.dtype, tuple(value.shape)) != spec:
                raise mismatch(f"a {value.dtype} tensor of shape {tuple(value.shape)} as output {i}, where the "
                               f"graph returns {spec[0]} of shape {spec[1]}")
        return out

    return run


@register_backend
def eager(gm, example_inputs):
    """Run the captured graph with PyTorch itself: the reference for every other backend."""
    return gm.forward


_built_in.update(_registry, _lazy)     # registered above by this module: never replaced
