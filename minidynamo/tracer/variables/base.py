"""``VariableTracker``: what the symbolic interpreter holds on its stack and in its locals.

The map (tests/test_docs.py checks it against the code: every class named exists in the file
named, every tracker is listed, and each sits under its base class):

    VariableTracker                   base.py          the interface: python_type, var_getattr, call_function, ...
     ├── NullVariable                 base.py          the NULL below a callable (PUSH_NULL, LOAD_METHOD)
     ├── UnreadArgument               base.py          an argument the code never reads: not wrapped
     ├── BoundMethodVariable          base.py          obj.name for a method a tracker implements itself
     ├── KnownObjectVariable          base.py          a real object used as itself (identity matters)
     │    ├── BuiltinVariable         builtins.py      len, isinstance, range, ... (one handler each)
     │    ├── TorchFunctionVariable   torch_fns.py     torch.*, torch.nn.functional.*: graph ops
     │    ├── ClassVariable           objects.py       a class (calling it: a namedtuple, a known type)
     │    ├── TensorGetterVariable    torch_function_modes.py  Tensor.<attr>.__get__, as a mode sees it
     │    ├── HandleTorchFunctionVariable torch_function_modes.py  torch.overrides.handle_torch_function
     │    └── PytreeFunctionVariable  pytree.py        torch.utils._pytree's tree_leaves/flatten/map/...
     ├── GetterVariable               builtins.py      operator.itemgetter / attrgetter
     ├── OpaqueCallableVariable       base.py          a C callable we cannot model: calling it breaks the graph
     ├── WeakRefVariable              weak_refs.py     weakref.ref(obj): calling it reads obj (or None), guarded
     ├── ConstantVariable             constant.py      Python scalars, strings, None, dtypes, devices, ...
     │    └── LazyNumberVariable      lazy_numbers.py  a caller's int/float, read only if more than counted with
     ├── ConstantMethodVariable       constant.py      "a{}".format, (3).bit_length: run when all known
     ├── NumpyCallableVariable        numpy_values.py  np.sqrt, np.float32, np.prod: run on numbers
     ├── TypeInfoVariable             numpy_values.py  np.finfo / np.iinfo computed at trace time
     ├── TensorVariable               tensor.py        an fx node plus a meta example value
     ├── TensorMethodVariable         tensor.py        tensor.name before it is called
     ├── BaseListVariable             containers.py    a sequence of trackers
     │    ├── ListVariable            containers.py
     │    │    ├── CallerListVariable caller_lists.py  a caller's list, read only if more than appended to
     │    │    └── DequeVariable      collection_types.py   collections.deque (maxlen too), or the caller's
     │    └── TupleVariable           containers.py
     │         ├── NamedTupleVariable containers.py    namedtuples, torch.return_types.*
     │         └── SizeVariable       containers.py    tensor.shape (static shapes)
     ├── DictVariable                 dicts.py         constant keys, tracker values, in order
     │    ├── DefaultDictVariable     collection_types.py   collections.defaultdict made in the trace
     │    └── InstanceDictVariable    new_objects.py   obj.__dict__ of an object made in the trace (shares its attributes)
     ├── DictViewVariable             dicts.py         d.keys() / d.values() / d.items()
     ├── SetVariable                  sets.py          a set of constants made in the trace
     │    └── CallerSetVariable       sets.py          a caller's set of constants, read-only
     ├── SliceVariable                containers.py
     ├── IteratorVariable             containers.py    the protocol: next_item(tx), lazy and live
     │    ├── ListIteratorVariable    iterators.py     iter(list): reads the live list by index
     │    ├── ListReverseIteratorVariable iterators.py
     │    ├── DictIteratorVariable    iterators.py
     │    ├── SetIteratorVariable     iterators.py
     │    ├── ZipVariable             iterators.py
     │    ├── MapVariable             iterators.py     map(fn, ...): fn inlined as items are pulled
     │    ├── FilterVariable          iterators.py
     │    ├── EnumerateVariable       iterators.py
     │    ├── DequeIteratorVariable   iterators.py
     │    ├── ChainVariable           iterators.py     itertools.chain / chain.from_iterable
     │    ├── IsliceVariable          iterators.py     itertools.islice
     │    ├── AccumulateVariable      iterators.py     itertools.accumulate (func inlined)
     │    ├── ZipLongestVariable      iterators.py     itertools.zip_longest
     │    ├── IndexedCombinatoricVariable iterators.py product, combinations, permutations, ...
     │    ├── PullVariable            iterators.py     pairwise, starmap, compress, takewhile, ...
     │    └── GeneratorVariable       generators.py    a paused generator frame, run one yield per pull
     │         └── GeneratorExpressionVariable generators.py a <genexpr> (its own class for the logs)
     ├── BaseFunctionVariable         functions.py     has a code object we inline
     │    ├── UserFunctionVariable    functions.py     a real Python function
     │    └── NestedFunctionVariable  functions.py     made by MAKE_FUNCTION in the trace
     ├── UserMethodVariable           functions.py     a function bound to self
     ├── PartialVariable              functions.py     functools.partial
     ├── CellVariable                 functions.py     a cell made in the trace
     ├── RealCellVariable             functions.py     a cell of a real closure
     ├── CodeVariable                 functions.py     a function's code object (co_* fields are constants)
     ├── SignatureVariable            functions.py     an inspect.Signature computed at trace time
     ├── TraceTimeAnswerVariable      functions.py     a call answered by a constant at trace time
     ├── HandlerVariable              stdlib.py        a class method such as dict.fromkeys
     ├── NNModuleVariable             nn_module.py     an nn.Module instance (forward inlined)
     │    └── FrameModuleVariable     frame_modules.py  a parameter-free module made in the frame
     ├── ModuleCallVariable           nn_module.py     nn.Module.__call__ bound to a module
     ├── BuiltinBaseMethod            new_objects.py   a C method of object / dict bound to such an instance
     ├── PythonModuleVariable         objects.py       a Python module (import, attribute reads)
     ├── UserObjectVariable           objects.py       any other real object, attributes guarded one by one
     │    └── NewObjectVariable       new_objects.py   an instance made during the trace
     ├── SuperVariable                objects.py       super(klass, obj)
     ├── ContextManagerVariable       ctx_managers.py  what BEFORE_WITH accepts
     │    ├── GradModeVariable        ctx_managers.py  torch.no_grad() / enable_grad()
     │    ├── SetGradEnabledVariable  ctx_managers.py  torch.set_grad_enabled(mode)
     │    ├── AutocastVariable        ctx_managers.py  torch.autocast(...)
     │    ├── InferenceModeVariable   ctx_managers.py  torch.inference_mode(mode)
     │    ├── NoEffectBlockVariable   ctx_managers.py  torch._C.DisableTorchFunctionSubclass(): nothing traced changes
     │    └── TorchFunctionModeVariable torch_function_modes.py  a TorchFunctionMode object in a with
     ├── RestoredExit                 ctx_managers.py  the __exit__ of such a block (a user's is a bound method)
     ├── ProfilerRangeVariable        torch_fns.py     the handle of a record_function range (no profiler runs)
     ├── ExceptionVariable            exception_values.py  an exception the traced code made or raised
     │    └── CaughtExceptionVariable exception_values.py  one raised at run time that a handler handles
     ├── HandledBefore                exception_values.py  what PUSH_EXC_INFO leaves under the exception
     ├── TracebackVariable            exception_values.py  a traceback: sys.exc_info()'s, an __exit__'s (only `is None`)
     ├── BuiltinExceptionInit         exception_values.py  super().__init__ reaching a built-in exception's __init__
     ├── DictWalkVariable             iterators.py     a loop's iterator over the caller's dict, at a break
     ├── VmapVariable                 higher_order.py  torch.vmap itself
     ├── VmappedFunctionVariable      higher_order.py  torch.vmap(fn, ...): calling it traces a body sub-graph
     ├── AutogradFunctionApplyVariable autograd_function.py  MyFunction.apply: one graph node
     ├── FunctionCtxVariable          autograd_function.py  the ctx a program's forward is shadow-traced with
     └── GradModeFunctionVariable     ctx_managers.py  a function decorated with no_grad()/enable_grad()

Each knows its ``source`` (how to re-read it from a later frame), or None when the value was
made during the trace.  Guards are installed when a real value is wrapped (see builder.py),
so whatever the trace reads from the outside world is checked on the next call.
"""

from __future__ import annotations

import inspect
from typing import Any

from ...exc import NeedsItsFrame, ProgramRaises, Unsupported


class AttributeMissing(Unsupported):
    """``owner.name`` would raise AttributeError.  ``getattr(obj, name, default)``, ``hasattr``,
    a class's ``__getattr__`` and the like catch it (``caught_attribute_error``), after guarding
    that the attribute is still absent; anything else falls back.  The owner and name travel
    with the error because the one missing need not be the one asked for: a property of ``obj``
    may read a missing ``self._x``, and the absence of ``self._x`` is what the answer relies on."""

    def __init__(self, reason: str, owner: "VariableTracker | None" = None, name: str | None = None):
        super().__init__(reason)
        self.owner, self.name = owner, name

    def guard(self, tx) -> None:
        """Make the answer that relied on the absence sound: guard it (``guard_absent``)."""
        if self.owner is None:
            raise Unsupported(f"relying on an absence the trace cannot name ({self.reason})")
        self.owner.guard_absent(tx, self.name)

    def as_program_exception(self, tx) -> "ProgramRaises | None":
        """The AttributeError CPython raises here, for the program's own ``try`` to catch: its
        message as the owner's type words it (asked of the real object through its type's builtin
        lookup, or a library's ``__getattr__`` such as ``nn.Module``'s: no program code runs),
        ``name`` and ``obj`` as ``LOAD_ATTR`` sets them.  The absence is guarded.  None where the
        owner is no real object the trace knows, or its type's lookup is the program's."""
        from ..library import is_library_value
        from ..program_code import python_slot

        value = getattr(self.owner, "value", None) if self.owner is not None else None
        klass = type(value)
        hook = python_slot(klass, "__getattr__")
        if value is None or self.name is None or python_slot(klass, "__getattribute__") is not None \
                or (hook is not None and not is_library_value(hook)):
            return None
        try:
            (getattr if hook is not None else klass.__getattribute__)(value, self.name)
        except AttributeError as error:
            message = str(error)
        else:
            return None                   # (present after all: not the absence the trace saw)
        self.guard(tx)
        return ProgramRaises(self.reason, AttributeError(message, name=self.name), {"obj": self.owner})


class AttributeDeleted(AttributeMissing):
    """Missing because the frame deleted it: absent by the trace itself, nothing to guard."""

    def guard(self, tx) -> None:
        pass


def caught_attribute_error(tx, error: Unsupported) -> bool:
    """Is ``error`` an AttributeError, as ``getattr(obj, name, default)``, ``hasattr`` or a class's
    ``__getattr__`` see it?  Either an absence (``AttributeMissing``: guarded here to stay one)
    or the program's own AttributeError, of any subclass (a property's ``raise``; the guards on
    what the raising code read hold it)."""
    if isinstance(error, AttributeMissing):
        error.guard(tx)
        return True
    return isinstance(error, ProgramRaises) and isinstance(error.exception, AttributeError)


def read_or_absent(tx, obj: "VariableTracker", name: str) -> "VariableTracker | None":
    """``getattr(obj, name, None)``'s question: ``obj.name``, or None where that raises
    AttributeError (``caught_attribute_error``)."""
    try:
        return obj.var_getattr(tx, name)
    except Unsupported as error:
        if not caught_attribute_error(tx, error):
            raise
        return None


class VariableTracker:
    """A symbolic value.  Subclasses override the operations they support."""

    def __init__(self, source=None):
        self.source = source

    # -- what the interpreter asks of every value ---------------------------------------
    def python_type(self) -> type:
        raise Unsupported(f"type of {self} is not known while tracing")

    def as_python_constant(self) -> Any:
        """The plain Python value, when it is fully known at trace time."""
        raise Unsupported(f"{self} is not a Python constant")

    def truth(self, tx) -> bool:
        """``bool(self)`` for control flow; only values known at trace time have one."""
        return bool(self.as_python_constant())

    def var_getattr(self, tx, name: str) -> "VariableTracker":
        raise Unsupported(f"attribute {name!r} of {self}")

    def guard_absent(self, tx, name: str) -> None:
        """Make the trace's reliance on ``name`` being absent sound.  Values whose type fixes
        their attributes need nothing; real objects with a ``__dict__`` override this."""
        if self.source is not None and hasattr(getattr(self, "value", None), "__dict__"):
            raise Unsupported(f"relying on the absence of attribute {name!r} of {self}")

    def call_function(self, tx, args: list, kwargs: dict) -> "VariableTracker":
        raise Unsupported(f"call to {self}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> "VariableTracker":
        """``self.name(*args, **kwargs)``; by default read the attribute, then call it."""
        return self.var_getattr(tx, name).call_function(tx, args, kwargs)

    def as_graph_arg(self, devices: list):
        """(fx node argument, meta example argument) when passed to a graph op."""
        raise Unsupported(f"{self} as an argument of a tensor operation")

    def unpack(self, tx) -> list:
        """The items of ``iter(self)``, all known at trace time (for unpacking and for-loops)."""
        raise Unsupported(f"iteration over {self}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class KnownObjectVariable(VariableTracker):
    """A real object the trace uses as itself (a builtin, a torch function, a class): its
    identity is what matters, so it is its own Python constant."""

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def as_python_constant(self):
        return self.value


class NullVariable(VariableTracker):
    """The NULL that PUSH_NULL / LOAD_GLOBAL / LOAD_METHOD put below a callable in 3.11."""

    def __repr__(self) -> str:
        return "NULL"


class UnreadArgument(VariableTracker):
    """An argument the frame's code never reads (``capture.names_read``): not wrapped, so no
    guard and no graph input; only handed on, as itself, to a resume function
    (``graph_break.kept_alive``)."""

    def __repr__(self):
        return f"UnreadArgument({self.source.name()})"


class BoundMethodVariable(VariableTracker):
    """``obj.name`` for a method the tracker implements itself (``list.append``, ``dict.items``)."""

    def __init__(self, obj: VariableTracker, name: str):
        super().__init__()
        self.obj = obj
        self.name = name

    def call_function(self, tx, args, kwargs):
        return self.obj.call_method(tx, self.name, args, kwargs)

    def __repr__(self):
        return f"BoundMethodVariable({self.obj!r}.{self.name})"


class OpaqueCallableVariable(VariableTracker):
    """A C function the tracer does not model (``id``, ``os.getpid``): loading it is fine,
    calling it is Unsupported, so the frame breaks at the call and the call runs eagerly.
    ``reads_frame`` (see ``refuse_frame_reader``): the call reads the frame it runs in, so it
    may not be a break's eager instruction."""

    def __init__(self, value, source, reason: str, reads_frame: str = ""):
        super().__init__(source)
        self.value = value
        self.reason = reason
        self.reads_frame = reads_frame

    def python_type(self):
        return type(self.value)

    def call_function(self, tx, args, kwargs):
        # "warn" (warnings.warn, any stacklevel) reads only where the frames are: a break
        # (see refuse_frame_reader), as any other unknown call
        if self.reads_frame == "stack" or (self.reads_frame == "own" and not args and not kwargs) \
                or self.reads_frame == "always own":
            refuse_frame_reader(tx, describe(self.value), walks_stack=self.reads_frame == "stack")
        raise Unsupported(self.reason)

    def __repr__(self):
        return f"OpaqueCallableVariable({getattr(self.value, '__qualname__', self.value)!r})"


def refuse_frame_reader(tx, what: str, walks_stack: bool = False):
    """Raise for a call of ``what``, which reads its caller's frame.  Called from the frame
    being compiled (``tx.depth == 0``), it cannot be a graph break's eager instruction (that
    runs in another frame): NeedsItsFrame, the frame runs eagerly.  Called from an inlined
    function, the break at the root's call runs that function as a real frame of its own,
    which the call then reads, unless it walks the stack further down (``sys._getframe(1)``),
    where it would meet the break's entry function in the frame's place.

    A walk that reads only *where* the frames are (their code's name and file, their line and
    globals: ``warnings.warn`` with any stacklevel, a plain break of its own; ``logging``'s
    caller lookup and its ``stack_info``) may meet the entry: it shows the frame's name, file and line on every
    instruction and runs with its globals (breaks/entry.py: ``seen_as_the_frame``), and its
    caller, like a resume function's, is the frame's caller (the frame hook calls a resume
    function once the entry has returned: ``run_entry``'s trampoline)."""
    if walks_stack and _in_logging_caller_lookup(tx):
        raise Unsupported(f"{what} reads where the frames that called it are")
    if tx.depth == 0 or walks_stack:
        raise NeedsItsFrame(f"{what} reads the frame it is called from: it cannot run at a graph "
                            "break (another frame), so the frame runs eagerly")
    raise Unsupported(f"{what} reads the frame it is called from")


def _in_logging_caller_lookup(tx) -> bool:
    """Whether the stack walk is ``logging``'s caller lookup (``Logger.findCaller``)."""
    import logging

    while tx is not None:
        if tx.code is logging.Logger.findCaller.__code__:
            return True
        tx = tx.parent
    return False


# ``maybe_constant(vt, NO_CONSTANT)`` tells "no constant" apart from the constant None.
NO_CONSTANT = object()


def maybe_constant(vt: VariableTracker, default=None):
    """``vt``'s Python constant, or ``default`` when it has none."""
    try:
        return vt.as_python_constant()
    except Unsupported:
        return default


def instance_dict(obj, default=None):
    """``obj.__dict__`` as CPython's attribute lookup sees it, read through its class's
    ``__dict__`` slot, never through ``obj`` (whose ``__getattribute__`` or ``__getattr__`` may
    be the program's code); ``default`` if it has none."""
    import types

    from guards import class_lookup

    slot = class_lookup(type(obj), "__dict__")
    if type(slot) not in (types.GetSetDescriptorType, types.MemberDescriptorType):
        return default
    found = slot.__get__(obj)
    return found if type(found) is dict else default


def describe(value: Any) -> str:
    """A short readable name for a real object, used in Unsupported reasons."""
    name = _name_attr(value, "__qualname__") or _name_attr(value, "__name__")
    if name is not None:
        module = _name_attr(value, "__module__")
        return f"{module}.{name}" if module else name
    return f"a {type(value).__name__} object"


_HEAP_TYPE = 1 << 9          # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or type()


def _name_attr(value: Any, attr: str):
    """``value.attr`` when it is a string, read without running the program's code: an object
    of a class the program wrote is read statically (its ``__getattr__`` may do anything)."""
    try:
        if isinstance(value, type) or not type(value).__flags__ & _HEAP_TYPE:
            found = type.__dict__[attr].__get__(value, type) if isinstance(value, type) else getattr(value, attr, None)
        else:
            found = inspect.getattr_static(value, attr, None)
    except Exception:
        return None
    return found if isinstance(found, str) else None


def static_class_attribute(klass: type, name: str) -> Any:
    """What ``klass`` holds for ``name`` through its MRO, as stored (no descriptor runs), or None."""
    return next((k.__dict__[name] for k in klass.__mro__ if name in k.__dict__), None)
