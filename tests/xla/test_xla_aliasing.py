"""Memory shared between arguments and outputs: views returned, one tensor passed twice, views
updated in place. Eager PyTorch (or the XLA lazy baseline for device tensors) is the oracle,
for values and for who shares memory with whom."""

import pytest
import torch

import minidynamo
import xla_bridge
from xla_bridge import device as dev
from tests.xla.xla_testing import (BACKENDS, assert_same, compile_with, to_cpu, to_xla,
                                   xla_metric_samples)


def same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    storage = torch.Tensor.untyped_storage   # (not a.untyped_storage: an attribute may hide it)
    return storage(a).data_ptr() == storage(b).data_ptr()


def views_and_copies(x):
    return x.t(), x[1], x.view(-1), x.contiguous(), x * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_outputs_that_view_an_input_are_views_of_the_callers_tensor(backend):
    x = torch.randn(3, 4)
    compiled = compile_with(backend, views_and_copies, [x])
    out = compiled(x)
    assert_same(out, views_and_copies(x))
    transposed, row, flat, itself, doubled = out
    assert itself is x
    assert all(same_memory(view, x) for view in (transposed, row, flat))
    assert not same_memory(doubled, x)
    x.add_(1)                                            # a later write is seen through them
    assert_same((transposed, row, flat), (x.t(), x[1], x.view(-1)))


def test_view_of_an_input_updated_in_place_shows_the_update():
    def bump_and_view(x):
        x.mul_(2)
        return x[0]

    x = torch.arange(6.0).reshape(2, 3)
    compiled = compile_with("torchxla_trace_once", bump_and_view, [x.clone()])
    row = compiled(x)
    assert same_memory(row, x)
    assert_same(row, torch.tensor([0.0, 2.0, 4.0]))


def test_view_of_an_input_whose_layout_changed_runs_that_call_eagerly():
    x = torch.randn(3, 4)
    compiled = compile_with("torchxla_trace_once", lambda x: x.t(), [x])
    transposed_input = torch.randn(4, 3).t()             # same shape, other strides
    out = compiled(transposed_input)
    assert_same(out, transposed_input.t())
    assert same_memory(out, transposed_input)
    assert "changed shape or strides" in xla_bridge.counters.reasons[-1]


def test_an_output_and_views_of_it_replay_as_one_memory():
    """``y, y[:, 0]`` (Hugging Face's pooled output): the later output is rebuilt on the host as
    that view of the first, so a write through one is seen through the other, as in eager."""
    def output_and_its_views(x):
        y = x * 2
        return y, y.view(-1), y[:, 1], y.t()

    x = torch.randn(2, 3)
    compiled = compile_with("torchxla_trace_once", output_and_its_views, [x])
    xla_bridge.reset_counters()
    for _ in range(2):
        out = compiled(x)
        expected = output_and_its_views(x)
        assert_same(out, expected)
        assert all(same_memory(out[0], view) for view in out[1:])
        out[0].add_(1)
        expected[0].add_(1)
        assert_same(out, expected)
    assert xla_bridge.counters.fallbacks == 0 and xla_bridge.counters.replays == 2


def layout(t: torch.Tensor) -> tuple:
    return tuple(t.shape), t.stride(), t.storage_offset(), t.untyped_storage().nbytes()


EMPTY_VIEWS_OF_INTERMEDIATES = {
    "rows after the last": lambda x: (x * 2)[1:],                   # [0, 3] at offset 3
    "a row and the empty rest": lambda x: ((x + 1)[:1], (x + 1)[1:]),
    "columns after the last, unbound": lambda x: (x * 3)[:, 3:].unbind(0),
    "an empty permuted view": lambda x: (x * 3).unsqueeze(0)[:, :, :0].permute(2, 0, 1),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", EMPTY_VIEWS_OF_INTERMEDIATES.values(), ids=EMPTY_VIEWS_OF_INTERMEDIATES)
def test_empty_outputs_keep_eagers_layout(backend, program):
    """An empty view of a graph-made tensor keeps eager's strides and storage offset (fuzz seed 205
    i804: ``(x + y)[1:]`` of one row came back at offset 0, eager's at 3)."""
    x = torch.randn(1, 3)
    compiled = compile_with(backend, program, [x])
    got, expected = compiled(x), program(x)
    got, expected = (got, expected) if isinstance(got, tuple) else ((got,), (expected,))
    assert [layout(t) for t in got] == [layout(t) for t in expected]


def test_outputs_sharing_memory_the_host_cannot_rebuild_run_eagerly_with_a_reason():
    def halves(x):
        return (x * 2).chunk(2)        # the second reads elements the first does not hold

    x = torch.randn(4, 3)
    compiled = compile_with("torchxla_trace_once", halves, [x])
    assert_same(compiled(x), halves(x))
    assert "two outputs share memory" in xla_bridge.counters.reasons[-1]


def test_device_outputs_that_view_an_earlier_output_replay_as_views_of_it():
    """CLIP returns ``logits_per_image`` and ``logits_per_text = logits_per_image.t()``: on the
    device too the later output is rebuilt as that view of the first (it ran eagerly on every
    call before), so a write through one is seen through the other, as in lazy torch_xla."""
    def output_and_its_views(x):
        y = x * 2
        return y, y.view(-1), y[:, 1], y.t()

    x = to_xla(torch.randn(2, 3))
    compiled = compile_with("torchxla_trace_once", output_and_its_views, [x])
    xla_bridge.reset_counters()
    for _ in range(2):
        out = compiled(x)
        expected = output_and_its_views(x)
        assert all(t.device.type == "xla" for t in out)
        assert_same(to_cpu(out), to_cpu(expected))
        out[0].add_(1)
        expected[0].add_(1)
        assert_same(to_cpu(out), to_cpu(expected))
    assert xla_bridge.counters.fallbacks == 0 and xla_bridge.counters.replays == 2


@pytest.mark.parametrize("where", ["cpu", "xla"])
def test_a_transposed_output_before_its_base_replays_as_its_view(where):
    """CLIP returns ``logits_per_image = logits_per_text.t()`` first: the earlier output is the
    view. The output filling the storage is the base wherever it stands (the device returns it
    as it is), so the transposed one is rebuilt as its view on the device too."""
    def transposed_first(x):
        logits = x @ x.t() * 2
        return logits.t(), logits

    x = torch.randn(3, 4).to(where)
    compiled = compile_with("torchxla_trace_once", transposed_first, [x])
    xla_bridge.reset_counters()
    for _ in range(2):
        out = compiled(x)
        expected = transposed_first(x)
        assert_same(to_cpu(out), to_cpu(expected))
        assert out[0].stride() == expected[0].stride()
        out[1][0, 1] = 100.0                 # a write through the base is seen through the view
        assert out[0][1, 0].item() == 100.0
    assert xla_bridge.counters.fallbacks == 0 and xla_bridge.counters.replays == 2


def test_a_view_of_a_replayed_output_reads_its_values_in_order():
    """Device fuzz seed 406 i254: ``row = out[0]`` of a replayed device result, rebuilt with
    ``as_strided``, read a column (XLA chose another layout for the program's result). Made by
    the graph's own ``select``, it is the row."""
    scale = to_xla(torch.nn.Parameter(torch.tensor(1.5)))

    def output_and_its_row(y):
        out = torch.relu(y) * scale + 1.25
        return out, out[0]

    y = torch.randn(3, 3)
    compiled = minidynamo.optimize("torchxla_trace_once")(output_and_its_row)
    for _ in range(2):
        out, row = compiled(to_xla(y))
        assert_same(row.cpu(), output_and_its_row(y.to(scale.device))[1].cpu())
        assert_same(row.cpu(), out.cpu()[0])


def test_views_made_before_a_call_see_its_write_to_their_device_base():
    """Device fuzz seed 406 i36: rows of ``x`` made by one graph, then a graph writing ``x`` in
    place: the replay gave ``x`` new device data and the rows kept the old."""
    def rows(x):
        return list(x.unbind(0))

    def overwrite(x):
        x.copy_(torch.full_like(x, 0.5))
        return x * 2

    make_rows = minidynamo.optimize("torchxla_trace_once")(rows)
    write = minidynamo.optimize("torchxla_trace_once")(overwrite)
    for _ in range(2):
        x = to_xla(torch.randn(2, 4))
        made = make_rows(x)
        write(x)
        assert_same(to_cpu(made), [torch.full((4,), 0.5)] * 2)
    assert xla_bridge.counters.fallbacks == 0


def test_device_outputs_that_view_an_earlier_output_train_as_eager():
    """The rebuilt view carries the gradient back into its base output: the weight's gradient
    is eager's (CPU), the step replayed by hash.  (The device steps run before any host
    backward: torch's autograd engine, once started, takes no device registered after.)"""
    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 3)
    x = torch.randn(4, 3)

    def logits(layer, x):
        scores = layer(x) @ x.t()
        return scores, scores.t()

    device_layer = torch.nn.Linear(3, 3).to(dev.xla_device())   # (to_xla maps tensors, not modules)
    device_layer.load_state_dict(to_xla(layer.state_dict()))
    compiled = minidynamo.optimize("torchxla_trace_once")(logits)
    xla_bridge.reset_counters()
    grads = []
    for _ in range(2):
        device_layer.zero_grad()
        per_image, per_text = compiled(device_layer, to_xla(x))
        (per_image.sum() + (per_text * per_text).sum()).backward()
        grads.append(device_layer.weight.grad.cpu())
    assert xla_bridge.counters.fallbacks == 0 and xla_bridge.counters.replays >= 2
    per_image, per_text = logits(layer, x)
    (per_image.sum() + (per_text * per_text).sum()).backward()
    for grad in grads:
        assert_same(grad, layer.weight.grad)


def views_of_device_inputs(x, mask):
    flat = x.flatten(1)                     # the code after a graph break, say
    return flat.t(), mask[:, None, None, :], x[1], flat * 2


@pytest.mark.parametrize("input_kind", ["plain", "itself a view"])
def test_outputs_viewing_a_device_input_are_its_views_and_replay(input_kind):
    """Made again by the graph's own view ops on the caller's tensor (torch_xla's as_strided
    reads strides in the base's storage, wrong for an input that is itself a view)."""
    def inputs():
        x = to_xla(torch.randn(6, 2, 2))
        return (x[::2] if input_kind == "itself a view" else x[:3]), to_xla(torch.randn(3, 5))

    compiled = compile_with("torchxla_trace_once", views_of_device_inputs, inputs())
    xla_bridge.reset_counters()
    for _ in range(2):
        x, mask = inputs()
        out = compiled(x, mask)
        assert_same(to_cpu(out), to_cpu(views_of_device_inputs(x, mask)))
        out[0].mul_(0)                      # a write through the view reaches the caller's x
        assert_same(x.cpu(), torch.zeros(3, 2, 2))
    assert xla_bridge.counters.fallbacks == 0 and xla_bridge.counters.replays == 2


def test_view_of_a_device_input_made_by_more_than_views_runs_eagerly_with_a_reason():
    def bump_then_view(x):
        return x.add_(1).t()                # made again, the view would add 1 twice

    x = to_xla(torch.randn(3, 4))
    expected = x.cpu().add(1)
    compiled = compile_with("torchxla_trace_once", bump_then_view, [to_xla(torch.randn(3, 4))])
    out = compiled(x)
    assert_same(x.cpu(), expected)
    assert_same(out.cpu(), expected.t())
    assert "not views only" in xla_bridge.counters.reasons[-1]


@pytest.mark.parametrize("where", ["cpu", "xla"])
def test_outputs_viewing_an_input_train_as_eager(where):
    """A training step whose outputs view its input (host or device): the views are made
    outside the replayed step, so the input's gradient arrives through them as in eager."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(8, 3)

    def step(layer, x):
        return x.flatten(1), layer(x.flatten(1)), x[:, 0]

    def loss(outputs):
        flat, y, row = outputs
        return flat.sum() * 3 + (y * y).sum() + row.pow(2).sum()

    device_layer = torch.nn.Linear(8, 3).to(where)
    device_layer.load_state_dict(layer.state_dict())
    compiled = minidynamo.optimize("torchxla_trace_once")(step)
    xla_bridge.reset_counters()
    for _ in range(2):
        x = torch.randn(3, 2, 4)
        eager_x, x_here = x.clone().requires_grad_(), x.to(where).requires_grad_()
        loss(step(layer, eager_x)).backward()
        outputs = compiled(device_layer, x_here)
        loss(outputs).backward()
        assert outputs[0]._base is x_here
        assert_same(x_here.grad.cpu(), eager_x.grad)
        assert_same(device_layer.weight.grad.cpu(), layer.weight.grad)
    assert xla_bridge.counters.fallbacks == 0 and xla_bridge.counters.replays >= 2


def test_one_tensor_in_two_positions_gets_one_device_copy():
    def add(a, b):
        return a + b

    w = torch.randn(4)
    compiled = compile_with("torchxla_trace_once", add, [w, w])
    w.add_(1)                                            # one copy for both positions
    transfers = xla_metric_samples("TransferToDeviceTime")
    assert_same(compiled(w, w), w + w)
    assert xla_metric_samples("TransferToDeviceTime") - transfers == 1


def write_first_read_second(x, y):
    x.add_(1)
    return y * 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("alias", [lambda a: a, lambda a: a[:]], ids=["same", "view"])
def test_argument_written_in_place_and_aliased_by_another_runs_eagerly(backend, alias):
    compiled = compile_with(backend, write_first_read_second, [torch.zeros(3), torch.zeros(3)])
    a, expected = torch.ones(3), torch.ones(3)
    out = compiled(a, alias(a))
    assert_same(out, write_first_read_second(expected, alias(expected)))
    assert_same(a, expected)
    assert "shares memory" in xla_bridge.counters.reasons[-1]
    b, c = torch.ones(3), torch.ones(3)                  # distinct again: replayed
    fallbacks = xla_bridge.counters.fallbacks
    assert_same(compiled(b, c), torch.full((3,), 2.0))
    assert xla_bridge.counters.fallbacks == fallbacks


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_update_of_a_device_view_reaches_its_base(backend):
    def bump(x):
        x.add_(1)
        return x * 2

    base = to_xla(torch.zeros(3, 4))
    compiled = compile_with(backend, bump, [to_xla(torch.zeros(4))])
    for step in (1, 2):
        out = compiled(base[1])
        assert_same(base.cpu()[1], torch.full((4,), float(step)))
        assert_same(out.cpu(), torch.full((4,), 2.0 * step))
    assert_same(base.cpu()[0], torch.zeros(4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_update_of_a_host_view_reaches_its_base(backend):
    def bump(x):
        x.add_(1)
        return x.sum()

    base = torch.zeros(3, 4)
    compiled = compile_with(backend, bump, [torch.zeros(4)])
    compiled(base[2])
    assert_same(base, torch.cat([torch.zeros(2, 4), torch.ones(1, 4)]))


def test_a_call_run_eagerly_does_not_leave_a_stale_graph_behind():
    """Call 2 has new shapes but runs eagerly (its arguments alias); call 3 has those shapes
    too and must pick (or capture) the graph for them, not reuse call 1's."""
    compiled = compile_with("torchxla_trace_once", write_first_read_second,
                            [torch.zeros(3), torch.zeros(3)])
    compiled(torch.ones(3), torch.ones(3))
    a = torch.ones(5)
    compiled(a, a)
    assert_same(compiled(torch.ones(5), torch.ones(5)), torch.full((5,), 2.0))


def test_aliased_example_inputs_are_caught_on_the_first_call():
    a = torch.ones(3)
    compiled = compile_with("torchxla_trace_once", write_first_read_second, [a, a])
    expected = torch.ones(3)
    assert_same(compiled(a, a), write_first_read_second(expected, expected))


# Tensor methods the bridge itself uses on the caller's tensors (transfers, write-backs, views,
# layout checks), each hidden by an attribute on the instance: the bridge calls torch.Tensor's own.
BRIDGE_METHODS = ["detach", "clone", "copy_", "to", "stride", "storage_offset", "as_strided",
                  "untyped_storage", "_is_view"]


def write_and_view(x, y):
    x.add_(1)
    return x.t(), x * 2 + y


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("hidden_at_trace", [False, True], ids=["hidden later", "hidden when traced"])
def test_attributes_hiding_tensor_methods_do_not_reach_the_bridge(backend, hidden_at_trace):
    def with_hidden(t):
        for name in BRIDGE_METHODS:
            setattr(t, name, lambda *args, **kwargs: 99)
        return t

    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(write_and_view)
    first = torch.ones(2, 3)
    compiled(with_hidden(first) if hidden_at_trace else first, torch.ones(2, 3))
    for _ in range(2):
        ours, theirs = with_hidden(torch.ones(2, 3)), torch.ones(2, 3)
        got = compiled(ours, torch.ones(2, 3))
        assert_same(got, write_and_view(theirs, torch.ones(2, 3)))
        assert torch.equal(ours, theirs)                       # the in-place write reached the caller
        assert same_memory(got[0], ours)                       # the view is the caller's memory
    assert not minidynamo.counters["fallback_reasons"], minidynamo.counters["fallback_reasons"]
    minidynamo.reset()


def copy_from_other_argument(x, y):
    return x.copy_(y)


def copy_from_host_made_tensor(x, y):
    x.copy_(torch.ones(3))               # broadcast; the source is made on the host
    return y + 1


def copy_of_itself(x, y):
    return x.copy_(x) * y


def swap_through_a_clone(x, y):
    old = x.clone()
    x.copy_(y)
    y.copy_(old)
    return old


def copy_of_a_host_scalar_then_reads(x, y):
    x.copy_(torch.tensor(0.5))           # torch_xla alone gives x one element under its shape
    return x + y, x.clone()


def copy_into_a_row_from_the_host(x, y):
    x[0].copy_(torch.tensor(0.5))
    x[:, 1].copy_(torch.tensor([7.0, 8.0]))
    return x.sum() * y


def copy_then_read_under_the_arguments_id(x, y):
    x.copy_(torch.ones(2, 3))           # new data, the argument's tensor id: not the argument
    return x.sum() * 1, x.clone()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", [copy_from_other_argument, copy_from_host_made_tensor,
                                     copy_of_itself, swap_through_a_clone,
                                     copy_of_a_host_scalar_then_reads, copy_into_a_row_from_the_host,
                                     copy_then_read_under_the_arguments_id])
def test_copy_into_an_argument_is_written_back_though_no_computation_is_left(backend, program):
    """On the device ``x.copy_(src)`` leaves ``x`` holding plain data (an argument's, or a host
    tensor's transferred), not pending computation: the write is found by identity, not by
    "needs materialization" (it was missed: the caller's ``x`` kept its old value)."""
    compiled = minidynamo.optimize(backend)(program)
    for call in range(3):
        x, y = torch.randn(2, 3), torch.randn(2, 3) + call
        ex, ey = x.clone(), y.clone()
        expected = program(ex, ey)
        assert_same(compiled(x, y), expected)
        assert_same((x, y), (ex, ey))


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_into_an_argument_on_the_training_path(backend):
    w = torch.randn(3, requires_grad=True)

    def step(x, w):
        x.copy_(torch.full((2, 3), 2.0))
        return (x * w).sum()

    compiled = minidynamo.optimize(backend)(step)
    for call in range(2):
        x = torch.randn(2, 3)
        loss = compiled(x, w)
        assert_same(x, torch.full((2, 3), 2.0))
        (grad,) = torch.autograd.grad(loss, w)
        assert_same(grad, torch.full((3,), 4.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_detach_of_an_argument_that_is_a_view_raises_as_eager_does(backend):
    compiled = minidynamo.optimize(backend)(lambda x: x.detach_() * 2)
    assert_same(compiled(torch.ones(2, 3)), torch.full((2, 3), 2.0))
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        compiled(torch.ones(6).view(2, 3))
    assert_same(compiled(torch.ones(2, 3)), torch.full((2, 3), 2.0))


def scaled_then_detached(y):
    y *= 2
    y.add_(1)
    y.detach_()
    return y * 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_detach_of_an_argument_after_in_place_ops_on_it_raises_for_a_view_as_eager_does(backend):
    """Host seed 295 i1997: ``y *= 2; y.detach_()`` detaches the argument through the in-place
    op's result; the call with an offset view of a larger tensor must raise as eager does."""
    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(scaled_then_detached)
    assert_same(compiled(torch.ones(3, 3)), torch.full((3, 3), 3.0))
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        scaled_then_detached(torch.ones(4, 3)[1:])
    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        compiled(torch.ones(4, 3)[1:])
    minidynamo.reset()


@pytest.mark.parametrize("backend", BACKENDS)
def test_copy_of_a_host_scalar_into_an_intermediate_on_the_training_path(backend):
    """Seed 171 program 638: the recorded training graph keeps 0-dim constants on the host, and
    torch_xla's copy from one left ``t`` 0-dim under its [3, 3] shape (the output came back 0-dim)."""
    def f(x):
        t = x * 2 + 0.5
        t.copy_(torch.tensor(0.25))
        return t * x

    compiled = minidynamo.optimize(backend)(f)
    for call in range(2):
        x = torch.randn(3, 3, requires_grad=True)
        out = compiled(x)
        assert_same(out, f(x.detach()))
        (grad,) = torch.autograd.grad(out.sum(), x)
        assert_same(grad, torch.full((3, 3), 0.25))


@pytest.mark.parametrize("program", [copy_of_a_host_scalar_then_reads, copy_into_a_row_from_the_host])
def test_a_copy_from_the_host_into_a_device_argument_replays_as_host_eager(program):
    """Device fuzz seed 402: meta tensors take no host source, so the aliasing analysis refused
    the graph and it ran eagerly on the device, where torch_xla's ``copy_`` keeps the source's
    shape. The analysis now copies as the device run does (``CopiesFromHost``)."""
    compiled = minidynamo.optimize("torchxla_trace_once")(program)
    xla_bridge.reset_counters()
    for call in range(2):
        x, y = torch.randn(2, 3), torch.randn(2, 3) + call
        ex, ey = x.clone(), y.clone()
        expected = program(ex, ey)
        dx, dy = to_xla(x), to_xla(y)
        assert_same(to_cpu(compiled(dx, dy)), expected)
        assert_same(dx.cpu(), ex)
    assert xla_bridge.counters.fallbacks == 0 and xla_bridge.counters.replays == 2


def test_a_device_graph_run_eagerly_copies_from_the_host_as_host_eager():
    """A graph the bridge runs eagerly (its host-made operand of an addition is refused by meta
    tensors, accepted by torch_xla) copies a host source as host eager does (``EagerRun``)."""
    def host_operand_then_copy(x, y):
        t = y + torch.ones(y.shape)
        x[:, 1:].copy_(torch.tensor(0.5))
        return t

    x, y = torch.randn(2, 3), torch.randn(2, 3)
    expected_x = x.clone()
    expected_x[:, 1:] = 0.5
    dx, dy = to_xla(x), to_xla(y)
    out = minidynamo.optimize("torchxla_trace_once")(host_operand_then_copy)(dx, dy)
    assert_same(out.cpu(), y + 1)
    assert_same(dx.cpu(), expected_x)
    assert "graph runs eagerly" in xla_bridge.counters.reasons[-1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_op_whose_meta_kernel_views_its_input_still_copies_as_eager(backend):
    """``F.channel_shuffle`` allocates in eager, but its meta kernel reshapes the input (a view):
    the output came back sharing the caller's memory, and a write to it was lost (layout probe).
    An op whose schema promises a new tensor gets one."""
    def shuffle_then_bump(x):
        y = torch.nn.functional.channel_shuffle(x, 2)
        y.add_(1)
        return y

    minidynamo.reset()
    x = torch.arange(8.0).view(1, 2, 2, 2)
    expected = shuffle_then_bump(x.clone())
    got = minidynamo.optimize(backend)(shuffle_then_bump)(x)
    assert_same(got, expected)
    assert not same_memory(got, x) and torch.equal(x, torch.arange(8.0).view(1, 2, 2, 2))


EMPTY_SHUFFLES = {
    "roll": lambda x: x.roll(-2),                       # torch_xla: SIGFPE (a shift modulo 0)
    "roll over two dims": lambda x: x.roll((1, -1), (0, 2)),
    "pixel_unshuffle": lambda x: torch.nn.functional.pixel_unshuffle(x, 2),   # came back unshuffled
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", EMPTY_SHUFFLES.values(), ids=EMPTY_SHUFFLES)
def test_shuffles_of_an_empty_tensor_answer_as_eager(backend, program):
    minidynamo.reset()
    x = torch.randn(0, 4, 2, 2)
    assert_same(minidynamo.optimize(backend)(program)(x), program(x))
    minidynamo.reset()


BETA_ZERO = {
    "addmm of zeros": lambda x: torch.addmm(torch.zeros(3, 3), x, x.t(), beta=0),
    "addmm of NaNs, then + 1": lambda x: torch.addmm(torch.full((3, 3), float("nan")), x, x.t(), beta=0) + 1,
    "addmv of zeros": lambda x: torch.addmv(torch.zeros(3), x, x[0], beta=0),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", BETA_ZERO.values(), ids=BETA_ZERO)
def test_results_come_home_as_plain_tensors(backend, program):
    """trivial returned ``addmm(..., beta=0)`` of a graph-made tensor inside torch_xla's
    functionalization wrapper: its storage could not be read (``.numpy()`` raised)."""
    minidynamo.reset()
    optimized = minidynamo.optimize(backend)(program)
    for _ in range(2):
        x = torch.randn(3, 4)
        got = optimized(x)
        assert not torch._is_functional_tensor(got)
        torch.testing.assert_close(torch.from_numpy(got.numpy()), program(x), rtol=1e-5, atol=1e-5)
    minidynamo.reset()


def _grad_fn_or_error(t):
    try:
        return ("grad_fn", type(t.grad_fn).__name__)
    except RuntimeError as error:
        return ("raises", str(error)[:40])


def _write_through(x):
    view = x[:, 1:]
    view.mul_(2)
    return view


def _copy_self(x):
    view = x[:, 1:]
    view.copy_(view)          # no value changes, but eager counts the write
    return view


def _write_then_view(x):
    x.add_(1)
    return x[:, 1:]


def _view_then_write_base(x):
    view = x[1:]
    x.add_(1)
    return view


WRITES_AND_VIEWS = {   # under no_grad, of an argument that requires grad
    "written through the view after it": _write_through,
    "the same data written back after it": _copy_self,
    "written before the view was made": _write_then_view,
    "the base written after the view": _view_then_write_base,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", WRITES_AND_VIEWS.values(), ids=WRITES_AND_VIEWS)
def test_a_no_grad_view_written_after_it_was_made_refuses_its_grad_fn_as_eager(backend, program):
    """Eager: a view made under no_grad of a tensor that requires grad, then written in place
    (through it or its base), raises on ``.grad_fn``; one made after the write does not. The
    host's view of the argument is made in eager's order relative to the write-back."""
    leaf = torch.randn(3, 4, requires_grad=True)
    with torch.no_grad():
        compiled = compile_with(backend, program, [leaf.detach().clone().requires_grad_()])
        x_eager, x_ours = (leaf.detach().clone().requires_grad_() for _ in range(2))
        expected, got = program(x_eager), compiled(x_ours)
    assert_same(got.data, expected.data)        # (.data: comparing reads no grad_fn)
    assert_same(x_ours.data, x_eager.data)
    assert _grad_fn_or_error(got) == _grad_fn_or_error(expected)


DETACHING = {
    "input.detach()": lambda x, w: (x.detach(), x * w),
    "input.data": lambda x, w: (x.data, x * w),
    "an output and its detach": lambda x, w: ((x * w), (x * w).detach()),
    "a slice of an output's detach": lambda x, w: ((x * w), (x * w).detach()[1:]),
    "a slice of the input, connected": lambda x, w: (x[1:], x * w),
    # the detached one first: the one with history is no view of it (trivial lost its gradient)
    "an output's .data, then the output": lambda x, w: (lambda h: (h.data, h))(x * w),
    "an output's detach, then the output": lambda x, w: (lambda h: (h.detach(), h))(x * w),
    "an output's detach, then a slice of the output": lambda x, w: (lambda h: (h.detach(), h[1:]))(x * w),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", DETACHING.values(), ids=DETACHING.keys())
def test_a_detached_view_carries_no_gradient(backend, program):
    """A view an output is of an input or another output, rebuilt after the run with
    ``as_strided``: where eager's view is cut from autograd (``detach``, ``.data``: SimSiam's
    ``z, z.detach()``) it was rebuilt from the tensor itself and carried its gradient (wrong
    gradients through trace-once's training path); now from the tensor detached."""
    def run(fn):
        torch.manual_seed(0)
        x = torch.randn(3, requires_grad=True)
        w = torch.randn(3, requires_grad=True)
        h = x * 1.0                                   # a non-leaf input, as after a break
        outs = fn(h, w)
        loss = sum((o * (k + 2)).sum() for k, o in enumerate(outs) if o.requires_grad)
        loss.backward()
        return [o.requires_grad for o in outs], x.grad, w.grad, [o.detach() for o in outs]

    minidynamo.reset()
    dev.xla_device()          # torch_xla before the first backward (else the call runs eagerly)
    expected = run(program)
    got = run(minidynamo.optimize(backend)(program))
    assert got[0] == expected[0]
    for ours, theirs in zip(got[1:3], expected[1:3]):
        torch.testing.assert_close(ours, theirs)
    for ours, theirs in zip(got[3], expected[3]):
        torch.testing.assert_close(ours.cpu(), theirs)


@pytest.mark.parametrize("grad", [True, False])
def test_an_output_eager_lays_out_permuted_is_a_tensor_of_its_own(grad):
    """Probe N: ``x + 1`` of a transposed ``x`` (and a conv of a channels_last input) came back
    as an ``as_strided`` view of a hidden buffer: ``out.detach_()`` raised "Can't detach views
    in-place", and under no_grad an in-place op bringing grad raised; eager's is no view."""
    f = lambda x: x + 1                                   # noqa: E731
    compiled = minidynamo.optimize("torchxla_trace_once")(f)
    x = torch.randn(6, 4).t()
    with torch.set_grad_enabled(grad):
        compiled(x)
        out, expected = compiled(x), f(x)
    assert (out.stride(), out._is_view()) == (expected.stride(), expected._is_view()) == ((1, 4), False)
    torch.testing.assert_close(out, expected)
    out.detach_()
    with torch.set_grad_enabled(grad):
        out.mul_(torch.ones(4, 6, requires_grad=True))


def test_an_output_that_is_a_written_argument_again_is_read_from_its_one_result():
    """Probe P: ``x.add_(1); return x.detach()``: the detached output and the written argument
    are one pending value, for which the runtime returns one output; the replay read a second
    (IndexError inside the bridge: with device arguments it reached the caller)."""
    def f(x):
        x.add_(1)
        return x.detach()
    xla_bridge.reset_counters()           # (this test's reasons only)
    compiled = minidynamo.optimize("torchxla_trace_once")(f)
    for _ in range(2):
        x, x_eager = torch.ones(3), torch.ones(3)
        torch.testing.assert_close(compiled(x), f(x_eager))
        torch.testing.assert_close(x, x_eager)
    assert not [r for r in xla_bridge.counters.reasons if "IndexError" in r], xla_bridge.counters.reasons


COPIES_OF_ONE_VALUE = {     # probe AC r1, r2: one pending value on the device, several tensors in eager
    "h, h.clone()": lambda h: (h, h.clone()),
    "h, h.detach()": lambda h: (h, h.detach()),
    "h.clone(), h.clone()": lambda h: (h.clone(), h.clone()),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", COPIES_OF_ONE_VALUE)
def test_outputs_that_are_one_value_on_the_device_stay_separate_tensors(case, grad):
    """A clone or a detach of an output is the same pending value to torch_xla; reading both
    outputs from one result made them one tensor object: writing the clone wrote ``h``, and a
    detached output carried ``h``'s history."""
    split = COPIES_OF_ONE_VALUE[case]

    def f(x):
        return split(x * 2)

    compiled = minidynamo.optimize("torchxla_trace_once")(f)
    for _ in range(3):
        x = torch.randn(4, requires_grad=grad)
        (a, b), (ea, eb) = compiled(x), f(x)
        assert a is not b
        assert (a.requires_grad, b.requires_grad) == (ea.requires_grad, eb.requires_grad)
        with torch.no_grad():
            b.zero_()
            eb.zero_()
        torch.testing.assert_close(a, ea)


def detached_and_cosine(x):
    return x.detach(), x.cos()


def test_a_detached_argument_returned_is_no_view_as_in_eager():
    """``x.detach()`` shares x's memory but is no view: eager's ``out.detach_()`` works on it.
    Rebuilt as a strided view of x, it raised "Can't detach views in-place"."""
    compiled = minidynamo.optimize("torchxla_trace_once")(detached_and_cosine)
    for _ in range(2):
        x = torch.randn(4, 8, requires_grad=True)
        out, _ = compiled(x)
        assert not out._is_view() and out.data_ptr() == x.data_ptr()
        out.detach_()
