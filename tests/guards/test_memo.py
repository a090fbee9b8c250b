"""The dict-tag memo: after a guard passed, the next call skips what no dict change could
alter, and still fails on every change the full guard would see."""

import pytest
import torch

from tests.guards.test_codegen import Net, net_guards
from tests.guards.helpers import guard_fn_for, some_function as f



def memo_of(guard_fn):
    namespace = getattr(guard_fn, "python", guard_fn).__globals__   # a FastGuard keeps its Python twin
    memos = [v for k, v in namespace.items() if k.startswith("___memo")]
    return memos[0] if memos else None


@pytest.fixture
def guarded_net(tensor_check_mode):
    """A guarded Net after one passing call (with the C helper: the memo is committed)."""
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    assert (memo_of(guard_fn) is not None) is tensor_check_mode, guard_fn.source
    assert guard_fn(f, net)                     # the full guard runs and commits
    if tensor_check_mode:
        assert memo_of(guard_fn).valid()
    assert guard_fn(f, net)                     # the fast path
    return net, guard_fn


CHANGES = {
    "eval()": lambda net: net.eval(),
    "a submodule's eval()": lambda net: net.layers[0].eval(),
    "a new submodule": lambda net: setattr(net, "layers", torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())),
    "a replaced item": lambda net: net.layers.__setitem__(0, torch.nn.Linear(2, 2)),
    "an appended item": lambda net: net.layers.append(torch.nn.Tanh()),
    "a float attribute": lambda net: setattr(net, "scale", 3.0),
    "a forward hook": lambda net: net.layers[0].register_forward_hook(lambda *a: None),
    "a forward pre-hook on the root": lambda net: net.register_forward_pre_hook(lambda *a: None),
    "a weight of another shape": lambda net: setattr(net.layers[0], "weight", torch.nn.Parameter(torch.ones(3, 2))),
    "a weight's data replaced": lambda net: setattr(net.layers[0].weight, "data", torch.ones(2, 3)),
    "a weight no longer requiring grad": lambda net: net.layers[0].weight.requires_grad_(False),
    "a buffer replaced": lambda net: setattr(net, "offset", torch.zeros(3)),
    "a deleted weight": lambda net: delattr(net.layers[0], "weight"),
    "a shadowing instance attribute": lambda net: net.__dict__.__setitem__("layers", torch.nn.ReLU()),
    "a whole new __dict__": lambda net: setattr(net, "__dict__", {**net.__dict__, "scale": 5.0}),
    "another class": lambda net: setattr(net, "__class__", type("Other", (Net,), {})),
    "a submodule of another class": lambda net: setattr(net.layers[0], "__class__",
                                                        type("OtherLinear", (torch.nn.Linear,), {})),
    "a _parameters entry written directly": lambda net: net.__dict__["_parameters"].__setitem__("layers", torch.nn.Parameter(torch.ones(1))),
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_the_fast_path_fails_on_every_change(guarded_net, change):
    net, guard_fn = guarded_net
    CHANGES[change](net)
    assert guard_fn(f, net) is False
    assert guard_fn.failure_reason(f, net) is not None


def _quiet_changes():
    """Changes made without changing any dict (everything they need is made beforehand), so
    the memo's quiet path, which skips the dict tags while no dict changed, is the one asked."""
    other_net = type("Other", (Net,), {})
    other_linear = type("OtherLinear", (torch.nn.Linear,), {})
    return {
        "another class": lambda net, made: object.__setattr__(net, "__class__", made[0]),
        "a submodule of another class": lambda net, made: object.__setattr__(net.layers[0], "__class__", made[1]),
        "a whole new __dict__": lambda net, made: object.__setattr__(net, "__dict__", made[2]),
        "a weight no longer requiring grad": lambda net, made: net.layers[0].weight.requires_grad_(False),
    }, (other_net, other_linear)


@pytest.mark.parametrize("change", list(_quiet_changes()[0]))
def test_the_quiet_path_still_fails_on_changes_that_change_no_dict(tensor_check_mode, change):
    from guards import _guard_helpers

    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    changes, (other_net, other_linear) = _quiet_changes()
    made = (other_net, other_linear, {**net.__dict__, "scale": 5.0})
    apply = changes[change]
    assert guard_fn(f, net) and guard_fn(f, net) and guard_fn(f, net)
    epoch = _guard_helpers.quiet_epoch()
    assert guard_fn(f, net)                  # no dict changed since the last call: quiet
    apply(net, made)
    assert guard_fn(f, net) is False
    if tensor_check_mode:                    # (the memo read the clock: still the same epoch)
        assert _guard_helpers.quiet_epoch() == epoch, "the change changed a dict: not the quiet path"


def test_the_quiet_path_ends_with_any_dicts_change(guarded_net, tensor_check_mode):
    from guards import _guard_helpers

    net, guard_fn = guarded_net
    assert guard_fn(f, net)
    epoch = _guard_helpers.quiet_epoch()
    unrelated = {}
    unrelated["k"] = 1                       # a dict the guard never read
    assert guard_fn(f, net)
    assert _guard_helpers.quiet_epoch() > epoch or not tensor_check_mode
    net.layers[0].__dict__["training"] = False     # one it read: seen
    assert guard_fn(f, net) is False


def test_a_global_module_hook_is_seen(guarded_net):
    net, guard_fn = guarded_net
    handle = torch.nn.modules.module.register_module_forward_hook(lambda *a: None)
    try:
        assert guard_fn(f, net) is False
    finally:
        handle.remove()
    assert guard_fn(f, net) is True


def test_in_place_updates_keep_the_fast_path(guarded_net):
    net, guard_fn = guarded_net
    with torch.no_grad():
        net.layers[0].weight.add_(1.0)
        net.offset.mul_(3.0)
    assert guard_fn(f, net) is True
    assert memo_of(guard_fn) is None or memo_of(guard_fn).valid()


def test_another_object_of_the_same_kind_is_not_taken_for_the_pinned_one(guarded_net):
    net, guard_fn = guarded_net
    assert guard_fn(f, Net()) is False


def test_changing_back_passes_again(guarded_net):
    net, guard_fn = guarded_net
    net.eval()
    assert guard_fn(f, net) is False
    net.train()
    assert guard_fn(f, net) is True      # full guard again, then a new commit
    assert guard_fn(f, net) is True


def test_a_commit_from_an_interrupted_guard_is_refused():
    from guards import native

    if native.DictMemo is None:
        return
    memo, owner = native.DictMemo(), Net()
    first = memo.begin()
    second = memo.begin()              # another thread began meanwhile: first's notes are gone
    memo.note_owner(owner, owner.__dict__)
    assert memo.commit((), first) is False and not memo.valid()
    assert memo.commit((), second) is True and memo.valid()
    owner.scale = 4.0
    assert not memo.valid()
    third = memo.begin()
    memo.note([], True)                # not a container the memo can vouch for
    assert memo.commit((), third) is False and not memo.valid()


def test_a_noted_type_is_checked_with_its_owner_and_alone():
    """A type noted for an object whose __dict__ was noted too is checked in the same visit;
    one noted for any other object is checked on its own: both count."""
    from guards import native

    if native.DictMemo is None:
        return
    memo, owner, loner = native.DictMemo(), Net(), Net()
    token = memo.begin()
    memo.note_type(owner)
    memo.note_owner(owner, owner.__dict__)
    memo.note_type(loner)
    assert memo.commit((), token) is True and memo.valid()
    for obj in (owner, loner):
        obj.__class__ = type("Other", (Net,), {})
        assert not memo.valid()
        obj.__class__ = Net
        assert memo.valid()


def test_a_change_to_any_noted_dict_is_seen_wherever_it_lies_in_the_notes():
    """valid() checks the tags in blocks: a change in any block, and in the tail after the last
    full block, makes it False, and it reports how much it checks."""
    from guards import native

    if native.DictMemo is None:
        return
    dicts = [{"k": i} for i in range(21)]      # two blocks of 8 and a tail of 5
    for changed in range(len(dicts)):
        memo = native.DictMemo()
        token = memo.begin()
        for d in dicts:
            memo.note(d, True)
        assert memo.commit((), token) is True and memo.valid()
        assert memo.noted == (len(dicts), 0)
        dicts[changed]["k"] += 1000
        assert not memo.valid(), changed


def test_the_memo_compares_tags_with_the_counter_at_begin():
    """valid() compares every noted dict's tag with the tag counter's value when the guard
    began: other dicts changing moves the counter and leaves the memo valid; a noted dict
    changing, even to an equal value, makes it invalid."""
    from guards import native

    if native.DictMemo is None:
        return
    noted, other = {"k": int("1000")}, {}
    owner = Net()
    memo = native.DictMemo()
    token = memo.begin()
    memo.note(noted, True)
    memo.note_owner(owner, owner.__dict__)
    assert memo.commit((), token) is True
    for i in range(100):                       # the counter moves on
        other[i] = i
    assert memo.valid()
    noted["k"] = int("1000")                   # an equal value (another object): a change
    assert not memo.valid()
    token = memo.begin()
    memo.note(noted, True)
    memo.note_owner(owner, owner.__dict__)
    assert memo.commit((), token) is True and memo.valid()
    owner.__dict__["label"] = "another object"
    assert not memo.valid()


def test_a_dict_changed_while_the_guard_ran_is_compared_with_its_own_tag():
    """A dict that changed after begin() and before its note (code the guard's reads ran, say)
    holds a tag above the counter at begin: it is checked against the tag it was noted with, so
    the memo is valid while it stays so and invalid after its next change."""
    from guards import native

    if native.DictMemo is None:
        return
    early, late = {"a": 1}, {"b": 1}
    memo = native.DictMemo()
    token = memo.begin()
    memo.note(early, True)
    late["b"] = 2                              # changed after begin, then noted
    memo.note(late, True)
    assert memo.commit((), token) is True and memo.valid()
    late["b"] = 3
    assert not memo.valid()
    token = memo.begin()
    memo.note(early, True)
    memo.note(late, True)
    assert memo.commit((), token) is True and memo.valid()
    early["a"] = 5
    assert not memo.valid()


# ----------------------------------------------------------------------------- inlined globals
# A function inlined from another module reads that module's globals (and builtins) through dict
# constants of the guard; the memo notes those dicts when its full guard begins, and vouches for
# the reads after that.

HELPER_SOURCE = """
import torch
FACTOR = 2.0
def helper(x):
    return torch.relu(x) * FACTOR + abs(-1.0)
"""


def helper_namespace():
    import types

    module = types.ModuleType("memo_helper")
    exec(HELPER_SOURCE, module.__dict__)
    return module


class CallsHelper(torch.nn.Module):
    def __init__(self, helpers):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.helpers = helpers

    def forward(self, x):
        return self.helpers.helper(self.lin(x))


HELPER_CHANGES = {
    "a global rebound": lambda module: setattr(module, "FACTOR", 5.0),
    "a module the function reads rebound": lambda module: setattr(module, "torch", _FakeTorch()),
    "a global that shadows a builtin": lambda module: setattr(module, "abs", lambda value: 10.0),
    "the builtin itself": lambda module: module.__builtins__.__setitem__("abs", lambda value: 20.0),
}


class _FakeTorch:
    relu = staticmethod(lambda x: x * 0)


@pytest.mark.parametrize("change", HELPER_CHANGES, ids=list(HELPER_CHANGES))
def test_a_change_to_an_inlined_functions_globals_is_seen(change):
    import builtins

    import minidynamo

    minidynamo.reset()
    module = helper_namespace()
    net = CallsHelper(module).eval()
    x = torch.randn(2, 3)
    optimized = minidynamo.optimize("eager")(net)
    saved_abs = builtins.abs
    try:
        for _ in range(3):   # capture, the full guard's commit, the fast path
            assert torch.equal(optimized(x), net(x))
        HELPER_CHANGES[change](module)
        assert torch.equal(optimized(x), net(x)), change
        assert torch.equal(optimized(x), net(x)), change
    finally:
        builtins.abs = saved_abs
        minidynamo.reset()
