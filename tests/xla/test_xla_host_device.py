"""A CPU program's graph names its device (``torch.arange(n, device=x.device)``,
``x.to(x.device)``): on the bridge that device means the device the graph runs on, so the graph
is one replayed XLA graph (no eager fallback), inside a ``torch.vmap`` body too."""

import torch

import minidynamo
import xla_bridge
from tests.xla.xla_testing import assert_same


def replayed(fn, *args):
    minidynamo.reset()
    xla_bridge.reset_counters()
    compiled = minidynamo.optimize("torchxla_trace_once")(fn)
    for _ in range(2):
        assert_same(compiled(*args), fn(*args))
    counters = xla_bridge.counters
    assert counters.fallbacks == 0 and counters.partitions == 0 and counters.retraces == 0, counters.reasons
    assert counters.replays == 2
    minidynamo.reset()


def test_device_constants_of_a_host_program_run_on_the_device():
    def f(x, mask):
        keep = mask.to(device=x.device, dtype=torch.bool)
        return (x.to(x.device) * 2 + torch.arange(3, device=x.device)) * keep

    replayed(f, torch.randn(2, 3), torch.tensor([[1, 0, 1], [0, 1, 1]]))


def test_vmap_body_naming_the_host_device():
    def f(x, table):
        def row(i, v):
            return (v * 2).to(v.device) + (table.sum() > 0).to(i.device)
        return torch.vmap(row)(torch.arange(x.shape[0], device=x.device), x)

    replayed(f, torch.randn(4, 3), torch.randn(2, 2))


def test_flattened_vmap_body_making_a_tensor_on_the_host_device():
    """The flat graph (vmap_flatten.py) of a body that makes a tensor with ``device=``: its
    recorded device is the host's, and on the bridge it follows the inputs to the device."""
    def f(x):
        def row(v):
            return v * torch.arange(v.shape[0], device=v.device) + torch.ones(3, device=v.device).sum()
        return torch.vmap(row)(x)

    replayed(f, torch.randn(4, 3))


def test_a_graph_without_tensor_arguments_makes_its_outputs_where_it_says():
    """Found by the fuzzer (device seed 5068, program 45): ``torch.tensor(0.5, device=y.device)``
    reads ``y`` for its device only, so the graph has no tensor argument, and the bridge took it
    for a host program: the output came back on the host.  A later ``x.copy_(it)`` into a device
    tensor then hit torch_xla's broadcast copy from a host tensor (``x`` read back 0-dim)."""
    from xla_bridge.device import xla_device

    device = xla_device()
    y = torch.randn(2, 3).to(device)
    programs = {
        "a device scalar": lambda y: torch.tensor(0.5, device=y.device),
        "a device list": lambda y: torch.tensor([0.5, 1.0], device=y.device),
        "a host and a device tensor": lambda y: (torch.tensor(0.5), torch.tensor(0.5, device=y.device)),
    }
    for name, fn in programs.items():
        minidynamo.reset()
        compiled = minidynamo.optimize("torchxla_trace_once")(fn)
        for _ in range(2):
            got, want = compiled(y), fn(y)
            got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            assert [t.device for t in got] == [t.device for t in want], name
            assert_same(got, want)
        x = torch.zeros(2, 3).to(device)
        x.copy_(got[-1][..., 0] if got[-1].dim() else got[-1])
        assert x.cpu().shape == (2, 3) and torch.equal(x.cpu(), torch.full((2, 3), 0.5)), name
    minidynamo.reset()


import pytest  # noqa: E402

from xla_bridge import device as _dev  # noqa: E402

MADE_ON_THE_DEVICE_BY_NAME = {
    "zeros_like(x, device=xla)": lambda x, d: torch.zeros_like(x, device=d) + 1,
    "x.new_ones(2, device=xla)": lambda x, d: x.new_ones(2, device=d),
    "full_like(x, 3, device=xla) beside x + 1": lambda x, d: (torch.full_like(x, 3.0, device=d), x + 1),
}


@pytest.mark.parametrize("backend", ["torchxla_trace_once", "torchxla_trivial"])
@pytest.mark.parametrize("case", MADE_ON_THE_DEVICE_BY_NAME)
def test_a_host_program_keeps_what_it_makes_on_the_device_by_name_there(backend, case):
    """Probe AI r13: every output of a program with host arguments went back to the host, also
    a tensor the program made on the lazy device by name (eager: on the device)."""
    fn = MADE_ON_THE_DEVICE_BY_NAME[case]
    d = _dev.xla_device()
    x = torch.arange(4.0)
    expected = fn(x, d)
    actual = minidynamo.optimize(backend)(fn)(x, d)
    for a, e in zip(*(o if isinstance(o, tuple) else (o,) for o in (actual, expected))):
        assert a.device == e.device and torch.equal(a.cpu(), e.cpu())
    minidynamo.reset()
