"""A graph that draws random numbers, made free to run twice: its generators are rewound if it raises.

The compiled code runs the whole graph first and replays the frame's Python side effects
after it (``tracer/side_effects.py``).  If an op of the graph raises at run time (an index out
of range), the exact answer is to re-run the frame eagerly: Python then makes exactly the side
effects that precede the failing op and raises eager's exception.  A graph that drew random
numbers before failing has moved its generators, so the eager re-run would draw other numbers
than eager does.  ``RewindOnRaise`` saves the state of each generator the graph draws from
before it runs and puts it back when the graph raises: the re-run then starts from where eager
stood, and draws eager's numbers.

Which generators: the default one of each device the graph's random ops draw on (``cpu``, each
``cuda:i``), and for ``xla`` both XLA's own generator (eager ops on the device draw from it)
and the host's (the XLA bridge draws a graph's random numbers on the host, as eager on the CPU
does: ``xla_bridge/host_random.py``).  Devices it does not know give ``None``: the capture
then refuses the frame as before.  The state is saved only for the frames that need the
re-run (Python side effects before a graph op, or a ``try`` around one): other graphs never
pay for it.

Every save and restore of a generator's state goes through one lock shared with the bridge
(``xla_bridge/generator_lock.py`` says why: without it, threads deadlock in torch's
``get_state``).
"""

from __future__ import annotations

from typing import Optional

import torch

from xla_bridge.generator_lock import STATE_LOCK, cpu_state, set_cpu_state

DEVICE_TYPES = frozenset({"cpu", "cuda", "xla"})     # the devices whose generators are known here


def _cpu():
    return cpu_state, set_cpu_state


def _cuda(index):
    def get():
        return torch.cuda.get_rng_state(index)

    def put(state):
        torch.cuda.set_rng_state(state, index)
    return get, put


def _xla(device):
    import torch_xla.core.xla_model as xm      # only for graphs on an XLA device

    return (lambda: xm.get_rng_state(device)), (lambda seed: xm.set_rng_state(seed, device))


def generators_of(devices) -> Optional[list]:
    """``[(get_state, set_state), ...]`` for the generators draws on ``devices`` advance, or None
    when one of them is not known to this module."""
    found: dict = {}
    for device in devices:
        if not isinstance(device, torch.device) or device.type not in DEVICE_TYPES:
            return None
        if device.type == "cpu":
            found["cpu"] = _cpu()
        elif device.type == "cuda":
            index = device.index if device.index is not None else torch.cuda.current_device()
            found[f"cuda:{index}"] = _cuda(index)
        elif device.type == "xla":
            found["cpu"] = _cpu()
            found[str(device)] = _xla(device)
    return list(found.values())


class RewindOnRaise:
    """``graph(*inputs)``; if it raises an ``Exception``, the generators are first put back."""

    def __init__(self, graph, generators: list):
        self.graph = graph
        self.generators = generators

    def __call__(self, *inputs):
        with STATE_LOCK:
            states = [get() for get, _ in self.generators]
        try:
            return self.graph(*inputs)
        except Exception:
            with STATE_LOCK:
                for (_, put), state in zip(self.generators, states):
                    put(state)
            raise

    def __repr__(self):
        return f"RewindOnRaise({self.graph!r})"
