"""The symbolic interpreter: CPython 3.11 bytecode over VariableTrackers.

One method per opcode, named exactly like it (``def LOAD_FAST(self, inst)``); families of
opcodes are one line each, from the tables at the bottom (``BINARY_OP`` arg -> ``operator``
function).  ``InstructionTranslator`` runs the frame being captured; ``InliningTranslator``
runs a called Python function on the same ``OutputGraph`` and hands back its return value.
"""

from __future__ import annotations

import builtins
import dis
import logging
import operator
import sys
import types
import weakref

from bytecode import Bytecode, Instr, Label, TryBegin, TryEnd
from bytecode.instr import BinaryOp, CellVar, Compare, FreeVar

import guards as G

from .. import config
from ..skipfiles import disabled_codes, torch_wrapper_codes
from ..exc import NeedsItsFrame, ProgramRaises, TraceTooLong, Unsupported
from . import operators, try_blocks
from .exceptions import ExceptionOpcodes, exception_entries, unwind
from .match_statements import MatchOpcodes
from .builder import wrap
from .library import is_library_value, refuse_user_dunders
from .lifetimes import check_release
from .variables.base import AttributeMissing, NullVariable, VariableTracker, instance_dict, refuse_frame_reader
from .variables.constant import ConstantVariable, is_none
from .variables.containers import ListVariable, SliceVariable, TupleVariable
from .variables.dicts import DictVariable, as_mapping
from .variables.sets import SetVariable
from .variables.iterators import items_of
from .variables.functions import CO_GENERATOR, CO_GENERATOR_LIKE, BaseFunctionVariable, CellVariable, NestedFunctionVariable
from .variables.generators import GeneratorExpressionVariable, GeneratorVariable
from .variables.tensor import TensorVariable

log = logging.getLogger("minidynamo.trace")   # MINIDYNAMO_LOG=trace

MAX_INSTRUCTIONS = 2_000_000   # a trace that runs this long is looping on something: give up
# Instructions (across every inlined call of one trace) in which no tensor op was recorded:
# a long computation in plain Python (a loop over 10**5 numbers) costs the tracer seconds where
# eager takes milliseconds, and its answer is a constant anyway: the frame runs eagerly.
MAX_PYTHON_ONLY_STEPS = 250_000

def decode(code: types.CodeType):
    """(instructions, label -> index, per instruction the try handlers around it, per
    instruction the stack slots of the with-blocks' ``__exit__`` around it), pseudo-instructions
    removed.

    3.11 has zero-cost exceptions: a try block is only an entry of the exception table
    (``TryBegin``/``TryEnd`` here).  Since anything that would raise is Unsupported, handlers
    never run while tracing; try_blocks.py decides when a body may rely on that."""
    instructions, targets, regions = [], {}, []
    active = None
    for item in Bytecode.from_code(code):
        if isinstance(item, Label):
            targets[item] = len(instructions)
        elif isinstance(item, TryBegin):
            active = item
        elif isinstance(item, TryEnd):
            active = None
        elif isinstance(item, Instr):
            regions.append(active)
            instructions.append(item)
    handler_of = [targets[region.target] if region is not None else None for region in regions]
    depth_of = {entry[0]: entry[1] for entry in exception_entries(code, instructions) if entry is not None}
    return (instructions, targets, try_blocks.handler_chains(instructions, handler_of),
            try_blocks.with_exit_slots(instructions, handler_of, depth_of))


_decoded: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # code -> decode(code)


def decoded(code):
    entry = _decoded.get(code)
    if entry is None:
        entry = _decoded[code] = decode(code)
    return entry


def _unbound(name: str) -> str:
    """CPython's message for a local read or deleted before assignment."""
    return f"cannot access local variable {name!r} where it is not associated with a value"


class InstructionTranslatorBase(ExceptionOpcodes, MatchOpcodes):
    runs_generators = False      # GeneratorTranslator: a generator expression's frame

    def __init__(self, code, f_locals: dict, f_globals: dict, globals_source, f_builtins: dict, output,
                 freevar_cells: list, depth: int):
        if code.co_flags & CO_GENERATOR_LIKE and not self.runs_generators:
            raise Unsupported(f"generator or coroutine {code.co_qualname}")
        self.code = code
        self.instructions, self.targets, self.try_handlers, self.with_exits = decoded(code)
        self.locals = dict(f_locals)
        self.f_globals = f_globals
        self.globals_source = globals_source
        self.f_builtins = f_builtins
        self.output = output
        self.depth = depth
        self.stack: list = []
        self.cells = dict(zip(code.co_freevars, freevar_cells))
        self.kw_names = None
        self.ip = 0
        self.return_value = None
        self.instruction_count = 0
        self.exc_info: list = []      # the exceptions its handlers are handling (exceptions.py)
        self.parent = None            # the frame that called this one (inlined), or resumed it

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> VariableTracker:
        while self.return_value is None:
            self.step()
        return self.return_value

    def step(self) -> None:
        """Execute one instruction."""
        index = self.ip
        handlers, withs = self.try_handlers[index], self.with_exits[index]
        inst = self.instructions[index]
        self.ip += 1
        self.instruction_count += 1
        if self.instruction_count > MAX_INSTRUCTIONS:
            raise Unsupported(f"{self.code.co_qualname} ran over {MAX_INSTRUCTIONS} instructions")
        output = self.output
        output.python_steps += 1
        if output.python_steps > MAX_PYTHON_ONLY_STEPS:
            output.python_only_window()
        handler = getattr(self, inst.name, None)
        if handler is None:
            raise Unsupported(f"opcode {inst.name} (in {self.code.co_qualname}, line {inst.lineno})")
        running = self.output.running          # where each node and guard comes from
        running.append((self.code, inst))
        try:
            if not handlers and not withs:
                handler(inst)
            else:
                graph = self.output.graph                        # inside a try or with body: see try_blocks.py
                nodes_before, last_before = len(graph.nodes), next(iter(reversed(graph.nodes)), None)
                handler(inst)
                if len(graph.nodes) != nodes_before:
                    try_blocks.check_handlers(self, handlers, try_blocks.ops_after(graph, last_before))
                    try_blocks.check_with_exits(self, withs)
        except ProgramRaises as error:         # the program's own exception: its try may catch it
            if not unwind(self, error, index):
                raise
        except AttributeMissing as error:
            # A handler here sees a real AttributeError; outside this frame no catcher may take
            # the absence for one of the name it asked about.
            if exception_entries(self.code, self.instructions)[index] is None:
                raise
            raised = error.as_program_exception(self)
            if raised is None or not unwind(self, raised, index):
                raise Unsupported(f"{error.reason}, inside a try or with block of {self.code.co_qualname}") from error
        finally:
            running.pop()
            if log.isEnabledFor(logging.DEBUG):     # the stack after it (an inlined call's lines come first)
                log.debug("%s%s:%s %s %s -> [%s]", "  " * self.depth, self.code.co_name, inst.lineno, inst.name,
                          self.describe_arg(inst), ", ".join(map(show_value, self.stack)))

    def describe_arg(self, inst) -> str:
        """The instruction's argument as the log shows it: jump targets by index, enums by name."""
        if not inst.require_arg():
            return ""
        arg = inst.arg
        if isinstance(arg, Label):
            return f"-> {self.targets[arg]}"
        if isinstance(arg, (BinaryOp, Compare)):
            return arg.name
        if isinstance(arg, (CellVar, FreeVar)):
            return arg.name
        if isinstance(arg, types.CodeType):
            return f"<code {arg.co_qualname}>"
        return repr(arg)

    def push(self, vt):
        self.stack.append(vt)

    def pop(self):
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump(self, inst):
        self.ip = self.targets[inst.arg]

    # -- calls -------------------------------------------------------------------------------
    def call(self, fn: VariableTracker, args: list, kwargs: dict) -> VariableTracker:
        return fn.call_function(self, list(args), dict(kwargs))

    def inline_call(self, fn: BaseFunctionVariable, args, kwargs):
        if self.depth + 1 > config.inline_depth_limit:
            raise Unsupported(f"inlining deeper than inline_depth_limit={config.inline_depth_limit} (recursion?)")
        code = fn.get_code()
        source = fn.attribute_source() if hasattr(fn, "attribute_source") else getattr(fn, "source", None)
        if source is not None and not is_library_value(getattr(fn, "value", None)):
            self.output.add_guard(G.id_match(G.AttrSource(source, "__code__"), code))   # f.__code__ = ...
        if code in disabled_codes:
            raise Unsupported(f"call to {code.co_qualname}, which is marked minidynamo.disable")
        wrapper = torch_wrapper_codes().get(code)
        if wrapper is not None:
            wrapped = getattr(getattr(fn, "value", None), "_torchdynamo_orig_callable", None)
            raise Unsupported(f"call to {getattr(wrapped, '__qualname__', 'a function')}, which "
                              + ("torch.compile compiles: torch's own" if wrapper == "compile" else
                                 "torch.compiler.disable marks: it runs eagerly"))
        if code.co_flags & CO_GENERATOR_LIKE:
            if not code.co_flags & CO_GENERATOR:
                raise Unsupported(f"call to coroutine or async generator function {code.co_qualname}")
            # a generator: nothing of the body runs now (variables/generators.py)
            kind = GeneratorExpressionVariable if code.co_name == "<genexpr>" else GeneratorVariable
            frame = GeneratorTranslator(
                code, fn.bind(self, args, kwargs), fn.globals_(), fn.globals_source, self.f_builtins_of(fn),
                self.output, fn.closure_cells(self), self.depth + 1, fn)
            frame.parent = self
            return kind(frame)
        f_locals = fn.bind(self, args, kwargs)
        child = InliningTranslator(code, f_locals, fn.globals_(), fn.globals_source, self.f_builtins_of(fn),
                                   self.output, fn.closure_cells(self), self.depth + 1, fn)
        child.parent = self
        return child.run()

    def f_builtins_of(self, fn):
        return self.f_builtins

    def subscript(self, obj, index):
        if isinstance(obj, TensorVariable):
            return obj.subscript(self, index)
        if hasattr(obj, "subscript"):
            return operators.protocol(self, obj, "__getitem__", lambda: obj.subscript(self, index), [index])
        return operators.protocol(self, obj, "__getitem__", lambda: obj.call_method(self, "__getitem__", [index], {}),
                                  [index])

    def store_attr(self, obj, name, value):
        """``obj.name = value`` on a module or a plain object reached from the frame; replayed
        after the graph runs (side_effects.py: modules are identity-guarded, plain objects
        must not alias another object of the trace)."""
        from .variables.nn_module import NNModuleVariable
        from .variables.objects import UserObjectVariable

        if hasattr(obj, "store_attribute"):           # an object made in the trace (new_objects.py)
            return obj.store_attribute(self, name, value)
        instance = instance_dict(getattr(obj, "value", None))
        if self.output.side_effects.mutated_dict(instance, self.output.wrapped_values):
            raise Unsupported(f"assignment to attribute {name!r} of an object whose __dict__ the trace wrote as a "
                              "dict (the two writes would replay apart)")
        if isinstance(obj, UserObjectVariable) and obj.source is not None:
            return self.store_object_attr(obj, name, value)
        if not isinstance(obj, NNModuleVariable) or obj.source is None:
            raise Unsupported(f"assignment to attribute {name!r} of {obj} (a side effect on a real object)")
        module = obj.value
        if name == "training" or name in module._parameters or name in module._modules or name.startswith("__"):
            raise Unsupported(f"assignment to {type(module).__name__}.{name} (changes the module's structure)")
        if isinstance(value, NNModuleVariable) or (name in module._buffers and not isinstance(value, TensorVariable)):
            raise Unsupported(f"assignment to {type(module).__name__}.{name} (changes the module's structure)")
        self.check_storable(value, f"{type(module).__name__}.{name}")
        self.check_module_store(type(module), name)
        if obj.by_structure:                           # a module the frame changes keeps its identity guard
            from .module_sharing import sharing_of

            sharing_of(self.output).pin(obj.source, f"the frame assigns {name!r} on it")
        self.output.side_effects.store_attribute(obj, name, value)

    def check_module_store(self, klass, name):
        """``module.name = value`` is modelled as ``nn.Module.__setattr__`` storing a plain value:
        refused when the module's class has its own ``__setattr__`` or a descriptor for ``name``
        (its code would run), and guarded so that one added later recompiles."""
        import torch

        from .class_answers import guard_class

        hook, found = G.class_lookup(klass, "__setattr__"), G.class_lookup(klass, name)
        if hook is not torch.nn.Module.__dict__["__setattr__"]:
            raise Unsupported(f"assignment to {klass.__name__}.{name} (the class has its own __setattr__)")
        if hasattr(type(found), "__set__"):
            raise Unsupported(f"assignment to {klass.__name__}.{name} (a descriptor)")
        guard_class(self, klass, lookups=("__setattr__", name))

    def store_object_attr(self, obj, name, value):
        """``obj.name = value`` on a plain user object: a Python ``__setattr__`` is inlined (it
        ends in ``object.__setattr__``, a raw store), else only a plain instance attribute (no
        C ``__setattr__``, property or slot would run code or refuse it)."""
        from .class_answers import guard_class
        from .program_code import python_slot
        from .variables.objects import lookup_class_attribute

        klass = type(obj.value)
        guard_class(self, klass, lookups=("__setattr__", name))     # no hook, property or slot added later
        if python_slot(klass, "__setattr__") is not None:
            hook = lookup_class_attribute(self, klass, "__setattr__", obj, obj.source)
            hook.call_function(self, [ConstantVariable(name), value], {})
            return
        if klass.__setattr__ is not object.__setattr__ and not _generic_setattr(klass):
            raise Unsupported(f"assignment to attribute {name!r} of a {klass.__name__} (a __setattr__ in C)")
        found = next((base.__dict__[name] for base in klass.__mro__ if name in base.__dict__), None)
        if isinstance(found, property) and isinstance(found.fset, types.FunctionType):
            # a property setter: object.__setattr__ calls it (what the class finds is guarded above)
            fset_source = G.AttrSource(G.AttrSource(G.AttrSource(obj.source, "__class__"), name), "fset")
            self.output.add_guard(G.id_match(fset_source, found.fset))
            from .variables.functions import UserFunctionVariable

            UserFunctionVariable(found.fset, fset_source).call_function(self, [obj, value], {})
            return
        if found is not None and python_slot(type(found), "__set__") is not None:
            self._through_descriptor(obj, name, "__set__", [obj, value])
            return
        obj.generic_setattr(self, name, value)

    def _through_descriptor(self, obj, name, method, args):
        """``obj.name = v`` / ``del obj.name`` where the class holds a descriptor whose
        ``__set__`` / ``__delete__`` is Python: object.__setattr__ calls it (inlined)."""
        from .variables.objects import descriptor_method

        klass = type(obj.value)
        if obj.source is None:
            raise Unsupported(f"{method} of {klass.__name__}.{name} on an object without a source")
        index = next(i for i, base in enumerate(klass.__mro__) if name in base.__dict__)
        class_source = G.AttrSource(obj.source, "__class__")
        descriptor_method(self, klass, index, name, method, class_source).call_function(self, args, {})

    def delete_attr(self, obj, name):
        """``del obj.name`` / ``delattr(obj, name)`` on a plain user object (a Python
        ``__delattr__`` is inlined), replayed after the graph like a store."""
        from .class_answers import guard_class
        from .program_code import python_slot
        from .variables.objects import UserObjectVariable, lookup_class_attribute

        if getattr(obj, "is_new_object", False):          # made in the trace: no side effect
            obj.delete_attribute(self, name)
            return
        if not isinstance(obj, UserObjectVariable) or obj.source is None:
            raise Unsupported(f"deleting attribute {name!r} of {obj} (a side effect)")
        klass = type(obj.value)
        guard_class(self, klass, lookups=("__delattr__", name))     # no hook or descriptor added later
        if python_slot(klass, "__delattr__") is not None:
            hook = lookup_class_attribute(self, klass, "__delattr__", obj, obj.source)
            hook.call_function(self, [ConstantVariable(name)], {})
            return
        if klass.__delattr__ is not object.__delattr__:
            raise Unsupported(f"deleting attribute {name!r} of a {klass.__name__} (a __delattr__ in C)")
        found = next((base.__dict__[name] for base in klass.__mro__ if name in base.__dict__), None)
        if found is not None and python_slot(type(found), "__delete__") is not None:
            self._through_descriptor(obj, name, "__delete__", [obj])
            return
        obj.generic_delattr(self, name)

    def check_storable(self, value, where: str):
        """A store replayed after the graph holds what the output templates rebuild there: a
        tensor, a constant, a container, an object or closure the frame made (the same object
        wherever else the frame put it)."""
        from .templates import rebuild_refusal

        refusal = rebuild_refusal(value)
        if refusal is not None:
            raise Unsupported(f"assignment of {value} to {where}: {refusal}")

    def implicit_super(self):
        from .variables.functions import CellVariable
        from .variables.objects import SuperVariable

        cell = self.cells.get("__class__")
        if cell is None or self.code.co_argcount == 0:
            # (CPython's super() reads the frame calling it: run at a break, the entry's)
            refuse_frame_reader(self, "super() without arguments outside a method")
        first = self.code.co_varnames[0]
        holder = self.cells.get(first)
        if holder is None:
            self_vt = self.locals.get(first)
        else:
            self_vt = None if isinstance(holder, CellVariable) and holder.value is None else holder.load(self)
        if self_vt is None:
            raise ProgramRaises("super() after its first argument was deleted (RuntimeError)",
                                RuntimeError("super(): arg[0] deleted"))
        return SuperVariable(cell.load(self).as_python_constant(), self_vt)

    # -- opcodes: stack ----------------------------------------------------------------------
    def NOP(self, inst): pass
    def RESUME(self, inst): pass
    def CACHE(self, inst): pass
    def PRECALL(self, inst): pass
    def COPY_FREE_VARS(self, inst): pass
    def POP_TOP(self, inst): self.pop()
    def PUSH_NULL(self, inst): self.push(NullVariable())
    def COPY(self, inst): self.push(self.stack[-inst.arg])

    def SWAP(self, inst):
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # -- names -------------------------------------------------------------------------------
    def LOAD_CONST(self, inst):
        self.push(ConstantVariable(inst.arg) if not isinstance(inst.arg, tuple) else _constant_tuple(inst.arg))

    def LOAD_FAST(self, inst):
        if inst.arg not in self.locals:
            raise ProgramRaises(f"local {inst.arg!r} read before assignment (UnboundLocalError)",
                                 UnboundLocalError(_unbound(inst.arg)))
        self.push(self.locals[inst.arg])

    def STORE_FAST(self, inst):
        old, new = self.locals.get(inst.arg), self.pop()
        if old is not None and old is not new:
            check_release(self, inst.arg, f"rebinding {inst.arg!r}")
        self.locals[inst.arg] = new

    def DELETE_FAST(self, inst):
        if inst.arg not in self.locals:
            raise ProgramRaises(f"del of local {inst.arg!r} before assignment (UnboundLocalError)",
                                UnboundLocalError(_unbound(inst.arg)))
        check_release(self, inst.arg, f"del {inst.arg}")
        del self.locals[inst.arg]

    def LOAD_GLOBAL(self, inst):
        push_null, name = inst.arg
        if push_null:
            self.push(NullVariable())
        self.push(self.load_global(name))

    def require_plain_namespaces(self, instruction: str) -> None:
        """Globals (or builtins) of a dict subclass: CPython's global opcodes ask its own
        ``__getitem__`` (and ``__missing__``) or store through its ``__setitem__``: refused."""
        for namespace, what in ((self.f_globals, "globals"), (self.f_builtins, "builtins")):
            if type(namespace) is not dict:
                raise Unsupported(f"{instruction} in {self.code.co_qualname}, whose {what} are a "
                                  f"{type(namespace).__name__}")

    def load_global(self, name):
        self.require_plain_namespaces("LOAD_GLOBAL")
        stored = self.output.side_effects.stored_global(name) if self.f_globals is self.output.frame_info.f_globals else None
        if stored is not None:
            return stored
        if name in self.f_globals:
            value = self.f_globals[name]
            if self.f_globals is self.output.frame_info.f_globals:
                source = G.GlobalSource(name)               # the frame's own module: G['name']
            else:
                source = self.globals_source(name)
            if source is None and not is_library_value(value):
                raise Unsupported(f"global {name!r} read by {self.code.co_qualname}, a function reached "
                                  "without a source: it could not be guarded")
            return wrap(self, value, source)
        if name in self.f_builtins:
            return wrap(self, self.f_builtins[name], self.builtin_source(name))
        raise Unsupported(f"global name {name!r} is not defined (NameError)")

    def builtin_source(self, name) -> G.BuiltinSource:
        """Where builtin ``name`` is re-read: the frame's builtins, or those an inlined function of
        another module sees (through its globals)."""
        if self.f_globals is self.output.frame_info.f_globals:
            return G.BuiltinSource(name)
        return G.BuiltinSource(name, G.NamespaceSource.of(self.f_globals))

    def STORE_GLOBAL(self, inst):
        value = self.pop()
        self.require_plain_namespaces("STORE_GLOBAL")
        if self.f_globals is not self.output.frame_info.f_globals:
            raise Unsupported(f"assignment to global {inst.arg!r} of another module")
        self.check_storable(value, f"global {inst.arg!r}")
        self.output.side_effects.store_global(inst.arg, value)

    def MAKE_CELL(self, inst):
        name = inst.arg.name if isinstance(inst.arg, (CellVar, FreeVar)) else inst.arg
        self.cells[name] = CellVariable(self.locals.pop(name, None))

    def LOAD_CLOSURE(self, inst): self.push(self.cells[inst.arg.name])
    def LOAD_DEREF(self, inst):
        self.require_filled_cell(inst.arg.name, "read of")
        self.push(self.cells[inst.arg.name].load(self))

    def STORE_DEREF(self, inst): self.cells[inst.arg.name].store(self, self.pop())

    def DELETE_DEREF(self, inst):
        self.require_filled_cell(inst.arg.name, "del of")
        self.cells[inst.arg.name].store(self, None)

    def require_filled_cell(self, name, what):
        """An empty cell (made in the trace) raises eager's error: UnboundLocalError for the
        frame's own cell variable, NameError for a free variable of an enclosing scope."""
        from .variables.functions import CellVariable

        cell = self.cells[name]
        if isinstance(cell, CellVariable) and cell.value is None:
            error = UnboundLocalError(_unbound(name)) if name in self.code.co_cellvars else NameError(
                f"cannot access free variable {name!r} where it is not associated with a value in enclosing scope")
            raise ProgramRaises(f"{what} {name!r} before assignment ({type(error).__name__})", error)
    LOAD_CLASSDEREF = LOAD_DEREF

    # -- attributes and items ----------------------------------------------------------------
    def LOAD_ATTR(self, inst): self.push(self.read_attribute(self.pop(), inst.arg))

    def read_attribute(self, obj, name):
        """``obj.name``.  An AttributeError the program raised on the way (a property's, a
        ``__getattr__``'s) leaves with ``name`` and ``obj`` set, as CPython's attribute read sets
        them on one that has neither."""
        try:
            return obj.var_getattr(self, name)
        except ProgramRaises as error:
            raised = error.exception
            if isinstance(raised, AttributeError) and raised.name is None and raised.obj is None \
                    and "obj" not in error.fields:
                raised.name = name
                error.fields = {**error.fields, "obj": obj}
            raise

    def LOAD_METHOD(self, inst):
        """3.11 pushes (method, self) or (NULL, callable); we always push NULL and the bound
        attribute, which CALL treats the same way."""
        obj = self.pop()
        self.push(NullVariable())
        self.push(self.read_attribute(obj, inst.arg))

    def STORE_ATTR(self, inst):
        obj, value = self.pop(), self.pop()
        self.store_attr(obj, inst.arg, value)

    def DELETE_ATTR(self, inst):
        self.delete_attr(self.pop(), inst.arg)

    def BINARY_SUBSCR(self, inst):
        index = self.pop()
        self.push(self.subscript(self.pop(), index))

    def STORE_SUBSCR(self, inst):
        index, obj, value = self.pop(), self.pop(), self.pop()
        if isinstance(obj, TensorVariable):
            from .variables.tensor import pin_special_methods
            from .variables.torch_function_modes import dispatch

            pin_special_methods(self, ("__setitem__",), [obj])
            dispatch(self, torch_setitem(), [obj, index, value], {},
                     lambda: self.output.call_op("call_function", operator.setitem, [obj, index, value], {}))
        else:
            operators.protocol(self, obj, "__setitem__", lambda: obj.call_method(self, "__setitem__", [index, value], {}),
                               [index, value])

    def DELETE_SUBSCR(self, inst):
        index, obj = self.pop(), self.pop()
        operators.protocol(self, obj, "__delitem__", lambda: obj.call_method(self, "__delitem__", [index], {}), [index])

    # -- operators -------------------------------------------------------------------------------
    def BINARY_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(operators.apply(self, BINARY_OPS[int(inst.arg)], [a, b]))

    def COMPARE_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(operators.apply(self, COMPARE_OPS[int(inst.arg)], [a, b]))

    def IS_OP(self, inst):
        b, a = self.pop(), self.pop()
        self.push(operators.apply(self, operator.is_not if inst.arg else operator.is_, [a, b]))

    def CONTAINS_OP(self, inst):
        container, item = self.pop(), self.pop()
        result = operators.contains(self, container, item)
        self.push(ConstantVariable(not result.truth(self)) if inst.arg else result)

    def _unary(fn):
        def handler(self, inst):
            self.push(operators.apply(self, fn, [self.pop()]))
        handler.__name__ = fn.__name__
        return handler

    UNARY_NEGATIVE = _unary(operator.neg)
    UNARY_POSITIVE = _unary(operator.pos)
    UNARY_INVERT = _unary(operator.invert)
    UNARY_NOT = _unary(operator.not_)

    # -- building containers -----------------------------------------------------------------
    def BUILD_TUPLE(self, inst): self.push(TupleVariable(self.popn(inst.arg)))
    def BUILD_LIST(self, inst): self.push(ListVariable(self.popn(inst.arg)))
    def LIST_TO_TUPLE(self, inst): self.push(TupleVariable(self.pop().items))
    def LIST_APPEND(self, inst):
        value = self.pop()
        self.stack[-inst.arg].method_append(self, value)

    def LIST_EXTEND(self, inst):
        values = self.pop()
        self.stack[-inst.arg].method_extend(self, values)

    def BUILD_SET(self, inst):
        result = SetVariable()
        result.method_update(self, TupleVariable(self.popn(inst.arg)))
        self.push(result)

    def SET_ADD(self, inst):
        value = self.pop()
        self.stack[-inst.arg].method_add(self, value)

    def SET_UPDATE(self, inst):
        values = self.pop()
        self.stack[-inst.arg].method_update(self, values)


    def BUILD_MAP(self, inst):
        items = self.popn(2 * inst.arg)
        result = DictVariable({})
        for k, v in zip(items[::2], items[1::2]):
            result.method_setitem(self, k, v)
        self.push(result)

    def BUILD_CONST_KEY_MAP(self, inst):
        keys = self.pop().as_python_constant()
        self.push(DictVariable(dict(zip(keys, self.popn(inst.arg)))))

    def MAP_ADD(self, inst):
        value, key = self.pop(), self.pop()
        self.stack[-inst.arg].method_setitem(self, key, value)

    def DICT_UPDATE(self, inst):
        other = as_mapping(self, self.pop())             # {**other}: a mapping, not pairs
        self.stack[-inst.arg].method_update(self, other)

    def DICT_MERGE(self, inst):
        """``f(**a, **b)``, ``f(k=1, **b)``: a call's keywords, so a key given twice or a key that
        is not a string is the call's TypeError (the frame runs eagerly and raises it)."""
        other, target = self.pop(), self.stack[-inst.arg]
        other = as_mapping(self, other, keywords=True)
        keys = other.items
        if isinstance(target, DictVariable):
            if any(not isinstance(k, str) for k in keys):
                raise Unsupported("** keywords that are not strings (TypeError)")
            twice = sorted(set(keys) & set(target.items))
            if twice:
                raise Unsupported(f"keyword argument {twice[0]!r} given twice (TypeError)")
        target.method_update(self, other)

    def BUILD_SLICE(self, inst): self.push(SliceVariable(*self.popn(inst.arg), *([ConstantVariable(None)] * (3 - inst.arg))))

    def BUILD_STRING(self, inst):
        self.push(ConstantVariable("".join(p.as_python_constant() for p in self.popn(inst.arg))))

    def FORMAT_VALUE(self, inst):
        spec = self.pop().as_python_constant() if inst.arg & 0x04 else ""
        value = self.pop()
        if isinstance(value, TensorVariable):
            raise Unsupported("formatting a tensor into a string needs its data")
        value = value.as_python_constant()
        refuse_user_dunders([value], "formatting")     # a Python __str__/__format__
        value = {0: value, 1: str(value), 2: repr(value), 3: ascii(value)}[inst.arg & 0x03]
        self.push(ConstantVariable(format(value, spec)))

    def UNPACK_SEQUENCE(self, inst):
        items = items_of(self, self.pop())
        if len(items) != inst.arg:
            raise Unsupported(f"unpacking {len(items)} values into {inst.arg} names (ValueError)")
        self.stack.extend(reversed(items))

    def UNPACK_EX(self, inst):
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = items_of(self, self.pop())
        if len(items) < before + after:
            raise Unsupported("not enough values to unpack (ValueError)")
        middle = ListVariable(items[before:len(items) - after])
        self.stack.extend(reversed([*items[:before], middle, *items[len(items) - after:]]))

    # -- control flow ------------------------------------------------------------------------
    def JUMP_FORWARD(self, inst): self.jump(inst)
    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_ABSOLUTE = JUMP_FORWARD

    def _pop_jump(test):
        def handler(self, inst):
            if test(self, self.pop()):
                self.jump(inst)
        return handler

    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = _pop_jump(lambda tx, v: v.truth(tx))
    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = _pop_jump(lambda tx, v: not v.truth(tx))
    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = _pop_jump(lambda tx, v: is_none(v))
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = _pop_jump(lambda tx, v: not is_none(v))

    def JUMP_IF_TRUE_OR_POP(self, inst):
        if self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_FALSE_OR_POP(self, inst):
        if not self.stack[-1].truth(self):
            self.jump(inst)
        else:
            self.pop()

    def GET_ITER(self, inst):
        from .variables.iterators import make_iterator

        self.push(make_iterator(self, self.pop()))      # lazy and live: see variables/iterators.py

    def FOR_ITER(self, inst):
        if not hasattr(self.stack[-1], "next_item"):
            raise Unsupported(f"a for loop over {self.stack[-1]}")
        item = self.stack[-1].next_item(self)
        if item is None:
            self.pop()
            self.jump(inst)
        else:
            self.push(item)

    # -- calls -------------------------------------------------------------------------------
    def KW_NAMES(self, inst): self.kw_names = inst.arg

    def CALL(self, inst):
        kw_names, self.kw_names = self.kw_names or (), None
        args = self.popn(inst.arg)
        # below the arguments: [NULL, callable] or [callable, self]
        callable_or_self, null_or_callable = self.pop(), self.pop()
        if isinstance(null_or_callable, NullVariable):
            fn = callable_or_self
        else:
            fn, args = null_or_callable, [callable_or_self, *args]
        n_kw = len(kw_names)
        kwargs = dict(zip(kw_names, args[len(args) - n_kw:])) if n_kw else {}
        positional = args[:len(args) - n_kw]
        self.push(self.call(fn, positional, kwargs))

    def CALL_FUNCTION_EX(self, inst):
        kwargs_vt = self.pop() if inst.arg & 0x01 else None
        args_vt, fn = self.pop(), self.pop()
        if self.stack and isinstance(self.stack[-1], NullVariable):
            self.pop()
        args = items_of(self, args_vt)
        kwargs = {}
        if kwargs_vt is not None:
            if not isinstance(kwargs_vt, DictVariable):
                raise Unsupported(f"**{kwargs_vt} in a call")
            kwargs = dict(kwargs_vt.items)
        self.push(self.call(fn, args, kwargs))

    def MAKE_FUNCTION(self, inst):
        code = self.pop().as_python_constant()
        closure = self.pop().items if inst.arg & 0x08 else []
        annotations = self.pop() if inst.arg & 0x04 else None     # kept only for a rebuilt function
        kwdefaults = dict(self.pop().items) if inst.arg & 0x02 else {}
        defaults = list(self.pop().items) if inst.arg & 0x01 else []
        fn = NestedFunctionVariable(code, self.f_globals, self.globals_source, defaults, kwdefaults, closure)
        fn.annotations = annotations
        self.push(fn)

    def RETURN_VALUE(self, inst): self.return_value = self.pop()

    # -- imports, with statements, class statements ---------------------------------------------
    def IMPORT_NAME(self, inst):
        """``import a.b`` / ``from a import b`` of a module already imported: only a binding,
        to ``sys.modules[...]``, read from there on every call (its identity guarded, a
        library's too: what is read through it is guarded as through a global), by the
        builtins' own ``__import__`` (a replaced one runs Python code: refused).  (A first
        import runs module code: refused.)"""
        from .variables.objects import PythonModuleVariable

        fromlist, level = self.pop().as_python_constant(), self.pop().as_python_constant()
        name = inst.arg
        if level != 0 or name not in sys.modules:
            raise Unsupported(f"import of {name!r} inside the traced code (not imported yet, or relative)")
        self.require_builtin_import()
        top = name if fromlist else name.partition(".")[0]
        module = sys.modules[top]
        source = G.ItemSource(G.HeldSource("sys.modules", id(sys.modules), sys.modules), top)
        self.output.add_guard(G.id_match(source, module))
        self.push(PythonModuleVariable(module, source))

    def require_builtin_import(self) -> None:
        """An import statement calls the ``__import__`` of the frame's builtins: the builtin one,
        guarded to stay so (``builtins.__import__ = hook`` between calls recompiles)."""
        importer = self.f_builtins.get("__import__") if type(self.f_builtins) is dict else None
        if importer is not _BUILTIN_IMPORT or "__import__" in self.f_globals:
            raise Unsupported(f"import in {self.code.co_qualname} with builtins.__import__ replaced")
        self.output.add_guard(G.id_match(self.builtin_source("__import__"), importer))

    def IMPORT_FROM(self, inst):
        self.push(self.stack[-1].var_getattr(self, inst.arg))

    def BEFORE_WITH(self, inst):
        from .variables.ctx_managers import AutocastVariable, ContextManagerVariable, enter_user_context, is_autocast_object
        from .variables.torch_function_modes import TorchFunctionModeVariable, is_function_mode

        manager = self.pop()
        if not isinstance(manager, ContextManagerVariable) and is_function_mode(manager):
            manager = TorchFunctionModeVariable(manager)
        elif is_autocast_object(manager):
            manager = AutocastVariable.of_object(self, manager)
        if not isinstance(manager, ContextManagerVariable):
            exit_method, entered = enter_user_context(self, manager)
            self.push(exit_method)
            self.push(entered)
            return
        self.push(manager.exit_callable())
        self.push(manager.enter(self))

    def LOAD_BUILD_CLASS(self, inst):
        raise Unsupported("class definition inside the traced code")


_BUILTIN_IMPORT = builtins.__import__


def torch_setitem():
    import torch

    return torch.Tensor.__setitem__


def show_value(vt) -> str:
    """A stack slot as the ``trace`` log shows it: tensors by graph node and meta shape."""
    if isinstance(vt, TensorVariable):
        example = vt.example
        return f"Tensor({vt.node.name}: {str(example.dtype).replace('torch.', '')}{list(example.shape)})"
    try:
        text = repr(vt)
    except Exception as e:       # a log line must never end a trace
        text = f"<{type(vt).__name__}: repr failed: {type(e).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def _constant_tuple(value: tuple):
    """A tuple constant of the code, which is itself wherever it is loaded (CPython's compiler
    makes equal constants of a code one object: ``(1, 2) is (1, 2)``)."""
    vt = TupleVariable([_constant_tuple(v) if isinstance(v, tuple) else ConstantVariable(v) for v in value])
    vt.value = value
    return vt


BINARY_OPS = {
    BinaryOp.ADD: operator.add, BinaryOp.SUBTRACT: operator.sub, BinaryOp.MULTIPLY: operator.mul,
    BinaryOp.TRUE_DIVIDE: operator.truediv, BinaryOp.FLOOR_DIVIDE: operator.floordiv,
    BinaryOp.REMAINDER: operator.mod, BinaryOp.POWER: operator.pow, BinaryOp.MATRIX_MULTIPLY: operator.matmul,
    BinaryOp.AND: operator.and_, BinaryOp.OR: operator.or_, BinaryOp.XOR: operator.xor,
    BinaryOp.LSHIFT: operator.lshift, BinaryOp.RSHIFT: operator.rshift,
    BinaryOp.INPLACE_ADD: operator.iadd, BinaryOp.INPLACE_SUBTRACT: operator.isub,
    BinaryOp.INPLACE_MULTIPLY: operator.imul, BinaryOp.INPLACE_TRUE_DIVIDE: operator.itruediv,
    BinaryOp.INPLACE_FLOOR_DIVIDE: operator.ifloordiv, BinaryOp.INPLACE_REMAINDER: operator.imod,
    BinaryOp.INPLACE_POWER: operator.ipow, BinaryOp.INPLACE_MATRIX_MULTIPLY: operator.imatmul,
    BinaryOp.INPLACE_AND: operator.iand, BinaryOp.INPLACE_OR: operator.ior, BinaryOp.INPLACE_XOR: operator.ixor,
    BinaryOp.INPLACE_LSHIFT: operator.ilshift, BinaryOp.INPLACE_RSHIFT: operator.irshift,
}
COMPARE_OPS = {Compare.LT: operator.lt, Compare.LE: operator.le, Compare.EQ: operator.eq,
               Compare.NE: operator.ne, Compare.GT: operator.gt, Compare.GE: operator.ge}


class InstructionTranslator(InstructionTranslatorBase):
    """Runs the frame being captured."""

    def __init__(self, func, f_locals, output, globals_source):
        from .variables.functions import RealCellVariable

        cells = [RealCellVariable(c, G.ClosureSource(i, name), name)
                 for i, (c, name) in enumerate(zip(func.__closure__ or (), func.__code__.co_freevars))]
        super().__init__(func.__code__, f_locals, func.__globals__, globals_source, func.__builtins__, output,
                         cells, depth=0)
        self.stop_at = None      # graph_break.py: stop before the instruction with this count
        self.stopped = False

    def run(self) -> VariableTracker | None:
        """As the base loop, plus what graph breaks need (graph_break.py): an Unsupported is
        marked with the root instruction it came from (``break_at``: the instruction count
        before it, its index), and a re-trace stops right before that instruction."""
        while self.return_value is None:
            if self.instruction_count == self.stop_at:
                self.stopped = True
                return None
            count, ip = self.instruction_count, self.ip
            self.output.root_position = (count, ip)     # where a generator made now was made
            try:
                self.step()
            except (NeedsItsFrame, TraceTooLong):
                raise                  # no break: the call must run in this very frame, or is too long
            except Unsupported as e:
                if getattr(e, "break_at", None) is None:
                    e.break_at = (count, ip)
                    raised_at = getattr(self.exc_info[-1], "raised_at", None) if self.exc_info else None
                    if raised_at is not None:
                        # inside an except clause, which a resume function cannot start in: the
                        # break goes where the exception came from; its entry raises it for real
                        # and the frame's own handler runs (graph_break.stop_values, raise_to)
                        e.break_at = raised_at
                raise
        return self.return_value


class InliningTranslator(InstructionTranslatorBase):
    """Runs a called function on the caller's graph; RETURN_VALUE ends it."""

    def __init__(self, code, f_locals, f_globals, globals_source, f_builtins, output, cells, depth, fn):
        super().__init__(code, f_locals, f_globals, globals_source, f_builtins, output, cells, depth)
        self.fn = fn


class GeneratorTranslator(InliningTranslator):
    """A generator's frame (a generator function's or a generator expression's), run one
    ``yield`` at a time by ``resume`` (see variables/generators.py).  ``next()`` sends None
    (the paused ``yield`` evaluates to None), ``send(v)`` sends ``v``."""

    runs_generators = True

    def __init__(self, *args):
        super().__init__(*args)
        self.yielded = None
        self.paused_at_yield = False
        self._handler_entries = None

    def resume(self, sent: VariableTracker | None = None, thrown=None) -> VariableTracker | None:
        """Run to the next ``yield``: its value, or None when the generator returned (its value
        is then ``return_value``).  An exception that leaves the body propagates.  ``sent``: the
        value of the ``yield`` it is paused at (None: ``next()``); ``thrown``: an exception
        (ExceptionVariable) that ``yield`` raises instead, unwound from it as CPython does
        (from the first instruction when the body has not started)."""
        self.yielded = None
        if thrown is not None:
            at = self.ip - 1 if self.paused_at_yield else self.ip
            self.paused_at_yield = False
            error = ProgramRaises(f"{type(thrown.exception).__name__} thrown into a generator", thrown.exception,
                                  thrown.fields)
            if not unwind(self, error, at):
                raise error
        elif self.paused_at_yield:
            self.push(sent if sent is not None else ConstantVariable(None))
            self.paused_at_yield = False
        while self.return_value is None and self.yielded is None:
            self.step()
        return self.yielded

    def RETURN_GENERATOR(self, inst):
        self.push(ConstantVariable(None))      # the value the first next() sends in (popped next)

    def YIELD_VALUE(self, inst):
        self.check_yield(self.ip - 1)
        self.yielded = self.pop()
        self.paused_at_yield = True            # the next resume pushes what ``yield`` evaluates to

    def GET_YIELD_FROM_ITER(self, inst):
        if not isinstance(self.stack[-1], GeneratorVariable):
            from .variables.iterators import make_iterator

            self.stack[-1] = make_iterator(self, self.stack[-1])

    def SEND(self, inst):
        """``yield from it`` (3.11): send the value (None under next()) into ``it``; an item is
        pushed (YIELD_VALUE passes it on), or ``it`` ended: its return value replaces it and the
        loop is left."""
        value, receiver = self.pop(), self.stack[-1]
        if not hasattr(receiver, "next_item"):
            raise Unsupported(f"yield from {receiver}")
        if is_none(value):
            item = receiver.next_item(self)
        elif isinstance(receiver, GeneratorVariable) and receiver.started:
            item = receiver.next_item(self, value)
        else:
            raise Unsupported(f"a value sent into {receiver} by yield from")
        if item is None:
            self.stack[-1] = receiver.return_value if isinstance(receiver, GeneratorVariable) else \
                getattr(receiver, "stop_value", None) or ConstantVariable(None)
            self.jump(inst)
        else:
            self.push(item)

    # -- where closing the generator would run code -------------------------------------------
    def handler_entries(self) -> list:
        """``exceptions.exception_entries`` of this frame, read once per generator (asked at
        every yield): refused when the table exists but could not be read."""
        if self._handler_entries is None:
            entries = exception_entries(self.code, self.instructions)
            if all(e is None for e in entries) and list(dis.Bytecode(self.code).exception_entries):
                raise Unsupported(f"generator {self.code.co_qualname}: its exception table could not be read")
            self._handler_entries = entries
        return self._handler_entries

    def check_yield(self, index: int) -> None:
        """A ``yield`` inside a ``with`` block leaves the context entered (grad mode, autocast, a
        TorchFunctionMode) while the consumer runs: refused.  Handlers nest as in try_blocks.py."""
        entries = self.handler_entries()
        seen, entry = set(), entries[index]
        while entry is not None and entry[0] not in seen:
            target = entry[0]
            seen.add(target)
            if try_blocks.is_with_cleanup(self.instructions, target):
                raise Unsupported(f"a yield inside a with block in generator {self.code.co_qualname} (the "
                                  "context would stay entered while the consumer runs)")
            entry = entries[target]

    def paused_in_cleanup_region(self) -> bool:
        """Paused at a ``yield`` that a try/finally/with statement covers: closing the generator
        would run that handler's code."""
        if self.ip == 0 or self.return_value is not None:
            return False
        return self.handler_entries()[self.ip - 1] is not None


# C classes whose own ``__setattr__`` slot is CPython's generic one (``PyObject_GenericSetAttr``,
# as object's): an attribute store is a plain instance ``__dict__`` store.  (A slot wrapper does
# not say which C function it wraps, so they are named.)
GENERIC_SETATTR_CLASSES = (types.SimpleNamespace,)


def _generic_setattr(klass) -> bool:
    """Does ``klass`` store attributes as ``object.__setattr__`` does (its own, or a class above
    it in GENERIC_SETATTR_CLASSES whose slot no class in between replaced)?"""
    for base in klass.__mro__:
        if "__setattr__" in base.__dict__:
            return base in GENERIC_SETATTR_CLASSES
    return True
