"""``copy.deepcopy`` / ``copy.copy`` and ``id()`` inside a captured frame (variables/copies.py).

transformers' ``PretrainedConfig.get_text_config(decoder=True)`` deep-copies the model's config,
deep-copies its ``__dict__`` (``to_dict``) and deletes and renames attributes of the copy; T5,
BART, mBART and Whisper call it while building their cache.  Each test compares with eager over
several calls, changing the inputs between calls, and counts graphs, breaks and fallbacks."""

import copy

import pytest
import torch

import minidynamo
from minidynamo.eval_frame import OptimizeContext
from minidynamo.explain import ExplainOutput

from .helpers import assert_same

x = torch.randn(2, 3)


def compiled_with_report(fn):
    minidynamo.reset()
    minidynamo.counters.reset()
    report = ExplainOutput()
    return OptimizeContext("eager", recorder=report)(fn), report


def no_fallbacks():
    counts = minidynamo.counters.snapshot()
    assert counts.get("fallbacks", 0) == 0 and counts.get("graph_errors_rerun", 0) == 0, counts


# ---------------------------------------------------------------- a config, copied and edited
class Config:
    """A transformers-like config: a ``__getattribute__`` mapping aliases, plain attributes."""
    attribute_map = {"hidden_size": "d_model"}

    def __init__(self):
        self.d_model = 4
        self.encoder_layers = 2
        self.decoder_layers = 3
        self.labels = {"a": 0, "b": 1}
        self.tokens = [7, 8]

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    def to_dict(self):
        return copy.deepcopy(self.__dict__)

    def decoder_view(self):
        """What ``get_text_config(decoder=True)`` does to a flat encoder-decoder config."""
        twin = copy.deepcopy(self)
        for key in twin.to_dict():
            if key.startswith("encoder"):
                delattr(twin, key)
            if key.startswith("decoder"):
                value = getattr(twin, key)
                delattr(twin, key)
                setattr(twin, "num_" + key[len("decoder_"):], value)
        return twin


def scale_by_decoder_layers(a, config):
    view = config.decoder_view()
    view.tokens.append(9)                        # the copy's list, not the config's
    return a * view.num_layers + view.hidden_size + len(view.tokens) + len(config.tokens)


def test_a_deep_copied_config_is_one_graph_and_equals_eager():
    compiled, report = compiled_with_report(scale_by_decoder_layers)
    config = Config()
    for _ in range(3):
        assert_same(scale_by_decoder_layers(x, config), compiled(x, config))
    assert vars(config) == vars(Config())        # the original is untouched
    assert (report.graph_count, report.graph_break_count, report.fallback_count) == (1, 0, 0), report.reasons
    assert minidynamo.counters["compiles"] == 1
    no_fallbacks()


@pytest.mark.parametrize("change", ["value", "alias value", "new attribute", "nested list", "deleted attribute"])
def test_a_change_to_the_copied_object_between_calls_is_seen(change):
    compiled, report = compiled_with_report(scale_by_decoder_layers)
    config = Config()
    assert_same(scale_by_decoder_layers(x, config), compiled(x, config))
    if change == "value":
        config.decoder_layers = 5
    elif change == "alias value":
        config.d_model = 10
    elif change == "new attribute":
        config.decoder_extra = 1                 # the copy renames it: num_extra
    elif change == "nested list":
        config.tokens.append(1)
    else:
        del config.encoder_layers
    for _ in range(2):
        assert_same(scale_by_decoder_layers(x, config), compiled(x, config))
    no_fallbacks()


def returns_the_copy(a, config):
    twin = copy.deepcopy(config)
    twin.d_model = twin.d_model + 1
    return a + 1, twin


def test_a_returned_copy_is_a_new_object_with_the_copied_state():
    compiled, report = compiled_with_report(returns_the_copy)
    config = Config()
    for step in range(3):
        config.decoder_layers = step
        expected, got = returns_the_copy(x, config), compiled(x, config)
        assert_same(expected, got)
        twin = got[1]
        assert twin is not config and twin.labels is not config.labels and twin.tokens is not config.tokens
        assert (twin.d_model, twin.decoder_layers, config.d_model) == (5, step, 4)
    no_fallbacks()


def copy_then_change_the_original(a, config):
    deep, shallow_twin = copy.deepcopy(config), copy.copy(config)
    config.d_model = 7                           # after the copies: neither copy sees it
    config.tokens.append(5)                      # the shallow copy shares this list, the deep one not
    return a + 1, deep, shallow_twin


def test_the_original_changed_after_the_copy_in_the_same_frame():
    compiled, report = compiled_with_report(copy_then_change_the_original)
    for step in range(3):
        expected_config, got_config = Config(), Config()
        expected_config.d_model = got_config.d_model = 10 + step
        expected, got = copy_then_change_the_original(x, expected_config), compiled(x, got_config)
        assert_same(expected, got)
        assert vars(expected_config) == vars(got_config)
        assert got[1].d_model == got[2].d_model == 10 + step and got[1].tokens == [7, 8]
        assert got[2].tokens is got_config.tokens
    no_fallbacks()


# ---------------------------------------------------------------- containers
def shared_inner_list(a, inner):
    outer = copy.deepcopy([inner, inner, (inner, 1)])
    outer[0].append(3)                           # one copy of inner, shared three times
    return a * len(outer[1]) + len(outer[2][0]) + len(inner)


def test_deepcopy_keeps_sharing_inside_the_copied_structure():
    compiled, report = compiled_with_report(shared_inner_list)
    for n in (1, 2, 2):                          # a longer list: its length guard recompiles once
        assert_same(shared_inner_list(x, [0] * n), compiled(x, [0] * n))
    assert (report.graph_count, report.graph_break_count, report.fallback_count) == (2, 0, 0), report.reasons


def two_lists(a, first, second):
    pair = copy.deepcopy({"p": first, "q": second})
    pair["p"].append(1)
    return a * len(pair["q"])


def test_whether_two_arguments_are_one_list_is_guarded():
    compiled, report = compiled_with_report(two_lists)
    one = [5]
    assert_same(two_lists(x, [5], [5]), compiled(x, [5], [5]))
    assert_same(two_lists(x, one, one), compiled(x, one, one))     # now aliased: 2, not 1
    assert_same(two_lists(x, [5], [5]), compiled(x, [5], [5]))
    assert report.graph_break_count == 0, report.reasons
    no_fallbacks()


def shallow(a, config):
    twin = copy.copy(config)
    twin.tokens.append(4)                        # shared with the caller's config
    twin.d_model = 100                           # the copy's own
    return a * len(config.tokens) + config.d_model


def test_copy_copy_shares_the_attributes_values():
    compiled, report = compiled_with_report(shallow)
    expected_config, got_config = Config(), Config()
    for _ in range(3):
        assert_same(shallow(x, expected_config), compiled(x, got_config))
        assert vars(expected_config) == vars(got_config)
    no_fallbacks()


# ---------------------------------------------------------------- id()
class Layer(torch.nn.Module):
    def forward(self, a, other):
        seen = {id(self): "self"}
        return a + (1 if id(other) in seen else 2)


def test_id_of_objects_read_from_the_frame_is_guarded_by_identity():
    layer, other = Layer(), Layer()
    compiled, report = compiled_with_report(layer)
    for arg in (layer, other, layer, other):
        assert_same(layer(x, arg), compiled(x, arg))
    assert report.graph_break_count == 0 and report.fallback_count == 0, report.reasons
    no_fallbacks()


def returns_an_id(a, obj):
    return a + 1, id(obj)


def test_a_returned_id_is_the_objects_id():
    compiled, report = compiled_with_report(returns_an_id)
    for obj in (Config(), Config()):
        assert compiled(x, obj)[1] == id(obj)
    assert "id() of" not in " ".join(report.reasons)


# ---------------------------------------------------------------- what falls back, cleanly
class OwnDeepcopy:
    copies = 0

    def __init__(self):
        self.k = 2

    def __deepcopy__(self, memo):
        OwnDeepcopy.copies += 1
        twin = OwnDeepcopy()
        twin.k = self.k * 10
        return twin


class AnswersDeepcopy:
    """``__deepcopy__`` comes from the instance's ``__getattr__``: copy asks the instance."""

    def __init__(self):
        self.k = 2

    def __getattr__(self, name):
        if name == "__deepcopy__":
            return lambda memo: AnswersDeepcopy.__new__(AnswersDeepcopy)   # a copy with no k
        raise AttributeError(name)


class Slotted:
    __slots__ = ("k",)

    def __init__(self):
        self.k = 2


def copy_then_read(a, obj):
    y = a * 2
    twin = copy.deepcopy(obj)
    return y + getattr(twin, "k", -1)


class Box:
    pass


def made_in_frame_id(a):
    y = a * 2
    return y + (id(Box()) > 0)                   # a new object per call: a new id per call


def deepcopy_tensor(a):
    y = a * 2
    twin = copy.deepcopy(y)
    twin.add_(1)
    return y, twin


@pytest.mark.parametrize("make", [OwnDeepcopy, AnswersDeepcopy, Slotted])
def test_objects_with_their_own_copy_protocol_break_the_graph(make):
    OwnDeepcopy.copies = 0
    compiled, report = compiled_with_report(copy_then_read)
    for _ in range(2):
        assert_same(copy_then_read(x, make()), compiled(x, make()))
    # (AnswersDeepcopy's copy has no k: its __getattr__ raising breaks once more, at getattr)
    assert report.graph_break_count >= 1 and report.fallback_count == 0, report.reasons
    assert "deepcopy of a " + make.__name__ in report.reasons[0] or "copy of a " + make.__name__ in report.reasons[0]
    if make is OwnDeepcopy:
        assert OwnDeepcopy.copies == 4           # eager and compiled, twice: the user's method ran
    no_fallbacks()


@pytest.mark.parametrize("fn", [made_in_frame_id, deepcopy_tensor])
def test_unmodelled_values_break_the_graph(fn):
    compiled, report = compiled_with_report(fn)
    for _ in range(2):
        assert_same(fn(x), compiled(x))
    assert report.graph_break_count >= 1 and report.fallback_count == 0, report.reasons
    no_fallbacks()


def test_a_deepcopy_method_added_to_the_class_later_is_used():
    class Late:
        def __init__(self):
            self.k = 2

    compiled, report = compiled_with_report(copy_then_read)
    assert_same(copy_then_read(x, Late()), compiled(x, Late()))
    assert report.graph_break_count == 0

    def own(self, memo):
        twin = Late()
        twin.k = 50
        return twin

    Late.__deepcopy__ = own                      # the class's copy protocol changed: recompile
    assert_same(copy_then_read(x, Late()), compiled(x, Late()))
    assert_same(copy_then_read(x, Late()), x * 2 + 50)
    no_fallbacks()
