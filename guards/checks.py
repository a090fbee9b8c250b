"""What each guard kind checks, as Python expressions (one builder per kind).

A builder turns a guard into ``Check`` records over a variable that holds the source's
value.  Codegen joins the ``test`` expressions into the fast guard function; the slow
path evaluates ``actual`` to say what it found instead of ``expected``.

Constants the expressions need (types, dtypes, devices, objects) are interned into the
generated function's globals through ``consts.name_for(obj, hint)``.
"""

from __future__ import annotations

import abc
import functools
import math
import types
from typing import Any, Callable, NamedTuple, Optional, Protocol

import torch

from . import module_facts
from .source import torch_state_function
from .guard import (
    ABSENT_MATCH, ALIAS_MATCH, AUTOGRAD_VIEW_MATCH, CLASS_MATCH, DISTINCT_MATCH, STORAGE_MATCH, NOT_FOUND, TORCH_STATE_MATCH, AUTOCAST_MATCH, COMPARE_MATCH, DICT_KEYS_MATCH, EQUALS_MATCH, GLOBAL_HOOKS_EMPTY, GRAD_MODE_MATCH, ID_MATCH,
    LENGTH_MATCH, MODULE_STATE_MATCH, TENSOR_MATCH, TYPE_MATCH, ClassFacts, Guard, TensorSpec,
    COMPARISONS, UnguardableValue, WeakPin, autograd_view, class_lookup, container_base, mro_of, pinned, storage_groups,
)


class Check(NamedTuple):
    test: str       # boolean Python expression, True when the guard holds
    label: str      # what is checked, in words: "L['x'].dtype"
    expected: str   # what the trace saw, in words: "torch.float32"
    actual: str     # Python expression for what is there now (slow path only)
    # The same test as data, for the native fast path (``native.fast_guard``), or None when only
    # the text expresses it: ("is", var, obj), ("type_is", var, cls), ("eq", var, obj),
    # ("call_is", fn, obj), ("call_eq", fn, obj), ("call_true", const_name), ("not_in", key, var),
    # ("call_with", const_name, (operand, ...)): the constant called with the operands is true,
    # ("lacks", var, name): var's instance __dict__ lacks name, ("same"/"not_same", var, var),
    # ("distinct", (var, ...)), ("len_is", var, n): len(var) == n, ("keys", var, const_name): tuple(var) is that tuple,
    # ("lookup_is"/"getattr_is", var, name, const_name or None, missing, on_type): what the MRO
    # lookup (``class_lookup``) / ``getattr`` of name on var (on type(var)) finds is that
    # constant, or nothing when missing.
    native: Optional[tuple] = None


class Consts(Protocol):
    def name_for(self, obj: Any, hint: str) -> str: ...


def type_name(cls: type) -> str:
    """``torch.Tensor``, ``int``, ``mymodule.Net``: how users write the type.  Read through
    ``type``'s own descriptors: a metaclass ``__getattr__`` is never asked, and a class made by
    ``type()`` in a namespace without ``__name__`` has no ``__module__`` at all."""
    module, qualname = _type_attr(cls, "__module__"), _type_attr(cls, "__qualname__")
    if module == "builtins" or module is None:
        return str(qualname)
    if cls is torch.Tensor or cls is torch.nn.Parameter:
        return f"torch.{'nn.' if cls is torch.nn.Parameter else ''}{qualname}"
    return f"{module}.{qualname}"


def _type_attr(cls: type, name: str):
    try:
        return type.__dict__[name].__get__(cls, type)
    except Exception:
        return None


def name_hint(obj: Any) -> str:
    """A readable name for ``obj`` in generated code, found without running its code: a class's,
    function's or module's own ``__name__``, else its type's (a user ``__getattr__`` may raise
    anything for a name it does not know)."""
    if isinstance(obj, type):
        name = _type_attr(obj, "__name__")
    elif isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
        try:
            name = object.__getattribute__(obj, "__name__")
        except Exception:
            name = None
    else:
        name = None
    return name if isinstance(name, str) else str(_type_attr(type(obj), "__name__"))


# Types whose repr runs no user code (containers only when their items are of these too).
_PLAIN_REPR = (type(None), bool, int, float, complex, str, bytes, range, slice, type(Ellipsis),
               types.FunctionType, types.BuiltinFunctionType, type)


def _plain(value: Any, depth: int = 0) -> bool:
    kind = type(value)
    if kind in _PLAIN_REPR:
        return True
    if kind in (tuple, list, set, frozenset) and depth < 3 and len(value) <= 32:
        return all(_plain(item, depth + 1) for item in value)
    if kind is dict and depth < 3 and len(value) <= 32:
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    return False


def show(value: Any) -> str:
    """A short readable rendering of a value found at run time (slow path).  Only values whose
    repr runs no user code are rendered by repr; any other object by its type and id.  (Asked
    of its type only: ``isinstance`` would read an object's ``__class__`` through its own
    ``__getattribute__``, and a module's repr asks the module for ``__file__``, which a module
    ``__getattr__`` answers.)"""
    kind = type(value)
    if issubclass(kind, type):
        return type_name(value)
    if issubclass(kind, types.ModuleType):
        return f"<module {value.__dict__.get('__name__', '?')!r}>"
    if issubclass(kind, torch.Size):
        return str(list(value))
    if issubclass(kind, (torch.device, torch.dtype)):
        return str(value)
    if issubclass(kind, torch.Tensor):
        return f"a tensor {value.dtype} {list(value.shape)}"
    if issubclass(kind, torch.nn.Module):
        return f"<{type_name(kind)} module at {id(value):#x}>"
    if not _plain(value):
        return f"<{type_name(type(value))} object at {id(value):#x}>"
    if type(value) in (str, bytes) and len(value) > 80:    # not the repr of all of it
        return f"{' '.join(repr(value[:60]).split())}... ({len(value)} {'characters' if type(value) is str else 'bytes'})"
    text = " ".join(repr(value).split())
    return text if len(text) <= 80 else text[:77] + "..."


def _short(value) -> bool:
    """An int, str or bytes whose repr may stand in a guard's source."""
    return value.bit_length() <= 256 if type(value) is int else len(value) <= 64


# ----------------------------------------------------------------------------- builders


def _type_check(v: str, label: str, cls: type, consts: Consts) -> Check:
    return Check(f"type({v}) is {consts.name_for(cls, cls.__name__)}",
                 f"type({label})", type_name(cls), f"type({v})", ("type_is", v, cls))


def type_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    return [_type_check(v, guard.source.name(), guard.expected, consts)]


def identity_test(v: str, name: str, held: Any) -> str:
    """``v is <the object>``, where ``name`` holds it: called when it is a weak pin (whose object,
    while it lives, is never None)."""
    return f"{v} is {name}() is not None" if type(held) is WeakPin else f"{v} is {name}"


def id_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    obj = pinned(guard.obj)
    weak = type(guard.obj) is WeakPin
    name = consts.name_for(guard.obj, f"{name_hint(obj)}_pin") if weak else consts.name_for(obj, name_hint(obj))
    return [Check(identity_test(v, name, guard.obj), guard.source.name(),
                  f"the object seen at trace time ({show(obj)})", v,
                  ("is_weak", v, guard.obj) if weak else ("is", v, obj))]


def _float_test(v: str, value: float, consts: Consts) -> str:
    if math.isnan(value):
        return f"{v} != {v}"
    if value == 0.0:
        sign = consts.name_for(math.copysign, "copysign")
        return f"{v} == 0.0 and {sign}(1.0, {v}) == {math.copysign(1.0, value)!r}"
    if math.isinf(value):
        return f"{v} == {consts.name_for(value, 'inf')}"
    return f"{v} == {value!r}"


def constant_checks(v: str, label: str, value: Any, consts: Consts) -> list[Check]:
    """Checks that ``v`` is the constant ``value``: same type, same value (recursively)."""
    # ``v[0]`` of a tuple is an expression, not a variable: only whole variables get a native form
    native = v.isidentifier()
    if value is None or type(value) is bool:
        return [Check(f"{v} is {value!r}", label, repr(value), v, ("is", v, value) if native else None)]
    if isinstance(value, torch.dtype):
        return [Check(f"{v} is {consts.name_for(value, 'dtype')}", label, str(value), v,
                      ("is", v, value) if native else None)]
    checks = [_type_check(v, label, type(value), consts)]
    if not native:
        checks[0] = checks[0]._replace(native=None)
    if type(value) is float:
        plain = math.isfinite(value) and value != 0.0   # else the test is not a plain ==
        checks.append(Check(_float_test(v, value, consts), label, repr(value), v,
                            ("eq", v, value) if native and plain else None))
    elif type(value) in (int, str, bytes):
        # a long one by name: its repr written into the guard's source would be compiled (and
        # shown) on every build of it (a 10**7-character string took seconds)
        literal = repr(value) if _short(value) else consts.name_for(value, type(value).__name__)
        checks.append(Check(f"{v} == {literal}", label, show(value), v, ("eq", v, value) if native else None))
    elif type(value) is tuple:
        checks.append(Check(f"len({v}) == {len(value)}", f"len({label})", str(len(value)),
                            f"len({v})", ("len_is", v, len(value)) if native else None))
        for index, item in enumerate(value):
            checks += constant_checks(f"{v}[{index}]", f"{label}[{index}]", item, consts)
    elif isinstance(value, (complex, torch.device, torch.Size)):
        checks.append(Check(f"{v} == {consts.name_for(value, type(value).__name__)}",
                            label, show(value), v, ("eq", v, value) if native else None))
    else:
        raise UnguardableValue(f"{label}: {type(value).__name__} is not a constant")
    return checks


def equals_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    return constant_checks(v, guard.source.name(), guard.obj, consts)


class Comparison:
    """``Comparison(">", 10, False)(x)``: whether ``(x > 10) is False``; a compare guard's native form."""

    __slots__ = ("compare", "constant", "outcome")

    def __init__(self, symbol: str, constant: Any, outcome: bool):
        self.compare, self.constant, self.outcome = COMPARISONS[symbol], constant, outcome

    def __call__(self, value: Any) -> bool:
        return self.compare(value, self.constant) is self.outcome


def compare_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    """``(v > 10) is False``: the comparison the trace made with the number, not its value."""
    symbol, _, outcome = guard.expected
    constant = guard.obj
    literal = repr(constant) if math.isfinite(constant) else consts.name_for(constant, "number")
    test = f"({v} {symbol} {literal}) is {outcome}"
    native = ("call_with", consts.name_for(Comparison(symbol, constant, outcome), "compare"), (v,)) \
        if v.isidentifier() else None
    return [Check(test, f"{guard.source.name()} {symbol} {literal}", repr(outcome), f"{v} {symbol} {literal}", native)]


def contiguity_pins_strides(spec: TensorSpec) -> bool:
    """True when ``x.shape == spec.shape and x.is_contiguous()`` means ``x.stride() == spec.stride``.

    ``is_contiguous()`` reads a flag torch keeps for every tensor, far cheaper than building
    the strides tuple.  It is exact when the expected strides are the row-major ones and no
    dimension has size 1 (torch ignores those strides) or 0 (then any strides count as
    contiguous); and only for plain tensors and parameters, whose flag is TensorImpl's own.
    Only on the host: a device tensor of torch_xla is a functional wrapper that asks the tensor
    inside through a symbolic bool (half again the cost of its strides).
    """
    if spec.type not in (torch.Tensor, torch.nn.Parameter) or any(size <= 1 for size in spec.shape) \
            or spec.device.type != "cpu":
        return False
    row_major, step = [], 1
    for size in reversed(spec.shape):
        row_major.append(step)
        step *= size
    return tuple(reversed(row_major)) == spec.stride


def tensor_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    spec: TensorSpec = guard.expected
    label = guard.source.name()
    # torch.Tensor's own methods, not x.stride(): an attribute set on the instance would answer
    # that (tensor methods the trace read are guarded against such attributes, see absent_match).
    # is_contiguous() also answers True for an mkldnn tensor: the layout is checked with it.
    stride_of = consts.name_for(torch.Tensor.stride, "Tensor_stride")
    stride_test = (f"{consts.name_for(torch.Tensor.is_contiguous, 'Tensor_is_contiguous')}({v}) and "
                   f"{v}.layout is {consts.name_for(torch.strided, 'strided')}"
                   if contiguity_pins_strides(spec) else f"{stride_of}({v}) == {spec.stride!r}")
    is_conj = consts.name_for(torch.Tensor.is_conj, "Tensor_is_conj")
    is_neg = consts.name_for(torch.Tensor.is_neg, "Tensor_is_neg")
    return [
        _type_check(v, label, spec.type, consts),
        Check(f"{v}.dtype is {consts.name_for(spec.dtype, 'dtype')}", f"{label}.dtype",
              str(spec.dtype), f"{v}.dtype"),
        Check(f"{v}.device == {consts.name_for(spec.device, 'device')}", f"{label}.device",
              str(spec.device), f"{v}.device"),
        Check(f"{v}.shape == {spec.shape!r}", f"{label}.shape", str(list(spec.shape)),
              f"{v}.shape"),
        Check(stride_test, f"{label}.stride()", str(list(spec.stride)), f"list({stride_of}({v}))"),
        Check(f"{v}.requires_grad is {spec.requires_grad!r}", f"{label}.requires_grad",
              repr(spec.requires_grad), f"{v}.requires_grad"),
        # a lazy conjugate or negative bit (``x.conj()``, its ``.imag``): what the trace never saw
        Check(f"not ({is_conj}({v}) or {is_neg}({v}))", f"{label}.is_conj() or .is_neg()", "False",
              f"{is_conj}({v}) or {is_neg}({v})"),
    ]


def length_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    cls, length = guard.expected
    label = guard.source.name()
    # a subclass's own __len__ is the program's code: the builtin's length is what was relied on
    base = container_base(cls)
    measure = "len" if base is None or base is cls else consts.name_for(base.__len__, "builtin_len")
    return [_type_check(v, label, cls, consts),
            Check(f"{measure}({v}) == {length}", f"len({label})", str(length), f"{measure}({v})",
                  ("len_is", v, length) if measure == "len" else None)]


def dict_keys_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    cls, keys, key_types = guard.expected
    label = guard.source.name()
    keys_name = consts.name_for(keys, 'keys')
    checks = [_type_check(v, label, cls, consts),
              Check(f"tuple({v}) == {keys_name}", f"{label}.keys()", show(list(keys)), f"list({v})",
                    ("keys", v, keys_name) if type(keys) is tuple else None)]
    if any(key_type is not str for key_type in key_types):
        checks.append(Check(f"tuple(map(type, {v})) == {consts.name_for(key_types, 'key_types')}",
                            f"types of {label}.keys()", show(key_types),
                            f"tuple(map(type, {v}))"))
    return checks


def module_state_checks(guard: Guard, v: str, consts: Consts,
                        read: Callable[[str], str] | None = None) -> list[Check]:
    """Training flag, empty hook dicts, and no replaced call (``module_facts.CALL_OVERRIDES``).
    ``read(attr)`` gives the expression for each attribute (and ``__dict__``) when codegen knows
    a faster exact way (from the instance ``__dict__``: nn.Module's ``__getattr__`` makes every
    plain attribute read on a module slow)."""
    label = guard.source.name()
    read = read or (lambda attr: f"{v}.{attr}")
    training, hook_counts = guard.expected
    checks = [Check(f"{read('training')} is {training!r}", f"{label}.training",
                    repr(training), read("training"))]
    for hooks, count in zip(module_facts.MODULE_HOOK_DICTS, hook_counts):
        test = f"not {read(hooks)}" if count == 0 else f"len({read(hooks)}) == {count}"
        checks.append(Check(test, f"len({label}.{hooks})", str(count), f"len({read(hooks)})"))
    compiled, instance_dict = read("_compiled_call_impl"), read("__dict__")
    checks.append(Check(f"{compiled} is None", f"{label}._compiled_call_impl", "None", compiled))
    checks.append(Check(f"'_call_impl' not in {instance_dict}", f"{label}.__dict__['_call_impl']", "absent",
                        f"{instance_dict}.get('_call_impl', {consts.name_for(MISSING, 'missing')})"))
    return checks + global_hooks_checks(guard, v, consts)


def module_call_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    """The module's class still finds what the traced call found (``module_facts.CALL_LOOKUPS``):
    a class can change behind its instances' dicts, so these run on every call."""
    return type_lookup_checks(guard.obj, v, guard.source.name(), consts)


def type_lookup_checks(lookups: tuple, v: str, label: str, consts: Consts) -> list[Check]:
    """For each ``(name, found)``: the MRO lookup of ``name`` on ``type(v)`` still finds ``found``
    (``class_lookup``: class dicts only, no descriptor or metaclass code runs)."""
    lookup = consts.name_for(class_lookup, "class_lookup")
    checks = []
    for name, found in lookups:
        expected = consts.name_for(found, name.strip('_'))
        checks.append(Check(f"{lookup}(type({v}), {name!r}) is {expected}", f"type({label}).{name}",
                            _found_name(found), f"{lookup}(type({v}), {name!r})",
                            ("lookup_is", v, name, expected, found is NOT_FOUND, True)))
    return checks


def global_hooks_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    checks = []
    for name, hooks in module_facts.global_hook_dicts().items():
        checks.append(Check(f"not {consts.name_for(hooks, name.lstrip('_'))}",
                            f"len(torch.nn.modules.module.{name})", "0",
                            f"len({consts.name_for(hooks, name.lstrip('_'))})"))
    return checks


def grad_mode_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    enabled = consts.name_for(torch.is_grad_enabled, "is_grad_enabled")
    return [Check(f"{enabled}() is {guard.expected!r}", "torch.is_grad_enabled()",
                  repr(guard.expected), f"{enabled}()", ("call_is", torch.is_grad_enabled, guard.expected))]


def autocast_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    enabled = consts.name_for(torch._C._is_any_autocast_enabled, "is_any_autocast_enabled")
    return [Check(f"{enabled}() is {guard.expected!r}", "torch autocast enabled (any device)",
                  repr(guard.expected), f"{enabled}()",
                  ("call_is", torch._C._is_any_autocast_enabled, guard.expected))]


def torch_state_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    function = guard.source.function
    function_obj = torch_state_function(function)
    fn = consts.name_for(function_obj, function)
    value = guard.obj
    if isinstance(value, (bool, torch.dtype)):          # singletons: identity is equality
        test = f"{fn}() is {value!r}" if isinstance(value, bool) else f"{fn}() is {consts.name_for(value, 'dtype')}"
        native = ("call_is", function_obj, value)
    else:
        test = f"{fn}() == {consts.name_for(value, type(value).__name__)}"
        native = ("call_eq", function_obj, value)
    return [Check(test, guard.source.name(), show(value), f"{fn}()", native)]


def class_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    """The class's MRO is the tuple seen (``mro_of(cls) is mro``), its lookups find what they found
    (one ``ClassLacks`` call, answered from the type version tag while the class is unchanged), and
    the ABC registries are as they were (``abc.get_cache_token()``)."""
    from . import native     # native needs this module's contiguity rule: imported on first use

    facts: ClassFacts = guard.obj
    cls, label = guard.source.cls, guard.source.name()
    name = consts.name_for(cls, name_hint(cls))
    checks = []
    if facts.mro_tuple is not None:
        mro_of_cls = consts.name_for(mro_of, "mro_of")
        checks.append(Check(f"{mro_of_cls}({name}) is {consts.name_for(facts.mro_tuple, 'mro')}", f"{label}.__mro__",
                            "the MRO seen at trace time", f"{mro_of_cls}({name})",
                            ("call_is", functools.partial(mro_of, cls), facts.mro_tuple)))
    if facts.lookups:
        absent = {attr for attr, found in facts.lookups if found is NOT_FOUND}
        found = {attr: obj for attr, obj in facts.lookups if obj is not NOT_FOUND}
        finds = consts.name_for(native.class_lacks([(cls, absent, found)]), "class_finds")
        attrs = tuple(attr for attr, _ in facts.lookups)
        now = consts.name_for(lookups_now, "lookups_now")
        checks.append(Check(f"{finds}()", f"{label} lookups of {', '.join(attrs)}",
                            lookups_text(facts.lookups), f"{now}({name}, {attrs!r})", ("call_true", finds)))
    if facts.abc_token is not None:
        token = consts.name_for(abc.get_cache_token, "abc_get_cache_token")
        checks.append(Check(f"{token}() == {facts.abc_token}", "abc.get_cache_token() (the ABC registries)",
                            str(facts.abc_token), f"{token}()", ("call_eq", abc.get_cache_token, facts.abc_token)))
    return checks


def lookups_text(lookups: tuple) -> str:
    """``__call__ -> <function ...>, __class__ -> not found``: what each MRO lookup found."""
    return ", ".join(f"{attr} -> {_found_name(found)}" for attr, found in lookups)


def lookups_now(cls: type, attrs: tuple) -> str:
    """What the lookups find now, in words (the slow path's report)."""
    return lookups_text(tuple((attr, class_lookup(cls, attr)) for attr in attrs))


_NAMED_BY_QUALNAME = (types.FunctionType, types.BuiltinFunctionType, types.WrapperDescriptorType,
                      types.MethodDescriptorType, types.GetSetDescriptorType, types.MemberDescriptorType,
                      types.ClassMethodDescriptorType)


def _found_name(found: Any) -> str:
    """``object.__class__``, ``Thing.<lambda>``: a function or descriptor by its own qualified name."""
    if found is NOT_FOUND:
        return "not found"
    if isinstance(found, _NAMED_BY_QUALNAME):
        try:
            qualname = object.__getattribute__(found, "__qualname__")
        except Exception:
            qualname = None
        if isinstance(qualname, str):
            return qualname
    return show(found)


class _Missing:
    """The default ``getattr`` returns in absence checks (no object has it as an attribute)."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def absent_checks(guard: Guard, v: str, consts: Consts) -> list[Check]:
    """``attr`` is still absent: not found through the class's MRO (``getattr`` on the class
    goes through CPython's type attribute cache), and not in the instance ``__dict__``."""
    attr, mode, descriptor, _, by_mro = guard.expected
    label = guard.source.name()
    missing = consts.name_for(MISSING, "missing")
    if mode == "instance":   # the class's own attribute stands, unless the instance hides it
        return [Check(f"{attr!r} not in {v}.__dict__", f"{label}.__dict__[{attr!r}]", "absent",
                      f"{v}.__dict__.get({attr!r}, {missing})", ("lacks", v, attr))]
    holder = v if mode == "class" else f"type({v})"
    if by_mro:    # (``getattr`` on the class would ask its metaclass too, maybe its Python)
        read = f"{consts.name_for(class_lookup, 'class_lookup')}({holder}, {attr!r})"
        nothing = consts.name_for(NOT_FOUND, "not_found")
    else:
        read, nothing = f"getattr({holder}, {attr!r}, {missing})", missing
    op, on_type = "lookup_is" if by_mro else "getattr_is", mode != "class"
    if mode == "slot":    # the class still has the slot (nothing else), and it is unset
        slot = consts.name_for(descriptor, "slot")
        return [Check(f"{read} is {slot}", f"{label}.{attr} (class attribute)", f"the slot {attr!r}", read,
                      (op, v, attr, slot, False, on_type)),
                Check(f"getattr({v}, {attr!r}, {missing}) is {missing}", f"{label}.{attr}", "unset",
                      f"getattr({v}, {attr!r}, {missing})", ("getattr_is", v, attr, None, True, False))]
    checks = [Check(f"{read} is {nothing}",
                    f"{label}.{attr} ({'on the class' if mode == 'class' else 'class attribute'})", "absent", read,
                    (op, v, attr, None, True, on_type))]
    if mode == "object":
        checks.append(Check(f"{attr!r} not in {v}.__dict__", f"{label}.__dict__[{attr!r}]", "absent",
                            f"{v}.__dict__.get({attr!r}, {missing})", ("lacks", v, attr)))
    return checks + type_lookup_checks(guard.obj, v, label, consts)   # no hook added since answers attr


def alias_checks(guard: Guard, v: str, other_vars: list[str]) -> list[Check]:
    """``v is other`` / ``v is not other`` for each related source (their variables given)."""
    label = guard.source.name()
    checks = []
    for (other, same), w in zip(guard.expected, other_vars):
        op = "is" if same else "is not"
        checks.append(Check(f"{v} {op} {w}", f"{label} {op} {other.name()}", "True", f"{v} {op} {w}",
                            ("same" if same else "not_same", v, w)))
    return checks


def distinct_checks(guard: Guard, v: str, other_vars: list[str]) -> list[Check]:
    """All the sources hold different objects: one set of ids, its size compared."""
    names = [*other_vars, v]
    ids = ", ".join(f"id({w})" for w in names)
    return [Check(f"len({{{ids}}}) == {len(names)}",
                  f"{', '.join(s.name() for s in guard.expected)} and {guard.source.name()} distinct",
                  "True", f"len({{{ids}}}) == {len(names)}", ("distinct", tuple(names)))]


def storage_checks(guard: Guard, v: str, other_vars: list[str], consts: Consts, checker: Callable) -> list[Check]:
    """The tensors share storage as at trace time: one call ``checker(*tensors)``
    (``guard.PyStorageGroups`` or its compiled twin, made for the guard's groups)."""
    sources, groups = guard.expected
    names = ", ".join([*other_vars, v])
    fn, groups_of = consts.name_for(checker, "storage_groups"), consts.name_for(storage_groups, "storage_groups_of")
    return [Check(f"{fn}({names})", f"storage shared among {', '.join(s.name() for s in (*sources, guard.source))}",
                  str(groups), f"{groups_of}(({names},))", native=("call_with", fn, (*other_vars, v)))]


def autograd_view_checks(guard: Guard, v: str, other_vars: list[str], consts: Consts, checker: Callable) -> list[Check]:
    """Each tensor is the kind of view for autograd it was at trace time: one call
    ``checker(*tensors)`` (``guard.PyAutogradViews`` or its compiled twin)."""
    sources, kinds = guard.expected
    names = ", ".join([*other_vars, v])
    fn, kinds_of = consts.name_for(checker, "autograd_views"), consts.name_for(describe_autograd_views, "autograd_views_of")
    return [Check(f"{fn}({names})", f"autograd view kinds of {', '.join(s.name() for s in (*sources, guard.source))}",
                  repr("; ".join(map(describe_autograd_view, kinds))), f"{kinds_of}(({names},))",
                  native=("call_with", fn, (*other_vars, v)))]


def describe_autograd_views(tensors: tuple) -> str:
    """What each tensor is for autograd, as the failure reason shows it."""
    return "; ".join(describe_autograd_view(autograd_view(t)) for t in tensors)


CHECK_BUILDERS: dict[str, Callable[[Guard, str, Consts], list[Check]]] = {
    TORCH_STATE_MATCH: torch_state_checks,
    CLASS_MATCH: class_checks,
    ABSENT_MATCH: absent_checks,
    TYPE_MATCH: type_checks,
    ID_MATCH: id_checks,
    EQUALS_MATCH: equals_checks,
    COMPARE_MATCH: compare_checks,
    TENSOR_MATCH: tensor_checks,
    LENGTH_MATCH: length_checks,
    DICT_KEYS_MATCH: dict_keys_checks,
    MODULE_STATE_MATCH: module_state_checks,
    GLOBAL_HOOKS_EMPTY: global_hooks_checks,
    GRAD_MODE_MATCH: grad_mode_checks,
    AUTOCAST_MATCH: autocast_checks,
}


# ----------------------------------------------------------------------------- words


def describe_guard(guard: Guard) -> str:
    """One readable line per guard: ``L['x'] tensor: torch.float32 cpu [2, 3] ...``."""
    name = guard.source.name()
    kind, expected = guard.kind, guard.expected
    if kind == TENSOR_MATCH:
        return (f"{name} tensor: {expected.dtype} {expected.device} {list(expected.shape)} "
                f"stride={list(expected.stride)} requires_grad={expected.requires_grad} "
                f"{type_name(expected.type)}")
    if kind == TYPE_MATCH:
        return f"{name} type: {type_name(expected)}"
    if kind == ID_MATCH:
        return f"{name} is {show(pinned(guard.obj))}"
    if kind == EQUALS_MATCH:
        return f"{name} == {show(guard.obj)}"
    if kind == COMPARE_MATCH:
        return f"({name} {expected[0]} {guard.obj!r}) is {expected[2]}"
    if kind == LENGTH_MATCH:
        return f"len({name}) == {expected[1]} ({type_name(expected[0])})"
    if kind == DICT_KEYS_MATCH:
        return f"{name}.keys() == {list(expected[1])!r}"
    if kind == MODULE_STATE_MATCH:
        hooks = "no hooks" if not any(expected[1]) else f"hooks per dict {expected[1]}"
        return f"{name} module: training={expected[0]}, {hooks}, call not replaced"
    if kind == GLOBAL_HOOKS_EMPTY:
        return "no global nn.Module hooks"
    if kind == GRAD_MODE_MATCH:
        return f"torch.is_grad_enabled() == {expected}"
    if kind == AUTOCAST_MATCH:
        return f"torch autocast enabled (any device) == {expected}"
    if kind == TORCH_STATE_MATCH:
        return f"{name} == {show(guard.obj)}"
    if kind == CLASS_MATCH:
        return f"{name}: {describe_class_facts(guard.obj)}"
    if kind == ABSENT_MATCH:
        where = {"class": "", "object": " (instance and class)", "slot": " (unset slot)"}.get(expected[1], " (class)")
        return f"{name} has no attribute {expected[0]!r}{where}"
    if kind == DISTINCT_MATCH:
        return f"{', '.join(s.name() for s in expected)} and {name} are distinct objects"
    if kind == STORAGE_MATCH:
        return describe_storage_groups((*expected[0], guard.source), expected[1])
    if kind == AUTOGRAD_VIEW_MATCH:
        return "; ".join(f"{s.name()} is {describe_autograd_view(k)}" for s, k in zip((*expected[0], guard.source), expected[1]))
    if kind == ALIAS_MATCH:
        return " and ".join(f"{name} {'is' if same else 'is not'} {other.name()}" for other, same in expected)
    return f"{name} {kind} {expected!r}"


def describe_autograd_view(kind: tuple) -> str:
    """``a view of a leaf (made under no_grad)`` for an ``autograd_view`` kind."""
    if not kind:
        return "no view"
    base_is_leaf, base_requires_grad, creation, readable = kind
    made = f" (created {creation})" if creation not in ("DEFAULT", "") else ""
    needs = "" if base_requires_grad else " that does not require grad"
    broken = "" if readable else ", written since: its history unreadable"
    return f"a view of {'a leaf' if base_is_leaf else 'a tensor autograd made'}{needs}{made}{broken}"


def describe_storage_groups(sources: tuple, groups: tuple) -> str:
    """``L['y'] and L['t'] share one storage; L['x'] has its own``."""
    members: dict[int, list[str]] = {}
    for source, group in zip(sources, groups):
        members.setdefault(group, []).append(source.name())
    shared = [" and ".join(names) + " share one storage" for names in members.values() if len(names) > 1]
    alone = [names[0] for names in members.values() if len(names) == 1]
    if alone:
        shared.append(", ".join(alone) + (" has its own" if len(alone) == 1 else " each have their own"))
    return "; ".join(shared)


def describe_class_facts(facts: ClassFacts) -> str:
    parts = ["the MRO seen at trace time"] if facts.mro_tuple is not None else []
    if facts.lookups:
        parts.append(f"lookups {lookups_text(facts.lookups)}")
    if facts.abc_token is not None:
        parts.append(f"abc.get_cache_token() == {facts.abc_token} (no ABC registered a class since)")
    return "; ".join(parts)
