"""XLA backends for minidynamo: run a captured ``fx.GraphModule`` on a PyTorch/XLA device.

    import xla_bridge
    compiled = xla_bridge.torchxla_trace_once(gm, example_inputs)   # or torchxla_trivial
    compiled(*inputs)                                               # returns what gm returns

- ``torchxla_trivial`` runs the graph lazily on the device on every call, then syncs: the
  lazy tensor runtime traces it again each time (the baseline the next one improves on).
- ``torchxla_trace_once`` traces the graph once, compiles it, and replays the compiled XLA
  graph by its hash (``_run_cached_graph``): later calls do no tracing at all. An op XLA
  cannot lower for its arguments is traced as its PyTorch decomposition where that lowers
  (``decompose``); graphs with an op that still cannot be lowered are split around it (or run
  eagerly, with the reason recorded). The
  common call (every tensor argument already on the device, nothing written back) runs in C++
  with no Python frame (``replay_path``, ``_replay.cpp``); every other call, and every call
  without the extension, takes the Python path, which is the reference. minidynamo's cache
  entry around such a graph runs in C++ too (``Replay.cache_entry_fn``: read the inputs, replay,
  shape the output), and skips the input checks the entry's guard has just made.

Host data and the device: every host (CPU) tensor the graph reads, data input or weight
(parameter, buffer, tensor attribute), is copied to the device on every call, in one batched
transfer. A host tensor can change without its ``_version`` moving (a loader refilling its
buffer through numpy, ``m.weight.data.fill_(...)``, a numpy view of a weight), so no device
copy of host data is trusted across calls. Tensors already on the device are used as they are:
keep the model on the XLA device (``model.to(xla_device)``) and only the data inputs move, as
in plain PyTorch/XLA; that is the fast path. Outputs go back to the device the inputs came from.
Cost of a host-resident model: one host->device copy of all its weights per call (resnet18,
~45 MB: see ``bench/README.md`` for the measured numbers). The opt-in
``xla_bridge.config.cache_host_weights = True`` (or ``cache_host_weights=True`` per backend
call) keeps host weights' device copies while the same tensor comes back with the same
``_version``; its risk, stated in ``config``: a weight changed without bumping the version is
served stale. Data inputs are never cached.

A graph captured from a host program names the host as its device (``torch.arange(n,
device=x.device)``, ``mask.to(x.device)``): while the bridge runs it, that device means the
device the arguments are on (``device_redirect``), so such graphs stay one device graph.

Memory shared with the caller is kept as eager PyTorch has it (``aliasing``): an output that
is a view of a host argument is returned as a view of the caller's tensor; one viewing a
device argument is made again by the graph's own view ops on the caller's tensor
(``device_views``); an output viewing an earlier output is that view of it, on the host or
the device (there made again the same way); the same tensor in two positions gets one device copy; an in-place update of a
device argument that is a view reaches its base. What cannot be replayed soundly runs eagerly,
with the reason recorded: a call where an argument the graph writes in place shares memory
with another argument, two outputs sharing memory where the later is no view of the first.

An out-of-range index tensor (``x[torch.tensor([7])]`` on 3 rows, ``gather``, ``embedding``,
...) is clamped by XLA; with host tensors the graph also computes whether every index it read
was in range, and if not the call runs eagerly and raises eager's ``IndexError``
(``index_check``). Programs on device tensors keep XLA's clamping. The same flag covers an
integer divisor holding 0 and a NaN reaching an op whose lowering treats NaN otherwise
(``argmax``, ``max(dim)``, ``cummax``, ``threshold``); XLA:CPU's min and max are told to keep NaN,
and 16-bit float ops to round every result as eager's do (``device._EAGER_FAITHFUL_FLAGS``), when
the bridge starts the runtime.

Random ops follow ``torch.manual_seed`` as eager's do (``host_random``): while a graph is traced
on the device, each random op's draw is made on the host generator as eager makes it, and
reaches the device as data; trace_once makes the draws again, in order, on every replay. The
same seed gives eager's dropout masks, and the generator ends where eager's does. A random op
whose eager kernel draws according to tensor values (``multinomial``, ``bernoulli`` of a tensor,
``rrelu`` in training) makes its graph run eagerly. A graph or call run eagerly on device
tensors (for any reason) makes its random ops on the host as well (``EagerHostDraws``).

A pointwise op gets its operands in the dtype eager computes it in (``dtype_check``: torch_xla
added f32[2,3] + f64[] in f64), and ops computed in another precision than eager's CPU kernels
(16-bit reductions, integer division, float to integer conversions) are traced as eager
computes them (``eager_precision``); so are the statistics of layer, group, batch and instance
norm, in two passes where XLA's batch norm cancels (``eager_norms``).

Where XLA and eager differ otherwise (plain PyTorch/XLA behaves the same; not corrected here):
denormals flush to zero on XLA:CPU. A graph that changes an argument's metadata in place (shape, strides, storage offset,
storage, ``requires_grad``: ``x.t_()``, ``x.unsqueeze_(0)``, ``x.resize_(n)``, ``x.set_(y)``,
``x.requires_grad_()``) runs eagerly with the reason (``aliasing.InputMetadataMutated``): the
device hands back data only. An output that eager lays out non-compactly (a view of a tensor
made in the graph, ``(x * 2).t()``, ``y.relu()[1:]``; an elementwise result of a permuted input)
is laid out the same way on the host (``aliasing.EagerLayout``: one host copy).

Seeing what happened:

- ``xla_bridge.counters``: ``compiles``, ``replays``, ``traces``, ``retraces``, ``fallbacks``,
  ``partitions`` and ``reasons`` (one line per retrace/fallback/partition);
  ``xla_bridge.reset_counters()``.
- ``MINIDYNAMO_LOG=xla``: graph hashes (hex), the lazy IR and input plan of each captured
  graph, retraces and graph switches (``log``).
- ``with xla_bridge.phase_timer() as t: compiled(x)`` then ``t.totals`` -> {phase: seconds}
  and ``t.counts`` -> {phase: calls}, phases: "transfer_in" (host->device, input syncs),
  "trace" (trivial's lazy trace), "hash_lookup_dispatch" (``_run_cached_graph`` for trace_once,
  the sync's hash/cache lookup and launch for trivial), "execute" (waiting for the device),
  "transfer_out" (device->host, write-back of in-place updates). The timer waits for the device
  between phases, so timed calls are slightly slower (and take the Python path); with no timer
  active the call path only checks one global.

Importing this package is cheap: torch_xla (which imports torch._dynamo) is imported on the
first backend call.

Training: a call in grad mode with a tensor that requires grad. ``torchxla_trace_once`` records
the graph's forward and backward once as one aten graph on meta tensors (``joint_graph``; no
``torch._dynamo``, no AOT autograd), splits it (save what backward reads), and replays the
forward graph and the backward graph by hash inside one ``autograd.Function`` (``training``):
``.grad`` accumulates on leaves, frozen parameters get none, non-leaf inputs pass grads
upstream, batch norm's running stats are written back, dropout draws eager's masks (from the
host generator) and the backward uses the forward's. A backward with ``create_graph=True``
recomputes the call eagerly for grads with a history (``double_backward``). ``torchxla_trivial`` runs the graph lazily with autograd on
(traced every step). Import torch_xla (or make the first backend call) before the process runs
its first backward: the autograd engine sizes its per-device queues then, once.

Modules: ``backends`` (the two entry points, host side), ``config`` (``cache_host_weights``),
``dead_code`` (ops nothing reads, left out of a program on device tensors, as lazy mode leaves them),
``host_inputs`` (arguments to device copies, per call), ``aliasing`` (outputs viewing arguments, in-place writes, found on meta
tensors), ``device_views`` (views of device arguments and outputs, made again), ``programs`` (what runs on the device), ``lazy_graph`` (capture and replay of one
graph), ``partition`` (ops without an XLA lowering), ``lifting`` (module state as inputs),
``device`` (torch_xla access, transfers), ``aten_recorder`` (aten ops on meta tensors into an
fx graph), ``joint_graph`` (forward + backward, partitioned), ``eager_saved`` (what eager's
autograd nodes hold, which a backward's version checks watch), ``training`` (the grad-mode paths), ``double_backward`` (create_graph=True by recomputing the call),
``replay_path`` (when a call can take the C++ replay, and its recipe), ``host_random`` (random
ops drawn on the host generator, as eager draws them), ``timing``, ``log``.
"""

from . import config
from .counters import counters, reset_counters
from .timing import phase_timer


def torchxla_trivial(gm, example_inputs, **options):
    """``options``: ``cache_host_weights`` (see ``xla_bridge.config``)."""
    from .backends import torchxla_trivial as backend
    return backend(gm, example_inputs, **options)


def torchxla_trace_once(gm, example_inputs, **options):
    """``options``: ``cache_host_weights`` (see ``xla_bridge.config``)."""
    from .backends import torchxla_trace_once as backend
    return backend(gm, example_inputs, **options)


__all__ = ["torchxla_trivial", "torchxla_trace_once", "config", "counters", "reset_counters",
           "phase_timer"]
