"""Typed errors. Each carries a reason a user can read."""


class MinidynamoError(Exception):
    """Base class of every error minidynamo raises on purpose."""


class Unsupported(MinidynamoError):
    """The tracer met something it cannot capture; the frame runs eagerly instead.

    ``reason`` is a short sentence saying what, e.g. "call to print (a side effect)".
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ProgramRaises(Unsupported):
    """The traced code itself raises here, on these values: a missing key, an index out of
    range, a division by zero, a local read before assignment.  The frame runs eagerly, where
    Python raises it; but only calls that take the same path need to.  The tracer attaches
    ``path_guards`` = (guards, frame): what it had read up to the raise, so the frame's cache
    entry runs eagerly while they pass and other values are still traced (an eager entry needs
    no guard to be right: guards only decide when tracing is worth another try).

    ``exception`` is the exception CPython raises there, when known: a ``try`` statement of the
    traced code then catches it at trace time (``tracer/exceptions.py``); ``fields``: those of
    its attributes that are trace-time values, not constants (a generator's return value as
    ``StopIteration.value``)."""

    path_guards = None

    def __init__(self, reason: str, exception: BaseException | None = None, fields: dict | None = None):
        super().__init__(reason)
        self.exception = exception
        self.fields = fields or {}


def raised_by_program(error: BaseException):
    """The ``ProgramRaises`` an Unsupported came from (itself, or along its causes), or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ProgramRaises):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


class TraceTooLong(Unsupported):
    """The trace ran a long computation in plain Python (no tensor op recorded for a while):
    the whole frame runs eagerly, faster, instead of breaking at the call that ran long (each
    re-trace, each resume function of a loop, would pay for that computation again)."""


class NeedsItsFrame(Unsupported):
    """A call that reads the frame it runs in or the frames below it (``globals()``,
    ``locals()``, ``eval``, ``sys._getframe()``, ``warnings.warn``).  A graph break runs its
    eager instruction in the break's own entry function, another frame, so such a call cannot
    be one: the whole frame runs eagerly instead, where it sees what it would have seen."""


class BackendCompilerFailed(MinidynamoError):
    """A backend raised while compiling a captured graph."""

    def __init__(self, backend_name: str, error: BaseException):
        super().__init__(f"backend {backend_name!r} failed: {type(error).__name__}: {error}")
        self.backend_name = backend_name
        self.error = error


class BackendOutputMismatch(MinidynamoError, TypeError):
    """A user backend's compiled graph returned something other than what the graph returns."""


class BadSetting(MinidynamoError, TypeError):
    """A ``minidynamo.config`` value of the wrong kind, named in the message."""


class UnknownBackend(MinidynamoError, ValueError):
    """``optimize("name")`` with a name no backend was registered under."""
