"""Property test: the fast layer decides exactly as the plain reference layer.

A small network is captured by minidynamo (real guards: module attributes through dict
shortcuts, Sequential/ModuleList items, method guards of inlined submodule calls, globals,
floats, tensors, grad mode, default dtype).  Then random sequences of mutations of the watched
objects are applied and undone; in every state

- the guard function (a native ``FastGuard`` in compiled mode), its generated Python twin and its
  slow path (``failure_reason``) give one answer;
- the graph-input reader (a native ``Reader`` in compiled mode) reads the very objects its
  generated Python twin reads, or both raise;
- it never passes where the plain layer (``guards.reference``: each source read once with
  ``getattr``/``[]``, one predicate per kind) fails;
- and it passes exactly where the plain layer passes, unless a mutation touched a premise of a
  shortcut (an instance attribute that shadows a dict or class entry, a class attribute added,
  ``__class__`` reassigned): there the fast layer refuses, conservatively, what the plain read
  would still accept.
"""

import random
import types

import pytest
import torch
from torch import nn

import minidynamo
from guards import FrameInfo, reference
from guards.native import cpp_helpers

SCALE = 2.0


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.norm = nn.LayerNorm(4)
        self.register_buffer("shift", torch.zeros(4))

    def forward(self, x):
        return self.norm(self.lin(x)) + self.shift


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.extra = nn.ModuleList([nn.Linear(4, 4)])
        self.alpha = 0.5
        self.depth = 2

    def forward(self, x):
        y = self.blocks(x.view(x.size(0), -1))   # methods read through the input
        y = self.extra[0](y) * self.alpha
        if self.depth > 1:                       # only compared: (self.depth > 1) is True
            y = y + 1
        return torch.relu(y) * SCALE


class SubNet(Net):
    pass


# ----------------------------------------------------------------------------- mutations
# Each takes (net, state) and returns an undo function; ``state["x"]`` is the input.


def set_data(get, make):
    def mutate(net, state):
        p = get(net)
        old = p.data
        p.data = make(old)
        return lambda: setattr(p, "data", old)
    return mutate


def set_attr(get_owner, name, make):
    def mutate(net, state):
        owner = get_owner(net)
        old = getattr(owner, name)
        setattr(owner, name, make(old))
        return lambda: setattr(owner, name, old)
    return mutate


def flip_requires_grad(net, state):
    p = net.blocks[1].lin.bias
    p.requires_grad_(not p.requires_grad)
    return lambda: p.requires_grad_(not p.requires_grad)


def train_one(net, state):
    net.blocks[0].train()
    return lambda: net.blocks[0].eval()


def forward_hook(net, state):
    handle = net.extra[0].register_forward_hook(lambda *a: None)
    return handle.remove


def global_hook(net, state):
    handle = nn.modules.module.register_module_forward_pre_hook(lambda *a: None)
    return handle.remove


def rebind_global(net, state):
    globals()["SCALE"] = 3.0
    return lambda: globals().__setitem__("SCALE", 2.0)


def same_global_value(net, state):
    globals()["SCALE"] = float("2.0")   # a new float object, same value
    return lambda: globals().__setitem__("SCALE", 2.0)


def grad_off(net, state):
    torch.set_grad_enabled(False)
    return lambda: torch.set_grad_enabled(True)


def default_double(net, state):
    torch.set_default_dtype(torch.float64)
    return lambda: torch.set_default_dtype(torch.float32)


def append_block(net, state):
    net.blocks.append(Block())
    key = str(len(net.blocks) - 1)
    return lambda: net.blocks._modules.pop(key)   # (del blocks[-1] would rebuild _modules as an OrderedDict)


def input_change(make):
    def mutate(net, state):
        old = state["x"]
        state["x"] = make(old)
        return lambda: state.__setitem__("x", old)
    return mutate


def hide_method(name, replacement):         # an attribute on the input tensor over a method
    def make(x):
        x = x.clone()
        setattr(x, name, replacement)
        return x
    return make


def shadow_submodule(net, state):          # premise: an instance attribute over _modules
    block = net.blocks[0]
    block.__dict__["lin"] = block._modules["lin"]
    return lambda: block.__dict__.pop("lin")


def bound_method_on_instance(net, state):  # premise: forward found in the instance dict
    block = net.blocks[1]
    block.forward = types.MethodType(Block.forward, block)   # the same function, bound by hand
    return lambda: block.__dict__.pop("forward")


def method_replaced_on_class(net, state):  # the class's function itself changes: both fail
    original = Block.forward
    Block.forward = lambda self, x: original(self, x)
    return lambda: setattr(Block, "forward", original)


def code_replaced(net, state):             # the function stays, its code changes: both fail
    original = Block.forward.__code__
    Block.forward.__code__ = (lambda self, x: self.norm(self.lin(x)) - self.shift).__code__
    return lambda: setattr(Block.forward, "__code__", original)


def class_property(net, state):            # premise: a class attribute wins over _buffers
    Block.shift = property(lambda self: self._buffers["shift"])
    return lambda: delattr(Block, "shift")


def reassign_class(net, state):            # premise: the exact type of a pinned module
    net.__class__ = SubNet
    return lambda: setattr(net, "__class__", Net)


MUTATIONS = {
    "weight dtype": (set_data(lambda n: n.blocks[0].lin.weight, lambda d: d.double()), False),
    "weight shape": (set_data(lambda n: n.blocks[0].lin.weight, lambda d: torch.randn(5, 4)), False),
    "weight strides": (set_data(lambda n: n.extra[0].weight, lambda d: d.t().contiguous().t()), False),
    "buffer dtype": (set_attr(lambda n: n.blocks[1], "shift", lambda b: b.double()), False),
    "same-metadata parameter": (set_attr(lambda n: n.blocks[1].lin, "weight",
                                         lambda p: nn.Parameter(p.detach().clone())), False),
    "requires_grad": (flip_requires_grad, False),
    "new submodule": (set_attr(lambda n: n.blocks[1], "norm", lambda m: nn.LayerNorm(4)), False),
    "eps": (set_attr(lambda n: n.blocks[0].norm, "eps", lambda e: 1e-3), False),
    "alpha": (set_attr(lambda n: n, "alpha", lambda a: 0.25), False),
    "alpha same value": (set_attr(lambda n: n, "alpha", lambda a: float("0.5")), False),
    "depth, same side": (set_attr(lambda n: n, "depth", lambda d: 7), False),
    "depth, other side": (set_attr(lambda n: n, "depth", lambda d: 1), False),
    "depth a float": (set_attr(lambda n: n, "depth", lambda d: 7.0), False),
    "depth a bool": (set_attr(lambda n: n, "depth", lambda d: True), False),
    "training": (train_one, False),
    "forward hook": (forward_hook, False),
    "global hook": (global_hook, False),
    "global rebound": (rebind_global, False),
    "global same value": (same_global_value, False),
    "grad mode": (grad_off, False),
    "default dtype": (default_double, False),
    "Sequential append": (append_block, False),
    "input dtype": (input_change(lambda x: x.double()), False),
    "input shape": (input_change(lambda x: torch.randn(3, 4)), False),
    "input requires_grad": (input_change(lambda x: x.detach().requires_grad_()), False),
    "input transposed": (input_change(lambda x: torch.randn(4, 2).t()), False),
    "input size() hidden": (input_change(hide_method("size", lambda *dims: 3)), False),
    "input method the trace never read hidden": (input_change(hide_method("sum", lambda: 0)), False),
    "method replaced on the class": (method_replaced_on_class, False),
    "method's code replaced": (code_replaced, False),
    "shadowing instance attribute": (shadow_submodule, True),
    "method in the instance dict": (bound_method_on_instance, True),
    "class property": (class_property, True),
    "__class__ reassigned": (reassign_class, True),
}


@pytest.fixture
def captured(tensor_check_mode):
    minidynamo.reset()
    net = Net().eval()
    x = torch.randn(2, 4)
    optimized = minidynamo.optimize("eager")(net)
    optimized(x)
    (entry,) = [e for e in minidynamo.cache_entries(net) if e.guard_fn is not None]
    guard_fn = entry[1]
    if tensor_check_mode and cpp_helpers is not None:
        assert type(guard_fn).__name__ == "FastGuard", "compiled mode runs the native fast path"
        read_inputs = entry[2].read_inputs
        assert type(getattr(read_inputs, "reader", read_inputs)).__name__ == "Reader", "compiled mode reads natively"
    guard_fn.reader = entry[2].read_inputs
    yield net, x, guard_fn
    minidynamo.reset()


def tensor_check_mode_is_compiled(guard_fn) -> bool:
    return type(guard_fn).__name__ == "FastGuard"


def reads(reader, *args):
    """The objects ``reader`` reads (compared by identity), or the type of what it raised."""
    try:
        return [id(value) for value in reader(*args)]
    except Exception as error:   # noqa: BLE001 - the kind is what is compared
        return type(error)


def decisions(net, x, guard_fn):
    forward = Net.forward
    reader = guard_fn.reader
    python_reader = getattr(reader, "python", reader)
    assert reads(reader, forward, net, x) == reads(python_reader, forward, net, x)
    fast = guard_fn(forward, net, x)
    # right after the guard, as on a hit: the values it handed off when it passed
    assert reads(reader, forward, net, x) == reads(python_reader, forward, net, x)
    python = getattr(guard_fn, "python", guard_fn)(forward, net, x)
    explained = guard_fn.failure_reason(forward, net, x) is None
    frame_info = FrameInfo(("self", "x"), forward.__globals__, forward.__builtins__)
    failed = reference.first_failure(guard_fn.guards, forward, (net, x), frame_info)
    return fast, python, explained, failed


def test_every_mutation_alone(captured):
    net, x, guard_fn = captured
    assert decisions(net, x, guard_fn)[0] is True
    if tensor_check_mode_is_compiled(guard_fn):
        assert type(guard_fn.reader).__name__ == "HandOff", "a FastGuard holding every input hands them off"
    for name, (mutate, premise) in MUTATIONS.items():
        state = {"x": x}
        undo = mutate(net, state)
        try:
            fast, python, explained, failed = decisions(net, state["x"], guard_fn)
        finally:
            undo()
        assert fast == python == explained, name
        assert not (fast and failed), f"{name}: fast passed where {failed} fails"
        if not premise:
            assert fast == (failed is None), f"{name}: fast {fast}, plain fails on {failed}"
        else:
            assert not fast, f"{name}: a shortcut's premise changed, yet the fast guard passed"
        assert decisions(net, x, guard_fn)[0] is True, f"after undoing {name}"


@pytest.mark.parametrize("seed", range(4))
def test_random_mutation_sequences(captured, seed):
    net, x, guard_fn = captured
    rng = random.Random(seed)
    names = list(MUTATIONS)
    for _ in range(40):
        chosen = rng.sample(names, rng.randint(1, 3))
        state, undos = {"x": x}, []
        try:
            for name in chosen:
                undos.append(MUTATIONS[name][0](net, state))
                fast, python, explained, failed = decisions(net, state["x"], guard_fn)
                assert fast == python == explained, chosen
                assert not (fast and failed), f"{chosen}: fast passed where {failed} fails"
                if not any(MUTATIONS[n][1] for n in chosen[:len(undos)]):
                    assert fast == (failed is None), f"{chosen}: fast {fast}, plain fails on {failed}"
        finally:
            for undo in reversed(undos):
                undo()
        assert decisions(net, x, guard_fn)[:3] == (True, True, True), chosen


def test_the_plain_layer_reads_each_source_once(captured, monkeypatch):
    net, x, guard_fn = captured
    forward = Net.forward
    reads = []
    for cls in {type(g.source) for g in guard_fn.guards}:
        original = cls.read
        monkeypatch.setattr(cls, "read", lambda self, frame, original=original: reads.append(self) or original(self, frame))
    frame_info = FrameInfo(("self", "x"), forward.__globals__, forward.__builtins__)
    assert reference.first_failure(guard_fn.guards, forward, (net, x), frame_info) is None
    guarded = {g.source for g in guard_fn.guards}
    assert guarded <= set(reads)
    # each guarded source once by the reader (a chain's bases are read again inside Source.read)
    top_level = [s for s in reads if s in guarded]
    assert len(top_level) >= len(guarded)
    assert reference.render(guard_fn.guards).splitlines() == guard_fn.guard_strings


class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)


def test_native_reader_follows_class_changes(tensor_check_mode):
    """The native reader's ``__dict__`` shortcut holds for a class as it is now: a class that
    gains a ``__getattribute__``, or has a ``__dict__`` property, is read through it, as Python
    would."""
    from guards import AttrSource, FrameInfo, LocalSource, compile_reader, type_match

    class Local(Plain):
        pass

    module = Local()
    source = AttrSource(AttrSource(LocalSource("m"), "lin"), "weight")
    frame = FrameInfo(("m",), globals(), __builtins__)
    reader = compile_reader([source], frame, [type_match(LocalSource("m"), module)])
    python = getattr(reader, "python", reader)
    assert reads(reader, None, module) == reads(python, None, module) == [id(module.lin.weight)]
    other = nn.Linear(2, 2)
    Local.__getattribute__ = lambda self, name: {"lin": other}.get(name) or object.__getattribute__(self, name)
    try:
        assert reads(reader, None, module) == reads(python, None, module)
    finally:
        del Local.__getattribute__
    assert reads(reader, None, module) == [id(module.lin.weight)]

    class OwnDict(Plain):   # a class whose __dict__ is not the instance dict
        __dict__ = property(lambda self: {"_modules": {"lin": other}, "_parameters": {}, "_buffers": {}})

    odd = OwnDict()
    reader = compile_reader([source], frame, [type_match(LocalSource("m"), odd)])
    assert reads(reader, None, odd) == reads(getattr(reader, "python", reader), None, odd) == [id(other.weight)]


def test_hand_off_only_for_the_same_call(captured):
    """The reader takes the guard's values only for the call the guard just passed, once."""
    net, x, guard_fn = captured
    forward, reader = Net.forward, guard_fn.reader
    other = torch.randn(2, 4)
    assert guard_fn(forward, net, x)
    assert reads(reader, forward, net, other) == reads(getattr(reader, "python", reader), forward, net, other)
    assert guard_fn(forward, net, x)
    first = reader(forward, net, x)
    assert any(value is x for value in first)
    assert [id(v) for v in reader(forward, net, x)] == [id(v) for v in first]   # read again: the same
    if hasattr(guard_fn, "drop_kept"):
        assert guard_fn(forward, net, x)
        assert guard_fn(forward, net, x.double()) is False   # a failing check drops what was kept
        assert reads(reader, forward, net, x) == reads(reader.python, forward, net, x)


GLOBAL_WEIGHT = torch.randn(4)


def scaled(net, x):
    return net.extra[0](x) * GLOBAL_WEIGHT


def test_hand_off_of_call_memo_and_read_values(tensor_check_mode):
    """The three places a handed-off input comes from: the call (``x``), the memo's committed
    values (the parameters, kept through their tuple) and a read the fast path made (a global):
    the reader gets the very objects its Python twin reads, on every call."""
    minidynamo.reset()
    net = Net().eval()
    optimized = minidynamo.optimize("eager")(scaled)
    x = torch.randn(2, 4)
    assert torch.equal(optimized(net, x), scaled(net, x))
    (entry,) = [e for e in minidynamo.cache_entries(scaled) if e.guard_fn is not None]
    guard_fn, reader = entry[1], entry[2].read_inputs
    if tensor_check_mode and cpp_helpers is not None:
        assert type(reader).__name__ == "HandOff"
    python_reader = getattr(reader, "python", reader)
    wanted = {id(x), id(net.extra[0].weight), id(GLOBAL_WEIGHT)}
    for call in range(3):
        assert guard_fn(scaled, net, x)
        handed = reads(reader, scaled, net, x)
        assert handed == reads(python_reader, scaled, net, x)
        assert wanted <= set(handed)
        assert getattr(reader, "handed", True)
        assert torch.equal(optimized(net, x), scaled(net, x))


class DeepNet(nn.Module):
    """Deep enough that the native guard needs more registers than it keeps on the C stack."""

    def __init__(self, depth=12):
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(depth)])

    def forward(self, x):
        return self.blocks(x) * SCALE


def test_a_guard_with_many_registers_decides_as_the_plain_layer(tensor_check_mode):
    minidynamo.reset()
    net, x = DeepNet().eval(), torch.randn(2, 4)
    optimized = minidynamo.optimize("eager")(net)
    optimized(x)
    (entry,) = [e for e in minidynamo.cache_entries(net) if e.guard_fn is not None]
    guard_fn, forward = entry[1], DeepNet.forward
    if tensor_check_mode_is_compiled(guard_fn):
        assert guard_fn.n_registers > 64
    frame_info = FrameInfo(("self", "x"), forward.__globals__, forward.__builtins__)
    mutations = [set_data(lambda n: n.blocks[11].lin.weight, lambda d: d.double()),
                 set_attr(lambda n: n.blocks[7].norm, "eps", lambda e: 1e-3),
                 lambda n, state: n.blocks[9].register_forward_hook(lambda *a: None).remove,
                 input_change(lambda x: torch.randn(3, 4)), rebind_global]
    rng = random.Random(0)
    try:
        for _ in range(30):
            state, undos = {"x": x}, []
            for mutate in rng.sample(mutations, rng.randint(0, 2)):
                undos.append(mutate(net, state))
            fast = guard_fn(forward, net, state["x"])
            plain = reference.first_failure(guard_fn.guards, forward, (net, state["x"]), frame_info) is None
            assert fast == getattr(guard_fn, "python", guard_fn)(forward, net, state["x"]) == plain == (not undos)
            for undo in reversed(undos):
                undo()
            assert guard_fn(forward, net, x)
    finally:
        minidynamo.reset()
