"""Small stand-ins for what Hugging Face transformers does, one mechanism each: a config with
its own ``__getattribute__``, a ``ModelOutput``-like dataclass subclassing ``OrderedDict``
built in the frame, a cache object with ``__slots__`` made and filled in the frame, a layer
overriding ``__call__``, ``is_compiling()``, decorators reading ``fn.__code__`` and
``inspect.signature``.  Each is compared with eager, and with guards that must catch a change."""

import collections
import copy
import dataclasses
import functools
import inspect
from typing import Optional

import pytest
import torch
from torch import nn

import minidynamo
from minidynamo.exc import Unsupported

from .helpers import assert_same, check, run_traced

x = torch.randn(2, 4)


# ---------------------------------------------------------------- a config's __getattribute__

class Config:
    attribute_map = {"width": "hidden_size"}

    def __init__(self):
        self.hidden_size = 4
        self.scale = 2.0

    def __getattribute__(self, key):          # transformers' PretrainedConfig does this
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_user_getattribute_is_inlined():
    def f(a, config):
        return a * config.scale + config.width + config.hidden_size
    check(f, x, Config())


def test_user_getattribute_reads_are_guarded():
    config = Config()
    calls = []

    @minidynamo.optimize("eager")
    def f(a, config):
        calls.append(1)
        return a * config.width

    minidynamo.counters.reset()
    assert_same(f(x, config), x * 4)
    config.hidden_size = 3                  # read through the attribute map: must recompile
    assert_same(f(x, config), x * 3)
    assert minidynamo.counters["fallbacks"] == 0


class Lazy:
    def __init__(self):
        self.base = 1.5

    def __getattr__(self, name):              # only for missing attributes
        if name != "double":
            raise AttributeError(name)
        return self.base * 2


def test_user_getattr_runs_only_for_missing_attributes():
    def f(a, obj):
        return a * obj.double + obj.base
    check(f, x, Lazy())


def test_builtin_slot_wrappers_are_not_user_overrides():
    """An OrderedDict subclass made in the frame: its C methods (keys, __len__, __setitem__)
    are the builtin behaviour, modelled; only Python overrides are inlined."""
    class Plain(collections.OrderedDict):
        pass

    def f(a):
        d = Plain(k=a)
        d["j"] = a + 1
        return d, list(d.keys()), d.get("k")
    check(f, x)


# ---------------------------------------------------------------- objects made in the frame

@dataclasses.dataclass
class Point:
    x: torch.Tensor
    y: Optional[torch.Tensor] = None

    def __post_init__(self):
        self.norm = self.x.abs().sum() if self.y is None else (self.x - self.y).abs().sum()


def test_dataclass_made_in_the_frame_is_rebuilt():
    def f(a):
        p = Point(a, a * 2)
        return p, p.norm + 1
    check(f, x)


class Output(collections.OrderedDict):
    """A stand-in for transformers' ModelOutput: fields live in the dict and as attributes."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __getitem__(self, k):
        if isinstance(k, str):
            return dict(self.items())[k]
        return self.to_tuple()[k]

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class ModelOut(Output):
    last_hidden_state: Optional[torch.Tensor] = None
    pooled: Optional[torch.Tensor] = None
    attentions: Optional[tuple] = None


def test_ordered_dict_dataclass_output_is_built_and_rebuilt():
    def f(a, return_dict):
        out = ModelOut(last_hidden_state=a.relu(), pooled=a.sum(0))
        if not return_dict:
            return out.to_tuple()
        return out, out[0] + out["pooled"], out.pooled, list(out.keys())
    check(f, x, True)
    check(f, x, False)
    _, got = run_traced(f, x, True)
    assert type(got[0]) is ModelOut and list(got[0]) == ["last_hidden_state", "pooled"]
    assert got[0].last_hidden_state is got[0]["last_hidden_state"]


class Layer:
    __slots__ = ("keys", "values")

    def __init__(self):
        self.keys = None


class Cache:
    """A stand-in for transformers' DynamicCache: made in the frame, filled by each layer."""

    def __init__(self, n):
        self.layers = [Layer() for _ in range(n)]

    def update(self, i, k):
        layer = self.layers[i]
        layer.keys = k if layer.keys is None else torch.cat([layer.keys, k])
        return layer.keys


def test_new_objects_compare_with_their_own_dunders():
    """A dataclass's generated __eq__ is inlined; identity is the new object's own."""
    def f(a, n):
        p, q = Point(a, n), Point(a, n)
        return a + int(p == q) + int(p is q) + int(p != Point(a, n + 1))
    check(f, x, 2)


def test_len_of_a_dict_subclass_made_in_the_frame_is_refused_not_guessed():
    class Plain(collections.OrderedDict):
        pass

    def f(a):
        return a + len(Plain(k=1))
    with pytest.raises(Unsupported):
        run_traced(f, x)


def test_cache_object_with_slots_made_and_mutated_in_the_frame():
    def f(a):
        cache = Cache(2)
        h = a
        for i in range(2):
            h = h + cache.update(i, h).sum()
        return h, cache
    _, got = run_traced(f, x)
    expected = f(x)
    assert_same(expected[0], got[0])
    assert type(got[1]) is Cache and type(got[1].layers[0]) is Layer
    torch.testing.assert_close(got[1].layers[1].keys, expected[1].layers[1].keys)


def test_unset_slot_is_an_attribute_error():
    def f(a):
        layer = Layer()
        return a + 1 if hasattr(layer, "values") else a - 1
    check(f, x)


def test_class_with_its_own_new_is_refused():
    class Odd:
        def __new__(cls):
            return object.__new__(cls)

    def f(a):
        return a, Odd()
    with pytest.raises(Unsupported, match="__new__"):
        run_traced(f, x)


def test_methods_of_new_objects_are_guarded_through_their_class():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, a):
            return a * self.k

    @minidynamo.optimize("eager")
    def f(a):
        return Scaler(3).apply(a)

    assert_same(f(x), x * 3)
    Scaler.apply = lambda self, a: a - self.k      # a change to the class must be seen
    assert_same(f(x), x - 3)


# ---------------------------------------------------------------- modules, decorators, flags

class CheckpointingLayer(nn.Module):
    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs)


class Block(CheckpointingLayer):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, a):
        return self.lin(a).relu()


def test_module_overriding_call_is_inlined():
    model = nn.Sequential(Block(), Block())
    check(model, x)


def test_is_compiling_answers_true_while_tracing():
    def f(a):
        return a + 1 if torch.compiler.is_compiling() else a - 1
    check_traced = run_traced(f, x)[1]
    assert_same(check_traced, x + 1)
    assert not torch.compiler.is_compiling()


def test_decorator_reading_code_and_signature():
    def needs(fn):
        takes_mask = "mask" in fn.__code__.co_varnames[:fn.__code__.co_argcount]
        return takes_mask, len(inspect.signature(fn).parameters)

    def attend(a, mask=None):
        return a

    def f(a):
        takes_mask, n = needs(attend)
        return a * n + int(takes_mask)
    check(f, x)


def test_hf_model_output_shapes_equal_eager_for_a_user_module():
    """The whole pattern at once, through optimize(): one graph, nothing compiled after."""
    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.config = Config()
            self.block = Block()

        def forward(self, a, return_dict=True):
            h = self.block(a) * self.config.scale
            out = ModelOut(last_hidden_state=h, pooled=h.mean(0))
            return out if return_dict else out.to_tuple()

    model = Tiny()
    compiled = minidynamo.optimize("eager")(model)
    minidynamo.counters.reset()
    for i in range(3):
        a = torch.randn(2, 4)
        assert_same(model(a), compiled(a))
        assert_same(model(a, False), compiled(a, False))
    assert minidynamo.counters["fallbacks"] == 0
    assert minidynamo.counters["compiles"] == 2


TRUE_VALUES = {"1", "ON", "YES", "TRUE"}
FLAG = "0"


def test_a_global_set_of_constants_is_read_only():
    def f(a):
        return (a + 1 if FLAG in TRUE_VALUES else a - 1), len(TRUE_VALUES), TRUE_VALUES
    _, got = run_traced(f, x)
    assert got[2] is TRUE_VALUES
    check(f, x)

    def g(a):
        TRUE_VALUES.add("2")
        return a
    with pytest.raises(Unsupported, match="caller's set"):
        run_traced(g, x)


def test_a_changed_global_set_recompiles():
    values = {"A"}

    @minidynamo.optimize("eager")
    def f(a):
        return a + 1 if "B" in values else a - 1

    assert_same(f(x), x - 1)
    values.add("B")
    assert_same(f(x), x + 1)


def test_builtin_types_with_their_own_getattribute_are_read():
    import contextvars
    var = contextvars.ContextVar("flag", default=3)
    union = int | None

    def f(a, var, union):
        return a * len(union.__args__) + len(var.name)
    _, got = run_traced(f, x, var, union)          # (a ContextVar cannot be deep-copied for check)
    assert_same(got, f(x, var, union))


# ---------------------------------------------------------------- closures made on every call

def make_mask_fn(offset):
    def mask(q, k):
        return k <= q + offset
    return mask


def test_fresh_closure_each_call_reuses_the_entry():
    @minidynamo.optimize("eager")
    def apply(a, fn):
        return a * fn(2, 1)

    minidynamo.counters.reset()
    for _ in range(4):
        assert_same(apply(x, make_mask_fn(0)), x * 1)   # a new function object every call
    assert minidynamo.counters["compiles"] == 1
    assert_same(apply(x, make_mask_fn(-5)), x * 0)      # another cell value: guarded


def test_fresh_closure_identity_and_return_are_its_own():
    @minidynamo.optimize("eager")
    def pick(a, f, g):
        return (a + 1 if f is g else a - 1), f

    f1, f2 = make_mask_fn(0), make_mask_fn(0)
    out, fn = pick(x, f1, f2)
    assert_same(out, x - 1)
    assert fn is f1
    out, fn = pick(x, f1, f1)
    assert_same(out, x + 1)
    f3 = make_mask_fn(0)
    out, fn = pick(x, f3, make_mask_fn(0))
    assert fn is f3


def test_closures_returned_from_the_frame_are_rebuilt():
    """An attention-mask builder: returns closures over a tensor and over each other."""
    def builder(a, offset):
        scale = a.sum()

        def inner(q, k=2, *, shift=1):
            return (k + shift <= q + offset) * scale

        def both(q):
            return inner(q) + inner(q, 0)
        return inner, both, inner

    _, got = run_traced(builder, x, 1)
    expected = builder(x, 1)
    inner, both, same = got
    assert inner is same and inner.__qualname__ == expected[0].__qualname__
    assert_same(inner(3), expected[0](3))
    assert_same(both(1), expected[1](1))
    assert both.__closure__[0].cell_contents is inner        # the same function, as in eager

    def annotated(a):
        def f(q: int) -> int:
            return q
        return f
    assert run_traced(annotated, x)[1].__annotations__ == {"q": int, "return": int}


def test_an_argument_whose_hash_raises_is_not_hashed_while_wrapping():
    class Spec:
        def __init__(self):
            self.n = 2

        def __hash__(self):
            raise AttributeError("half-built")

    def f(a, spec):
        return a * spec.n
    _, got = run_traced(f, x, Spec())
    assert_same(got, x * 2)


# ---------------------------------------------------------------- returning an object it was given

class GivenCache:                             # transformers' DynamicCache, reduced
    def __init__(self):
        self.keys = None
        self.seen = 0


def test_an_object_read_from_the_frame_is_returned_as_itself():
    def f(a, cache):
        cache.keys = a * 2 if cache.keys is None else cache.keys + a
        cache.seen = cache.seen + 1
        return a.relu(), cache

    compiled = minidynamo.optimize("eager")(f)
    minidynamo.counters.reset()
    for _ in range(2):
        eager_cache, cache = GivenCache(), GivenCache()
        out, returned = compiled(x, cache)
        expected, eager_returned = f(x, eager_cache)
        assert returned is cache and eager_returned is eager_cache
        assert_same(out, expected)
        assert_same(cache.keys, eager_cache.keys) and cache.seen == eager_cache.seen == 1
    assert minidynamo.counters["fallbacks"] == 0
    assert minidynamo.counters["compiles"] == 1


# ---------------------------------------------------------------- attribute writes on real objects
class TrackedConfig:
    """transformers' PretrainedConfig: a Python ``__setattr__`` that ends in ``object.__setattr__``."""

    attribute_map = {"width": "hidden_size"}

    def __init__(self):
        self.hidden_size = 4
        self.scale = 2.0
        self.decoder_only = 1

    def __setattr__(self, key, value):
        key = type(self).attribute_map.get(key, key)
        super().__setattr__(key, value)


def prune_and_scale(a, config):
    config.width = 5                               # through the user's __setattr__: hidden_size
    object.__setattr__(config, "calls", 1)         # the raw store, bypassing it
    for key in ("decoder_only", "missing"):        # transformers' get_text_config: delattr in a loop
        if hasattr(config, key):
            delattr(config, key)
    return a * config.scale + config.hidden_size + (10 if hasattr(config, "decoder_only") else 0)


def test_setattr_and_delattr_on_a_real_object_are_replayed():
    """Stores and deletions on an object of the caller are side effects replayed after the
    graph (``object.__setattr__`` / ``object.__delattr__``); later reads in the trace see them,
    and an attribute the frame deleted is not guarded absent (the next call sees it present)."""
    compiled = minidynamo.optimize("eager")(prune_and_scale)
    minidynamo.counters.reset()
    for _ in range(2):
        expected_config, got_config = Config_pair()
        expected = prune_and_scale(x, expected_config)
        assert_same(expected, compiled(x, got_config))
        assert vars(got_config) == vars(expected_config) and "decoder_only" not in vars(got_config)
    counts = minidynamo.counters.snapshot()
    assert counts.get("fallbacks", 0) == 0 and counts["compiles"] == 1, counts
    report = minidynamo.explain(prune_and_scale)(x, TrackedConfig())
    assert (report.graph_count, report.graph_break_count, report.fallback_count) == (1, 0, 0)


def Config_pair():
    return TrackedConfig(), TrackedConfig()


def test_deleting_a_missing_attribute_is_refused_not_guessed():
    def f(a, config):
        del config.missing
        return a + 1
    with pytest.raises(Unsupported, match="no attribute 'missing' to delete"):
        run_traced(f, x, TrackedConfig())


class Plain:
    pass


def store_then_delete(a, obj):
    obj.extra = 2                       # the trace's own store ...
    if hasattr(obj, "extra"):
        delattr(obj, "extra")           # ... then deleted: the attribute ends absent
    return a + 1


@pytest.mark.parametrize("present_before", [False, True])
def test_an_attribute_stored_then_deleted_by_the_frame_ends_absent(present_before):
    """The replay has no store to undo: it deletes only what the real object has (fuzz seed 91
    #1959: the object never had the attribute, and the replayed deletion raised AttributeError)."""
    compiled = minidynamo.optimize("eager")(store_then_delete)
    minidynamo.counters.reset()
    for _ in range(2):
        expected_obj, got_obj = Plain(), Plain()
        if present_before:
            expected_obj.extra = got_obj.extra = 1
        assert_same(store_then_delete(x, expected_obj), compiled(x, got_obj))
        assert vars(got_obj) == vars(expected_obj) == {}
    counts = minidynamo.counters.snapshot()
    assert counts.get("fallbacks", 0) == 0 and counts.get("graph_errors_rerun", 0) == 0, counts


# ---------------------------------------------------------------- frames with nothing of torch
class NoDeepcopy:
    """A config whose ``__getattribute__`` raises for ``__deepcopy__``: ``copy.deepcopy`` calls it
    from C, so it is a frame of its own, with no tensor in it."""

    def __init__(self):
        self.factor = 3

    def __getattribute__(self, key):
        return super().__getattribute__(key)


def copy_then_scale(a, config):
    y = a + 1
    twin = copy.deepcopy(config, {})               # the break: deepcopy with a memo is not traced
    return y * twin.factor


def test_frames_without_torch_are_run_as_they_are():
    """Frames that copy.deepcopy calls (the object's own __getattribute__) hold no tensor and
    name no torch module: they run as they are, as under torch.compile (not fallbacks)."""
    compiled = minidynamo.optimize("eager")(copy_then_scale)
    minidynamo.counters.reset()
    for _ in range(2):
        assert_same(copy_then_scale(x, NoDeepcopy()), compiled(x, NoDeepcopy()))
    counts = minidynamo.counters.snapshot()
    assert counts.get("fallbacks", 0) == 0 and counts["frames_without_torch"] >= 1, counts
    report = minidynamo.explain(copy_then_scale)(x, NoDeepcopy())
    assert (report.graph_count, report.graph_break_count, report.fallback_count) == (2, 1, 0)


def store_across_a_break(a, obj):
    y = a * 2
    object.__setattr__(obj, "note", print("", end=""))     # object.__setattr__ is on the stack at print
    return y + obj.factor


def test_a_builtin_slot_on_the_stack_crosses_a_break():
    """The unbound C slot is handed to the resume function, which models it again."""
    compiled = minidynamo.optimize("eager")(store_across_a_break)
    minidynamo.counters.reset()
    for _ in range(2):
        expected_obj, got_obj = NoDeepcopy(), NoDeepcopy()
        assert_same(store_across_a_break(x, expected_obj), compiled(x, got_obj))
        assert vars(expected_obj) == vars(got_obj)
    counts = minidynamo.counters.snapshot()
    assert counts.get("fallbacks", 0) == 0 and counts["graph_breaks"] == 1, counts


# ---------------------------------------------------------------- torch.jit.script helpers
@torch.jit.script
def scripted_shift(t, k: int):
    return t * k + 1                              # DeBERTa-v2's relative-position helpers are scripted


def calls_a_scripted_helper_in_a_loop(a):
    for _ in range(2):
        a = scripted_shift(a, 3).relu()
    return a


def test_a_scripted_function_is_traced_through_its_python_original():
    compiled = minidynamo.optimize("eager")(calls_a_scripted_helper_in_a_loop)
    minidynamo.counters.reset()
    for _ in range(2):
        assert_same(calls_a_scripted_helper_in_a_loop(x), compiled(x))
    counts = minidynamo.counters.snapshot()
    assert counts.get("fallbacks", 0) == 0 and counts["compiles"] == 1, counts
    report = minidynamo.explain(calls_a_scripted_helper_in_a_loop)(x)
    assert (report.graph_count, report.graph_break_count, report.fallback_count) == (1, 0, 0)


class CheckpointingLayer(nn.Module):
    """transformers' GradientCheckpointingLayer: ``__call__`` overridden, ending in ``super().__call__``."""

    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs)

    def forward(self, a):
        y = a + 1
        print("", end="")                 # the forward breaks: so does the __call__ frame, at super().__call__
        return y * 2


def test_super_call_of_a_module_crosses_a_break():
    layer = CheckpointingLayer()

    def f(a):
        return layer(a) - 1

    compiled = minidynamo.optimize("eager")(f)
    minidynamo.counters.reset()
    for _ in range(2):
        assert_same(f(x), compiled(x))
    counts = minidynamo.counters.snapshot()
    assert counts.get("fallbacks", 0) == 0, counts["fallback_reasons"]


class OnceLogger:
    """transformers' ``Logger.warning_once``: a method that is an ``functools.lru_cache`` wrapper."""

    @functools.lru_cache(None)
    def warning_once(self, message):
        print("warning:", message)


LOGGER = OnceLogger()


def test_a_lru_cache_method_call_breaks_the_graph_instead_of_the_frame(capsys):
    """Reading ``LOGGER.warning_once`` used to refuse the frame ("a _lru_cache_wrapper
    descriptor": GPT-2's loss ran eagerly); its ``__get__`` is C that binds it, so it is read,
    and its call (a side effect) is where the frame breaks."""
    def f(x):
        y = x.sin() * 2
        LOGGER.warning_once("once")
        return y.cos() + 1

    minidynamo.reset()
    x = torch.ones(3)
    compiled = minidynamo.optimize("eager")(f)
    for _ in range(2):
        assert torch.equal(compiled(x), f(x))
    assert capsys.readouterr().out == "warning: once\n"
    assert not minidynamo.counters.snapshot().get("fallback_reasons")
    assert any("warning_once" in r for r in minidynamo.counters.snapshot().get("break_reasons", []))
