"""The generated guard function: one read per source, parents first, deduplicated, readable,
and its nn.Module shortcuts give exactly what ``module.attr`` would."""

import torch

from guards import (
    AttrSource, ClosureSource, GlobalSource, ItemSource, LocalSource, compile_reader,
    dict_keys_match, equals_match, id_match, length_match, module_state_match, tensor_match,
    type_match,
)
from tests.guards.helpers import frame_of, guard_fn_for, some_function as f

SELF = LocalSource("self")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
        self.scale = 2.0
        self.register_buffer("offset", torch.zeros(2))


def net_guards(net):
    """What a tracer guards when it reads net.layers[0].weight, net.scale and net.offset."""
    layers, linear = AttrSource(SELF, "layers"), ItemSource(AttrSource(SELF, "layers"), 0)
    return [
        id_match(SELF, net), module_state_match(SELF, net),
        id_match(layers, net.layers), module_state_match(layers, net.layers),
        dict_keys_match(AttrSource(layers, "_modules"), net.layers._modules),
        id_match(linear, net.layers[0]), module_state_match(linear, net.layers[0]),
        tensor_match(AttrSource(linear, "weight"), net.layers[0].weight),
        equals_match(AttrSource(SELF, "scale"), net.scale),
        tensor_match(AttrSource(SELF, "offset"), net.offset),
    ]


def test_same_guard_twice_is_checked_once():
    x = torch.ones(2)
    guard_fn = guard_fn_for([tensor_match(LocalSource("x"), x)] * 3 + [equals_match(LocalSource("n"), 1)] * 2,
                            "x", "n")
    assert len(guard_fn.guards) == 2
    assert guard_fn.source.count("# L['x'] tensor") == 1
    assert guard_fn.guard_strings == [
        "L['x'] tensor: torch.float32 cpu [2] stride=[1] requires_grad=False torch.Tensor", "L['n'] == 1"]


def test_each_source_is_read_once_and_parents_are_checked_first():
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    text = guard_fn.source
    assert guard_fn(f, net)
    assert text.count("['layers']") == 1            # one read of L['self'].layers, shared
    # the parent's identity check comes before any read of its children
    assert text.index("L_self is") < text.index("['layers']") < text.index("['weight']")
    assert guard_fn.guards[0].source == SELF


def test_module_reads_skip_getattr_but_stay_exact():
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    assert "L_self.__dict__" in guard_fn.source and "L_self.layers" not in guard_fn.source
    # An instance attribute that shadows the submodule changes what net.layers means.
    net.__dict__["layers"] = torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert not guard_fn(f, net)
    assert guard_fn.failure_reason(f, net) == \
        "L['self'].layers: expected found in _modules, got 'the instance __dict__'"
    del net.__dict__["layers"]
    assert guard_fn(f, net)


def test_module_changes_are_seen():
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    net.layers[0] = torch.nn.Linear(2, 2)                       # a new submodule
    assert guard_fn.failure_reason(f, net).startswith("L['self'].layers[0]: expected the object")
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    net.layers.add_module("extra", torch.nn.Tanh())             # one more child
    assert "L['self'].layers._modules.keys()" in guard_fn.failure_reason(f, net)
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    net.scale = 3.0
    assert guard_fn.failure_reason(f, net) == "L['self'].scale: expected 2.0, got 3.0"
    net.scale = 2.0
    del net.layers[0].weight
    assert guard_fn.failure_reason(f, net).startswith("L['self'].layers[0].weight: could not read it (KeyError")
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    net.offset = torch.zeros(3)                                  # a buffer replaced
    assert guard_fn.failure_reason(f, net) == "L['self'].offset.shape: expected [2], got [3]"


def test_in_place_weight_updates_still_pass():
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    with torch.no_grad():
        net.layers[0].weight.add_(1.0)
    assert guard_fn(f, net)


def test_reader_reads_what_python_reads():
    net = Net()
    guards = net_guards(net)
    sources = [AttrSource(ItemSource(AttrSource(SELF, "layers"), 0), "weight"), AttrSource(SELF, "offset")]
    for reader in (compile_reader(sources, frame_of("self"), guards), compile_reader(sources, frame_of("self"))):
        assert reader(f, net)[0] is net.layers[0].weight
        assert reader(f, net)[1] is net.offset
        with torch.no_grad():
            net.layers[0].weight.mul_(2)    # in place: the same tensor, new data
        assert reader(f, net)[0] is net.layers[0].weight
    assert "_parameters" in compile_reader(sources, frame_of("self"), guards).source


def test_reader_falls_back_to_getattr_when_a_shortcut_does_not_apply():
    net = Net()
    guards = net_guards(net)
    reader = compile_reader([AttrSource(SELF, "offset")], frame_of("self"), guards)
    shadow = torch.ones(2)
    net.__dict__["offset"] = shadow        # now net.offset is the instance attribute
    assert reader(f, net)[0] is shadow


def test_globals_and_closures_are_read_from_the_function():
    def make(scale):
        def inner(x):
            return x * scale * WEIGHT
        return inner

    namespace = {"WEIGHT": 2.0}
    inner = make(3.0)
    g = type(inner)(inner.__code__, namespace, "inner", None, inner.__closure__)
    guards = [equals_match(GlobalSource("WEIGHT"), 2.0), equals_match(ClosureSource(0, "scale"), 3.0)]
    guard_fn = guard_fn_for(guards, "x", f_globals=namespace)
    assert guard_fn(g, None)
    namespace["WEIGHT"] = 5.0
    assert guard_fn.failure_reason(g, None) == "G['WEIGHT']: expected 2.0, got 5.0"
    namespace["WEIGHT"] = 2.0
    assert not guard_fn(make(4.0), None)          # same code, another closure cell
    assert guard_fn.failure_reason(type(inner)(inner.__code__, namespace, "inner", None, make(4.0).__closure__),
                                   None) == "C['scale']: expected 3.0, got 4.0"
    del namespace["WEIGHT"]
    assert guard_fn.failure_reason(g, None).startswith("G['WEIGHT']: could not read it (KeyError")


def test_containers_and_their_items():
    items = [torch.ones(2), 3]
    x = LocalSource("x")
    guards = [type_match(x, items), length_match(x, items), tensor_match(ItemSource(x, 0), items[0]),
              equals_match(ItemSource(x, 1), 3)]
    guard_fn = guard_fn_for(guards, "x")
    assert guard_fn(f, [torch.zeros(2), 3])
    assert guard_fn.failure_reason(f, [torch.zeros(2)]) == "len(L['x']): expected 2, got 1"
    assert guard_fn.failure_reason(f, [torch.zeros(2), 4]) == "L['x'][1]: expected 3, got 4"
    # the length check runs before any item is read: a short list is a clean miss
    assert guard_fn(f, []) is False


def test_source_is_printable_python():
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    compile(guard_fn.source, "<test>", "exec")
    code = [line for line in guard_fn.source.splitlines() if not line.startswith("#")]
    assert code[0] == "def ___guard(___func, L_self):"
    assert "# L['self'].layers[0].weight tensor: torch.float32 cpu [2, 2]" in guard_fn.source


def test_argument_names_cannot_clash_with_generated_names():
    x = torch.ones(1)
    names = ("v0", "___func", "L_x", "x")
    guards = [tensor_match(LocalSource(name), x) for name in names]
    guard_fn = guard_fn_for(guards, *names)
    assert guard_fn(f, x, x, x, x)
    assert not guard_fn(f, x, x, x, 1)


def test_an_identical_constant_tuple_skips_its_item_checks():
    size = (2, 3)
    x = LocalSource("size")
    guards = [type_match(x, size), length_match(x, size),
              equals_match(ItemSource(x, 0), 2), equals_match(ItemSource(x, 1), 3)]
    guard_fn = guard_fn_for(guards, "size")
    assert "if L_size is not ___const" in guard_fn.source
    assert guard_fn(f, size)                           # the very tuple: one identity check
    assert guard_fn(f, tuple([2, 3]))                  # an equal tuple: the item checks run
    assert not guard_fn(f, (2, 4))
    assert guard_fn.failure_reason(f, (2, 4)) == "L['size'][1]: expected 3, got 4"
    assert not guard_fn(f, [2, 3])


def test_a_tuple_holding_a_tensor_is_never_taken_on_trust():
    pair = (torch.ones(2), 1)
    x = LocalSource("pair")
    guards = [type_match(x, pair), length_match(x, pair),
              tensor_match(ItemSource(x, 0), pair[0]), equals_match(ItemSource(x, 1), 1)]
    guard_fn = guard_fn_for(guards, "pair")
    assert "is not ___const" not in guard_fn.source
    assert guard_fn(f, pair)
    pair[0].resize_(3)                                 # same tuple, its tensor changed shape
    assert not guard_fn(f, pair)


def test_module_state_is_read_from_the_instance_dict():
    net = Net()
    guard_fn = guard_fn_for(net_guards(net), "self")
    assert "['training'] is True" in guard_fn.source
    net.train(False)
    assert not guard_fn(f, net)
    net.train(True)
    net.layers.register_forward_pre_hook(lambda *a: None)
    assert guard_fn.failure_reason(f, net) == "len(L['self'].layers._forward_pre_hooks): expected 0, got 1"


def test_reader_sees_a_module_attribute_that_moved_out_of_the_instance_dict():
    holder = torch.nn.Module()
    holder.extra = torch.ones(1)            # a plain tensor attribute: lives in __dict__
    source = AttrSource(SELF, "extra")
    guards = [id_match(SELF, holder), tensor_match(source, holder.extra)]
    reader = compile_reader([source], frame_of("self"), guards)
    assert reader(f, holder)[0] is holder.extra
    del holder.extra
    holder.register_buffer("extra", torch.zeros(1))   # now served by nn.Module.__getattr__
    assert reader(f, holder)[0] is holder.extra


def test_a_guard_on_something_the_frame_cannot_read_is_refused_when_built():
    import pytest

    from guards import UnguardableValue

    with pytest.raises(UnguardableValue, match="not an argument"):
        guard_fn_for([equals_match(LocalSource("y"), 1)], "x")
