"""Random ops on the device draw their numbers from the host's generator, as eager does.

Eager PyTorch on the CPU draws every random number from the host's default generator
(``torch.manual_seed``): the same seed gives the same dropout masks, and a call advances the
generator by exactly what it drew, so the random numbers drawn after it follow too. XLA's
lowerings draw from the device's own generator instead (seeded by ``xm.set_rng_state``, and a
replayed graph reads a fresh device seed per call): other numbers, and the host's generator
never moves. So the bridge does not let a random op reach XLA: while it traces a graph on the
device, ``HostDraws`` (a dispatch mode) answers each random op on device tensors by making that
op's draw on the host, exactly as eager makes it (the same aten op, the same sizes, dtype and
arguments, on the host generator, in the program's order), and handing the device the drawn
tensor as data. Everything computed from it (dropout's ``div`` and ``mul``, ``x + rand``) stays
in the device graph.

One rule for the family: a random op whose tensor arguments give only their sizes and dtype
(``bernoulli.p`` of dropout's noise tensor, ``uniform``, ``normal_functional``, ``exponential``,
``random``, the ``*_like`` factories, ``rand``/``randn``/``randint``/``randperm``/
``normal(float, float, size)``) is drawn on the host: its draw does not depend on any value the
device computes, so the host can make it before the device runs. ``trivial`` draws while it
traces, every call; ``trace_once`` records each draw (``Draw``) and makes them again, in order,
on every replay (``Draws``), passing them to the compiled graph as extra inputs.

A random op whose draw reads tensor values (``bernoulli(p)``, ``normal(mean_tensor, std)``,
``multinomial``, ``poisson``, ``binomial``, ``_standard_gamma``, ``_sample_dirichlet``,
``rrelu`` in training: its CPU kernel draws only for negative inputs) cannot be drawn before
the device computes those values: a graph holding one runs eagerly (``HostDraws.reason``, raised
as ``lazy_graph.DrawReadsValues``: not split around the op, which would run it on the device).
Random ops on host tensors (``torch.rand(3)`` without a device) are ``lazy_graph``'s
``HostRandomWatch``'s: they run on the host, between replayed segments.

A graph or a call the bridge runs eagerly on device tensors (a refused graph, such a value-reading
draw, a training call whose backward cannot be recorded) draws on the host too
(``EagerHostDraws``): each random op on the device runs on the host with its arguments' values,
as CPU eager runs it, and its result comes back to the device. Left to torch_xla's kernels it
would draw from the device's generator, and the host generator would not move: every later
host draw (wav2vec2's LayerDrop ``torch.rand([])``) would then differ from eager's too.

Where the numbers go: a CPU kernel fills its tensor in memory order, and eager's ``empty_like``
keeps its input's strides, so the dropout of a transposed tensor draws its mask in transposed
order. The device's tensors have no strides; each draw's stand-in is laid out as eager lays out
the tensor it fills, found by asking eager itself on meta tensors (``eager_layouts``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Optional

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from . import device as dev
from .eager_layouts import EagerLayouts
from .generator_lock import cpu_state, set_cpu_state

_aten = torch.ops.aten

# Random ops whose tensor arguments give only their sizes and dtype (their values are
# overwritten, or only shaped the result): as their functional forms reach a dispatch mode
# under torch_xla's functionalization, and their in-place forms (without it).
DRAWS_FROM_SIZES = frozenset({
    _aten.bernoulli.p, _aten.bernoulli_.float,
    _aten.uniform.default, _aten.uniform_.default,
    _aten.normal_functional.default, _aten.normal_.default,
    _aten.exponential.default, _aten.exponential_.default,
    _aten.cauchy.default, _aten.cauchy_.default,
    _aten.log_normal.default, _aten.log_normal_.default,
    _aten.geometric.default, _aten.geometric_.default,
    _aten.random.default, getattr(_aten.random, "from"), _aten.random.to,
    _aten.random_.default, getattr(_aten.random_, "from"), _aten.random_.to,
    _aten.rand_like.default, _aten.randn_like.default,
    _aten.randint_like.default, _aten.randint_like.low_dtype,
    _aten.rand.default, _aten.rand.generator, _aten.randn.default, _aten.randn.generator,
    _aten.randint.default, _aten.randint.generator, _aten.randint.low, _aten.randint.low_generator,
    _aten.randperm.default, _aten.randperm.generator,
    _aten.normal.float_float,
})


def is_random(func) -> bool:
    return torch.Tag.nondeterministic_seeded in func.tags


@dataclass(frozen=True)
class _StandIn:
    """A tensor argument of a draw: its sizes and dtype, and the strides eager fills it in
    (``eager_layouts``; None: contiguous)."""
    shape: tuple
    dtype: torch.dtype
    stride: Optional[tuple] = None

    def make(self) -> torch.Tensor:
        if self.stride is None:
            return torch.empty(self.shape, dtype=self.dtype)
        return torch.empty_strided(self.shape, self.stride, dtype=self.dtype)


def _host_device(value):
    """``value``, with the device named as the host where it names the device."""
    if isinstance(value, torch.device) and value.type == dev.xla_device().type:
        return torch.device("cpu")
    if isinstance(value, str) and value.startswith(dev.xla_device().type):
        return "cpu"
    return value


def _on_host(value):
    if isinstance(value, torch.Tensor):
        return _StandIn(tuple(value.shape), value.dtype)
    return _host_device(value)


def _made(value):
    return value.make() if isinstance(value, _StandIn) else value


@dataclass(frozen=True, eq=False)
class Draw:
    """One random op as eager makes it on the host: the op, its arguments with each tensor a
    stand-in of its sizes and dtype, the device named as the host."""
    func: object
    args: tuple
    kwargs: dict

    @classmethod
    def of(cls, func, args, kwargs, eager=None) -> "Draw":
        """``eager``: (the op eager runs, the strides of the tensor it fills), from
        ``EagerLayouts.take``: the draw is then made as eager makes it."""
        args, kwargs = pytree.tree_map(_on_host, tuple(args)), pytree.tree_map(_on_host, dict(kwargs))
        first = next((k for k, a in enumerate(args) if isinstance(a, _StandIn)), None)
        if eager is not None and first is not None:
            func, strides = eager
            args = args[:first] + (_StandIn(args[first].shape, args[first].dtype, strides),) + args[first + 1:]
        return cls(func, args, kwargs)

    def make(self) -> torch.Tensor:
        """The draw on the host generator (in-place forms write their stand-in, returned), as a
        contiguous tensor of its numbers."""
        args = pytree.tree_map(_made, self.args, is_leaf=lambda v: isinstance(v, _StandIn))
        kwargs = pytree.tree_map(_made, self.kwargs, is_leaf=lambda v: isinstance(v, _StandIn))
        return self.func(*args, **kwargs).contiguous()


def touches_device(args, kwargs) -> bool:
    device = kwargs.get("device")
    return (device is not None and torch.device(device).type == dev.xla_device().type) or \
        any(dev.is_xla(t) for t in pytree.tree_leaves((args, kwargs)))


class _DrawMode(TorchDispatchMode):
    @classmethod
    def when(cls, draws: bool):
        """The mode for a graph that draws; nothing for one that does not (a dispatch mode
        costs a Python call per op)."""
        return cls() if draws else contextlib.nullcontext()


class HostDraws(_DrawMode):
    """Active while the bridge traces a graph on the device: each random op on the device is
    drawn on the host (see the module docstring) and reaches the device as data. ``draws``:
    each draw's recipe with the device tensor it made, in the program's order; ``reason()``:
    why the graph cannot draw on the host, or None."""

    def __init__(self):
        super().__init__()
        self.draws = []           # (Draw, device tensor holding its numbers)
        self.reads_values = []    # random ops on the device whose draw reads tensor values
        self.layouts = EagerLayouts()   # where eager fills them (the tracer runs the graph noting nodes)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not is_random(func) or not touches_device(args, kwargs):
            return dev.run_functionally(func, args, kwargs)
        if func not in DRAWS_FROM_SIZES:       # (runs on the device; the graph will run eagerly)
            self.reads_values.append(str(func.overloadpacket.__name__))
            return dev.run_functionally(func, args, kwargs)
        tensor = next((a for a in pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)), None)
        eager = self.layouts.take(func, tuple(tensor.shape)) if tensor is not None else None
        draw = Draw.of(func, args, kwargs, eager)
        with _disable_current_modes():            # the bridge's own work, not the program's
            drawn = dev.to_device([draw.make()])[0]
        self.draws.append((draw, drawn))
        # The op's answer is computed from the draw (``* 1``), not the draw's data itself: an
        # argument the op fills (``x.uniform_()``, functionalized to ``x.copy_(uniform(x))``)
        # would otherwise take that data in place, keeping its identity, and look unwritten
        # (the caller's ``x`` was left as it was: probe N)
        answer = _aten.mul.Tensor(drawn, torch.ones((), dtype=drawn.dtype, device=drawn.device))
        if func._schema.arguments[0].alias_info is not None:    # in place: its argument holds them
            _aten.copy_.default(args[0], answer)
            return args[0]
        return dev.functional_like_a_kernel(answer, args, kwargs)

    def reason(self):
        if self.reads_values:
            return (f"random ops whose draw reads tensor values ({', '.join(sorted(set(self.reads_values)))}): "
                    "eager's CPU kernels draw according to them, which the host cannot do before the "
                    "device computes them")
        return None

    def recipes(self) -> "Draws | None":
        return Draws(tuple(draw for draw, _ in self.draws)) if self.draws else None

    def tensors(self) -> list:
        return [tensor for _, tensor in self.draws]


@dataclass(frozen=True, eq=False)
class Draws:
    """A compiled graph's draws, made again on every replay: on the host generator, in the
    program's order, moved to the device in one transfer."""
    recipes: tuple

    def make(self) -> list:
        return dev.to_device([draw.make() for draw in self.recipes])


class EagerHostDraws(_DrawMode):
    """Active while the bridge runs a graph eagerly on device tensors (a graph or call it does
    not run as a device program: ``backends.EagerGraph``, ``BridgedCall._eager``).  Run as it
    is, a random op on the device would draw from the device's generator (torch_xla's own
    kernels): other numbers than eager's CPU run, and the host generator would not move, so
    every host draw after it (a LayerDrop ``torch.rand([])``) would differ too.  Here each random
    op touching the device runs on the host, as CPU eager runs it: its tensor arguments copied
    to the host with their values (so ops whose draw reads values, ``bernoulli(p)``,
    ``multinomial``, draw as eager's kernels do), the device named as the host; its results and
    the arguments it writes come back to the device.  Everything else runs as it is."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not is_random(func) or not touches_device(args, kwargs):
            return func(*args, **kwargs)
        device_tensors = [t for t in pytree.tree_leaves((args, kwargs)) if dev.is_xla(t)]
        dev.materialize(device_tensors)
        host = dict(zip(map(id, device_tensors), dev.to_host(device_tensors)))

        def to_host(value):
            if isinstance(value, torch.Tensor) and dev.is_xla(value):
                return host[id(value)]
            return _host_device(value)

        host_args = pytree.tree_map(to_host, tuple(args))
        host_kwargs = pytree.tree_map(to_host, dict(kwargs))
        out = func(*host_args, **host_kwargs)     # (through the modes below this one)
        # arguments the op writes: the host copies hold what it wrote
        schema = func._schema
        written = {}
        for k, argument in enumerate(schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            if argument.kwarg_only or k >= len(args):
                device_value, host_value = kwargs.get(argument.name), host_kwargs.get(argument.name)
            else:
                device_value, host_value = args[k], host_args[k]
            if isinstance(device_value, torch.Tensor) and dev.is_xla(device_value):
                torch.Tensor.copy_(device_value, host_value)
                written[id(host_value)] = device_value

        def to_device(value):
            if not isinstance(value, torch.Tensor):
                return value
            if id(value) in written:
                return written[id(value)]
            return dev.functional_like_a_kernel(dev.to_device([value])[0], args, kwargs)

        return pytree.tree_map(to_device, out)


class GeneratorRewind:
    """The host generator's state before a call's draws, put back when the call then runs
    eagerly (its eager run draws again, from where eager's generator stands)."""

    def __init__(self, draws: bool):
        self.state = cpu_state() if draws else None

    def rewind(self) -> None:
        if self.state is not None:
            set_cpu_state(self.state)
