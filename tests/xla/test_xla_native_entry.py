"""The cache entry's body in C (``xla_bridge._replay.Entry``) answers as eager PyTorch does.

A model kept on the XLA device, optimized with minidynamo, is called, changed between calls in
every way a weight or an input can change (in place, through ``.data``, replaced, reshaped,
retyped, left pending), and called again; each answer is compared with eager PyTorch on a CPU
copy of the changed model. The entry skips the replay's tensor checks only for the values its
guard just checked for this very call (the reader's ``handed`` flag); these tests hold on both
XLA backends and with the C body turned off (``minidynamo.config.native_cache_entry``).
"""

import copy

import pytest
import torch
import torch.nn as nn

import minidynamo
import xla_bridge
from minidynamo import config as md_config
from xla_bridge import device as dev
from xla_bridge import replay_path
from tests.xla.xla_testing import BACKENDS, assert_same, fresh  # noqa: F401 (autouse)


class Affine(nn.Module):
    """A parameter, a buffer and a plain tensor attribute (neither parameter nor buffer)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.norm = nn.LayerNorm(3)
        self.register_buffer("shift", torch.arange(3.0))
        self.scale = torch.full((3,), 2.0)

    def forward(self, x):
        return self.norm(self.lin(x)) * self.scale + self.shift


def _xla(t):
    return t.to(dev.xla_device())


def changes(model):
    """Ways a weight changes between calls, each applied to the device model under no_grad."""
    return {
        "add_": lambda: model.lin.weight.add_(1.0),
        "copy_": lambda: model.lin.weight.copy_(_xla(torch.randn(3, 4))),
        "mul_ of a buffer": lambda: model.shift.mul_(-3),
        ".data = same shape": lambda: setattr(model.lin.weight, "data", _xla(torch.randn(3, 4))),
        ".data.fill_": lambda: model.lin.bias.data.fill_(0.5),
        ".data = other shape": lambda: setattr(model.scale, "data", _xla(torch.full((1,), 3.0))),
        ".data = other dtype": lambda: setattr(model.shift, "data", _xla(torch.arange(3.0, dtype=torch.float64))),
        "new Parameter": lambda: setattr(model.lin, "weight", nn.Parameter(_xla(torch.randn(3, 4)))),
        "new tensor attribute": lambda: setattr(model, "scale", _xla(torch.full((3,), -1.0))),
        "pending weight": lambda: setattr(model.lin.weight, "data", model.lin.weight * 2),
    }


CHANGES = list(changes(Affine()))


@pytest.fixture(params=[True, False], ids=["C entry", "Python entry"])
def native_entry(request, monkeypatch):
    monkeypatch.setattr(md_config, "native_cache_entry", request.param)
    return request.param


def device_model():
    torch.manual_seed(0)
    model = Affine().eval().to(dev.xla_device())
    model.scale = _xla(model.scale)       # a plain attribute is not moved by .to()
    return model


def eager(model, x):
    """Eager PyTorch on CPU copies of the (changed) model and input."""
    cpu = copy.deepcopy(model).to("cpu")
    cpu.scale = model.scale.cpu()          # a plain attribute is not moved by .to()
    with torch.no_grad():
        return cpu(x.cpu())


def call(optimized, x):
    with torch.no_grad():
        return optimized(x)


def the_entry(optimized):
    entries = [e for e in minidynamo.cache_entries(optimized) if e.compiled_fn is not None]
    return entries[0].compiled_fn


def compiled_once():
    """The device model, optimized on trace-once and called once: (model, optimized, x)."""
    model = device_model()
    optimized = minidynamo.optimize("torchxla_trace_once")(model)
    x = _xla(torch.randn(2, 4))
    call(optimized, x)
    return model, optimized, x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("change", CHANGES)
def test_a_changed_weight_gives_the_eager_answer(backend, change, native_entry):
    model = device_model()
    optimized = minidynamo.optimize(backend)(model)
    x = _xla(torch.randn(2, 4))
    for _ in range(2):                          # compile, then a hit
        assert_same(call(optimized, x).cpu(), eager(model, x))
    with torch.no_grad():
        changes(model)[change]()
    for _ in range(2):                          # the first call after the change, then a hit
        assert_same(call(optimized, x).cpu(), eager(model, x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_change_in_turn_on_one_entry(backend, native_entry):
    model = device_model()
    optimized = minidynamo.optimize(backend)(model)
    x = _xla(torch.randn(2, 4))
    assert_same(call(optimized, x).cpu(), eager(model, x))
    for change in CHANGES:
        with torch.no_grad():
            changes(model)[change]()
        assert_same(call(optimized, x).cpu(), eager(model, x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_inputs_of_other_shapes_dtypes_or_pending(backend, native_entry):
    model = device_model()
    optimized = minidynamo.optimize(backend)(model)
    inputs = [torch.randn(2, 4), torch.randn(5, 4), torch.randn(2, 4), torch.randn(1, 1, 4)]
    for x in inputs:
        x = _xla(x)
        assert_same(call(optimized, x).cpu(), eager(model, x))
        pending = x * 3                          # lazy computation not yet run
        assert_same(call(optimized, pending).cpu(), eager(model, pending))


def test_the_entry_runs_in_c_and_leaves_the_guarded_checks_to_the_guard(native_entry):
    model, optimized, x = compiled_once()
    entry = the_entry(optimized)
    if not native_entry or replay_path._replay is None:
        assert type(entry).__name__ == "function"
        return
    assert type(entry).__name__ == "Entry" and "Runs in C" in entry.source
    # every tensor input (x, four weights, a buffer, an attribute) is checked by the guard for
    # what the replay needs: a handed-off call leaves those checks to it
    inputs = entry.read_inputs.reader(type(model).forward, model, x)
    assert entry.vouched_positions == tuple(i for i, v in enumerate(inputs) if isinstance(v, torch.Tensor))
    assert len(entry.vouched_positions) == 7
    assert call(optimized, x).cpu().shape == (2, 3)
    assert entry.read_inputs.handed            # the last call took the guard's values
    before = xla_bridge.counters.replays
    call(optimized, x)
    assert xla_bridge.counters.replays == before + 1


def test_an_entry_called_without_its_guard_checks_everything():
    """The reader did not hand off (no guard ran for this call): nothing is vouched, so a tensor
    of another shape is caught by the replay's own checks (the Python path retraces)."""
    model, optimized, x = compiled_once()
    entry = the_entry(optimized)
    other = _xla(torch.randn(6, 4))
    with torch.no_grad():
        out = entry(type(model).forward, model, other)
    assert not entry.read_inputs.handed
    assert_same(out.cpu(), eager(model, other))


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_graph_error_reruns_the_frame_or_propagates(monkeypatch, native_entry, error):
    """As the generated Python's ``except``: an Exception re-runs the frame eagerly (the graph is
    free to run twice), anything else (KeyboardInterrupt) reaches the caller."""
    model, optimized, x = compiled_once()

    def broken(graph_hash, inputs):
        raise error("the runtime failed")

    monkeypatch.setattr(dev.xlac(), "_run_cached_graph", broken)
    if error is KeyboardInterrupt:
        with pytest.raises(KeyboardInterrupt):
            call(optimized, x)
        return
    reruns = minidynamo.counters["graph_errors_rerun"]
    assert_same(call(optimized, x).cpu(), eager(model, x))
    assert minidynamo.counters["graph_errors_rerun"] == reruns + 1


def test_a_guard_promise_for_other_sizes_than_the_armed_graph_vouches_nothing():
    """The replay is re-armed for another shape (a call without the guard), then a guarded call
    with the traced shape comes: the guard checked sizes the armed graph does not have, so the
    replay checks the inputs itself, switches back to the traced graph, and answers right."""
    model, optimized, x = compiled_once()
    entry = the_entry(optimized)
    other = _xla(torch.randn(6, 4))
    with torch.no_grad():
        assert_same(entry(type(model).forward, model, other).cpu(), eager(model, other))
    if type(entry).__name__ == "Entry":
        assert 0 not in entry.vouched_positions          # x: (6, 4) armed, the guard checks (2, 4)
    for _ in range(2):
        assert_same(call(optimized, x).cpu(), eager(model, x))
