"""Views autograd guards: eager refuses an in-place write that makes one require grad when the
view came from an op with several results (``unbind``, ``split``, ``chunk``) or was made in
no-grad mode.  The bridge makes such outputs again (``as_strided`` of the caller's tensor) or
returns fresh tensors from the device; either would accept the write.  They must refuse it as
eager does (host seed 284 i289: ``t2, *t3 = x.unbind(1)`` then ``t3.add_(w * scale)``)."""

import pytest
import torch

import torch.fx as fx

import minidynamo
import xla_bridge
from xla_bridge import replay_path
from tests.xla.xla_testing import BACKENDS, to_xla


def unbind_of_argument(x):
    return x.unbind(1)[1]


def select_of_argument(x):
    return x[:, 1]


def unbind_of_intermediate(x):
    return (x * 2).unbind(1)[1]


def split_of_intermediate(x):
    return (x * 2).t().split(1)[1][0]


def view_next_to_its_base(x):
    y = x * 2
    return y.unbind(1)[0], y


def select_in_a_no_grad_block(x):
    with torch.no_grad():
        return (x * 2)[:, 1]


def argument_view_in_a_no_grad_block(x):
    with torch.no_grad():
        view = x[:, 1]
    return view


PROGRAMS = [unbind_of_argument, select_of_argument, unbind_of_intermediate, split_of_intermediate,
            view_next_to_its_base, select_in_a_no_grad_block, argument_view_in_a_no_grad_block]


def write_requiring_grad(result) -> str:
    """What an in-place add of a value that requires grad does to the (first) result."""
    first = result[0] if isinstance(result, tuple) else result
    try:
        first.add_(torch.ones(3, requires_grad=True).to(first.device))
    except RuntimeError as error:
        return "refused: " + str(error).split(".")[0]
    return f"accepted (requires_grad={first.requires_grad})"


@pytest.mark.parametrize("device", ["cpu", "xla"])
@pytest.mark.parametrize("grad_mode", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_a_write_into_a_returned_view_is_refused_or_accepted_as_eager(program, backend, grad_mode, device):
    """The reference is eager on the host, lazy torch_xla on the device."""
    x = torch.randn(3, 2)
    if device == "xla":
        x = to_xla([x])[0]
    with torch.set_grad_enabled(grad_mode):
        returned = program(x.clone())
    expected = write_requiring_grad(returned)           # the write itself in grad mode
    minidynamo.reset()
    compiled = minidynamo.optimize(backend)(program)
    for _ in range(2):                                   # the compiling call, then a replay
        with torch.set_grad_enabled(grad_mode):
            result = compiled(x.clone())
        assert write_requiring_grad(result) == expected
    minidynamo.reset()


def test_the_broken_frame_of_seed_284_refuses_the_write_as_eager():
    """The unpacked view crosses a graph break: the write runs eagerly on the graph's output."""
    def program(x, w):
        t2, *t3 = x.unbind(1)
        t3 = t3[0]
        t3.add_(w * 2)
        return t3 * 3

    x, w = torch.randn(3, 2), torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="is being modified inplace"):
        program(x.clone(), w)
    minidynamo.reset()
    compiled = minidynamo.optimize("torchxla_trace_once")(program)
    with pytest.raises(RuntimeError, match="is being modified inplace"):
        compiled(x.clone(), w)
    minidynamo.reset()


@pytest.mark.skipif(replay_path._replay is None, reason="xla_bridge._replay not built")
def test_only_guarded_views_leave_the_native_replay_path():
    """A plain view of an intermediate replays natively; a guarded one takes the Python path,
    which makes it a view of eager's kind (on the device, as lazy torch_xla's)."""
    def plain(x):
        return (x * 2).view(-1)

    def first_row(x):
        return (x * 2).unbind(0)[0]

    x = to_xla([torch.randn(3, 3)])[0]
    native = xla_bridge.torchxla_trace_once(fx.symbolic_trace(plain), [x])
    assert type(native).__name__ == "Replay" and native.armed
    guarded = xla_bridge.torchxla_trace_once(fx.symbolic_trace(first_row), [x])
    assert not (type(guarded).__name__ == "Replay" and guarded.armed)
    for _ in range(2):
        assert write_requiring_grad(guarded(x)) == write_requiring_grad(first_row(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_graph_that_ends_inside_a_no_grad_block_leaves_grad_mode_as_it_was(backend):
    """The graph before a break inside ``with torch.no_grad()`` ends in no-grad mode; compiling
    it makes its views once more on meta tensors, and that run must not leave the mode switched
    off (host seed 289 i393: the returned view of an argument requiring grad came back a leaf)."""
    def program(x):
        row = x[:, 0]
        view = x[..., :1]
        with torch.no_grad():
            print("inside", row.requires_grad)
        return view

    x = torch.randn(2, 3, requires_grad=True)
    minidynamo.reset()
    result = minidynamo.optimize(backend)(program)(x)
    assert torch.is_grad_enabled()
    assert not result.is_leaf and result.grad_fn is not None
    minidynamo.reset()
