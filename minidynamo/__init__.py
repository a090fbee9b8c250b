"""minidynamo: capture PyTorch programs from Python bytecode, guard them, replay them compiled.

    import minidynamo

    @minidynamo.optimize("torchxla_trace_once")
    def f(x, y):
        return (x @ y).relu() + 1

The pipeline, one module each:
    _eval_frame.c (PEP 523 hook, per-code caches) -> convert_frame (the miss path)
    -> tracer (symbolic bytecode interpreter -> torch.fx graph + guards)
    -> backends (eager, xla_bridge's) -> guards (generated guard functions) -> cache entry
"""

import sys

if sys.version_info[:2] != (3, 11):
    raise ImportError(
        f"minidynamo supports CPython 3.11 only (its frame hook uses 3.11's internal frame layout); "
        f"this is Python {sys.version_info.major}.{sys.version_info.minor}"
    )
if sys.implementation.name != "cpython":
    raise ImportError(f"minidynamo needs CPython 3.11, not {sys.implementation.name}")

from . import config  # noqa: E402
from .backends import list_backends, lookup_backend, register_backend  # noqa: E402
from .counting import counters  # noqa: E402
from .eval_frame import OptimizedModule, cache_entries, disable, optimize, reset  # noqa: E402
from .exc import BackendCompilerFailed, BackendOutputMismatch, MinidynamoError, Unsupported, UnknownBackend  # noqa: E402
from .explain import ExplainOutput, explain  # noqa: E402

__all__ = [
    "optimize", "disable", "reset", "explain", "ExplainOutput", "config", "counters", "cache_entries",
    "register_backend", "list_backends", "lookup_backend", "OptimizedModule",
    "Unsupported", "BackendCompilerFailed", "BackendOutputMismatch", "MinidynamoError", "UnknownBackend",
]
