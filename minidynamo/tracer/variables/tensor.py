"""``TensorVariable``: a tensor in the graph, as an fx node plus a meta example value.

The example value answers every metadata question (shape, dtype, strides: all static and
guarded on the inputs) without touching data; ``device`` is kept apart because examples live
on ``meta`` while the program's tensors live on their real device.  Anything that needs the
tensor's *data* (``.item()``, ``bool(t)``, ``.tolist()``) cannot be traced: Unsupported.
"""

from __future__ import annotations

import operator
import types

import torch

import guards as G
from ...exc import Unsupported
from ..library import is_program_function
from . import constant_tensors
from .base import AttributeMissing, VariableTracker, instance_dict, static_class_attribute
from .constant import ConstantVariable

# Attributes answered from the example value as constants.
CONSTANT_ATTRIBUTES = {"dtype", "ndim", "requires_grad", "layout", "is_sparse", "is_quantized",
                       "is_leaf", "is_nested", "is_mkldnn", "itemsize", "names"}   # (is_complex: a method)
# Of those, the ones an input's example cannot know (it is a fresh leaf without names): read
# from the real input and guarded.
INPUT_ATTRIBUTES = {"is_leaf", "names"}
# In-place methods that change a tensor's metadata (not only its data): a tensor read from two
# places must then be one graph input, or the trace reads stale metadata through the other.
METADATA_MUTATORS = {"unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "resize_",
                     "resize_as_", "as_strided_", "set_", "detach_", "requires_grad_", "rename_"}
# Attributes that are tensors themselves: a getattr node.
TENSOR_ATTRIBUTES = {"T", "mT", "H", "mH", "real", "imag"}
# Methods whose answer is metadata, hence a constant (static shapes).
METADATA_METHODS = {"size", "dim", "ndimension", "numel", "nelement", "stride", "is_contiguous",
                    "is_floating_point", "is_complex", "element_size", "__len__", "storage_offset",
                    "is_signed", "has_names", "is_inference"}
# Of those, what an input's meta example does not carry: asked of the input itself (guarded).
INPUT_FACTS = {"has_names", "is_inference"}
# Methods that need the data: never traceable.
DATA_METHODS = {"item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__",
                "data_ptr", "untyped_storage", "storage", "backward", "register_hook",
                "__array__", "__format__", "__repr__", "__str__", "__iter__", "__setstate__"}


class TensorVariable(VariableTracker):
    known = None      # the real value, when only constants made it (constant_tensors.py)
    # An in-place op's result is the tensor it wrote, the very object (``y *= 2`` is ``y``): a
    # new tracker for the value after the write, which stands for the written one's object.
    same_object = None

    def the_object(self) -> "TensorVariable":
        """The tracker whose object this is (itself, or the tensor an in-place op wrote)."""
        return self.same_object if self.same_object is not None else self

    def __init__(self, node, example: torch.Tensor, device, source=None, python_class=torch.Tensor):
        super().__init__(source)
        self.node = node
        self.example = example
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.python_class = python_class      # nn.Parameter for parameters (tensor_match guards it)

    def python_type(self):
        return self.python_class

    @property
    def is_input(self) -> bool:
        return self.node.op == "placeholder"

    def truth(self, tx):
        if self.known is not None and self.known.numel() == 1:
            return bool(self.known)
        raise Unsupported("tensor-data-dependent control flow (bool() of a tensor)")

    def as_graph_arg(self, devices):
        devices.append(self.device)
        return self.node, self.example

    def unpack(self, tx):
        if tx.output.function_modes:          # torch would pass Tensor.__iter__, then unbind
            raise Unsupported("iteration over a tensor inside a TorchFunctionMode block (not routed)")
        if self.example.dim() == 0:
            raise Unsupported("iteration over a 0-d tensor")
        pin_special_methods(tx, ("__iter__",), [self])
        if is_program_function(G.class_lookup(self.python_class, "__iter__")):
            raise Unsupported("iteration over a tensor whose class's __iter__ the program replaced")
        return [self.subscript(tx, ConstantVariable(i)) for i in range(self.example.shape[0])]

    def subscript(self, tx, index: VariableTracker):
        from .torch_function_modes import dispatch

        pin_special_methods(tx, ("__getitem__",), [self])
        return dispatch(tx, torch.Tensor.__getitem__, [self, index], {},
                        lambda: tx.output.call_op("call_function", operator.getitem, [self, index], {}))

    def var_getattr(self, tx, name):
        from .torch_function_modes import tensor_attribute

        pin_special_methods(tx, (name,), [self])      # x.shape, x.T: what the class finds for them
        return tensor_attribute(tx, self, name, lambda: self._getattr(tx, name))

    def store_attribute(self, tx, name, value):
        """``t.requires_grad = flag``: the setter makes ``t.requires_grad_(flag)``'s change, and
        refuses a flag that is not a bool and any tensor that is not a leaf (``requires_grad_``
        only refuses ``False`` there).  Any other name is a plain Python attribute (see
        ``_store_plain_attribute``)."""
        if name == "grad":
            return self._clear_input_grad(tx, value)
        if name != "requires_grad":
            return self._store_plain_attribute(tx, name, value)
        if tx.output.function_modes:
            raise Unsupported("assignment to a tensor's requires_grad under a TorchFunctionMode")
        if not (isinstance(value, ConstantVariable) and type(value.value) is bool):
            raise Unsupported(f"assignment of {value} to a tensor's requires_grad (eager wants a bool)")
        if not self.var_getattr(tx, "is_leaf").as_python_constant():
            raise Unsupported("assignment to requires_grad of a tensor autograd made (eager refuses it)")
        self.call_method(tx, "requires_grad_", [value], {})

    def _clear_input_grad(self, tx, value):
        """``p.grad = None`` on a leaf graph input (``zero_grad(set_to_none=True)``): replayed on
        the real tensor after the graph (``.grad``'s own setter), and what later reads in the trace
        see (``_input_grad``).  Another value, or any other tensor, is refused."""
        source = self.input_source(tx)
        if not (isinstance(value, ConstantVariable) and value.value is None) or source is None:
            raise Unsupported("assignment to a tensor's .grad other than p.grad = None on a graph input")
        if tx.output.function_modes:
            raise Unsupported("assignment to a tensor's .grad under a TorchFunctionMode")
        if not self.var_getattr(tx, "is_leaf").as_python_constant():
            raise Unsupported("assignment to .grad of a tensor autograd made (eager warns)")
        if G.class_lookup(self.python_class, "grad") is not G.class_lookup(torch.Tensor, "grad"):
            raise Unsupported(f"assignment to .grad of a {self.python_class.__name__} (its own grad attribute)")
        tx.output.side_effects.store_tensor_attribute(self.example, "grad", value,
                                                      (source, tx.output.real_inputs[source]))

    def _store_plain_attribute(self, tx, name, value):
        """``t.name = value`` where the tensor's class has nothing called ``name`` and object's
        ``__setattr__``: an entry of the tensor's ``__dict__`` (``mark_static_address`` tags a
        cache tensor so).  Later reads in the trace see it; the store replays after the graph."""
        from .containers import ListVariable, TupleVariable
        from .dicts import DictVariable

        if tx.output.function_modes:
            raise Unsupported(f"assignment to attribute {name!r} of a tensor under a TorchFunctionMode")
        klass = self.python_class
        if name.startswith("__") or G.class_lookup(klass, name) is not G.NOT_FOUND:
            raise Unsupported(f"assignment to attribute {name!r} of a tensor ({klass.__name__}.{name} exists)")
        if G.class_lookup(klass, "__setattr__") is not object.__setattr__:
            raise Unsupported(f"assignment to attribute {name!r} of a tensor ({klass.__name__} has its own __setattr__)")
        tx.output.add_guard(G.class_match(klass, lookups=(name, "__setattr__")))
        if not isinstance(value, (TensorVariable, ConstantVariable, TupleVariable, ListVariable, DictVariable)):
            raise Unsupported(f"assignment of {value} to attribute {name!r} of a tensor")
        source = self.input_source(tx)
        real_input = (source, tx.output.real_inputs[source]) if source is not None else None
        tx.output.side_effects.store_tensor_attribute(self.example, name, value, real_input)

    def _getattr(self, tx, name):
        from .containers import SizeVariable

        example = self.example
        if name == "shape":
            return SizeVariable([ConstantVariable(d) for d in example.shape])
        if name == "device":
            return ConstantVariable(self.device)
        if name == "is_cuda":
            return ConstantVariable(self.device.type == "cuda")
        if name == "is_cpu":
            return ConstantVariable(self.device.type == "cpu")
        if name == "is_meta":
            return ConstantVariable(self.device.type == "meta")
        if name in INPUT_ATTRIBUTES and self.input_source(tx) is not None:
            from ..builder import wrap

            source = self.input_source(tx)
            return wrap(tx, getattr(tx.output.real_inputs[source], name), G.AttrSource(source, name))
        if name in CONSTANT_ATTRIBUTES:
            return ConstantVariable(getattr(example, name))
        if name in TENSOR_ATTRIBUTES:
            return tx.output.call_op("call_function", getattr, [self, ConstantVariable(name)], {})
        if name == "data":      # not ``detach()``: eager's ``.data`` has a version counter of its own
            return tx.output.call_op("call_function", getattr, [self, ConstantVariable("data")], {})
        if name == "__class__":                      # exact class: tensor_match guards it
            from .objects import ClassVariable

            return ClassVariable(self.python_class)
        if name == "grad" and self.input_source(tx) is not None:
            return self._input_grad(tx)
        if name in ("grad", "grad_fn", "_base", "_version"):
            raise Unsupported(f"tensor attribute .{name} (autograd state)")
        if callable(getattr(torch.Tensor, name, None)):
            return self._method(tx, name)
        if not hasattr(torch.Tensor, name):
            return self._instance_attribute(tx, name)
        raise Unsupported(f"tensor attribute .{name}")

    def _input_grad(self, tx):
        """``p.grad`` of a leaf graph input (a parameter after ``backward()``): read from the real
        tensor and guarded as any input is (``is None``, or a tensor input of its own).  Autograd
        writes it only in a backward pass, which runs eagerly at a break, so nothing in a graph
        changes it.  A non-leaf's ``.grad`` is refused (eager warns at each read)."""
        from ..builder import wrap

        if not self.var_getattr(tx, "is_leaf").as_python_constant():
            raise Unsupported("tensor attribute .grad of a tensor autograd made (eager warns at each read)")
        cleared = tx.output.side_effects.tensor_attribute(self.example, "grad")
        if cleared is not None:                      # p.grad = None earlier in the trace
            return cleared
        source = self.input_source(tx)
        return wrap(tx, tx.output.real_inputs[source].grad, G.AttrSource(source, "grad"))

    def _method(self, tx, name):
        """``x.name`` for a method of torch.Tensor: the input's own attribute when it hides it."""
        if self.hides_method(tx.output, name):
            from ..builder import wrap

            source = self.input_source(tx)
            return wrap(tx, tx.output.real_inputs[source].__dict__[name], G.AttrSource(source, name))
        return self.program_method(tx, name) or TensorMethodVariable(self, name)

    def program_method(self, tx, name):
        """``x.name`` found on the tensor's class as a Python function of the program (one it
        added to ``torch.Tensor``, or put in place of torch's): inlined, never recorded as a
        method call by name (a graph replayed as traced would keep the old function).  What the
        class finds for ``name`` is guarded (``torch.Tensor.relu = f`` between calls recompiles).
        None: torch's own method."""
        found = G.class_lookup(self.python_class, name)
        program_function = isinstance(found, types.FunctionType) and is_program_function(found)
        tx.output.add_guard(G.class_match(self.python_class, lookups=(name,)))
        if not program_function:
            return None
        from .functions import UserFunctionVariable, UserMethodVariable

        return UserMethodVariable(UserFunctionVariable(found), self)

    def hides_method(self, output, name) -> bool:
        """Whether this input tensor has an attribute of its own that hides torch.Tensor's method
        ``name`` (a method is not a data descriptor: ``t.size = f`` makes ``t.size(0)`` call f).
        When it has none, the absence is guarded: a graph that calls the method by name relies on it."""
        source = self.input_source_in(output)
        if source is None or _data_descriptor(static_class_attribute(torch.Tensor, name)):
            return False
        real = output.real_inputs[source]
        if name in instance_dict(real, {}):
            return True
        output.add_guard(G.absent_match(source, real, name, instance_only=True))
        return False

    def input_source(self, tx):
        """The source of the graph input this tensor IS (the very object), or None."""
        return self.input_source_in(tx.output)

    def input_source_in(self, output):
        if self.is_input and self.source is not None and self.source in output.real_inputs:
            return self.source
        for source, variable in output.input_variables.items():   # an in-place op returns its input
            if variable.example is self.example and source in output.real_inputs:
                return source
        return None

    def _instance_attribute(self, tx, name):
        """``x.name`` for a name torch.Tensor lacks: a Python attribute set on the tensor object."""
        source = self.input_source(tx)
        real = tx.output.real_inputs[source] if source is not None else None
        # what the trace stored: on an input, known by the real tensor (one tensor under two
        # sources has one entry); on a tensor the graph makes, by its example
        effects = tx.output.side_effects
        stored = effects.tensor_attribute(self.example, name) if real is None else effects.stored_attribute_of(real, name)
        if stored is not None:
            return stored
        if source is not None:
            instance = instance_dict(real, {})
            if name in instance:
                from ..builder import wrap

                return wrap(tx, instance[name], G.AttrSource(source, name))
        elif any(name in instance_dict(t, {}) for t in tx.output.real_inputs.values()):
            raise Unsupported(f"attribute {name!r} of a tensor computed in the trace (an input has one)")
        raise AttributeMissing(f"Tensor has no attribute {name!r} (AttributeError)", self, name)

    def guard_absent(self, tx, name):
        """A tensor made in the trace has no Python attributes, unless it is an input returned by
        an in-place op: guard the absence on the input it is (or on every input)."""
        source = self.input_source(tx)
        sources = [source] if source is not None else list(tx.output.real_inputs)
        for source in sources:
            tx.output.add_guard(G.absent_match(source, tx.output.real_inputs[source], name))

    def call_method(self, tx, name, args, kwargs):
        method = self.program_method(tx, name) or TensorMethodVariable(self, name)
        return method.call_function(tx, args, kwargs)

    def __repr__(self):
        return f"TensorVariable({self.node.name}: {tuple(self.example.shape)} {self.example.dtype})"


def pin_special_methods(tx, names: tuple, args) -> None:
    """An attribute read, operator, index, iteration or store on tensors relies on what their
    classes find for ``names`` (``torch.Tensor.__add__ = f`` changes ``x + 1``): guarded."""
    for kind in {a.python_class for a in args if isinstance(a, TensorVariable)}:
        tx.output.add_guard(G.class_match(kind, lookups=names))


def _data_descriptor(attr) -> bool:
    """Whether a class attribute is a data descriptor, which an instance attribute of the same
    name cannot hide."""
    return hasattr(type(attr), "__set__") or hasattr(type(attr), "__delete__")


class TensorMethodVariable(VariableTracker):
    """``tensor.name`` before it is called."""

    def __init__(self, tensor: TensorVariable, name: str):
        super().__init__()
        self.tensor = tensor
        self.name = name

    def python_type(self):
        return _BOUND_C_METHOD

    def call_function(self, tx, args, kwargs):
        from .torch_function_modes import tensor_method

        return tensor_method(tx, self.tensor, self.name, args, kwargs, lambda: self._call(tx, args, kwargs))

    def _call(self, tx, args, kwargs):
        name, tensor = self.name, self.tensor
        if name in DATA_METHODS:
            if constant_tensors.answers(tensor, name) and not args and not kwargs:
                from ..builder import wrap_constant_result

                return wrap_constant_result(constant_tensors.read(tensor, name))
            raise Unsupported(f"Tensor.{name}() needs the tensor's data")
        if name == "storage_offset":                 # examples carry the inputs' offsets:
            tx.output.reads_storage_offset = True      # the inputs' offsets are guarded
        if name in METADATA_MUTATORS:
            source = tensor.input_source(tx)
            if source is not None:
                tx.output.note_metadata_mutation(source)
        if name in INPUT_FACTS and not args and not kwargs and tensor.input_source(tx) is not None:
            from ..builder import wrap

            source = tensor.input_source(tx)        # the example has no names, is no inference tensor
            fact = getattr(torch.Tensor, name)(tx.output.real_inputs[source])
            return wrap(tx, fact, G.CallSource(source, name))
        if name in METADATA_METHODS:
            values = [a.as_python_constant() for a in args]
            kw = {k: v.as_python_constant() for k, v in kwargs.items()}
            result = getattr(tensor.example, name)(*values, **kw)
            from ..builder import wrap_constant_result

            return wrap_constant_result(result)
        if name == "get_device":
            return ConstantVariable(tensor.device.index if tensor.device.type != "cpu" else -1)
        if name in ("to", "cuda", "cpu", "type"):
            return _device_move(tx, tensor, name, args, kwargs)
        if name.startswith("__") and name.endswith("__") and name not in TENSOR_DUNDERS:
            raise Unsupported(f"Tensor.{name}")
        return tx.output.call_op("call_method", name, [tensor, *args], kwargs)

    def __repr__(self):
        return f"TensorMethodVariable({self.name})"


_BOUND_C_METHOD = type(torch.empty(0).add)

TENSOR_DUNDERS = {"__getitem__", "__add__", "__radd__", "__mul__", "__rmul__", "__sub__", "__rsub__",
                  "__truediv__", "__rtruediv__", "__matmul__", "__neg__", "__pow__", "__rpow__",
                  "__and__", "__or__", "__xor__", "__invert__", "__lt__", "__le__", "__gt__", "__ge__",
                  "__eq__", "__ne__", "__floordiv__", "__mod__", "__abs__", "__setitem__"}


def _is_device_like(value) -> bool:
    if isinstance(value, torch.device):
        return True
    if isinstance(value, str):
        try:
            torch.device(value)
            return True
        except RuntimeError:
            return False
    return isinstance(value, int) and not isinstance(value, bool)


def _device_move(tx, tensor, name, args, kwargs):
    """``.to(...)`` / ``.cuda()`` / ``.cpu()`` / ``.type(dtype)``: the real device changes,
    the example stays on meta."""
    from .base import maybe_constant

    device = tensor.device
    if name == "cpu":
        device = torch.device("cpu")
    elif name == "cuda":
        target = maybe_constant(args[0]) if args else maybe_constant(kwargs.get("device"), None)
        device = torch.device("cuda", target) if isinstance(target, int) else torch.device(target or "cuda")
    elif name == "type":
        if not args and not kwargs:                  # "torch.FloatTensor": from dtype and device
            meta_name = torch.empty(0, dtype=tensor.example.dtype, device="meta").type()
            prefix = "" if device.type == "cpu" else f"{device.type}."
            return ConstantVariable(meta_name.replace("meta.", prefix, 1))
        return _type_to(tx, tensor, args, kwargs)
    else:
        for a in [*args, kwargs.get("device")]:
            if isinstance(a, TensorVariable):
                device = a.device
            elif a is not None and not isinstance(maybe_constant(a), torch.dtype) and _is_device_like(maybe_constant(a)):
                device = torch.device(maybe_constant(a))

    def example_fn(self, *a, **kw):
        a = ["meta" if not isinstance(x, (torch.Tensor, torch.dtype, bool)) and _is_device_like(x) else x for x in a]
        if "device" in kw:
            kw["device"] = "meta"
        kw.pop("non_blocking", None)
        if name in ("cpu", "cuda"):
            return self.to("meta")
        return getattr(self, name)(*a, **kw)

    example_fn.__qualname__ = f"Tensor.{name}"
    return tx.output.call_op("call_method", name, [tensor, *args], kwargs, device=device, example_fn=example_fn)


def _tensor_type_dtype(target):
    """``t.type(X)``'s dtype for X a dtype, a tensor type (``torch.HalfTensor``) or its name;
    a type of another device than the tensor's is refused (it would move the tensor)."""
    if isinstance(target, torch.dtype):
        return target, None
    if isinstance(target, str):
        parts = target.split(".")
        owner = torch.cuda if parts[:2] == ["torch", "cuda"] else torch if parts[:1] == ["torch"] else None
        target = getattr(owner, parts[-1], None) if owner is not None and len(parts) in (2, 3) else None
    dtype = getattr(target, "dtype", None)
    if not isinstance(target, type) or not isinstance(dtype, torch.dtype):
        raise Unsupported(f"Tensor.type({target!r})")
    return dtype, "cuda" if target.is_cuda else "cpu"


def _type_to(tx, tensor, args, kwargs):
    """``t.type(X)`` is ``t.to(dtype)`` on the tensor's own device (returns ``t`` itself when
    the dtype is already X, as both do)."""
    from .base import maybe_constant

    if len(args) != 1 or set(kwargs) - {"non_blocking"}:
        raise Unsupported("Tensor.type() with several arguments")
    target = args[0].value if hasattr(args[0], "value") else maybe_constant(args[0])
    dtype, device_type = _tensor_type_dtype(target)
    if device_type is not None and device_type != tensor.device.type:
        raise Unsupported(f"Tensor.type({target}) moves the tensor to {device_type}")
    return tx.output.call_op("call_method", "to", [tensor, ConstantVariable(dtype)], {}, device=tensor.device)


def wrap_op_result(output, node, example, device):
    """Turn an op's meta result into VariableTrackers (tensors, tuples of them, None)."""
    from .containers import NamedTupleVariable, TupleVariable, ListVariable

    if isinstance(example, torch.Tensor):
        node.meta["example_value"] = example
        node.meta["device"] = device
        return TensorVariable(node, example, device)
    if isinstance(example, (tuple, list)):
        items = [wrap_op_result(output, output.getitem_node(node, i), e, device) if isinstance(e, (torch.Tensor, tuple, list))
                 else _constant_item(e) for i, e in enumerate(example)]
        from .containers import is_named_tuple_type

        if is_named_tuple_type(type(example)):
            return NamedTupleVariable(items, type(example))
        return (TupleVariable if isinstance(example, tuple) else ListVariable)(items)
    if example is None:            # an op run for its effect (setitem, _assert): the node stays
        return ConstantVariable(None)
    output.graph.erase_node(node)
    raise Unsupported(f"an operation returned a {type(example).__name__}, which depends on tensor data")


def _constant_item(value):
    if value is None:
        return ConstantVariable(None)
    raise Unsupported(f"an operation returned a {type(value).__name__} inside a tuple, which depends on tensor data")
