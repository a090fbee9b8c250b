"""Exceptions the traced Python raises and its own ``try`` catches (tracer/exceptions.py): the
tracer unwinds to the handler as CPython does and traces the handler, so the frame compiles
instead of running eagerly.  Every case compares with eager over calls that raise and calls
that do not (values, the exception type when one escapes, side effects)."""

import sys

import pytest
import torch

import minidynamo


@pytest.fixture(autouse=True)
def _fresh():
    minidynamo.reset()
    yield
    minidynamo.reset()


def key_or_default(x, d):
    try:
        s = d["scale"]
    except KeyError:
        s = 2.0
    return x * s


def index_or_default_as_e(x, xs):
    try:
        v = xs[3]
    except (IndexError, TypeError) as e:
        v = -1
    return x + v


def _lookup(d):
    return d["missing"] * 2


def raised_in_a_callee(x, d):
    try:
        return x * _lookup(d)
    except LookupError:
        return x - 1


def zero_division_with_finally(x, n):
    try:
        k = 10 // n
    except ZeroDivisionError:
        k = 0
    finally:
        x = x + 1
    return x * k


def nested_try_finally(x, d):
    try:
        try:
            v = d["a"]
        finally:
            x = x * 3
    except KeyError:
        v = 7
    return x + v


def inside_no_grad(x, d):
    with torch.no_grad():
        try:
            v = d["a"]
        except KeyError:
            v = 1
        y = x * v
    return y, torch.is_grad_enabled()


def else_clause_and_side_effects(x, d, log):
    log.append("before")
    try:
        v = d.pop("a")
    except KeyError:
        log.append("missing")
        v = 0
    else:
        log.append("found")
    return x + v


def loop_with_continue(x, keys, d):
    total = x * 0
    for k in keys:
        try:
            total = total + d[k]
        except KeyError:
            continue
    return total


CAUGHT = [
    (key_or_default, [({"scale": 3.0},), ({},)]),
    (index_or_default_as_e, [([1, 2, 3, 4],), ([1],)]),
    (raised_in_a_callee, [({"missing": 2},), ({},)]),
    (zero_division_with_finally, [(2,), (0,)]),
    (nested_try_finally, [({"a": 2},), ({},)]),
    (inside_no_grad, [({},), ({"a": 3},)]),
    (loop_with_continue, [(["a", "b"], {"a": 1}), (["b", "c"], {"c": 4})]),
]


def run_both(fn, opt, extra):
    x = torch.arange(3.0, requires_grad=True)
    return fn(x, *extra), opt(x, *extra)


@pytest.mark.parametrize("fn, calls", CAUGHT, ids=[fn.__name__ for fn, _ in CAUGHT])
def test_a_caught_exception_is_traced_and_compiles(fn, calls):
    opt = minidynamo.optimize("eager")(fn)
    for extra in calls * 2:                       # each path twice: the second one hits the cache
        expected, got = run_both(fn, opt, extra)
        torch.testing.assert_close(got, expected)
    assert minidynamo.counters["fallbacks"] == 0
    assert minidynamo.counters["compiles"] == len(calls)


def test_side_effects_before_and_in_the_handler_are_eagers():
    opt = minidynamo.optimize("eager")(else_clause_and_side_effects)
    for d in ({"a": 1.0}, {}, {"a": 2.0}, {}):
        x = torch.ones(2)
        log_eager, log_opt, d_eager, d_opt = [], [], dict(d), dict(d)
        torch.testing.assert_close(opt(x, d_opt, log_opt), else_clause_and_side_effects(x, d_eager, log_eager))
        assert (log_opt, d_opt) == (log_eager, d_eager)
    assert minidynamo.counters["fallbacks"] == 0


def unmatched(x, d):
    try:
        v = d["a"]
    except ValueError:
        v = 5
    return x * v


def reraised(x, d):
    try:
        v = d["a"]
    except KeyError:
        raise
    return x * v


def raised_again_from(x, d):
    try:
        v = d["a"]
    except KeyError as e:
        raise ValueError("no a") from e
    return x * v


def exception_object_used(x, d):
    try:
        v = d["a"]
    except KeyError as e:
        v = len(str(e))
    return x * v


def _lookup_under_no_grad(d):
    with torch.no_grad():
        return d["a"]


def crossing_a_with_block(x, d):
    try:
        v = _lookup_under_no_grad(d)
    except KeyError:
        v = torch.is_grad_enabled()
    return x * v


ESCAPING = [unmatched, reraised, raised_again_from, exception_object_used, crossing_a_with_block]


@pytest.mark.parametrize("fn", ESCAPING, ids=[fn.__name__ for fn in ESCAPING])
def test_what_is_not_caught_or_not_modelled_behaves_as_eager(fn):
    """Uncaught exceptions leave the frame (eager raises them); a handler that uses the
    exception object or an exception crossing a with block is not modelled: eager runs it."""
    opt = minidynamo.optimize("eager")(fn)
    for d in ({"a": 2.0}, {}, {"a": 3.0}, {}):
        x = torch.ones(2)
        try:
            expected = fn(x, d)
        except Exception as error:
            with pytest.raises(type(error)):
                opt(x, d)
        else:
            torch.testing.assert_close(opt(x, d), expected)


# -- the program's own raise ------------------------------------------------------------------------
class ShapeError(ValueError):
    """A class statement that adds nothing to ValueError: making one runs no program code."""


class CodedError(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def _checked(t, n):
    if n > 2:
        raise ShapeError(f"n={n} is too big for {tuple(t.shape)}", n)
    return t * n


def raise_in_a_callee_caught(x, n):
    try:
        return _checked(x, n)
    except ValueError as e:
        return x - len(str(e)) - e.args[1]


def raise_from_and_bare_raise(x, n):
    try:
        try:
            if n > 1:
                raise KeyError(n)
            y = x + 1
        except KeyError as e:
            if n > 2:
                raise ValueError("wrapped") from e
            raise
    except ValueError as e:
        y = x * (e.__cause__ is not None) + isinstance(e.__cause__, KeyError)
    except KeyError:
        y = x * 3
    return y


def raise_a_class_in_a_loop(x, n):
    total = x
    for i in range(n):
        try:
            if i % 2:
                raise IndexError
            total = total + i
        except IndexError as e:
            total = total * (len(e.args) + 2)
    return total


def raise_under_no_grad_caught_outside(x, n):
    try:
        with torch.no_grad():
            y = x * 2
            if n > 1:
                raise RuntimeError("stop")
    except RuntimeError:
        y = y + x
    return y, torch.is_grad_enabled()


RAISED = [raise_in_a_callee_caught, raise_from_and_bare_raise, raise_a_class_in_a_loop,
          raise_under_no_grad_caught_outside, exception_object_used, crossing_a_with_block]


@pytest.mark.parametrize("fn", RAISED, ids=[fn.__name__ for fn in RAISED])
def test_a_raise_the_frame_catches_compiles(fn):
    """``raise`` of a plain exception class is traced like a built-in's raise; a with block over
    grad mode between the raise and the handler is left as its __exit__ leaves it."""
    opt = minidynamo.optimize("eager")(fn)
    for n in (1, 2, 3, 1, 2, 3):
        extra = n
        if fn in (exception_object_used, crossing_a_with_block):    # (these take a dict)
            extra = {"a": 2.0} if n == 1 else {}
        x = torch.arange(3.0, requires_grad=True)
        torch.testing.assert_close(opt(x, extra), fn(x, extra))
        assert torch.is_grad_enabled()
    assert minidynamo.counters["fallbacks"] == 0


def coded(x, n):
    try:
        raise CodedError("m", n)
    except CodedError as e:
        return x * e.code


def returns_the_exception(x, n):
    try:
        raise KeyError(n)
    except KeyError as e:
        return x + 1, e


def test_an_escaping_exception_runs_eagerly():
    opt = minidynamo.optimize("eager")(returns_the_exception)
    for n in (1, 2):
        x = torch.ones(2)
        expected, got = returns_the_exception(x, n), opt(x, n)
        assert type(got[1]) is KeyError and got[1].args == (n,) and got[1] is not expected[1]  # new per call
        torch.testing.assert_close(got[0], expected[0])
    assert minidynamo.counters["fallbacks"] >= 1


# -- a program's exception class with its own __init__: made by BaseException.__new__, its
# __init__ inlined (super().__init__ sets args; what it stores is read back as a constant) --------
class Unnamed(Exception):
    def __init__(self, message, code=0, *, hint="none"):     # no super().__init__: args stay as given
        self.code, self.hint = code, hint


class KindOfCoded(CodedError):
    pass


class FileProblem(OSError):             # OSError's own __new__ and __init__ keep errno and strerror
    def __init__(self, errno, message, extra):
        super().__init__(errno, message)
        self.extra = extra


class TwoInits(CodedError):
    def __init__(self, message):
        super().__init__(message, 7)


def own_inits(x, n):
    total = x
    for kind in (CodedError, KindOfCoded):
        try:
            raise kind("m", n)
        except CodedError as e:
            total = total * e.code + len(str(e)) + len(e.args)
    try:
        raise Unnamed("u", n + 1, hint="h")
    except Exception as e:
        total = total + e.code + len(e.args) + len(e.hint) + len(str(e))
    try:
        raise FileProblem(2, "missing", n)
    except OSError as e:
        total = total + e.errno + len(e.strerror) + e.extra + len(e.args)
    made = CodedError("never raised", n)
    return total - made.code - len(type(made).__name__)


def test_an_exception_class_with_its_own_init_is_traced():
    for fn in (coded, own_inits):
        opt = minidynamo.optimize("eager")(fn)
        for n in (1, 2, 1):
            x = torch.ones(2)
            torch.testing.assert_close(opt(x, n), fn(x, n))
    assert minidynamo.counters["fallbacks"] == 0 and minidynamo.counters["graph_breaks"] == 0
    assert minidynamo.counters["compiles"] == 4                   # per function, one per n


def raises_two_inits(x, n):
    try:
        raise TwoInits("two")
    except CodedError as e:
        return x + e.code


def test_two_inits_in_the_hierarchy_still_break_and_a_patched_init_is_seen():
    opt = minidynamo.optimize("eager")(raises_two_inits)
    torch.testing.assert_close(opt(torch.ones(2), 1), raises_two_inits(torch.ones(2), 1))
    assert any("runs its own code" in r for r in minidynamo.counters["break_reasons"])
    minidynamo.reset()
    opt = minidynamo.optimize("eager")(coded)
    torch.testing.assert_close(opt(torch.ones(2), 3), coded(torch.ones(2), 3))
    original = CodedError.__init__
    try:
        def doubled(self, message, code):
            super(CodedError, self).__init__(message)
            self.code = code * 2
        CodedError.__init__ = doubled
        torch.testing.assert_close(opt(torch.ones(2), 3), torch.ones(2) * 6)
    finally:
        CodedError.__init__ = original
    assert minidynamo.counters["recompiles"] == 1


def test_an_uncaught_raise_leaves_with_eagers_exception_and_traceback():
    opt = minidynamo.optimize("eager")(_checked)
    torch.testing.assert_close(opt(torch.ones(2), 2), torch.ones(2) * 2)
    with pytest.raises(ShapeError, match="n=3 is too big for") as caught:
        opt(torch.ones(2), 3)
    assert caught.traceback[-1].name == "_checked"


def _counted(x, n):
    yield x
    return x * n


def stop_iteration_value(x, n):
    it = _counted(x, n)
    next(it)
    try:
        next(it)
    except StopIteration as e:
        first = e.value                         # the generator's return value, a tensor
    try:
        next(it)
    except StopIteration as e:
        again = e.value                         # None once it has returned
    return first + 1, again is None


# (compiled here: pytest rewrites the assert statements of test modules into its own code)
_compiled: dict = {}
exec(compile("""
def failed_assert(x, n):
    try:
        assert n < 2, f"n={n}"
        return x + 1
    except AssertionError as e:
        return x * len(str(e))
""", __file__, "exec"), _compiled)
failed_assert = _compiled["failed_assert"]


@pytest.mark.parametrize("fn", [stop_iteration_value, failed_assert])
def test_stop_iteration_values_and_asserts(fn):
    opt = minidynamo.optimize("eager")(fn)
    for n in (1, 2, 3, 1):
        x = torch.arange(3.0)
        torch.testing.assert_close(opt(x, n), fn(x, n))
    assert minidynamo.counters["fallbacks"] == 0


def reads_fields_and_a_missing_attribute(x, n):
    try:
        raise OSError(2, "no such file")        # made as a FileNotFoundError, as CPython does
    except OSError as e:
        found = hasattr(e, "code")              # no such field: False (None would answer True)
        return x * e.errno + len(e.strerror) + found + getattr(e, "code", 7) + (type(e) is FileNotFoundError)


def test_an_exceptions_fields_are_read_and_a_missing_one_is_missing():
    opt = minidynamo.optimize("eager")(reads_fields_and_a_missing_attribute)
    for n in (1, 2):
        x = torch.ones(2)
        torch.testing.assert_close(opt(x, n), reads_fields_and_a_missing_attribute(x, n))
    assert minidynamo.counters["fallbacks"] == 0


@pytest.mark.parametrize("change, read", [
    (lambda cls: setattr(cls, "__str__", lambda self: "a longer message"), lambda e: len(str(e))),
    (lambda cls: setattr(cls, "code", 5), lambda e: getattr(e, "code", 0) if hasattr(e, "code") else -1),
], ids=["a method", "a class attribute"])
def test_a_change_to_the_exception_class_after_the_trace_is_seen(change, read):
    """The trace folded what it read of the exception with the class as it was: where the class
    finds each name is guarded."""
    class Late(ValueError):
        pass

    def f(x):
        try:
            raise Late("abc")
        except Late as e:
            return x + read(e)

    opt = minidynamo.optimize("eager")(f)
    torch.testing.assert_close(opt(torch.ones(2)), f(torch.ones(2)))
    change(Late)
    torch.testing.assert_close(opt(torch.ones(2)), f(torch.ones(2)))


# -- the exception being handled is one per thread: a callee and the frame's caller see it ----------
def _context_of_lookup(d):
    try:
        d["inner"]
    except KeyError as e:
        return e.__context__


def context_seen_by_a_callee(x, d):
    try:
        d["outer"]
    except KeyError:
        context = _context_of_lookup(d)        # raised while the outer KeyError is handled
        return x + (100 if context is not None and context.args == ("outer",) else 1)
    return x


def context_of_a_caught_lookup(x, d):
    try:
        d["k"]
    except KeyError as e:
        return x + (1 if e.__context__ is None else 100)
    return x


def test_an_exception_raised_while_another_is_handled_chains_it_as_in_eager():
    x = torch.zeros(1)
    opt = minidynamo.optimize("eager")(context_seen_by_a_callee)
    assert opt(x, {}).item() == context_seen_by_a_callee(x, {}).item() == 100
    assert minidynamo.counters["fallbacks"] == 0


def test_a_frame_called_inside_a_handler_sees_the_callers_exception():
    """The trace assumed its caller handles no exception (a guard now says so): called inside
    an ``except`` block, the ``KeyError`` it catches has that exception as ``__context__``."""
    x = torch.zeros(1)
    opt = minidynamo.optimize("eager")(context_of_a_caught_lookup)
    assert opt(x, {}).item() == 1
    try:
        raise ValueError("the caller's")
    except ValueError:
        assert opt(x, {}).item() == context_of_a_caught_lookup(x, {}).item() == 100
    assert opt(x, {}).item() == 1
    assert any("exception_being_handled" in r for r in minidynamo.counters["recompile_reasons"])


# -- a graph break inside an except clause ---------------------------------------------------------
# A break where the trace itself raised (``cfg["scale"]``) moves to that instruction: the entry
# raises it for real, and the handler's resume function starts with the real exception
# (``CaughtExceptionVariable``: its class guarded).  A break inside the handler then hands the
# exception on: the entry makes it ``sys.exc_info()``'s for the eager instruction, and the next
# resume function re-enters the handler by ``PUSH_EXC_INFO`` of it (resume_code's "handling" slot).
def logs_a_missing_key(x, cfg):
    try:
        s = cfg["scale"]
    except KeyError as e:
        print("missing", e, sys.exc_info()[0].__name__)
        s = 1.5
    return x * s


def nested_handlers(x, cfg):
    try:
        s = cfg["a"]
    except KeyError:
        print("outer", sys.exc_info()[1])
        try:
            s = cfg["b"]
        except KeyError as e:
            print("inner", e, sys.exc_info()[1], repr(e.__context__))
            s = 2.0
        print("outer again", sys.exc_info()[1])
    return x * s


def reraises_after_logging(x, cfg):
    try:
        return x * cfg["a"]
    except KeyError:
        print("re-raising")
        raise


def chains_after_logging(x, cfg):
    try:
        return x * cfg["a"]
    except KeyError as e:
        print("chaining", e)
        raise ValueError("no a") from e


def skips_missing_keys(x, keys, cfg):
    for k in keys:
        try:
            x = x * cfg[k]
        except KeyError:
            print("skip", k)
            continue
    return x


def _outcome(fn, args):
    try:
        result = ("returned", fn(*args).tolist())
    except Exception as error:          # noqa: BLE001 (compared with eager's)
        result = ("raised", type(error), error.args, type(error.__context__), type(error.__cause__))
    return result, sys.exc_info()


@pytest.mark.parametrize("fn, args", [
    (logs_a_missing_key, ({},)), (logs_a_missing_key, ({"scale": 3.0},)),
    (nested_handlers, ({},)), (nested_handlers, ({"b": 4.0},)),
    (reraises_after_logging, ({},)), (chains_after_logging, ({},)),
    (skips_missing_keys, (("a", "b", "c"), {"b": 2.0})),
], ids=["missing", "present", "nested", "nested-inner-present", "reraise", "chain", "loop"])
def test_a_graph_break_inside_an_except_clause_matches_eager(capsys, fn, args):
    x = torch.ones(2)
    expected = _outcome(fn, (x, *args)), capsys.readouterr().out
    opt = minidynamo.optimize("eager")(fn)
    for _ in range(2):
        assert (_outcome(opt, (x, *args)), capsys.readouterr().out) == expected
    if expected[0][0][0] == "returned":
        report = minidynamo.explain(fn)(x, *args)
        assert report.fallback_count == 0, report.reasons


def reads_the_caught_exception(x, cfg, k, d):
    try:
        s = cfg[k]
    except KeyError as e:
        print("missing", e)                # a break: the resume function handles the real KeyError(k)
        try:
            d["other"]
        except KeyError as e2:             # its __context__ is that real exception
            return x + len(e2.__context__.args[0])
    return x * s


def test_a_caught_exceptions_fields_are_read_on_every_call(capsys):
    """The real exception a handler's resume function starts with differs per call: its fields
    are guarded where read (``args``), never folded from the first call's."""
    opt = minidynamo.optimize("eager")(reads_the_caught_exception)
    for k in ("ab", "abcd", "ab", "abcdefg"):
        x = torch.zeros(1)
        assert opt(x, {}, k, {}).item() == reads_the_caught_exception(x, {}, k, {}).item() == len(k)
    assert minidynamo.counters["fallbacks"] == 0


class MessageError(ValueError):
    def __str__(self):                     # runs its own code: not a plain class
        return "message"


@minidynamo.disable
def raise_message_error(k):
    raise MessageError(k)


def handles_a_programs_exception(x, k):
    try:
        raise_message_error(k)             # a break: the handler's resume function gets it
    except ValueError as e:
        print("caught", e)                 # ... as a plain object, not an exception it traces
        return x + e.args[0]
    return x


def test_a_handler_of_an_exception_that_runs_its_own_code_runs_eagerly_without_error(capsys):
    x = torch.zeros(1)
    expected = handles_a_programs_exception(x, 3)
    assert minidynamo.optimize("eager")(handles_a_programs_exception)(x, 3).item() == expected.item()
    report = minidynamo.explain(handles_a_programs_exception)(x, 3)
    assert not any("internal" in reason for reason in report.reasons), report.reasons


def _reads_exc_info(x):
    before = sys.exc_info()[0]
    try:
        raise ValueError("abc")
    except ValueError:
        kind, error, traceback = sys.exc_info()
        inside = (kind is ValueError) + len(str(error)) + (traceback is not None)
    return x + inside + (before is None)


def test_sys_exc_info_answers_the_handled_exception():
    calls = []
    opt = minidynamo.optimize(lambda gm, inputs: calls.append(gm) or gm.forward)(_reads_exc_info)
    x = torch.ones(2)
    torch.testing.assert_close(opt(x), _reads_exc_info(x))
    assert len(calls) == 1 and minidynamo.counters["graph_breaks"] == 0
    try:
        raise KeyError("the caller's")
    except KeyError:                       # the caller handles one: sys.exc_info() is the caller's
        torch.testing.assert_close(opt(x), _reads_exc_info(x))


def test_the_caught_exception_is_the_raised_object():
    """PyTorch's test_exceptions (test_context_of_exception_*): ``except E as e`` binds the very
    object raised, and ``__context__`` / ``__cause__`` / ``sys.exc_info()`` are those objects."""
    def f(t):
        cause, raised = KeyError("k"), ValueError(2)
        out = []
        try:
            raise raised from cause
        except ValueError as e:
            out += [e is raised, e.__cause__ is cause, sys.exc_info()[1] is e, raised in [e], [1, e].index(raised)]
            try:
                raise TypeError(3)
            except TypeError as inner:
                out += [inner.__context__ is raised, inner.__context__ is e]
        try:
            try:
                first = TypeError(1)
                raise first
            finally:
                second = ValueError(2)
                raise second
        except Exception as e:
            out += [e is second, e.__context__ is first, e.__context__ is second]
        return t.sin(), out

    t = torch.randn(3)
    got, expected = minidynamo.optimize("eager")(f)(t), f(t)
    assert got[1] == expected[1] == [True] * 4 + [1] + [True, True, True, True, False]
    assert minidynamo.counters["graph_breaks"] == 0 and not minidynamo.counters["fallback_reasons"]


def test_raising_an_exception_already_on_the_chain_cuts_the_cycle():
    """PyTorch's test_raise_does_not_create_context_chain_cycle: ``raise a`` while handling c,
    whose chain is c -> b -> a: CPython sets a.__context__ = c and cuts b.__context__ to None."""
    def f(t):
        try:
            try:
                raise AssertionError
            except AssertionError as a_:
                a = a_
                try:
                    raise BytesWarning
                except BytesWarning as b_:
                    b = b_
                    try:
                        raise ConnectionError
                    except ConnectionError as c_:
                        c = c_
                        raise a
        except AssertionError as e:
            exc = e
        return t.sin(), exc is a, a.__context__ is c, c.__context__ is b, b.__context__ is None

    t = torch.ones(2)
    got, expected = minidynamo.optimize("eager")(f)(t), f(t)
    assert got[1:] == expected[1:] == (True,) * 4
    assert minidynamo.counters["graph_breaks"] == 0 and not minidynamo.counters["fallback_reasons"]
