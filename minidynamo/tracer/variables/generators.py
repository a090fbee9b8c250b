"""Generators: ``def pairs(x): yield x; yield x + 1`` and generator expressions.

Calling a generator function (or a ``<genexpr>``) does not run it: it makes a
``GeneratorVariable`` that holds the paused frame (a ``translator.GeneratorTranslator``).  The
body runs symbolically only when an item is pulled -- ``next_item(tx)``, the iterator protocol
every iterator tracker follows -- so it interleaves with its consumer exactly as in CPython
(list appends, in-place tensor ops, other generators).  Pullers: ``for`` (GET_ITER/FOR_ITER),
``next(gen)`` / ``next(gen, default)`` / ``gen.__next__()``, every builtin that walks an
iterable (``list``, ``tuple``, ``sum``, ``min``, ``any``, ``zip``, ``map``, unpacking, ...) and
``yield from gen`` inside another traced generator (SEND in translator.py; its value is the
sub-generator's ``return`` value, kept here as ``return_value``).  ``iter(gen) is gen``.

An exception the body raises and does not catch finishes the generator and propagates to the
puller (a ``StopIteration`` becomes ``RuntimeError``, PEP 479); later pulls see it exhausted.

What CPython would do that the trace cannot reproduce is refused (``Unsupported``):

- the generator object leaving the frame: returned, stored where the caller sees it, or
  handed over at a graph break (no output template rebuilds a paused frame);
- the ``gi_*`` attributes (``send(v)`` resumes the body with ``v`` as the value of its paused
  ``yield``, ``throw(e)`` with its paused ``yield`` raising ``e``, which the body may catch, and
  ``close()`` with it raising GeneratorExit; a StopIteration then carries the return value);
- a ``yield`` inside a ``with`` block (the context would stay entered while the consumer runs);
- a generator left unfinished at the end of the trace while paused inside a ``try`` (``finally``,
  ``except``) or ``with`` statement: CPython runs that cleanup when the generator is closed or
  collected (``check_left_generators``, called by ``capture._trace``);
- pulling a generator that is already running (ValueError in CPython), or inside another vmap
  body than the one it was made in.

A failure inside the body (a print, an unknown C call) is a graph break at the root
instruction that was running when the generator was made (``made_at``; for generators pulled
by generators, the earliest): that instruction then runs eagerly and makes a real generator,
which the rest of the frame (the resume function) uses as an opaque value.  A break that
would have to hand a paused generator over (on the stack or in a live local) is refused.
"""

from __future__ import annotations

import types

from ...exc import NeedsItsFrame, ProgramRaises, Unsupported
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable, is_none
from .containers import BoundMethodVariable, IteratorVariable


class GeneratorVariable(IteratorVariable):
    """A generator's paused frame; items come out of ``next_item``."""

    def __init__(self, frame):
        super().__init__((), types.GeneratorType)
        self.frame = frame          # a translator.GeneratorTranslator
        self.exhausted = False
        self.running = False
        self.broken = None          # why an earlier pull was refused: the frame is in no known state
        self.return_value = ConstantVariable(None)    # the StopIteration value (``yield from``'s result)
        self.stop_value = None      # what the last pull's StopIteration carries (exception_values.stop_iteration)
        self.started = False
        self.scope = _innermost_scope(frame.output)
        # the root instruction running when it was made: a graph break for a failure in its body
        self.made_at = getattr(frame.output, "root_position", None)
        made = getattr(frame.output, "generators", None)
        if made is None:
            made = frame.output.generators = []
        made.append(self)

    @property
    def name(self) -> str:
        return self.frame.code.co_qualname

    def next_item(self, tx=None, sent: VariableTracker | None = None, thrown=None) -> VariableTracker | None:
        """Run the generator to its next ``yield``: the item, or None once it has returned.
        ``sent``: what the paused ``yield`` evaluates to (``send``; None under ``next``);
        ``thrown``: an exception the paused ``yield`` raises instead (``throw``)."""
        if self.broken is not None:
            raise Unsupported(f"generator {self.name} pulled again after a refused pull ({self.broken})")
        if self.exhausted:
            if thrown is not None:              # a finished generator raises what is thrown in
                raise ProgramRaises(f"{type(thrown.exception).__name__} thrown into finished generator {self.name}",
                                    thrown.exception, thrown.fields)
            self.stop_value = None
            return None
        if self.running:
            raise Unsupported(f"generator {self.name} pulled while it is running (ValueError: generator "
                              "already executing)")
        if _innermost_scope(self.frame.output) is not self.scope:
            raise Unsupported(f"generator {self.name} pulled inside another vmap body than the one it was made in")
        self.running = self.started = True
        if tx is not None:        # a generator handling nothing sees its puller's exception
            self.frame.parent = tx
        try:
            item = self.frame.resume(sent, thrown)
        except ProgramRaises as error:      # leaves the generator: finished, raised at the puller
            self.exhausted = True
            if isinstance(error.exception, StopIteration):
                raise ProgramRaises(f"StopIteration raised inside generator {self.name} (RuntimeError, PEP 479)",
                                    RuntimeError("generator raised StopIteration")) from error
            raise
        except Unsupported as refusal:  # the trace is abandoned, or breaks where the generator was made
            self.broken = refusal.reason
            if not isinstance(refusal, NeedsItsFrame) and self.made_at is not None and (
                    getattr(refusal, "break_at", None) is None or self.made_at[0] < refusal.break_at[0]):
                refusal.break_at = self.made_at
            raise
        finally:
            self.running = False
        if item is None:
            self.exhausted = True
            self.return_value = self.stop_value = self.frame.return_value
        return item

    def method_send(self, tx, value):
        """``gen.send(value)``: the next item, the body resumed with ``value`` as its paused
        ``yield``'s value (a just-started generator takes only None, as in CPython)."""
        if not self.started and not (isinstance(value, ConstantVariable) and value.value is None):
            raise ProgramRaises(f"a value sent into the just-started generator {self.name} (TypeError)",
                                TypeError("can't send non-None value to a just-started generator"))
        item = self.next_item(tx, value)
        if item is None:
            from .exception_values import stop_iteration

            raise stop_iteration(self)
        return item

    def method_throw(self, tx, kind, value=None, traceback=None):
        """``gen.throw(exc)`` / ``gen.throw(type, value, traceback)``: the paused ``yield`` raises
        the exception (a just-made generator raises it before its first line), the body's own
        handlers may catch it; the next item, or StopIteration once the body returned.  The
        traceback may be None or a ``with`` block's (``contextlib.contextmanager``'s
        ``__exit__`` passes it on); the trace does not attach it."""
        from .base import maybe_constant
        from .exception_values import (CaughtExceptionVariable, ExceptionVariable, TracebackVariable, make_exception,
                                       plain_exception_class, stop_iteration)

        if not (traceback is None or isinstance(traceback, TracebackVariable) or is_none(traceback)) or not (
                value is None or is_none(value) or isinstance(value, ExceptionVariable)):
            raise Unsupported(f"generator.throw({kind}, {value}, {traceback}): only an exception the trace made")
        thrown = value if isinstance(value, ExceptionVariable) else kind
        if not isinstance(thrown, ExceptionVariable):     # a plain class: made without arguments
            if not plain_exception_class(maybe_constant(thrown, None)):
                raise Unsupported(f"generator.throw({thrown}): not an exception or a plain exception class")
            thrown = make_exception(tx, maybe_constant(thrown, None), [], {})
        if isinstance(thrown, CaughtExceptionVariable):
            raise Unsupported(f"generator.throw({thrown}): the exception of this call, raised again (eager does it)")
        item = self.next_item(tx, thrown=thrown)
        if item is None:
            raise stop_iteration(self)
        return item

    def method_close(self, tx):
        """``gen.close()``: GeneratorExit raised at the paused ``yield`` (its ``finally`` and
        ``except`` clauses run); finished when the body returns or lets GeneratorExit out, a
        RuntimeError when it yields again.  A generator not started, or finished, is just
        finished (Python 3.11's close returns None)."""
        from .exception_values import ExceptionVariable

        if not self.started or self.exhausted:
            self.exhausted = True
            return ConstantVariable(None)
        try:
            item = self.next_item(tx, thrown=ExceptionVariable(GeneratorExit()))
        except ProgramRaises as error:
            if isinstance(error.exception, GeneratorExit):
                return ConstantVariable(None)
            raise
        if item is None:
            return ConstantVariable(None)
        raise ProgramRaises(f"generator {self.name} ignored GeneratorExit (RuntimeError)",
                            RuntimeError("generator ignored GeneratorExit"))

    def consume(self, tx) -> list:
        """All remaining items, in order (``tuple(gen)``)."""
        return self.unpack(tx)

    def var_getattr(self, tx, name):
        if name in ("__next__", "__iter__", "send", "throw", "close"):
            return BoundMethodVariable(self, name)
        if hasattr(types.GeneratorType, name):
            raise Unsupported(f"generator.{name} of {self.name} is not modelled")
        raise AttributeMissing(f"'generator' object has no attribute {name!r} (AttributeError)", self, name)

    def paused_in_cleanup_region(self) -> bool:
        """Started, not finished, and paused at a ``yield`` a try/with statement covers: closing
        it (CPython does when it is collected) would run user code."""
        return not self.exhausted and self.frame.paused_in_cleanup_region()

    def __repr__(self):
        return f"GeneratorVariable({self.name})"


class GeneratorExpressionVariable(GeneratorVariable):
    """A ``<genexpr>``: the same generator (its own class only for the logs)."""

    def __repr__(self):
        return f"GeneratorExpressionVariable({self.name})"


def _innermost_scope(output):
    scopes = getattr(output, "scopes", None)
    return scopes[-1] if scopes else None


def check_left_generators(output) -> None:
    """At the end of the trace (a return or a graph break): no generator may be left paused
    where closing it would run a ``finally``/``except``/``with`` cleanup (CPython closes it
    when it is collected; the compiled code has no generator to close)."""
    for gen in getattr(output, "generators", ()):
        if gen.paused_in_cleanup_region():
            raise Unsupported(f"generator {gen.name} is left unfinished inside a try/finally or with block "
                              "(CPython runs that cleanup when the generator is closed or collected)")
