"""Double backward (``create_graph=True``) through a replayed training step, by recomputing it.

The replayed backward graph is an XLA program: it computes the grads, but records no autograd
history, so a backward that must itself be differentiated (gradient penalties such as WGAN-GP's
and R1's, MAML's inner step) cannot use it. Eager autograd can, because each node's backward
formula runs as ordinary differentiable ops over saved tensors that keep their own history.
This module does what eager does, late: when a backward with ``create_graph=True`` reaches a
step's node, it runs the captured graph again, eagerly and with grad on, over the very tensors
the step was called with, and differentiates that with ``create_graph=True``. The grads come
with eager's history, so a second backward reaches the parameters and inputs as eager's does.

Recomputing gives eager's answer only when it computes what the call computed:

- every argument still holds the values it held at the call (its version has not moved since:
  eager would read its saved tensors, and this module cannot see old values; a write through
  ``.data``, which moves no version, is not seen: the recomputation reads the new values);
- no argument the graph writes in place is one whose value at the call its differentiated
  outputs read (``reads_and_writes``): the recomputation runs on copies of the written
  arguments (writing them a second time would be a second update), whose values then do not
  matter (batch norm's running statistics in training mode, a counter, a cache the caller
  keeps);
- its random numbers are drawn again as the call drew them: the host generator's state at the
  call is kept and set again around the recomputation (then put back where it had got to), so
  dropout's masks come out the same. The call's draws were made as eager makes them
  (``host_random``) only where every argument is on the host: a call with device arguments
  that draws is refused (its eager recomputation on the device lays the draws out otherwise);
- no autocast was on around the call (the recomputation runs inside the backward, outside it).

Otherwise the backward raises ``DoubleBackwardUnsupported``, with the reason. The arguments are
held by the step's autograd nodes for as long as those live: until the outputs are dropped, where
eager's nodes free what they saved at the first backward that does not retain the graph (the
inputs of one step, the parameters being held by the model anyway). A backward with
``create_graph=True, retain_graph=False`` leaves the step's saved tensors in place.
"""

from __future__ import annotations

import contextlib
import operator

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from . import device as dev
from .eager_saved import _version
from .generator_lock import cpu_state, cpu_state_kept, set_cpu_state
from .host_random import is_random

_AUTOCAST_DEVICES = ("cpu", "xla")


class DoubleBackwardUnsupported(RuntimeError):
    """``create_graph=True`` through a replayed step that cannot be recomputed faithfully."""


def draws_random(forward_gm) -> bool:
    """Whether a step with this forward graph draws random numbers (its recomputation must draw
    the same ones)."""
    return any(node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
               and is_random(node.target) for node in forward_gm.graph.nodes)


# Ops whose schema leaves out what they write: batch norm in training mode updates its running
# statistics (arguments 3 and 4), which its results do not read.
_BATCH_NORMS = {torch.ops.aten.native_batch_norm.default, torch.ops.aten.cudnn_batch_norm.default,
                torch.ops.aten.miopen_batch_norm.default}


def _unlisted_writes(node: fx.Node) -> tuple:
    """The argument indices ``node`` writes although its schema does not say so."""
    training = node.args[5] if len(node.args) > 5 else node.kwargs.get("training")
    return (3, 4) if node.target in _BATCH_NORMS and training is True else ()


def reads_and_writes(forward_gm, leaves) -> tuple[frozenset, frozenset]:
    """(the argument positions whose values *at the call* the forward's outputs at ``leaves``
    read, the positions it writes in place), from its aten ops' schemas.

    Each tensor value lives in a storage: the node that made it, or the one it is a view of or
    writes into; a storage carries the positions its current contents were computed from. An
    op's results read everything its inputs hold; what it writes comes to hold that too (a
    write into part of a storage keeps what the rest held). An op the walk cannot read a
    schema from (a check the bridge inserted) is taken to write all its inputs."""
    storage, holds, written = {}, {}, set()

    def stored(value):
        return [storage[n] for n in pytree.tree_leaves(value) if isinstance(n, fx.Node) and n in storage]

    def write(key, what):
        holds[key] = holds[key] | what
        if isinstance(key, fx.Node) and key.op == "placeholder":
            written.add(int(key.name[3:]))

    for node in forward_gm.graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            storage[node] = node
            holds[node] = frozenset({int(node.name[3:])} if node.op == "placeholder" else ())
        elif node.op == "call_function" and node.target is operator.getitem and node.args[0] in storage:
            # one result of several, or a piece of a list (every piece in the list's storage)
            storage[node] = storage.get((node.args[0], node.args[1]), storage[node.args[0]])
        elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            schema = node.target._schema
            values = [node.args[k] if k < len(node.args) else node.kwargs.get(a.name)
                      for k, a in enumerate(schema.arguments)]
            unlisted = _unlisted_writes(node)
            read = frozenset().union(*(holds[key] for k, v in enumerate(values) if k not in unlisted
                                       for key in stored(v)))
            everything = read.union(*(holds[key] for k in unlisted for key in stored(values[k])))
            for k, argument in enumerate(schema.arguments):
                if k in unlisted or (argument.alias_info is not None and argument.alias_info.is_write):
                    for key in stored(values[k]):
                        write(key, everything)
            for index, returned in enumerate(schema.returns):
                alias = returned.alias_info
                keys = [stored(values[k]) for k, a in enumerate(schema.arguments)
                        if alias is not None and a.alias_info is not None and a.alias_info.before_set == alias.before_set]
                key = keys[0][0] if keys and keys[0] else (node, index)
                holds.setdefault(key, read)
                storage[(node, index)] = key
            storage[node] = storage.get((node, 0), node)          # (an op that returns nothing: itself)
            holds.setdefault(storage[node], read)
        elif node.op == "call_function":
            keys = stored((node.args, node.kwargs))
            read = frozenset().union(*(holds[key] for key in keys))
            for key in keys:
                write(key, read)
            storage[node] = node
            holds[node] = read
    output = forward_gm.graph.output_node().args[0]
    reads = frozenset().union(*(holds[key] for k in leaves if isinstance(output[k], fx.Node)
                                for key in stored(output[k])))
    return reads, frozenset(written)


class Recompute:
    """What a step's node keeps to recompute the call: the program (a ``lifting.FlatProgram``),
    the arguments and their grad flags, the versions at the call of the arguments whose versions
    the step does not record already (those a backward reads: ``checked``, handed to
    ``grads``), the arguments the call wrote (the recomputation writes copies), the default
    dtype at the call and, for a graph that draws, the host generator's state at the call."""

    __slots__ = ("program", "args", "needs_grad", "versions", "written", "generator_state", "default_dtype")

    def __init__(self, program, args, needs_grad, unchecked, draws, written):
        self.program, self.args, self.needs_grad = program, args, needs_grad
        self.written = frozenset(written)
        self.versions = {p: _version(args[p]) for p in unchecked if p not in self.written}
        self.generator_state = cpu_state() if draws else None
        self.default_dtype = torch.get_default_dtype()

    @staticmethod
    def of(program, args, needs_grad, unchecked, draws: bool, written, reads_writes):
        """A ``Recompute`` (made before the call draws anything), or the reason a double backward
        through this call will raise (``draws``: the graph draws random numbers, ``draws_random``;
        ``written``: the arguments the call writes; ``reads_writes``: ``reads_and_writes`` of
        its forward graph)."""
        reads, writes = reads_writes
        refused = None
        if set(written) - writes:
            refused = ("its call writes arguments in place that its graph does not show (through "
                       "`.data`)")
        elif set(written) & reads:
            refused = ("its graph writes an argument in place whose value at the call its outputs "
                       "read (a recomputation would read the written value)")
        elif draws and any(isinstance(a, torch.Tensor) and dev.is_xla(a) for a in args):
            refused = ("its graph draws random numbers from device tensors (a recomputation on the "
                       "device would not draw them as the call did)")
        elif any(torch.is_autocast_enabled(d) for d in _AUTOCAST_DEVICES):
            refused = "autocast was on around the call (a recomputation runs outside it)"
        return refused if refused is not None else \
            Recompute(program, args, needs_grad, unchecked, draws, written)

    def grads(self, outputs, tangents, inputs, checked: dict) -> tuple:
        """d(leaves ``outputs`` . ``tangents``)/d(arguments ``inputs``), with history;
        ``checked``: {position: (argument, its version after the call)} for the others."""
        versions = {**self.versions, **{p: version for p, (_, version) in checked.items()
                                        if p not in self.written}}
        for position, version in versions.items():
            arg = self.args[position]
            if _version(arg) != version or arg.requires_grad != self.needs_grad[position]:
                raise DoubleBackwardUnsupported(
                    f"create_graph=True through torchxla_trace_once recomputes the call, and "
                    f"argument {position} changed in place (or its requires_grad) since it")
        with torch.enable_grad():
            # one alias per position: the grad of each position alone, as the node's inputs get
            # theirs (a tensor passed twice, or an argument made from another, would otherwise
            # be differentiated through every way it reaches the outputs at each position)
            # (and a copy of each argument the call wrote, which the recomputation writes again)
            aliases = [(a.detach().clone() if p in self.written else a.view_as(a))
                       if isinstance(a, torch.Tensor) else a for p, a in enumerate(self.args)]
            leaves = pytree.tree_leaves(self._run(aliases))
        arrived = [(leaves[k], g) for k, g in zip(outputs, tangents) if g is not None]
        return torch.autograd.grad([leaf for leaf, _ in arrived], [aliases[p] for p in inputs],
                                   [g for _, g in arrived], create_graph=True, allow_unused=True)

    def _run(self, args):
        """The program on ``args`` as the call ran it: under the call's default dtype and no
        autocast (the call ran outside autocast: ``of``), drawing what the call drew (the
        generator then put back where the program had got it to), and node by node (an fx
        Interpreter, whose frames are torch's: a frame hook active where the backward runs, a
        compiled step's or a ``with optimize(...)`` block's, would capture the graph's own code
        and replay it, and that replay's backward would recompute it again, without end)."""
        with contextlib.ExitStack() as stack:
            for device in _AUTOCAST_DEVICES:
                if torch.is_autocast_enabled(device):
                    stack.enter_context(torch.autocast(device, enabled=False))
            if torch.get_default_dtype() != self.default_dtype:
                stack.enter_context(_default_dtype(self.default_dtype))
            if self.generator_state is not None:
                stack.enter_context(cpu_state_kept())
                set_cpu_state(self.generator_state)
            return self.program.run_with(lambda *inputs: fx.Interpreter(self.program.graph_module).run(*inputs),
                                         tuple(args))


@contextlib.contextmanager
def _default_dtype(dtype):
    before = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(before)


def unsupported(reason: str) -> DoubleBackwardUnsupported:
    return DoubleBackwardUnsupported(
        f"create_graph=True (double backward) through torchxla_trace_once: the replayed backward "
        f"has no autograd of its own and the call cannot be recomputed: {reason}; compute "
        f"higher-order gradients with the eager or torchxla_trivial backend")


__all__ = ["DoubleBackwardUnsupported", "Recompute", "draws_random", "reads_and_writes", "unsupported"]
