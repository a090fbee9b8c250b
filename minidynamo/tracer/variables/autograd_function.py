"""``SomeFunction.apply(...)`` of a ``torch.autograd.Function``: one graph node.

The node calls the class's real ``apply`` at run time, so the Function's own Python (its
``forward``, ``setup_context``, its ``vmap`` rule or ``generate_vmap_rule``) runs then, exactly
as in eager, and ``backward`` runs when autograd calls it.  The example value comes from
running ``apply`` on the meta examples.

A program's own Function (not a library's) is first *shadow-traced*: its ``forward`` runs
through the symbolic interpreter into a throwaway body (``trace_body``), under no_grad as
autograd runs it, with a stand-in ``ctx``.  That trace guards what ``forward`` reads (a global
config, a class attribute: what its results, their shapes and dtypes depend on), and refuses a
``forward`` with Python side effects, random draws or in-place writes to its inputs (the
meta run, then the real one, would make them twice; the call then runs eagerly at a graph
break).  Its node is marked ``python_kernel``: a graph that raised after it ran is not run
again (``capture.graph_effects``), and the XLA bridge runs such a graph eagerly (``backward``'s
Python is not traced: a program replayed by hash would keep what it computed).

What this assumes (sound for the graphs the tracer makes):
  - a library's Function (torch's own) is pure: no Python side effects, results told by its
    inputs;
  - its inputs are tensors, constants and tuples/lists of them, and so are its outputs;
  - no TorchFunctionMode is active in the trace around the call: in eager the mode would see
    the torch calls ``forward`` makes, which the node does not route (refused).  Inside a mode's
    own handler the mode is inactive, so a handler may call ``apply`` (flex attention's
    getitem-to-index mode, which transformers' mask builder enters, calls ModIndex.apply).
"""

from __future__ import annotations

import weakref

import torch

import guards as G
from ...exc import Unsupported
from ..library import is_program_class
from ..subgraph import trace_body
from .base import BoundMethodVariable, VariableTracker, describe
from .constant import ConstantVariable


def is_function_apply(value) -> bool:
    """``cls.apply`` bound to a ``torch.autograd.Function`` subclass."""
    owner = getattr(value, "__self__", None)
    func = getattr(value, "__func__", None)
    return isinstance(owner, type) and issubclass(owner, torch.autograd.Function) and \
        getattr(func, "__name__", None) == "apply"


_appliers: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def apply_of(cls):
    """A plain function calling ``cls.apply``: the graph's target.  fx names a callable by its
    module, and a bound ``apply`` reports ``torch.autograd.function`` (where ``Function.apply``
    is defined), so its generated code would look for ``torch.autograd.function.apply`` and
    fail on every call.  This one is named after the class and kept in the code's globals."""
    found = _appliers.get(cls)
    if found is None:
        owner = weakref.ref(cls)                 # the cache must not keep the class alive

        def apply(*args):
            return owner().apply(*args)

        apply.__name__ = apply.__qualname__ = f"{cls.__name__}_apply"
        found = _appliers[cls] = apply
    return found


class AutogradFunctionApplyVariable(VariableTracker):
    def __init__(self, apply, source=None):
        super().__init__(source)
        self.apply = apply                     # the bound classmethod (its class is guarded)

    def python_type(self):
        return type(self.apply)

    def call_function(self, tx, args, kwargs):
        cls = self.apply.__self__
        if tx.output.function_modes:
            raise Unsupported(f"{cls.__name__}.apply inside a TorchFunctionMode block (its forward's torch calls "
                              "would go through the mode in eager)")
        if kwargs:
            raise Unsupported(f"{cls.__name__}.apply with keyword arguments")
        target = apply_of(cls)
        program_class = is_program_class(cls)
        if program_class:
            shadow_forward(tx, cls, self.source.base_source if isinstance(self.source, G.AttrSource) else None, args)
        result = tx.output.call_op("call_function", target, args, {})
        if program_class:
            node = next(n for n in reversed(tx.output.graph.nodes) if n.target is target)
            node.meta["python_kernel"] = f"{cls.__name__}.apply"
        return result

    def __repr__(self):
        return f"AutogradFunctionApplyVariable({describe(self.apply.__self__)})"


# -- the shadow trace of a program's forward ---------------------------------------------------

def shadow_forward(tx, cls, class_source, args) -> None:
    """Trace ``cls.forward`` on ``args`` into a body that is thrown away, for its guards; refuse
    a forward whose run would change anything but its results."""
    from ..builder import wrap
    from .tensor import TensorVariable

    output = tx.output
    own_context = _overrides(cls, "setup_context")        # forward(*args), then setup_context
    snapshot = output.side_effects.snapshot()
    grad_enabled = torch.is_grad_enabled()
    with trace_body(output, f"{cls.__name__}_forward") as scope:
        body_args = []
        for k, arg in enumerate(args):
            if isinstance(arg, TensorVariable):
                node = scope.argument(f"arg{k}", arg.example, arg.device)
                arg = TensorVariable(node, arg.example, arg.device)
            body_args.append(arg)
        forward = wrap(tx, cls, class_source).var_getattr(tx, "forward")
        ctx = [] if own_context else [FunctionCtxVariable(args)]
        torch._C._set_grad_enabled(False)                 # autograd runs forward so
        try:
            forward.call_function(tx, ctx + body_args, {})
        finally:
            torch._C._set_grad_enabled(grad_enabled)
        if output.side_effects.snapshot() != snapshot:
            raise Unsupported(f"{cls.__name__}.forward has Python side effects (it would run twice: traced on "
                              "meta, then for real)")
        arguments = {id(node.meta["example_value"]) for node in scope.arguments}
        for node in scope.graph.nodes:
            if node.meta.get("draws_random"):
                raise Unsupported(f"{cls.__name__}.forward draws random numbers ({node.name})")
            if any(id(written) in arguments for written in node.meta.get("writes") or ()):
                raise Unsupported(f"{cls.__name__}.forward changes an input in place ({node.name})")


def _overrides(cls, name) -> bool:
    def plain(f):
        return getattr(f, "__func__", f)

    return plain(getattr(cls, name)) is not plain(getattr(torch.autograd.Function, name))


class FunctionCtxVariable(VariableTracker):
    """The ``ctx`` a program's ``forward(ctx, ...)`` is shadow-traced with.  What forward tells it
    (``save_for_backward``, ``mark_*``, attributes for backward) matters to the real run only;
    here an attribute stored is read back, the rest answers None."""

    CALLS = ("save_for_backward", "save_for_forward", "mark_dirty", "mark_non_differentiable",
             "set_materialize_grads")

    def __init__(self, args):
        super().__init__()
        from .tensor import TensorVariable

        needs = tuple(isinstance(a, TensorVariable) and a.example.requires_grad for a in args)
        self.attributes = {"needs_input_grad": ConstantVariable(needs)}

    def python_type(self):
        return torch.autograd.function.FunctionCtx

    def store_attribute(self, tx, name, value):
        self.attributes[name] = value
        return ConstantVariable(None)

    def var_getattr(self, tx, name):
        if name in self.attributes:
            return self.attributes[name]
        if name in self.CALLS:
            return BoundMethodVariable(self, name)
        raise Unsupported(f"ctx.{name} read in a Function's forward (not modelled)")

    def call_method(self, tx, name, args, kwargs):
        if name in self.CALLS:
            return ConstantVariable(None)
        raise Unsupported(f"ctx.{name}(...) in a Function's forward (not modelled)")

    def __repr__(self):
        return "FunctionCtxVariable()"
