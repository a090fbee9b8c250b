"""The C++ replay call (``xla_bridge._replay``) decides every call as the Python path does.

Each test builds the same graph twice, once with the native path and once without
(``config.native_replay``), calls both with the same arguments (on the device, on the host,
pending, reshaped, retyped, new Python values, under a phase timer, in grad mode, after a
runtime error) and compares both with eager PyTorch on the CPU.
"""

import random

import pytest
import torch
import torch.fx as fx

import xla_bridge
from xla_bridge import config, replay_path
from xla_bridge import device as dev
from tests.xla.xla_testing import assert_same, to_cpu, to_xla

pytestmark = pytest.mark.skipif(replay_path._replay is None, reason="xla_bridge._replay not built")


def compile_both(fn, example):
    gm = fx.symbolic_trace(fn)
    native = xla_bridge.torchxla_trace_once(gm, list(example))
    saved = config.native_replay
    config.native_replay = False
    try:
        python = xla_bridge.torchxla_trace_once(fx.symbolic_trace(fn), list(example))
    finally:
        config.native_replay = saved
    return native, python


def check(native, python, fn, args):
    """Both paths give eager's answer on ``args`` (fresh device copies for each)."""
    expected = fn(*to_cpu(args))
    with torch.no_grad():
        got_native = native(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        got_python = python(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    assert_same(to_cpu(got_native), expected)
    assert_same(to_cpu(got_python), expected)


def affine(x, w, scale):
    return torch.relu(x @ w) * scale


def test_a_device_graph_is_armed_and_replays_without_the_python_path(monkeypatch):
    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    native, python = compile_both(affine, [x, w, 2.0])
    assert type(native).__name__ == "Replay" and native.armed
    assert type(python).__name__ == "BridgedCall"
    calls = []
    fallback = native.fallback
    monkeypatch.setattr(type(fallback), "__call__", lambda self, *a: calls.append(a))
    before = xla_bridge.counters.replays
    with torch.no_grad():
        out = native(x, w, 2.0)
    assert calls == [] and xla_bridge.counters.replays == before + 1
    assert_same(out.cpu(), affine(x.cpu(), w.cpu(), 2.0))


def test_attributes_come_from_the_python_path():
    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    native, _ = compile_both(affine, [x, w, 2.0])
    assert native.program is native.fallback.program


def test_changed_shapes_dtypes_and_values_take_the_python_path_and_rearm():
    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    native, python = compile_both(affine, [x, w, 2.0])
    for args in ([x, w, 2.0], to_xla([torch.randn(6, 4)]) + [w, 2.0], [x, w, 3.0],
                 to_xla([torch.randn(3, 4, dtype=torch.float64),
                         torch.randn(4, 5, dtype=torch.float64)]) + [2.0],
                 [x, w, 2.0], [x, w, 2]):
        check(native, python, affine, args)
    assert native.armed


def test_a_pending_input_is_materialized_by_the_python_path():
    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    native, python = compile_both(affine, [x, w, 2.0])
    def updated_in_place():
        updated = x.clone()
        dev.materialize([updated])
        return updated.add_(1)           # in place: pending again

    # (made just before its call: materializing one input syncs every live tensor)
    for make in (lambda: x * 3, updated_in_place):     # lazy: no device data yet
        arg = make()
        assert dev.xlac()._check_tensor_need_materialization([arg]) == [True]
        with torch.no_grad():
            out = native(arg, w, 2.0)
        assert_same(out.cpu(), affine(arg.cpu(), w.cpu(), 2.0))


def test_host_inputs_stay_on_the_python_path():
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    native, python = compile_both(affine, [x, w, 2.0])
    assert not native.armed
    check(native, python, affine, [x, w, 2.0])
    assert native(x, w, 2.0).device.type == "cpu"


def several_outputs(x, y):
    return (x + y, x, 3, [x * y, y])


def tuple_of_three(x, y):
    return x + y, x, x - y


def as_list(x, y):
    return [x * y, x]


@pytest.mark.parametrize("fn, armed", [(several_outputs, False), (tuple_of_three, True),
                                       (as_list, True)])
def test_output_structures(fn, armed):
    x, y = to_xla([torch.randn(2, 3), torch.randn(2, 3)])
    native, python = compile_both(fn, [x, y])
    assert native.armed is armed
    check(native, python, fn, [x, y])
    with torch.no_grad():
        out = native(x, y)
    assert out[1] is x                 # an argument returned is the argument itself


def test_a_timed_call_takes_the_python_path_and_is_split_into_phases():
    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    native, _ = compile_both(affine, [x, w, 2.0])
    with torch.no_grad(), xla_bridge.phase_timer() as timer:
        native(x, w, 2.0)
    assert set(timer.totals) == {"transfer_in", "hash_lookup_dispatch", "execute", "transfer_out"}


def test_grad_mode_with_an_input_that_requires_grad_takes_the_training_path():
    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    w.requires_grad_(True)
    native, _ = compile_both(affine, [x, w, 2.0])
    with torch.enable_grad():
        out = native(x, w, 2.0)
        out.sum().backward()
    assert out.requires_grad and w.grad is not None


def test_a_runtime_error_hands_the_call_to_the_python_path(monkeypatch):
    """An evicted hash (or any error of the runtime call) is decided in Python: recompiled."""
    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    native, _ = compile_both(affine, [x, w, 2.0])
    real = dev.xlac()._run_cached_graph
    failures = []

    def evicted_once(graph_hash, inputs):     # for the C++ call and the Python path's replay
        if len(failures) < 2:
            failures.append(graph_hash)
            raise RuntimeError("Failed to get computation by hash")
        return real(graph_hash, inputs)

    monkeypatch.setattr(dev.xlac(), "_run_cached_graph", evicted_once)
    before = xla_bridge.counters.retraces
    with torch.no_grad():
        out = native(x, w, 2.0)
    assert len(failures) == 2 and xla_bridge.counters.retraces == before + 1
    assert_same(out.cpu(), affine(x.cpu(), w.cpu(), 2.0))


def test_random_call_sequences_agree_with_the_python_path_and_eager():
    """Property: over random sequences of calls (shapes, dtypes, values, pending inputs, host
    inputs, repeated tensors), the two paths and eager agree."""
    rng = random.Random(7)
    torch.manual_seed(7)

    def fn(x, y, k):
        return (x * y + k).sum(-1), x - y

    base = to_xla([torch.randn(2, 3), torch.randn(2, 3)])
    native, python = compile_both(fn, base + [1.0])
    for _ in range(25):
        rows = rng.choice([2, 2, 2, 4])
        dtype = rng.choice([torch.float32, torch.float32, torch.float64])
        x, y = torch.randn(rows, 3, dtype=dtype), torch.randn(rows, 3, dtype=dtype)
        where = rng.choice(["device", "device", "pending", "host"])
        if where != "host":
            x, y = to_xla([x, y])
        if where == "pending":
            x = x + 1
        if rng.random() < 0.2:
            y = x
        check(native, python, fn, [x, y, rng.choice([1.0, 1.0, 2.5])])


def test_the_entry_and_its_python_path_die_with_the_last_reference_no_cycle():
    import gc
    import weakref

    x, w = to_xla([torch.randn(3, 4), torch.randn(4, 5)])
    native, _ = compile_both(affine, [x, w, 2.0])
    entry_ref, python_ref = weakref.ref(native), weakref.ref(native.fallback)
    gc.disable()
    try:
        del native
        assert entry_ref() is None and python_ref() is None
    finally:
        gc.enable()
