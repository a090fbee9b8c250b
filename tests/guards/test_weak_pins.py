"""Identity guards hold their objects weakly (``guards.pin``).

A guard ``L['model'] is <the model>`` that kept the model alive kept it, its parameters and
everything they hold for as long as the cache entry lived, where eager frees them at the
``del``.  Each test here is a way a weak pin could go wrong: keeping the object alive anyway
(through another holder: the generated code's constants, the native program, the memo), or
passing a call once the object is gone (a dead weak reference answers None; a new object may
take the dead one's address).
"""

import weakref

import torch

from guards import AttrSource, ItemSource, LocalSource, id_match, module_state_match, tensor_match, type_match
from guards.guard import GONE, WeakPin, pin, pinned
from tests.guards.helpers import guard_fn_for, some_function as f

M = LocalSource("m")


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(2, 2) for _ in range(5)])


def model_guards(net):
    """Enough of a model's structure for the memo to take part (pinned argument, module dicts)."""
    guards = [id_match(M, net), module_state_match(M, net)]
    for i, layer in enumerate(net.layers):
        source = ItemSource(AttrSource(M, "layers"), i)
        guards += [id_match(source, layer), module_state_match(source, layer),
                   tensor_match(AttrSource(source, "weight"), layer.weight)]
    return guards


def test_an_identity_guard_does_not_keep_its_object_alive():
    net = Net()
    guard_fn = guard_fn_for(model_guards(net), "m")
    assert guard_fn(f, net) and guard_fn(f, net)       # the second call takes the memo's path
    alive = [weakref.ref(net), weakref.ref(net.layers[3].weight)]
    del net
    assert [ref() for ref in alive] == [None, None]
    assert guard_fn.weak_pins and all(p() is None for p in guard_fn.weak_pins)


def test_a_guard_whose_object_died_passes_no_call():
    class Thing:
        pass

    thing = Thing()
    guard_fn = guard_fn_for([id_match(M, thing)], "m")
    assert guard_fn(f, thing)
    del thing
    assert not guard_fn(f, None)          # a dead weak reference answers None: None is not it
    assert not guard_fn(f, Thing())       # nor the next object, at whatever address it lands
    assert "L['m']" in guard_fn.failure_reason(f, None)


class BigNet(Net):
    """Over 512 bytes an object is the C allocator's, which hands a freed block of a size to the
    next request of that size: the next BigNet takes the address of the last one freed."""

    __slots__ = tuple(f"slot{i}" for i in range(80))


def test_a_new_model_at_a_dead_ones_address_fails_the_guard():
    for _ in range(20):       # the allocator decides; it takes one round nearly always
        net = BigNet()
        guard_fn = guard_fn_for(model_guards(net), "m")
        assert guard_fn(f, net) and guard_fn(f, net)
        address, alive = id(net), weakref.ref(net)
        del net
        assert alive() is None
        candidates = [BigNet.__new__(BigNet) for _ in range(100)]      # all alive: each its own place
        same_place = [net for net in candidates if id(net) == address]
        if same_place:
            net = same_place[0]
            net.__init__()
            assert not guard_fn(f, net)
            return
    raise AssertionError("no new model took a dead one's address in 20 rounds: the case was not exercised")


def test_the_pin_tells_its_listeners_when_the_object_dies():
    class Thing:
        pass

    thing = Thing()
    held = pin(thing)
    heard = []
    held.listeners.append(lambda: heard.append(True))
    assert type(held) is WeakPin and pinned(held) is thing
    del thing
    assert heard == [True] and pinned(held) is GONE


def test_objects_without_weak_references_are_held_themselves():
    xs = [1, 2]
    assert pin(xs) is xs and pin(None) is None and pinned(xs) is xs
    guard_fn = guard_fn_for([id_match(LocalSource("xs"), xs), type_match(LocalSource("xs"), xs)], "xs")
    assert guard_fn(f, xs) and not guard_fn(f, [1, 2])
    assert guard_fn.weak_pins == ()


def test_a_program_weak_reference_is_compared_as_itself():
    """A weak reference the program passes is an object like any other (it takes no weak
    reference itself): the guard holds it and compares it, it does not call it."""
    class Thing:
        pass

    thing = Thing()
    ref = weakref.ref(thing)
    guard_fn = guard_fn_for([id_match(M, ref)], "m")
    assert guard_fn(f, ref) and not guard_fn(f, thing)


def test_one_object_at_two_sources_is_named_once():
    """Each identity guard makes its own pin; the generated code names the object once, so the
    checks of it that read the same variable are one check (as with a strong pin)."""
    class Holder:
        pass

    shared, holder = Holder(), Holder()
    holder.a = holder.b = shared
    guard_fn = guard_fn_for([id_match(M, holder), id_match(AttrSource(M, "a"), shared),
                             id_match(AttrSource(M, "b"), shared)], "m")
    assert guard_fn(f, holder)
    names = {line.split(" is ")[1].split("(")[0] for line in guard_fn.source.splitlines()
             if "['a'] is" in line or "['b'] is" in line or ".a is" in line or ".b is" in line}
    assert len(names) == 1, guard_fn.source
    holder.b = Holder()
    assert not guard_fn(f, holder)
