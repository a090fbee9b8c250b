"""The XLA device seen from the host: torch_xla imported on first use, transfers, waits.

torch_xla is imported only here and only when a backend first runs: importing it pulls in
torch._dynamo, which ``import minidynamo`` must not.
"""

import contextlib
import logging
import os
import sys
import threading

import torch

from .generator_lock import cpu_state_kept

_torch_xla = None

# XLA flags that make the compiler compute as eager's kernels do, read when the runtime starts
# (a process that started it first keeps its own settings; ``reductions_propagate_nan`` says
# whether the first one holds):
# - XLA:CPU's min and max drop a NaN unless told not to (``x.max()`` of ``[1, nan]`` gives 1,
#   eager gives nan);
# - XLA keeps a chain of 16-bit float ops in float32 and rounds once at the end, unless told not
#   to ("excess precision"): eager rounds every op's result (``x.bfloat16().sin().float()`` at 1
#   is 0.83984375 in eager, 0.84147 with the excess precision), which a later conversion to an
#   integer or a comparison then shows whole.
_NAN_PROPAGATING_MIN_MAX = "--xla_cpu_enable_fast_min_max=false"
_EAGER_FAITHFUL_FLAGS = {"xla_cpu_enable_fast_min_max": _NAN_PROPAGATING_MIN_MAX,
                         "xla_allow_excess_precision": "--xla_allow_excess_precision=false"}


def ask_for_eager_faithful_flags() -> None:
    """Add the flags above to ``XLA_FLAGS`` (a flag the program set itself is left as it is)."""
    flags = os.environ.get("XLA_FLAGS", "")
    for name, flag in _EAGER_FAITHFUL_FLAGS.items():
        if name not in flags:
            flags = f"{flags} {flag}".strip()
    os.environ["XLA_FLAGS"] = flags


# Importing torch_xla replaces names in torch's own namespaces (``nn.GRU`` becomes a scan-based
# GRU that fails on CPU tensors, ``nn.utils.clip_grad_norm_`` its own version): a user's eager
# code would change behind their back when a backend first runs. When the bridge is the one
# that imports torch_xla, it puts torch's names back.
_TORCH_NAMESPACES = (torch, torch.nn, torch.nn.functional, torch.nn.utils)


# One device step at a time, process-wide: torch_xla's lazy tensors are per device, not per
# thread, and ``sync()`` runs every pending tensor of the device, another thread's half-traced
# or half-transferred ones included (threads calling one compiled function crashed the process).
# Re-entrant: a hook inside a step may call another compiled function.
DEVICE_STEP = threading.RLock()


def torch_xla():
    """The torch_xla module, imported on first use (torch's names left as they were, and the
    program's root logger: one of torch_xla's modules calls ``logging.basicConfig()``, after
    which the program's own ``basicConfig(level=...)`` would do nothing)."""
    global _torch_xla
    if _torch_xla is None:
        ask_for_eager_faithful_flags()
        ours = "torch_xla" not in sys.modules
        before = [dict(vars(namespace)) for namespace in _TORCH_NAMESPACES]
        root = logging.getLogger()
        root_before = (list(root.handlers), root.level)
        import torch_xla as module
        import torch_xla.core.xla_model  # noqa: F401  (registers the device helpers)
        if ours:
            for namespace, names in zip(_TORCH_NAMESPACES, before):
                for name, value in names.items():
                    if vars(namespace).get(name) is not value:
                        setattr(namespace, name, value)
            root.handlers[:] = root_before[0]
            root.setLevel(root_before[1])
        _torch_xla = module
    return _torch_xla


def xlac():
    """torch_xla's C extension: the lazy-graph calls the bridge is built on."""
    return torch_xla()._XLAC


def xla_device() -> torch.device:
    return torch_xla().device()


def is_xla(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "xla"


_device_name = None


def run_functionally(func, args, kwargs):
    """``func(*args, **kwargs)`` from inside a Python dispatch mode, its device result made
    functional as torch_xla makes it outside one.

    torch_xla wraps every device tensor for functionalization, so that a write through a view
    reaches the base. A device tensor made while a dispatch mode is active from no device
    tensor (a factory: ``torch.zeros(.., device=xla)``, the ``empty`` inside ``torch.vander``,
    a host tensor's copy) comes out bare, and a write through its views is lost
    (``z = torch.zeros(3, 4); z[:, 1:].add_(x)`` left ``z`` zero; ``torch.vander`` gave zeros).
    Every mode of the bridge runs ops through here."""
    return functional_like_a_kernel(func(*args, **kwargs), args, kwargs)


def functional_like_a_kernel(out, args, kwargs):
    """``out``, a device tensor a mode gives as the answer to an op on ``args``, wrapped for
    functionalization when the op's own kernel would have been wrapped (see
    ``run_functionally``)."""
    if isinstance(out, torch.Tensor) and out.device.type == "xla" and not torch._is_functional_tensor(out) \
            and not any(is_xla(t) for t in torch.utils._pytree.tree_leaves((args, kwargs))):
        out = torch._to_functional_tensor(out)
    return out


def to_device(tensors: list) -> list:
    """Copy host tensors to the device in one batched transfer, each as plain device data.

    (``tensor.to(device)`` turns a 0-dim tensor holding 0 or 1 into a constant of the lazy
    graph, which would then be baked into a compiled graph instead of being one of its inputs.)
    """
    global _device_name
    if _device_name is None:
        _device_name = str(xla_device())
    try:
        return xlac()._xla_tensors_from_aten([torch.Tensor.detach(t) for t in tensors],
                                             [_device_name] * len(tensors))
    except RuntimeError:
        if any(map(torch.Tensor.is_conj, tensors)) or any(map(torch.Tensor.is_neg, tensors)):
            raise HostOnlyArgument("an argument is a lazy conjugate or negative view (conj/neg bit): "
                                   "the device holds values only") from None
        if any(map(torch.Tensor.has_names, tensors)):
            raise HostOnlyArgument("an argument has named dimensions: the device holds values only") from None
        raise


class HostOnlyArgument(RuntimeError):
    """A host tensor that is more than its values was to be copied to the device: one with a lazy
    conjugate or negative bit (``x.conj()``, ``torch._neg_view(x)``: ``view_as_real`` refuses it,
    views of it keep it) or with dimension names (eager's results carry them). torch_xla refuses
    both, and a copy of the values alone would lose what eager does with the rest, so the call
    runs eagerly (``reason``). Found by the failed transfer: a call without one pays nothing."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def device_copies(values: list) -> list:
    """Fresh device data for every tensor in ``values``, each with its own tensor id: host
    tensors copied in (one batched transfer); device tensors copied on the device, by syncing
    lazy clones (a device tensor cannot be given a second, independent handle on its data in
    place, and a round trip through the host costs two transfers of every weight)."""
    positions = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
    on_device = [i for i in positions if is_xla(values[i])]
    on_host = [i for i in positions if not is_xla(values[i])]
    copies = list(values)
    with torch.no_grad():
        clones = [torch.Tensor.detach(values[i]).clone() for i in on_device]
    if clones:
        xlac()._xla_sync_multi(clones, devices=[], wait=True, sync_xla_data=True)
        wait_device()          # the copies' execution is over before any trace starts
    for i, copy in zip(on_device, clones):
        copies[i] = copy
    if on_host:
        for i, copy in zip(on_host, to_device([torch.Tensor.detach(values[i]) for i in on_host])):
            copies[i] = copy
    return copies


def positions_sharing_data(identities: tuple) -> list:
    """Positions whose device data an earlier position holds too (one tensor passed twice, tied
    weights, a ``detach()`` of another argument), from ``data_identities``. torch_xla's graph
    hash does not say which parameters are one data: a lazy trace over such arguments is given
    the executable compiled for a graph of the same ops whose parameters were shared otherwise
    (``x.sin() + y.cos()`` for ``(a, a)`` and ``(a, b)``), so a trace must see each position's
    own data."""
    first, repeats = set(), []
    for position, identity in enumerate(identities):
        if identity is None:
            continue
        if identity[0] in first:
            repeats.append(position)
        first.add(identity[0])
    return repeats


def own_data_per_position(values: list, identities: tuple) -> tuple:
    """``values`` (a list, changed in place) with each position that shares its device data
    with an earlier one given a device copy of its own (``positions_sharing_data``: never one
    the graph writes, as such calls run eagerly), and the identities anew."""
    repeats = positions_sharing_data(identities)
    if not repeats:
        return values, identities
    for position, copy in zip(repeats, device_copies([values[p] for p in repeats])):
        values[position] = copy
    return values, data_identities(values)


def data_identities(values: list) -> tuple:
    """Per device tensor in ``values``: torch_xla's id of its IR value, its version counter and
    its shape (None for anything else). A write changes the first (a lazy in-place op gives the
    tensor a new IR value; a sync gives it new data) and an aten in-place op also the second.
    The IR value is made first: a tensor that no trace used yet has none, and reading one would
    otherwise change the id without any write."""
    tensors = [v for v in values if is_xla(v)]
    if tensors:
        xlac()._get_tensors_xla_device_data_node(tensors)     # gives each its IR value
    return tuple((xlac()._unique_id_for_ir_and_data(v), version(v), tuple(v.shape))
                 if is_xla(v) else None for v in values)


def version(tensor: torch.Tensor) -> int:
    """``tensor._version``, or 0 for an inference tensor (made under ``torch.inference_mode``),
    which has no version counter: its writes show in the other parts of an identity."""
    return 0 if tensor.is_inference() else tensor._version


def untouched(copies: list, identities: tuple):
    """``copies`` (from ``device_copies``) if none changed since ``identities`` was taken, so
    they still hold their arguments' data and another trace may use them; else None. Copying
    every weight on the device costs a compile and a pass over all of them: a first call that
    traces several times (a graph split around a CPU-fallback op) makes one set, not three."""
    return copies if data_identities(copies) == identities else None


_backward_on_device = None


def backward_on_device() -> bool:
    """Whether autograd can run backward functions on the XLA device in this process. The
    engine sizes its per-device queues once, at the first backward: one that ran before
    torch_xla was loaded (a CPU-only training step, say) leaves none for the device, and every
    later device backward fails an internal assert. Asked once, with a one-element probe (which
    is itself the first backward when none ran yet, and then sizes the queues right)."""
    global _backward_on_device
    if _backward_on_device is None:
        probe = torch.zeros(1, device=xla_device(), requires_grad=True)
        try:
            torch.autograd.grad((probe * 2).sum(), probe)
            _backward_on_device = True
        except RuntimeError:
            _backward_on_device = False
    return _backward_on_device


_reductions_propagate_nan = None


def reductions_propagate_nan() -> bool:
    """Whether the device's max and min reductions give NaN for data holding a NaN, as eager's
    do (see ``_NAN_PROPAGATING_MIN_MAX``). Asked once, with a two-element probe."""
    global _reductions_propagate_nan
    if _reductions_propagate_nan is None:
        probe = torch.tensor([1.0, float("nan")]).to(xla_device())
        _reductions_propagate_nan = bool(torch.isnan(probe.max().cpu()) and torch.isnan(probe.min().cpu()))
    return _reductions_propagate_nan


def to_host(tensors: list) -> list:
    """Copy device tensors to the CPU in one batched transfer (waits for their values)."""
    return xlac()._xla_get_cpu_tensors(tensors) if tensors else []


def materialize(tensors: list) -> None:
    """Run the pending lazy computation of device tensors so each holds plain device data.

    Only these tensors are synced, as lazy torch_xla syncs a tensor it reads (``.cpu()``), and
    without letting XLA donate buffers (``sync_xla_data=False``): a donating sync of a weight
    with a pending in-place update frees its old buffer, which another pending tensor may still
    read ("buffer ... is deleted" in a training loop without ``mark_step``). Syncing every live
    tensor, as ``mark_step`` does, avoids that too but also lowers live tensors the program never
    reads, which may not lower at all (``gelu`` of an int64 tensor: device fuzz seed 411 i137)."""
    if not tensors:
        return
    pending = [t for t, needs in zip(tensors, xlac()._check_tensor_need_materialization(tensors)) if needs]
    if pending:
        _require_typed_as_declared(pending)
        _require_lowerable(pending)
        xlac()._xla_sync_multi(pending, devices=[], wait=True, sync_xla_data=False)


class PendingInputRefused(RuntimeError):
    """A pending input the program must not sync: the call runs lazily instead (``reason``)."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class PendingUnlowerable(PendingInputRefused):
    """A pending tensor the program reads holds computation torch_xla cannot lower (``gelu``
    of an integer tensor, run at a graph break). Syncing it would fail and leave it without
    data; untouched, it stays pending, as in lazy mode, which computes it only if read."""

    def __init__(self, error: Exception):
        first_line = (str(error).splitlines() or [""])[0]
        super().__init__(f"a pending input cannot be lowered by torch_xla: {first_line[:160]}")


class PendingMistyped(PendingInputRefused):
    """A pending tensor whose lazy computation has another element type than the tensor's own
    dtype: lazy torch_xla computes ``f32 + f64 0-dim`` in f64 while the tensor says float32
    (device seed 428 i583). Synced, its data would not fit a program compiled for its dtype
    ("Executable expected parameter 0 of size 8 but got buffer with incompatible size 16", at
    execution); lazy mode reads it as torch_xla does."""

    def __init__(self, tensor, element_type: str):
        super().__init__(f"a pending input computes {element_type} for a {tensor.dtype} tensor "
                         f"(torch_xla's promotion): a program compiled for its dtype cannot read it")


# torch_xla's names of element types (``_get_xla_tensor_shape_type``), per dtype.
_ELEMENT_TYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "s64", torch.int32: "s32", torch.int16: "s16", torch.int8: "s8",
    torch.uint8: "u8", torch.bool: "pred", torch.complex64: "c64", torch.complex128: "c128",
}


def _require_typed_as_declared(pending: list) -> None:
    """Raise PendingMistyped, touching nothing, if a pending tensor computes another element
    type than its dtype's."""
    c = xlac()
    for tensor in pending:
        expected = _ELEMENT_TYPES.get(tensor.dtype)
        if expected is None:
            continue
        try:
            found = c._get_xla_tensor_shape_type(tensor)
        except RuntimeError:        # (a tensor torch_xla cannot describe: the sync decides)
            continue
        if found != expected:
            raise PendingMistyped(tensor, found)


# Hashes of pending graphs that lowered: each is lowered to HLO once, on first sight, before its
# first sync (a failed sync leaves its tensors without data); later calls pay only the hash.
_LOWERED: set = set()
_LOWERED_LIMIT = 4096


def _require_lowerable(pending: list) -> None:
    """Raise PendingUnlowerable, touching nothing, if ``pending``'s computation does not lower."""
    c = xlac()
    graph_hash = c._get_graph_hash(pending)
    if graph_hash in _LOWERED:
        return
    try:
        c._get_xla_tensors_hlo(pending)
    except RuntimeError as error:
        raise PendingUnlowerable(error) from None
    if len(_LOWERED) >= _LOWERED_LIMIT:
        _LOWERED.clear()
    _LOWERED.add(graph_hash)


def wait_device() -> None:
    """Block until every computation queued on the device has finished."""
    xlac()._xla_wait_device_ops(devices=[])


def device_activity() -> tuple:
    """Counts that move when the device executes or a CPU-fallback op runs.

    Compared before and after a lazy trace: if any moved, the trace did not stay one lazy graph.
    """
    c = xlac()
    fallback_total = sum(c._xla_counter_value(name) or 0 for name in c._get_executed_fallback_ops())
    samples = []
    for metric in ("ExecuteTime", "TransferFromDeviceTime"):
        data = c._xla_metric_data(metric)
        samples.append(data[0] if data else 0)
    return (fallback_total, *samples)


def executed_fallback_ops() -> list:
    return list(xlac()._get_executed_fallback_ops())


def fallback_counts() -> dict:
    """{op name: times it ran on the CPU as a fallback} so far in this process."""
    c = xlac()
    return {name: c._xla_counter_value(name) or 0 for name in c._get_executed_fallback_ops()}


def fallbacks_since(counts: dict) -> list:
    """The ops that ran on the CPU as a fallback since ``fallback_counts()`` gave ``counts``."""
    return [name for name, count in fallback_counts().items() if counts.get(name, 0) != count]


@contextlib.contextmanager
def host_random_kept():
    """Leave the host's random generator as it was.  The bridge's one-time runs of a graph (on
    meta copies to see its aliasing, trial traces on device copies, the joint graph) run a
    factory without a device (``torch.rand(5)``) on the host, which draws; the call's real run
    must then draw what eager draws, from where eager's generator stands."""
    with cpu_state_kept():
        yield


@contextlib.contextmanager
def function_modes_set_aside():
    """Take the program's TorchFunctionModes off the stack for the bridge's one-time work (its
    traces record the graph's own ops, not what a mode makes of them; a call made under a mode
    runs eagerly, see ``BridgedCall.__call__``), and put them back after.  The bridge's own
    modes (``device_redirect``) are entered inside, on the emptied stack."""
    modes = []
    while torch._C._len_torch_function_stack():
        modes.append(torch._C._pop_torch_function_stack())
    try:
        yield
    finally:
        for mode in reversed(modes):
            torch._C._push_on_torch_function_stack(mode)


@contextlib.contextmanager
def outside_inference_mode():
    """The bridge's one-time work (meta and device probes, which read version counters that
    inference tensors lack) run outside ``torch.inference_mode``, grad mode kept as it is
    (``inference_mode(False)`` alone turns it on)."""
    if not torch.is_inference_mode_enabled():
        yield
        return
    grad = torch.is_grad_enabled()
    with torch.inference_mode(False), torch.set_grad_enabled(grad):
        yield
