"""The program's own Python (dunders, descriptors, hooks) runs exactly where and as often as in
eager: the tracer must not call it for its own purposes (to hash, compare, inspect or read a
value), since such code may count calls, log, or change state.  Each case counts the calls of a
program hook over several calls, eagerly and optimized."""

import io

import pytest
import torch

import minidynamo

CALLS = []


@pytest.fixture(autouse=True)
def fresh():
    minidynamo.reset()
    CALLS.clear()
    yield
    minidynamo.reset()
    CALLS.clear()


def calls_and_results(fn, make_args, n=3):
    results = [fn(*make_args()) for _ in range(n)]
    return list(CALLS), results


def same_calls(fn, make_args, reset_state=lambda: None):
    reset_state()
    CALLS.clear()
    expected = calls_and_results(fn, make_args)
    reset_state()
    CALLS.clear()
    actual = calls_and_results(minidynamo.optimize("eager")(fn), make_args)
    assert actual[0] == expected[0], f"the program's code ran as {actual[0]}, in eager {expected[0]}"
    assert repr(actual[1]) == repr(expected[1])


class HashCounts:
    def __init__(self, v):
        self.v = v

    def __str__(self):
        return f"T{self.v}"

    def __hash__(self):
        CALLS.append("hash")
        self.v += 1
        return 1


GLOBAL_OBJECT = HashCounts(3)


def formats_a_global(x):
    return x + 1, f"{GLOBAL_OBJECT}", GLOBAL_OBJECT.v


def test_a_globals_hash_is_not_asked_when_checking_for_frame_readers():
    """Probe L: ``graph_break._is_reader`` looked each global up in a dict, running its
    ``__hash__`` (which here changes the object: eager 'T3', optimized 'T7')."""
    def reset():
        GLOBAL_OBJECT.v = 3
    same_calls(formats_a_global, lambda: (torch.ones(2),), reset)


class CountedDescriptor:
    def __get__(self, instance, owner):
        CALLS.append("get")
        return len(CALLS)


class WithDescriptor:
    d = CountedDescriptor()


def reads_a_descriptor_through_its_class(x):
    return x * WithDescriptor.d


class CountingMeta(type):
    @property
    def meta_property(cls):
        CALLS.append("meta property")
        return len(CALLS)

    def __getattr__(cls, name):
        CALLS.append(f"meta getattr {name}")
        return 5


class WithMeta(metaclass=CountingMeta):
    pass


def reads_a_metaclass_property(x):
    return x * WithMeta.meta_property


def reads_through_a_metaclass_getattr(x):
    return x * WithMeta.missing


@pytest.mark.parametrize("fn", [reads_a_descriptor_through_its_class, reads_a_metaclass_property,
                                reads_through_a_metaclass_getattr])
def test_a_class_attributes_descriptor_runs_once_per_read(fn):
    """Probe L: ``hasattr(K, name)`` then ``getattr(K, name)`` (and the guard's re-read) ran a
    descriptor's ``__get__`` three times at trace time: the first call answered 5, eager 1."""
    same_calls(fn, lambda: (torch.ones(1),))


def make_lazy_module():
    import types

    module = types.ModuleType("lazy_module_of_the_test")

    def module_getattr(name):                 # PEP 562
        CALLS.append(name)
        if name == "lazy":
            return len(CALLS)
        raise AttributeError(name)
    module.__getattr__ = module_getattr
    return module


LAZY = make_lazy_module()


def reads_a_lazy_module_attribute(x):
    return x * LAZY.lazy


def test_a_modules_getattr_runs_once_per_read():
    """Probe L: the trace asked the module for the name twice and the guard's description
    asked it for ``__file__`` three times (a module's repr)."""
    same_calls(reads_a_lazy_module_attribute, lambda: (torch.ones(1),))


class CountsReads:
    def __init__(self):
        object.__setattr__(self, "a", 2)

    def __getattribute__(self, name):
        CALLS.append(name)
        return object.__getattribute__(self, name)


def reads_an_attribute(x, o):
    return x * o.a


def test_a_python_getattribute_is_not_run_by_the_tracers_own_questions():
    """Probe L: the tracer's ``isinstance`` checks read ``__class__`` through the object's own
    ``__getattribute__`` (64 calls for eager's one).  What is left: the guard re-reads the
    attributes the trace read, through that code (``AttrSource``), on every call."""
    minidynamo.optimize("eager")(reads_an_attribute)(torch.ones(2), CountsReads())
    assert "__class__" not in CALLS and "__dict__" not in CALLS


class LoggingList(list):
    def __iter__(self):
        CALLS.append("list iter")
        return super().__iter__()


class DisguisedClass:
    @property
    def __class__(self):
        CALLS.append("__class__")
        return DisguisedClass


def holds_objects_across_a_break(x, items, obj):
    items.append(3)
    is_one = isinstance(obj, DisguisedClass)     # eager: type(obj) answers, no __class__ read
    print("", end="")                            # a graph break: what the program holds is looked at
    return x * items[0], is_one


def test_a_graph_break_looks_at_what_the_program_holds_by_type():
    """Probe M: ``graph_break._reachable`` iterated a list subclass (its ``__iter__``) and asked
    ``isinstance`` of real values (a ``__class__`` property)."""
    same_calls(holds_objects_across_a_break, lambda: (torch.ones(2), LoggingList([1, 2]), DisguisedClass()))


class Pair(__import__("collections").namedtuple("Pair", "a b")):
    def __iter__(self):
        CALLS.append("iter")
        return tuple.__iter__(self)

    def __len__(self):
        CALLS.append("len")
        return tuple.__len__(self)


def reads_a_pair(x, p):
    return x * p.a + p[1]


def test_a_tuple_subclass_argument_is_measured_as_a_tuple():
    """Probe M: wrapping (and the length guard) called the subclass's ``__len__`` and ``__iter__``."""
    same_calls(reads_a_pair, lambda: (torch.ones(2), Pair(2, 3)))


EQUAL = [True]


class SometimesEqual(str):
    def __hash__(self):
        return str.__hash__(self)

    def __eq__(self, other):
        return EQUAL[0] and str.__eq__(self, other)


TABLE = {SometimesEqual("a"): 2}


def looks_up_a_key(x):
    return x * TABLE["a"]


def test_a_dict_whose_keys_compare_in_python_is_not_modelled():
    """Probe M: the trace's lookup ran the key's ``__eq__``; the guard then found the entry by the
    stored key itself, so when ``__eq__`` changed its answer eager raised KeyError and the
    optimized frame still returned the folded value."""
    opt = minidynamo.optimize("eager")(looks_up_a_key)
    EQUAL[0] = True
    torch.testing.assert_close(opt(torch.ones(2)), looks_up_a_key(torch.ones(2)))
    EQUAL[0] = False
    try:
        with pytest.raises(KeyError):
            looks_up_a_key(torch.ones(2))
        with pytest.raises(KeyError):
            opt(torch.ones(2))
    finally:
        EQUAL[0] = True


class SlottedWithGetattr:
    __slots__ = ("y",)

    def __getattr__(self, name):
        CALLS.append(f"getattr {name}")
        raise AttributeError(name)


def stores_a_missing_slot(x, s):
    try:
        s.z = 1                 # no such slot, no __dict__: AttributeError, no __getattr__ call
    except AttributeError:
        pass
    return x + 1


def test_an_objects_dict_is_read_through_its_class():
    """Probe M: ``getattr(obj, "__dict__", None)`` asked the object's ``__getattr__``."""
    same_calls(stores_a_missing_slot, lambda: (torch.ones(2), SlottedWithGetattr()))


class CountingModule(__import__("types").ModuleType):
    @property
    def counted(self):
        CALLS.append("counted")
        return len(CALLS)


MODULE_OF_A_SUBCLASS = CountingModule("module_of_a_subclass")


def reads_a_module_property(x):
    return x * MODULE_OF_A_SUBCLASS.counted


def test_a_module_subclass_property_runs_once_per_read():
    """Probe M: ``hasattr`` then ``getattr`` on the real module ran the property twice more."""
    same_calls(reads_a_module_property, lambda: (torch.ones(1),))


class TimesTen(__import__("collections").OrderedDict):
    def __setitem__(self, key, value):
        CALLS.append(f"setitem {key}")
        super().__setitem__(key, value * 10)


def builds_an_ordered_dict(x):
    d = TimesTen(a=1)
    d.update(b=2)
    d["c"] = 3
    return x * d["a"], dict(d)


def test_an_ordered_dict_subclass_stores_through_its_own_setitem():
    """Probe M: OrderedDict's __init__ and update call ``self[k] = v`` (dict's do not); the
    trace filled the dict directly: {'a': 1, 'b': 2} where eager has {'a': 10, 'b': 20}."""
    same_calls(builds_an_ordered_dict, lambda: (torch.ones(2),))


class ClaimsToBeAnInt:
    @property
    def __class__(self):
        return int


def makes_an_impostor(x):
    o = ClaimsToBeAnInt()
    return x + 1, o.__class__, isinstance(o, int)


def test_an_object_made_in_the_frame_answering_its_class_itself():
    """Probe M: the trace answered ``o.__class__`` with the real type (eager: the property's)."""
    expected = makes_an_impostor(torch.ones(2))[1:]
    assert minidynamo.optimize("eager")(makes_an_impostor)(torch.ones(2))[1:] == expected == (int, True)


class AnsweringMeta(type):
    def __getattr__(cls, name):
        CALLS.append(f"metaclass getattr {name}")
        raise AttributeError(name)


class AnswersMissingNames(metaclass=AnsweringMeta):
    def __getattr__(self, name):
        CALLS.append(f"getattr {name}")
        return 5


def reads_missing_names(x, o):
    return x * o.zz, hasattr(o, "q")


def test_an_absent_guard_asks_the_classes_mro_not_its_metaclass():
    """Probe M: the guard that ``zz`` stays absent read ``getattr(type(o), 'zz', missing)``,
    which ran the metaclass's ``__getattr__`` on every call (an instance's lookup never asks it)."""
    same_calls(reads_missing_names, lambda: (torch.ones(2), AnswersMissingNames()))


class HintsItsLength:
    def __iter__(self):
        CALLS.append("iter")
        return iter([1, 2])

    def __length_hint__(self):
        CALLS.append("length hint")
        return 2


class KnowsItsLength(HintsItsLength):
    def __len__(self):
        CALLS.append("len")
        return 2


@pytest.mark.parametrize("kind", [HintsItsLength, KnowsItsLength])
@pytest.mark.parametrize("consume", [list, tuple, sorted])
def test_list_tuple_and_sorted_ask_the_size_as_cpython_does(kind, consume):
    """Probe M: CPython's list() asks ``__len__`` (else ``__length_hint__``) after ``iter()``,
    to size its buffer; the trace never asked."""
    same_calls(lambda x, o: x * len(consume(o)), lambda: (torch.ones(2), kind()))


class LoggedTensor(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        CALLS.append(getattr(func, "__name__", "?"))
        return super().__torch_function__(func, types, args, kwargs or {})


def adds(x, t):
    return (x + t).as_subclass(torch.Tensor)


def test_a_tensor_subclass_input_is_read_without_its_torch_function():
    """Probe M: making a subclass instance a graph input read its shape, strides and flags
    through ``__torch_function__`` (22 calls more than eager's on the first call)."""
    same_calls(adds, lambda: (torch.ones(2), torch.ones(2).as_subclass(LoggedTensor)))


class CountingMetaReads(type):
    def __getattribute__(cls, name):
        CALLS.append(f"meta {name}")
        return super().__getattribute__(name)


class ClassReadThroughItsMeta(metaclass=CountingMetaReads):
    def __init__(self):
        self.a = 2


def reads_an_instance(x, o):
    return x * o.a


def test_a_metaclass_getattribute_is_not_run_by_the_tracer():
    """Probe M: the tracer asked the class ``__qualname__``, ``__mro__``, ``__dict__`` ... through
    its metaclass's ``__getattribute__`` (22 calls; eager's instance read makes none)."""
    same_calls(reads_an_instance, lambda: (torch.ones(2), ClassReadThroughItsMeta()))


class SlotAnsweredByGetattr:
    __slots__ = ("a",)
    answers = 0

    def __getattr__(self, name):
        CALLS.append(f"getattr {name}")
        SlotAnsweredByGetattr.answers += 1
        return SlotAnsweredByGetattr.answers


def reads_an_unset_slot(x, s):
    return x * s.a


def test_an_unset_slot_answered_by_getattr_is_read_once():
    """Probe M: the trace read the unset slot with ``getattr``, which ran the program's
    ``__getattr__`` three more times: the first call answered 4 where eager answers 1."""
    def reset():
        SlotAnsweredByGetattr.answers = 0
    same_calls(reads_an_unset_slot, lambda: (torch.ones(1), SlotAnsweredByGetattr()), reset)


import functools  # noqa: E402

import torch.nn.functional as F  # noqa: E402


@functools.wraps(torch.relu)
def doubled_relu(v):
    CALLS.append("doubled_relu")
    return torch.relu(v) * 2


class UpdatedWrapper:
    def __call__(self, v):
        CALLS.append("wrapper object")
        return v * 3


WRAPPER_OBJECT = functools.update_wrapper(UpdatedWrapper(), torch.add)


def calls_wrappers_carrying_torch_names(x):
    return doubled_relu(x - 2), WRAPPER_OBJECT(x)


def test_a_wrapper_carrying_a_torch_functions_name_is_the_programs_function():
    """Probe AJ r11: ``functools.wraps(torch.relu)`` gives the program's wrapper torch's
    ``__module__`` and name, and the trace took it for ``torch.relu`` (a graph node, whose code
    then called the real ``torch.relu``): relu's values, not twice them, and the wrapper's body
    ran once at trace time."""
    same_calls(calls_wrappers_carrying_torch_names, lambda: (torch.arange(5.0),))


_ORIGINAL_RELU, _ORIGINAL_SIGMOID = F.relu, torch.sigmoid


def logging_relu(v, inplace=False):
    CALLS.append("logging_relu")
    return _ORIGINAL_RELU(v, inplace)


def calls_saved_originals(x):
    return _ORIGINAL_RELU(x - 3), _ORIGINAL_SIGMOID(x), F.relu(x)


@pytest.mark.parametrize("when", ["before the first call", "after the first call"])
def test_the_graph_calls_the_functions_the_program_called_not_their_names(monkeypatch, when):
    """Probe AJ r13: fx writes ``torch.nn.functional.relu(x)`` and looks the name up when the
    graph runs: with ``F.relu`` patched (a logging wrapper that calls the saved original), the
    graph called the wrapper where the program called the original (its log twice per call),
    and a profiler-style patch of ``torch.sigmoid`` after the compile changed a cached graph's
    values while every guard passed."""
    compiled = minidynamo.optimize("eager")(calls_saved_originals)
    x = torch.arange(6.0)
    if when == "after the first call":
        compiled(x)
    monkeypatch.setattr(F, "relu", logging_relu)
    monkeypatch.setattr(torch, "sigmoid", lambda v: v * 0)
    CALLS.clear()
    expected = calls_saved_originals(x)
    expected_calls, _ = list(CALLS), CALLS.clear()
    for _ in range(2):
        actual = compiled(x)
        assert list(CALLS) == expected_calls
        CALLS.clear()
        assert all(torch.equal(a, e) for a, e in zip(actual, expected))


_MADE_BY_EXEC = {}
exec("def sigmoid_logged(v):\n    CALLS.append('sigmoid_logged')\n    return ORIGINAL(v)\n",
     {"CALLS": CALLS, "ORIGINAL": torch.sigmoid}, _MADE_BY_EXEC)
_MADE_BY_EXEC["sigmoid_logged"].__module__ = "torch"
_MADE_BY_EXEC["sigmoid_logged"].__name__ = "sigmoid"


def calls_torch_sigmoid(x):
    return torch.sigmoid(x) + 1


def test_a_wrapper_made_by_exec_and_installed_as_a_torch_function_is_the_programs(monkeypatch):
    """Probe AK r10: a logging wrapper made by ``exec`` (as the ``decorator`` package makes them)
    with torch's ``__module__``, installed as ``torch.sigmoid``, counted as torch's own (its
    module held it under its name), so its body ran more often than in eager."""
    monkeypatch.setattr(torch, "sigmoid", _MADE_BY_EXEC["sigmoid_logged"])
    same_calls(calls_torch_sigmoid, lambda: (torch.arange(3.0),))
