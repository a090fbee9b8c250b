"""Readings of torch_xla's own runtime metrics, the one clock every XLA peer shares.

``ExecuteTime`` is accumulated by the PJRT runtime around each compiled-graph execution, so the
difference of two readings is the XLA execution time between them, whoever launched it (lazy
mode, minidynamo, torch.compile). Reading it is a C call outside any timed window.
"""


def _xla():
    """torch_xla, started as the bridge starts it (its ``XLA_FLAGS``), so every peer in the
    process runs under the same runtime settings whichever starts it first."""
    from xla_bridge import device

    return device.torch_xla()


def device():
    return _xla().device()


def execute_ns():
    """Total XLA execution time so far, in nanoseconds (0 before the first execution)."""
    return _metric_total_ns("ExecuteTime")


def compile_ns():
    """Total XLA compilation time so far, in nanoseconds."""
    return _metric_total_ns("CompileTime")


def _metric_total_ns(name):
    data = _xla()._XLAC._xla_metric_data(name)
    return int(data[1]) if data else 0


def wait_device():
    """Block until every launched XLA execution has finished (a barrier between phases)."""
    _xla()._XLAC._xla_wait_device_ops(devices=[])


def sync():
    _xla().sync()


def to_device(values, dev):
    """Move every tensor in a (nested) tuple/list/dict to ``dev``."""
    return map_tensors(values, lambda t: t.to(dev))


def to_host(values):
    """Bring every XLA tensor in a (nested) output back to the CPU; CPU tensors stay as they are."""
    return map_tensors(values, lambda t: t.cpu() if t.device.type != "cpu" else t)


def map_tensors(values, fn):
    import torch

    if isinstance(values, torch.Tensor):
        return fn(values)
    if isinstance(values, (tuple, list)):
        return type(values)(map_tensors(v, fn) for v in values)
    if isinstance(values, dict):
        return {k: map_tensors(v, fn) for k, v in values.items()}
    return values
