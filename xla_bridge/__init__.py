"""XLA backends for minidynamo: run a captured ``fx.GraphModule`` on a PyTorch/XLA device.

    import xla_bridge
    compiled = xla_bridge.torchxla_trace_once(gm, example_inputs)   # or torchxla_trivial
    compiled(*inputs)                                               # returns what gm returns

- ``torchxla_trivial`` runs the graph lazily on the device on every call, then syncs: the
  lazy tensor runtime traces it again each time (the baseline the next one improves on).
- ``torchxla_trace_once`` traces the graph once, compiles it, and replays the compiled XLA
  graph by its hash (``_run_cached_graph``): later calls do no tracing at all. Graphs with an
  op XLA cannot lower are split around it (or run eagerly, with the reason recorded).

Host (CPU) inputs are moved to the device and outputs moved back; inputs already on the device
are used as they are. Weights (graph inputs or module state) keep their device copy while the
same tensor comes back with the same ``_version``.

Seeing what happened:

- ``xla_bridge.counters``: ``compiles``, ``replays``, ``traces``, ``retraces``, ``fallbacks``,
  ``partitions`` and ``reasons`` (one line per retrace/fallback/partition);
  ``xla_bridge.reset_counters()``.
- ``with xla_bridge.phase_timer() as t: compiled(x)`` then ``t.totals`` -> {phase: seconds}
  and ``t.counts`` -> {phase: calls}, phases: "transfer_in" (host->device, input syncs),
  "trace" (trivial's lazy trace), "hash_lookup_dispatch" (``_run_cached_graph`` for trace_once,
  the sync's hash/cache lookup and launch for trivial), "execute" (waiting for the device),
  "transfer_out" (device->host, write-back of in-place updates). The timer waits for the device
  between phases, so timed calls are slightly slower; with no timer active the call path only
  checks one global.

Importing this package is cheap: torch_xla (which imports torch._dynamo) is imported on the
first backend call.

Limits, on purpose: autograd is not carried through the device (a call made with grad mode on
and a tensor that requires grad runs eagerly); input shapes and dtypes must match the example
inputs (minidynamo's guards ensure it); a host tensor changed without bumping ``_version``
(through ``.data`` or numpy) keeps its stale device copy; an output that is a view of an input
comes back as a new tensor, not a view.

Modules: ``backends`` (the two entry points, host side), ``programs`` (what runs on the
device), ``lazy_graph`` (capture and replay of one graph), ``partition`` (ops without an XLA
lowering), ``lifting`` (module state as inputs), ``device`` (torch_xla access, transfers).
"""

from .counters import counters, reset_counters
from .timing import phase_timer


def torchxla_trivial(gm, example_inputs):
    from .backends import torchxla_trivial as backend
    return backend(gm, example_inputs)


def torchxla_trace_once(gm, example_inputs):
    from .backends import torchxla_trace_once as backend
    return backend(gm, example_inputs)


__all__ = ["torchxla_trivial", "torchxla_trace_once", "counters", "reset_counters", "phase_timer"]
