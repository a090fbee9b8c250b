"""Property test: the native program decides as the generated Python for every kind of check.

Real models' guards (Hugging Face configs with their own ``__getattribute__``, kwargs dicts,
several arguments that are one object, attributes that must stay absent, pinned constant
tuples) hold checks that had no native form: the identity of two sources, distinct sources, a
dict's keys, an attribute still absent, a class lookup, a constant tuple's length, the block
skipped for a pinned constant.  One of them sent the whole guard back to Python.  Here a frame
makes all of them; random mutations of its arguments are applied, and in every state the native
guard, its generated twin, its slow path and the plain layer give one answer."""

import random

import pytest
import torch

import minidynamo
from guards import FrameInfo, reference


class Config:
    """A transformers-like config: its own ``__getattribute__``."""

    def __init__(self):
        self.scale = 2.0

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)


class Slotted:
    __slots__ = ("a", "b")


def program(x, config, table, first, second, shape, slotted):
    y = x * config.scale
    if getattr(config, "extra", None) is None:      # stays absent
        y = y + 1
    for key in table:                               # the dict's keys, in order
        y = y + table[key]
    if first is second:                             # one object, or two
        y = y * 2
    y = y + len(shape)                              # a pinned constant tuple
    if not hasattr(slotted, "b"):                   # an unset slot
        y = y - slotted.a
    return y


def arguments():
    slotted = Slotted()
    slotted.a = 1.0
    first = Config()
    return [torch.ones(2), Config(), {"p": 1.0, "q": 2.0}, first, first, (), slotted]


def replace(position, make):
    def mutate(args):
        args[position] = make(args[position])
    return mutate


def set_attribute(position, name, value):
    def mutate(args):
        object.__setattr__(args[position], name, value)
    return mutate


def reorder(table):
    return dict(reversed(list(table.items())))


MUTATIONS = {
    "scale": set_attribute(1, "scale", 3.0),
    "extra appears": set_attribute(1, "extra", 1),
    "config's class method replaced": lambda args: setattr(type(args[1]), "__getattribute__",
                                                           object.__getattribute__),
    "a key added": replace(2, lambda t: {**t, "r": 0.0}),
    "keys reordered": replace(2, reorder),
    "same keys, new dict": replace(2, dict),
    "second is another object": replace(4, lambda o: Config()),
    "first is the config": lambda args: args.__setitem__(3, args[1]),
    "another constant tuple": replace(5, lambda s: (1,)),
    "an equal tuple": replace(5, lambda s: tuple(list(s))),
    "slot filled": set_attribute(6, "b", 5.0),
    "input shape": replace(0, lambda x: torch.ones(3)),
}


@pytest.fixture
def captured(tensor_check_mode):
    minidynamo.reset()
    compiled = minidynamo.optimize("eager")(program)
    compiled(*arguments())
    (entry,) = [e for e in minidynamo.cache_entries(program) if e.guard_fn is not None]
    if tensor_check_mode:
        assert type(entry.guard_fn).__name__ == "FastGuard", "every check has a native form"
    yield entry.guard_fn
    minidynamo.reset()
    Config.__getattribute__ = ORIGINAL


ORIGINAL = Config.__getattribute__
FRAME = FrameInfo(("x", "config", "table", "first", "second", "shape", "slotted"),
                  program.__globals__, program.__builtins__)


def decisions(guard_fn, args):
    fast = guard_fn(program, *args)
    python = getattr(guard_fn, "python", guard_fn)(program, *args)
    explained = guard_fn.failure_reason(program, *args) is None
    plain = reference.first_failure(guard_fn.guards, program, tuple(args), FRAME) is None
    return fast, python, explained, plain


def test_the_guard_holds_every_kind_of_check(captured):
    kinds = {str(g.kind) for g in captured.guards}
    assert {"ALIAS_MATCH", "DICT_KEYS_MATCH", "ABSENT_MATCH", "CLASS_MATCH", "EQUALS_MATCH"} <= kinds, kinds
    assert decisions(captured, arguments()) == (True, True, True, True)


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_each_mutation_alone(captured, name):
    args = arguments()
    MUTATIONS[name](args)
    try:
        fast, python, explained, plain = decisions(captured, args)
    finally:
        Config.__getattribute__ = ORIGINAL
    assert fast == python == explained == plain, name
    assert fast is (name in ("same keys, new dict", "an equal tuple")), name


@pytest.mark.parametrize("seed", range(3))
def test_random_mutation_sequences(captured, seed):
    rng = random.Random(seed)
    for _ in range(25):
        args = arguments()
        chosen = rng.sample(list(MUTATIONS), rng.randint(1, 3))
        try:
            for name in chosen:
                MUTATIONS[name](args)
            outcome = decisions(captured, args)
        finally:
            Config.__getattribute__ = ORIGINAL
        assert len(set(outcome)) == 1, (chosen, outcome)
