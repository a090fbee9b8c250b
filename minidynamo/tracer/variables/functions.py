"""Python functions the tracer inlines: real ones, ones made during the trace (nested defs,
lambdas, comprehensions), bound methods, and the cells that closures share."""

from __future__ import annotations

import inspect
import types

import guards as G
from ...exc import ProgramRaises, Unsupported
from ..library import is_library_value
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import TupleVariable
from .dicts import DictVariable

CO_VARARGS, CO_VARKEYWORDS = inspect.CO_VARARGS, inspect.CO_VARKEYWORDS
CO_GENERATOR = inspect.CO_GENERATOR
CO_GENERATOR_LIKE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class CellVariable(VariableTracker):
    """A cell made during the trace (``MAKE_CELL``), shared by the frame and its closures."""

    def __init__(self, value: VariableTracker | None = None):
        super().__init__()
        self.value = value

    def load(self, tx):
        if self.value is None:
            raise ProgramRaises("free variable read before assignment (NameError)",
                                NameError("cannot access free variable where it is not associated with a value"))
        return self.value

    def store(self, tx, value):
        self.value = value


class RealCellVariable(VariableTracker):
    """A cell of a real closure: read through its source.  Writing to it is a side effect,
    replayed after the graph, for the frame's own free variables (``G.ClosureSource``: a
    resume function writing a cell of the frame it continues, ``nonlocal`` in a root closure)."""

    def __init__(self, cell, source, name: str):
        super().__init__(source)
        self.cell = cell
        self.name = name          # the free variable's name in the function that holds the cell
        self.loaded = None

    def load(self, tx):
        if self.loaded is None:
            from ..builder import wrap

            if isinstance(self.source, G.ClosureSource):
                tx.output.side_effects.note_own_cell_read(self.cell, self.name)
            else:
                tx.output.side_effects.note_foreign_cell_read(self.cell, self.name, self)

            try:
                contents = self.cell.cell_contents
            except ValueError as e:
                raise Unsupported("empty closure cell (NameError)") from e
            if self.source is None and not (is_library_value(contents) or isinstance(contents, (types.FunctionType, type))):
                raise Unsupported("a closure variable of a function reached without a source could not be guarded")
            self.loaded = wrap(tx, contents, self.source)
        return self.loaded

    def store(self, tx, value):
        if value is None:                                                  # DELETE_DEREF
            raise Unsupported("deletion of a closure variable of a function defined outside the trace")
        if isinstance(self.source, G.ClosureSource):                       # the frame's own
            tx.output.side_effects.store_cell(self.source.index, self.cell, self.source.var_name, value)
        elif isinstance(self.source, G.AttrSource) and self.source.attr == "cell_contents":   # fn.__closure__[i]
            root = tx.output.code
            if self.name in root.co_cellvars + root.co_freevars:     # maybe the frame's own cell
                raise Unsupported(f"assignment to the closure variable {self.name!r} through a function the "
                                  "frame also shares that name with (it may be the frame's own cell)")
            tx.check_storable(value, f"the closure variable {self.name!r}")
            tx.output.side_effects.store_foreign_cell(self, value)
        else:
            raise Unsupported("assignment to a closure variable of a function reached without a source")
        self.loaded = value


class BaseFunctionVariable(VariableTracker):
    """Something with a code object we can run with an inlining translator."""

    def get_code(self) -> types.CodeType:
        raise NotImplementedError

    def python_type(self):
        return types.FunctionType

    def bind(self, tx, args, kwargs) -> dict:
        return bind_arguments(self.get_code(), self.fn_name(), args, kwargs,
                              self.defaults(tx), self.kwdefaults(tx))

    def call_function(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)

    def var_getattr(self, tx, name):
        if name == "__name__":                  # the code's name; fn_name() is the qualified one
            return ConstantVariable(self.get_code().co_name)
        if name == "__qualname__":
            return ConstantVariable(self.fn_name())
        if name == "__code__":                  # decorators read co_varnames, co_argcount, ...
            return CodeVariable(self.get_code())
        raise Unsupported(f"attribute {name!r} of function {self.fn_name()}")


class UserFunctionVariable(BaseFunctionVariable):
    """A real Python function (from a global, an attribute, a closure, ...)."""

    def __init__(self, fn: types.FunctionType, source=None):
        super().__init__(source)
        self.value = fn

    def get_code(self):
        return self.value.__code__

    def fn_name(self):
        return self.value.__qualname__

    def as_python_constant(self):
        return self.value

    def defaults(self, tx):
        from ..builder import wrap

        values = self.value.__defaults__ or ()
        source = self.attribute_source()
        base = G.AttrSource(source, "__defaults__") if source is not None else None
        return [wrap(tx, v, G.ItemSource(base, i) if base is not None else None) for i, v in enumerate(values)]

    def kwdefaults(self, tx):
        from ..builder import wrap

        values = self.value.__kwdefaults__ or {}
        source = self.attribute_source()
        base = G.AttrSource(source, "__kwdefaults__") if source is not None else None
        return {k: wrap(tx, v, G.ItemSource(base, k) if base is not None else None) for k, v in values.items()}

    def closure_cells(self, tx) -> list:
        cells = self.value.__closure__ or ()
        source = self.attribute_source()
        base = G.AttrSource(source, "__closure__") if source is not None else None
        if base is None:
            return [RealCellVariable(c, None, name) for c, name in zip(cells, self.value.__code__.co_freevars)]
        # one tracker per cell source in a trace: a function called twice reads what its first
        # call stored (side_effects.store_foreign_cell)
        trackers = tx.output.side_effects.cell_trackers
        return [trackers.setdefault(cell_source, RealCellVariable(c, cell_source, name))
                for i, (c, name) in enumerate(zip(cells, self.value.__code__.co_freevars))
                for cell_source in [G.AttrSource(G.ItemSource(base, i), "cell_contents")]]

    def globals_(self):
        return self.value.__globals__

    def globals_source(self, name):
        # fn.__globals__ cannot be rebound: every function of one module reads the same dict,
        # named by itself (so its entries are guarded even for a function reached without a source)
        return G.ItemSource(G.NamespaceSource.of(self.value.__globals__), name)

    def var_getattr(self, tx, name):
        from ..builder import wrap

        source = self.attribute_source()
        if name in ("__name__", "__qualname__", "__module__", "__doc__"):      # assignable: guarded
            return wrap(tx, getattr(self.value, name), G.AttrSource(source, name) if source else None)
        if name == "__class__":
            from .objects import ClassVariable

            return ClassVariable(types.FunctionType)
        if name in self.value.__dict__:
            return wrap(tx, self.value.__dict__[name], G.AttrSource(source, name) if source else None)
        if name == "__code__" and self.source is not None and not _is_library(self.value):
            tx.output.add_guard(G.id_match(G.AttrSource(self.source, "__code__"), self.value.__code__))
        return super().var_getattr(tx, name)

    def attribute_source(self):
        """Where the function's own attributes are re-read from: its source, or (a program's
        function met without one) the function held as itself; a library's needs none."""
        if self.source is not None or _is_library(self.value):
            return self.source
        return G.HeldSource.of(self.value)

    def __repr__(self):
        return f"UserFunctionVariable({self.fn_name()})"


def _is_library(value) -> bool:
    return is_library_value(value)


class CodeVariable(VariableTracker):
    """A function's code object: its ``co_*`` fields are constants (the code is guarded by
    identity where it was read from, or is a constant of the code that made the function)."""

    def __init__(self, code):
        super().__init__()
        self.value = code

    def python_type(self):
        return types.CodeType

    def as_python_constant(self):
        return self.value

    def var_getattr(self, tx, name):
        from ..builder import held_constant, wrap_constant_result

        if not name.startswith("co_") or not hasattr(self.value, name):
            raise Unsupported(f"code attribute {name!r}")
        value = getattr(self.value, name)
        if value is getattr(self.value, name):     # kept on the code (co_consts), not made per read (co_varnames)
            return held_constant(tx, value)
        return wrap_constant_result(value)

    def __repr__(self):
        return f"CodeVariable({self.value.co_qualname})"


class NestedFunctionVariable(BaseFunctionVariable):
    """A function made by MAKE_FUNCTION during the trace (nested def, lambda, comprehension)."""

    def __init__(self, code, globals_dict, globals_source_fn, defaults, kwdefaults, closure):
        super().__init__()
        self.code = code
        self.globals_dict = globals_dict
        self.globals_source_fn = globals_source_fn
        self.default_values = defaults or []
        self.kwdefault_values = kwdefaults or {}
        self.closure = closure or []

    def get_code(self):
        return self.code

    def fn_name(self):
        return self.code.co_qualname

    def defaults(self, tx):
        return list(self.default_values)

    def kwdefaults(self, tx):
        return dict(self.kwdefault_values)

    def closure_cells(self, tx):
        return list(self.closure)

    def globals_(self):
        return self.globals_dict

    def globals_source(self, name):
        return self.globals_source_fn(name)

    def __repr__(self):
        return f"NestedFunctionVariable({self.fn_name()})"


class UserMethodVariable(VariableTracker):
    """``obj.method``: a function bound to ``self``."""

    def __init__(self, fn: VariableTracker, self_vt: VariableTracker, source=None):
        super().__init__(source)
        self.fn = fn
        self.self_vt = self_vt

    def python_type(self):
        return types.MethodType

    def call_function(self, tx, args, kwargs):
        return self.fn.call_function(tx, [self.self_vt, *args], kwargs)

    def var_getattr(self, tx, name):
        if name == "__self__":
            return self.self_vt
        if name == "__func__":
            return self.fn
        return self.fn.var_getattr(tx, name)

    def __repr__(self):
        return f"UserMethodVariable({self.fn!r})"


class PartialVariable(VariableTracker):
    """``functools.partial(fn, *args, **kwargs)``: made in the trace (rebuilt where it leaves
    the frame: returned, stored, handed over at a break), or a real one read from the frame
    (guarded by exact type; ``func``, ``args`` and the ``keywords`` dict are wrapped from their
    sources, so they are guarded, and a change the program makes to ``keywords`` is seen by
    later calls of the partial and replayed on the real dict)."""

    def __init__(self, fn: VariableTracker, args: list, keywords: DictVariable, source=None):
        super().__init__(source)
        self.fn, self.args, self.keywords = fn, list(args), keywords

    @staticmethod
    def of_real(tx, value, source):
        from ..builder import wrap

        def attr(name):
            return G.AttrSource(source, name) if source is not None else None

        fn = wrap(tx, value.func, attr("func"))
        args = wrap(tx, value.args, attr("args")).unpack(tx)
        return PartialVariable(fn, args, wrap(tx, value.keywords, attr("keywords")), source)

    def python_type(self):
        import functools

        return functools.partial

    def call_function(self, tx, args, kwargs):
        return self.fn.call_function(tx, [*self.args, *args], {**self.keywords.items, **kwargs})

    def var_getattr(self, tx, name):
        if name == "func":
            return self.fn
        if name == "args":
            return TupleVariable(self.args)
        if name == "keywords":
            return self.keywords
        return super().var_getattr(tx, name)

    def __repr__(self):
        return f"PartialVariable({self.fn!r})"


def bind_arguments(code, name, args, kwargs, defaults, kwdefaults) -> dict:
    """Map a call's arguments onto the code's parameters, as CPython does (TypeError ->
    Unsupported: the program would raise)."""
    nargs, nkw = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional, kwonly = names[:nargs], names[nargs:nargs + nkw]
    i = nargs + nkw
    varargs = names[i] if code.co_flags & CO_VARARGS else None
    varkw = names[i + (1 if varargs else 0)] if code.co_flags & CO_VARKEYWORDS else None

    bound = dict(zip(positional, args))
    extra = list(args[nargs:])
    if extra and varargs is None:
        raise Unsupported(f"{name}() takes {nargs} positional arguments but {len(args)} were given (TypeError)")
    keyword_ok = set(positional[code.co_posonlyargcount:]) | set(kwonly)
    extra_kw = {}
    for key, value in kwargs.items():
        if key in keyword_ok:
            if key in bound:
                raise Unsupported(f"{name}() got multiple values for argument {key!r} (TypeError)")
            bound[key] = value
        elif varkw is not None:
            extra_kw[key] = value
        else:
            raise Unsupported(f"{name}() got an unexpected keyword argument {key!r} (TypeError)")
    first_default = nargs - len(defaults)
    for j, pname in enumerate(positional):
        if pname not in bound:
            if j < first_default:
                raise Unsupported(f"{name}() missing required argument {pname!r} (TypeError)")
            bound[pname] = defaults[j - first_default]
    for pname in kwonly:
        if pname not in bound:
            if pname not in kwdefaults:
                raise Unsupported(f"{name}() missing keyword-only argument {pname!r} (TypeError)")
            bound[pname] = kwdefaults[pname]
    if varargs is not None:
        bound[varargs] = TupleVariable(extra)
    if varkw is not None:
        bound[varkw] = DictVariable(extra_kw)
    return bound


def trace_time_answers() -> dict:
    """Library functions whose answer differs while the tracer runs, and that answer.

    ``torch.compiler.is_compiling()`` is True while a frame is traced (as under torch.compile):
    libraries then take their compile-friendly paths (transformers skips the data-dependent
    ``torch.all(mask == 1)`` shortcut and eager-only ContextVar and stream checks).  The graph
    keeps that choice on every later call, which is what compiling means.  Outside the trace
    (eager code, a frame that fell back) the real function answers False."""
    import sys

    import torch

    answers = {torch.compiler.is_compiling: True, torch.compiler.is_dynamo_compiling: True,
               torch.compiler.is_exporting: False}
    legacy = getattr(sys.modules.get("torch._utils"), "is_compiling", None)
    if legacy is not None:
        answers[legacy] = True
    for name in ("torch._dynamo", "torch._dynamo.external_utils"):   # only if already imported
        fn = getattr(sys.modules.get(name), "is_compiling", None)
        if fn is not None:
            answers[fn] = True
    answers[inspect.signature] = signature_of
    return answers


def signature_of(tx, args, kwargs):
    """``inspect.signature(fn)`` of a real Python function (guarded by identity where it was
    read): computed now from the real function, its ``parameters`` a dict of names."""
    if len(args) != 1 or kwargs:
        raise Unsupported("inspect.signature(...) with options")
    fn, bound = args[0], False
    if isinstance(fn, UserMethodVariable):
        fn, bound = fn.fn, True
    if not isinstance(fn, UserFunctionVariable):
        raise Unsupported(f"inspect.signature of {fn}")
    real = fn.value
    if "__wrapped__" in real.__dict__ or "__signature__" in real.__dict__:
        raise Unsupported("inspect.signature of a wrapped function (it follows __wrapped__)")
    if fn.source is not None:             # a later __wrapped__ / __signature__ would change the answer
        tx.output.add_guard(G.dict_keys_match(G.AttrSource(fn.source, "__dict__"), real.__dict__))
    signature = inspect.signature(real)
    if bound:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    return SignatureVariable(signature)


class SignatureVariable(VariableTracker):
    """An ``inspect.Signature`` computed at trace time: its ``parameters`` by name."""

    def __init__(self, signature):
        super().__init__()
        self.value = signature

    def python_type(self):
        return inspect.Signature

    def var_getattr(self, tx, name):
        from .objects import UserObjectVariable

        if name == "parameters":
            return DictVariable({k: UserObjectVariable(p, None) for k, p in self.value.parameters.items()})
        raise Unsupported(f"Signature.{name}")


class TraceTimeAnswerVariable(VariableTracker):
    """One of ``trace_time_answers``: calling it gives its constant answer (or, for a
    function answered at trace time, what its handler computes)."""

    def __init__(self, fn, answer, source=None):
        super().__init__(source)
        self.value, self.answer = fn, answer

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args, kwargs):
        if callable(self.answer):
            return self.answer(tx, args, kwargs)
        if args or kwargs:
            raise Unsupported(f"{self.value.__qualname__}() takes no arguments (TypeError)")
        return ConstantVariable(self.answer)

    def __repr__(self):
        return f"TraceTimeAnswerVariable({self.value.__qualname__} -> {self.answer})"


# -- a function made in the trace, returned or stored: rebuilt after the graph ----------------------
def function_template(templates, vt: "NestedFunctionVariable"):
    """``("function", code, globals, defaults, kwdefaults, cells)``: what ``rebuild_function``
    needs.  A cell made in the trace is one new cell per call (shared by every closure that
    holds it, filled with its value at the frame's end); a real closure's cell is re-read."""
    annotations = {}
    if getattr(vt, "annotations", None) is not None:      # 3.11: (name, value, name, value, ...)
        pairs = [_annotation_value(item) for item in vt.annotations.unpack(None)]
        if any(p is _NOT_KNOWN for p in pairs):
            raise Unsupported(f"returning {vt.fn_name()}: its annotations are not constants")
        annotations = dict(zip(pairs[::2], pairs[1::2]))
    cells = []
    for cell in vt.closure:
        if isinstance(cell, CellVariable):
            cells.append(cell_template(templates, cell))
        elif isinstance(cell, RealCellVariable) and isinstance(cell.source, G.ClosureSource):
            templates.reads_frame_cells = True                               # the frame's own free variable:
            cells.append(("frame_cell", cell.source.index))                  # func.__closure__[i] of this call
        elif isinstance(cell, RealCellVariable) and cell.source is not None:
            cells.append(("real", templates.read(cell.source.base_source)))   # fn.__closure__[i]
        else:
            raise Unsupported(f"returning {vt.fn_name()}: a closure cell without a source")
    return ("function", (vt.code, vt.globals_dict, annotations), [templates.of(d) for d in vt.default_values],
            [(k, templates.of(v)) for k, v in vt.kwdefault_values.items()], cells)


_NOT_KNOWN = object()


def _annotation_value(vt):
    """An annotation's value: a constant, a class, or a typing construct the trace built from
    them (``List[torch.Tensor]``: typing caches it, so eager's def gets that object too)."""
    from .base import maybe_constant
    from .objects import UserObjectVariable

    value = maybe_constant(vt, _NOT_KNOWN)
    if value is _NOT_KNOWN and type(vt) is UserObjectVariable and vt.source is None \
            and type(vt.value).__module__ == "typing":
        return vt.value
    return value


def cell_template(templates, cell: CellVariable):
    """A cell made in the trace: one new cell per call, filled with its value at the frame's
    end (or at a graph break), the same object wherever it is held (closures, the resume
    function of a break)."""
    key = ("cell", id(cell))
    if key not in templates.fresh:
        templates._keep.append(cell)
        index = len(templates._keep) - 1
        templates.fresh[key] = None
        templates.fresh[key] = ("fresh", index, ("cell", templates.of(cell.value) if cell.value is not None else None))
    if templates.fresh[key] is None:
        raise Unsupported("a closure cell that contains its own function")
    return templates.fresh[key]


def rebuild_function(made, defaults, kwdefaults, cells):
    code, globals_dict, annotations = made
    fn = types.FunctionType(code, globals_dict, None, tuple(defaults) or None, tuple(cells) or None)
    if kwdefaults:
        fn.__kwdefaults__ = dict(kwdefaults)
    if annotations:
        fn.__annotations__ = dict(annotations)
    return fn
