/*
 * The PEP 523 frame hook: minidynamo's only C code.
 *
 * CPython 3.11 lets an extension replace the function that evaluates every Python frame
 * (`_PyInterpreterState_SetEvalFrameFunc`). We install `eval_frame_hook` while at least one
 * thread has a callback set, and for each frame it sees:
 *
 *     frame not watched (no callback, generator, class body, ...)  -> CPython's evaluator
 *     a trace or profile function is set on the thread              -> CPython's evaluator
 *     a cache entry of this code object whose guard passes         -> that entry's compiled_fn
 *     no entry matches                                             -> the Python callback
 *
 * Per code object the cache lives in `co_extra`. It holds either
 *   - a list of entries `(owner, guard_fn, compiled_fn)`, most recently hit first (a
 *     `CacheEntry`, convert_frame.py: a tuple subclass, so the fields are read here by
 *     position as cheaply as from a plain tuple), or
 *   - any other object (a str saying why): "never watch this code".
 * `owner` is a weak reference to the callback that made the entry, so two `optimize(...)`
 * contexts (say, two backends) never run each other's compiled code, and an entry dies with
 * its context. `guard_fn is None` always passes;
 * `compiled_fn is None` means "run the frame normally" (how a code that gave up is marked).
 *
 * guard_fn and compiled_fn are called as f(func, *args): the frame's function object and its
 * argument slots, exactly as CPython laid them out (positionals, keyword-only, *args, **kwargs).
 * The callback is called as callback(func, args_tuple) and returns an entry to run now, or None.
 * While any of them runs, the hook is paused on this thread.
 *
 * C stack depth.  While a custom eval function is installed, CPython 3.11 no longer inlines
 * Python-to-Python calls: every Python frame costs C stack (our hook + a fresh
 * `_PyEval_EvalFrameDefault`), where eager costs none.  A recursion that is fine eagerly
 * (20000 deep under `sys.setrecursionlimit(60000)`) would overflow the C stack and crash.  So
 * the hook measures how much of the thread's C stack is in use (its bounds come from
 * `pthread_getattr_np`, once per thread), and past `SUSPEND_FRACTION` of it, it *suspends*
 * itself: the eval function is set back to CPython's for the whole interpreter until that
 * frame returns.  Deeper frames then run exactly as eager (inlined, watched by nobody: every
 * frame may run eagerly, so this is always sound), Python's own recursion limit applies as
 * usual, and other threads merely run unwatched meanwhile.  If the hook is nevertheless
 * entered with the stack nearly exhausted, it raises RecursionError instead of crashing.
 */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "minidynamo's frame hook supports CPython 3.11 only"
#endif

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#define NOT_WATCHED_FLAGS (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)
#define SMALL_ARGV 16

static Py_ssize_t extra_index = -1;           /* our slot in every code object's co_extra */
static Py_ssize_t threads_with_callback = 0;  /* the hook is installed while this is > 0 */
static _Thread_local PyObject *tls_callback = NULL;
static _Thread_local int tls_paused = 0;
/* hand_over(fn, box): the arguments the call holds until fn's frame starts (see py_hand_over). */
static _Thread_local PyObject *tls_handed_fn = NULL, *tls_handed_args = NULL;
/* The trampoline (see run_entry): set while run_entry waits for the graph-break entry it called,
 * whose last act, hand_over(resume, box), then leaves the call in tls_pending_* and returns
 * `continue_marker` instead of making it. */
static _Thread_local int tls_entry_tail = 0;
static _Thread_local PyObject *tls_pending_fn = NULL, *tls_pending_args = NULL;
static PyObject *continue_marker = NULL;
/* What the callback returns for "run this frame, and every frame it calls, unwatched" (the
 * wrappers of torch.compile and torch.compiler.disable: convert_frame.FrameConverter.__call__). */
static PyObject *unwatched_marker = NULL;
static PyObject *swap_callback(PyObject *callback);

/* ---- C stack budget (see the top comment) ---- */
#define SUSPEND_FRACTION 8               /* suspend once 1/8 of the thread's stack is in use */
#define HARD_FRACTION 16                 /* RecursionError with less than 1/16 left */
#define FALLBACK_STACK (128 * 1024)      /* hooked depth allowed when the bounds are unknown */
static Py_ssize_t n_suspended = 0;       /* frames (any thread) running with the hook suspended */
static unsigned long long n_suspensions;
static _Thread_local uintptr_t tls_suspend_below = 0;   /* stack addresses: it grows down */
static _Thread_local uintptr_t tls_error_below = 0;

static void init_stack_bounds(void) {
    char here;
    uintptr_t sp = (uintptr_t)&here, low = 0, size = 0;
#ifdef __linux__
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *addr = NULL;
        size_t sz = 0;
        if (pthread_attr_getstack(&attr, &addr, &sz) == 0 && addr != NULL && sz > 0 &&
            sp > (uintptr_t)addr && sp <= (uintptr_t)addr + sz) {
            low = (uintptr_t)addr;
            size = sz;
        }
        pthread_attr_destroy(&attr);
    }
#endif
    if (size == 0) {    /* unknown bounds: suspend FALLBACK_STACK below this first call */
        tls_suspend_below = sp > FALLBACK_STACK ? sp - FALLBACK_STACK : 1;
        tls_error_below = sp > 2 * FALLBACK_STACK ? sp - 2 * FALLBACK_STACK : 0;
        return;
    }
    uintptr_t high = low + size;
    tls_suspend_below = high - size / SUSPEND_FRACTION;
    tls_error_below = low + size / HARD_FRACTION;
    if (tls_suspend_below > sp) tls_suspend_below = sp;   /* started deep already: suspend now */
}

static void update_hook(void);

/* Counters, read by minidynamo.counters: cheap enough for the hot path. */
static unsigned long long n_frames_seen, n_cache_hits, n_cache_misses;
static int eager_when_traced = 1;   /* sys.settrace/setprofile set: run frames as CPython does */
/* The JIT tracer's thread state (minidynamo._jit_state's reader, given by set_jit_state when it
 * is built): while torch.jit.trace records a program, frames run as CPython runs them, so the
 * tracer sees every op (a replayed graph's results are values it never saw: it crashed). */
static int (*jit_is_tracing)(void) = NULL;

static void free_extra(void *extra) { Py_XDECREF((PyObject *)extra); }

static PyObject *get_extra(PyCodeObject *code) {
    void *extra = NULL;
    if (_PyCode_GetExtra((PyObject *)code, extra_index, &extra) < 0) {
        PyErr_Clear();
        return NULL;
    }
    return (PyObject *)extra;
}

static inline PyObject *run_default(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag) {
    return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

static Py_ssize_t count_arg_slots(PyCodeObject *code) {
    Py_ssize_t n = code->co_argcount + code->co_kwonlyargcount;
    if (code->co_flags & CO_VARARGS) n++;
    if (code->co_flags & CO_VARKEYWORDS) n++;
    return n;
}

/* Walk the entries; on a passing guard move it to the front and return it (new reference).
 * Returns NULL with no error set when nothing matched, NULL with an error if a guard raised. */
static PyObject *find_entry(PyObject *entries, PyObject *owner, PyObject *const *argv, Py_ssize_t argc) {
    Py_ssize_t n = PyList_GET_SIZE(entries);
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(entries); i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        PyObject *owner_ref = PyTuple_GET_ITEM(entry, 0);
        if (!PyWeakref_CheckRef(owner_ref) || PyWeakref_GET_OBJECT(owner_ref) != owner) continue;
        PyObject *guard_fn = PyTuple_GET_ITEM(entry, 1);
        Py_INCREF(entry);
        int passed = 1;
        if (guard_fn != Py_None) {
            PyObject *ok = PyObject_Vectorcall(guard_fn, argv, argc, NULL);
            if (ok == NULL) { Py_DECREF(entry); return NULL; }
            passed = (ok == Py_True) ? 1 : PyObject_IsTrue(ok);
            Py_DECREF(ok);
            if (passed < 0) { Py_DECREF(entry); return NULL; }
        }
        if (passed) {
            if (i > 0 && PyList_GET_ITEM(entries, i) == entry) {   /* move to front */
                memmove(&PyList_GET_ITEM(entries, 1), &PyList_GET_ITEM(entries, 0), i * sizeof(PyObject *));
                PyList_SET_ITEM(entries, 0, entry);
            }
            return entry;
        }
        Py_DECREF(entry);
    }
    return NULL;
}

/* fn's frame now holds its own references to the arguments hand_over gave it: drop the call's. */
static inline void release_handed(_PyInterpreterFrame *frame) {
    if (tls_handed_args != NULL && (PyObject *)frame->f_func == tls_handed_fn) {
        PyObject *held = tls_handed_args;
        tls_handed_args = tls_handed_fn = NULL;
        Py_DECREF(held);    /* frees no argument: the frame holds each one */
    }
}

/* fn(*held), where `held` (a tuple, stolen) stays referenced only until fn's frame starts. */
static PyObject *call_handing_over(PyObject *fn, PyObject *held) {
    Py_INCREF(fn);
    PyObject *outer_fn = tls_handed_fn, *outer_args = tls_handed_args;   /* an outer call's, not yet dropped */
    tls_handed_fn = fn;
    tls_handed_args = held;
    /* (CPython reads the argument array only while it makes fn's frame, before the hook runs) */
    PyObject *result = PyObject_Vectorcall(fn, &PyTuple_GET_ITEM(held, 0), PyTuple_GET_SIZE(held), NULL);
    if (tls_handed_args == held) {          /* fn's frame never reached the hook */
        tls_handed_args = tls_handed_fn = NULL;
        Py_DECREF(held);
    }
    tls_handed_fn = outer_fn;
    tls_handed_args = outer_args;
    Py_DECREF(fn);
    return result;
}

/* Run one entry: compiled_fn(func, *args), or the frame itself when compiled_fn is None.
 * A compiled_fn written in Python (a graph break's entry runs the rest of the frame's code)
 * gets the frame's arguments as their only holder, as the frame itself would have them: the
 * frame, which never runs, lets go of them, so a local the code deletes dies there. */
static PyObject *run_entry(PyObject *entry, PyThreadState *ts, _PyInterpreterFrame *frame,
                           PyObject *const *argv, Py_ssize_t argc) {
    PyObject *compiled_fn = PyTuple_GET_ITEM(entry, 2);
    if (compiled_fn == Py_None) {
        tls_paused = 0;
        return run_default(ts, frame, 0);
    }
    if (!PyFunction_Check(compiled_fn))
        return PyObject_Vectorcall(compiled_fn, argv, argc, NULL);
    PyObject *held = PyTuple_New(argc);
    if (held == NULL) return NULL;
    for (Py_ssize_t i = 0; i < argc; i++) {
        Py_INCREF(argv[i]);
        PyTuple_SET_ITEM(held, i, argv[i]);
    }
    for (Py_ssize_t i = 0; i + 1 < argc; i++)
        Py_CLEAR(frame->localsplus[i]);   /* `held` has them: the frame never runs */
    /* A graph break's entry ends with hand_over(resume, box): the rest of the frame.  It returns
     * that call here (continue_marker) and it is made here, once the entry's frame is gone, so
     * the resume function's frame follows the frame's caller, as the rest of the frame does in
     * eager: a stack walk from it (warnings' stacklevel, logging's caller, a traceback) meets
     * the caller, not the entry; and a loop that breaks on every iteration adds no frame per
     * iteration.  The resume function runs watched by the hook, as hand_over would run it. */
    int outer_tail = tls_entry_tail;
    tls_entry_tail = 1;
    PyObject *result = call_handing_over(compiled_fn, held);
    tls_entry_tail = outer_tail;
    while (result == continue_marker) {
        Py_DECREF(result);
        PyObject *fn = tls_pending_fn, *args = tls_pending_args;
        tls_pending_fn = tls_pending_args = NULL;
        int was_paused = tls_paused;
        tls_paused = 0;
        tls_entry_tail = 0;           /* (a resume function is no entry: its own entries are run here) */
        result = call_handing_over(fn, args);
        tls_entry_tail = outer_tail;
        tls_paused = was_paused;
        Py_DECREF(fn);
    }
    return result;
}

/* Evaluate the frame with the hook suspended for the whole interpreter (see the top comment). */
static PyObject *run_suspended(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag) {
    char here;
    if ((uintptr_t)&here < tls_error_below && !throwflag && frame->owner == FRAME_OWNED_BY_THREAD) {
        PyErr_SetString(PyExc_RecursionError,
                        "maximum recursion depth exceeded (C stack nearly exhausted under the minidynamo frame hook)");
        return NULL;
    }
    n_suspended++;
    n_suspensions++;
    update_hook();
    PyObject *result = _PyEval_EvalFrameDefault(ts, frame, throwflag);
    n_suspended--;
    update_hook();
    return result;
}

static PyObject *eval_frame_hook(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag) {
    char here;
    release_handed(frame);
    if (tls_suspend_below == 0) init_stack_bounds();
    if ((uintptr_t)&here < tls_suspend_below) return run_suspended(ts, frame, throwflag);
    PyObject *callback = tls_callback;
    PyCodeObject *code = frame->f_code;
    if (callback == NULL || tls_paused || throwflag || frame->owner != FRAME_OWNED_BY_THREAD ||
        frame->f_func == NULL || !(code->co_flags & CO_OPTIMIZED) || (code->co_flags & NOT_WATCHED_FLAGS)) {
        return run_default(ts, frame, throwflag);
    }
    /* Deep in a recursion (past half the recursion limit): a watched frame costs more Python
       frames than eager's one (the entry, its output's rebuilding, the callback's trace), so a
       recursion eager finishes would raise RecursionError inside minidynamo's own code. */
    if (ts->recursion_remaining < ts->recursion_limit / 2) {
        return run_default(ts, frame, throwflag);
    }
    /* sys.settrace / sys.setprofile (a debugger, coverage, cProfile): the tool is owed every
       line and call of the program as eager runs it, none of the compiler's own work */
    if ((ts->c_tracefunc != NULL || ts->c_profilefunc != NULL) && eager_when_traced) {
        return run_default(ts, frame, throwflag);
    }
    if (jit_is_tracing != NULL && jit_is_tracing()) {
        return run_default(ts, frame, throwflag);
    }
    PyObject *entries = get_extra(code);
    if (entries != NULL && !PyList_CheckExact(entries)) {
        return run_default(ts, frame, throwflag);      /* marked: never watch this code */
    }
    n_frames_seen++;

    /* argv = [func, arg slots...]: borrowed references, the frame keeps them alive. */
    Py_ssize_t nslots = count_arg_slots(code);
    Py_ssize_t argc = nslots + 1;
    PyObject *small[SMALL_ARGV];
    PyObject **argv = argc <= SMALL_ARGV ? small : PyMem_Malloc(argc * sizeof(PyObject *));
    if (argv == NULL) return PyErr_NoMemory();
    argv[0] = (PyObject *)frame->f_func;
    memcpy(argv + 1, frame->localsplus, nslots * sizeof(PyObject *));

    PyObject *result = NULL;
    Py_INCREF(callback);
    Py_XINCREF(entries);      /* a guard may run reset() (another thread, a finalizer): keep it alive */
    tls_paused = 1;
    PyObject *entry = entries ? find_entry(entries, callback, argv, argc) : NULL;
    if (entry != NULL) {
        n_cache_hits++;
    } else if (!PyErr_Occurred()) {
        n_cache_misses++;
        PyObject *args = PyTuple_New(nslots);
        if (args != NULL) {
            for (Py_ssize_t i = 0; i < nslots; i++) {
                Py_INCREF(argv[i + 1]);
                PyTuple_SET_ITEM(args, i, argv[i + 1]);
            }
            entry = PyObject_CallFunctionObjArgs(callback, argv[0], args, NULL);
            Py_DECREF(args);
        }
        if (entry == Py_None) {                         /* "run this frame normally" */
            Py_DECREF(entry);
            entry = NULL;
            tls_paused = 0;
            result = run_default(ts, frame, throwflag);
            goto done;
        }
        if (entry == unwatched_marker) {                /* "... and what it calls, unwatched" */
            Py_DECREF(entry);
            entry = NULL;
            tls_paused = 0;
            PyObject *previous = swap_callback(NULL);
            result = run_default(ts, frame, throwflag);
            Py_XDECREF(swap_callback(previous));
            Py_XDECREF(previous);
            goto done;
        }
        if (entry != NULL && !(PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) == 3)) {
            PyErr_SetString(PyExc_TypeError, "minidynamo callback must return None or (owner, guard_fn, compiled_fn)");
            Py_CLEAR(entry);
        }
    }
    if (entry != NULL) {
        result = run_entry(entry, ts, frame, argv, argc);
        Py_DECREF(entry);
    }
done:
    tls_paused = 0;
    Py_XDECREF(entries);
    Py_DECREF(callback);
    if (argv != small) PyMem_Free(argv);
    return result;
}

/* The hook is installed while some thread has a callback and no frame runs suspended. */
static void update_hook(void) {
    int on = threads_with_callback > 0 && n_suspended == 0;
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction want = on ? eval_frame_hook : _PyEval_EvalFrameDefault;
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(interp);
    /* Another PEP 523 hook installed since (torch.compile's, inside a region it runs) is left in
       place: it passes the frames it does not take to the one it replaced, and restores it. */
    if (current != want && (current == eval_frame_hook || current == _PyEval_EvalFrameDefault))
        _PyInterpreterState_SetEvalFrameFunc(interp, want);
}

/* Make `callback` (NULL: none) this thread's callback; returns the previous one (a reference
 * the caller owns, or NULL). Installs the hook when the first thread gets a callback and
 * removes it when the last one drops it. */
static PyObject *swap_callback(PyObject *callback) {
    PyObject *previous = tls_callback;
    Py_XINCREF(callback);
    tls_callback = callback;
    if (!previous && callback && threads_with_callback++ == 0) update_hook();
    if (previous && !callback && --threads_with_callback == 0) update_hook();
    return previous;
}

/* ---- Watched: fn wrapped so that its call runs with a given callback (optimize's decorator) ---- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *callback;       /* NULL: run unwatched (minidynamo.disable) */
    PyObject *dict;           /* __name__, __doc__, __wrapped__, ... set by functools.update_wrapper */
    PyObject *weakrefs;       /* weak references to it (WeakSet, WeakMethod: as to a function) */
    vectorcallfunc vectorcall;
} Watched;

/* Another PEP 523 hook holds the interpreter (torch.compile's, inside a region it runs, or left
   installed by a torch.compile that raised): update_hook leaves it there, so minidynamo captures
   nothing while it stays.  Said once per process, as a RuntimeWarning (-1: it was raised). */
static int warned_foreign_hook = 0;

static int warn_if_foreign_hook(void) {
    if (warned_foreign_hook) return 0;
    _PyFrameEvalFunction current = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
    if (current == eval_frame_hook || current == _PyEval_EvalFrameDefault) return 0;
    warned_foreign_hook = 1;
    return PyErr_WarnEx(PyExc_RuntimeWarning,
                        "another frame evaluation hook (PEP 523) is installed, perhaps torch.compile's (it "
                        "stays after a torch.compile that raised): minidynamo captures nothing while it "
                        "is, and the program runs eagerly", 1);
}

static PyObject *watched_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Watched *w = (Watched *)self;
    PyObject *previous = swap_callback(w->callback);
    if (w->callback != NULL && warn_if_foreign_hook() < 0) {
        Py_XDECREF(swap_callback(previous));
        Py_XDECREF(previous);
        return NULL;
    }
    PyObject *result = PyObject_Vectorcall(w->fn, args, nargsf, kwnames);
    Py_XDECREF(swap_callback(previous));
    Py_XDECREF(previous);
    return result;
}

static PyObject *watched_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *fn, *callback;
    if (!PyArg_ParseTuple(args, "OO:Watched", &fn, &callback)) return NULL;
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "Watched needs a callable, got %.100s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    Watched *w = (Watched *)type->tp_alloc(type, 0);
    if (w == NULL) return NULL;
    Py_INCREF(fn);
    w->fn = fn;
    w->callback = callback == Py_None ? NULL : (Py_INCREF(callback), callback);
    w->vectorcall = watched_vectorcall;
    return (PyObject *)w;
}

static int watched_traverse(Watched *w, visitproc visit, void *arg) {
    Py_VISIT(w->fn);
    Py_VISIT(w->callback);
    Py_VISIT(w->dict);
    return 0;
}

static int watched_clear(Watched *w) {
    Py_CLEAR(w->fn);
    Py_CLEAR(w->callback);
    Py_CLEAR(w->dict);
    return 0;
}

static void watched_dealloc(Watched *w) {
    PyObject_GC_UnTrack(w);
    if (w->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)w);
    watched_clear(w);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

/* A Watched in a class body binds like a function: obj.method(...) passes obj first. */
static PyObject *watched_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *watched_get_fn(Watched *w, void *unused) { return Py_NewRef(w->fn); }
static PyObject *watched_get_callback(Watched *w, void *unused) {
    return Py_NewRef(w->callback ? w->callback : Py_None);
}

static PyGetSetDef watched_getset[] = {
    {"fn", (getter)watched_get_fn, NULL, "the wrapped callable", NULL},
    {"callback", (getter)watched_get_callback, NULL, "the callback its calls run with", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

static PyTypeObject WatchedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "minidynamo._eval_frame.Watched",
    .tp_doc = "Watched(fn, callback): calling it calls fn with this thread's callback set to callback.",
    .tp_basicsize = sizeof(Watched),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = watched_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Watched, vectorcall),
    .tp_dictoffset = offsetof(Watched, dict),
    .tp_weaklistoffset = offsetof(Watched, weakrefs),
    .tp_traverse = (traverseproc)watched_traverse,
    .tp_clear = (inquiry)watched_clear,
    .tp_dealloc = (destructor)watched_dealloc,
    .tp_descr_get = watched_descr_get,
    .tp_getset = watched_getset,
};

/* ---- the module's Python API ---- */

static PyObject *py_set_callback(PyObject *self, PyObject *callback) {
    PyObject *previous = swap_callback(callback == Py_None ? NULL : callback);
    if (previous == NULL) Py_RETURN_NONE;
    return previous;    /* swap_callback handed us the thread's reference */
}

static PyObject *py_get_callback(PyObject *self, PyObject *unused) {
    PyObject *cb = tls_callback ? tls_callback : Py_None;
    Py_INCREF(cb);
    return cb;
}

static int check_code(PyObject *code) {
    if (!PyCode_Check(code)) {
        PyErr_Format(PyExc_TypeError, "expected a code object, got %.100s", Py_TYPE(code)->tp_name);
        return 0;
    }
    return 1;
}

static PyObject *py_get_cache(PyObject *self, PyObject *code) {
    if (!check_code(code)) return NULL;
    PyObject *extra = get_extra((PyCodeObject *)code);
    if (extra == NULL) Py_RETURN_NONE;
    Py_INCREF(extra);
    return extra;
}

static PyObject *py_set_cache(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_cache(code, entries_list_or_reason_or_None)");
        return NULL;
    }
    if (!check_code(args[0])) return NULL;
    PyObject *value = args[1] == Py_None ? NULL : args[1];
    Py_XINCREF(value);
    /* _PyCode_SetExtra releases the old value through free_extra *before* it stores the new one.
     * Freeing the old entries can run Python code (a weakly pinned object dies with its guard, and
     * its listener reads this very cache): so the old value is kept alive across the swap and
     * released only once the slot holds the new one (it was a dangling list: a crash). */
    PyObject *old = get_extra((PyCodeObject *)args[0]);
    Py_XINCREF(old);
    if (_PyCode_SetExtra(args[0], extra_index, value) < 0) {
        Py_XDECREF(value);
        Py_XDECREF(old);
        return NULL;
    }
    Py_XDECREF(old);
    Py_RETURN_NONE;
}

static PyObject *py_stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{sKsKsKsnsK}", "frames_seen", n_frames_seen, "cache_hits", n_cache_hits,
                         "cache_misses", n_cache_misses, "threads_with_callback", threads_with_callback,
                         "stack_suspensions", n_suspensions);
}

static PyObject *py_reset_stats(PyObject *self, PyObject *unused) {
    n_frames_seen = n_cache_hits = n_cache_misses = n_suspensions = 0;
    Py_RETURN_NONE;
}

/* set_eager_when_traced(flag) -> the previous flag: whether frames run as CPython runs them while
 * a trace or profile function is set (the default); off, a profiler sees minidynamo's own work. */
static PyObject *py_set_eager_when_traced(PyObject *self, PyObject *flag) {
    int on = PyObject_IsTrue(flag);
    if (on < 0) return NULL;
    int previous = eager_when_traced;
    eager_when_traced = on;
    return PyBool_FromLong(previous);
}

/* set_jit_state(capsule): the JIT tracer's state reader, minidynamo._jit_state.is_tracing. */
static PyObject *py_set_jit_state(PyObject *self, PyObject *capsule) {
    void *reader = PyCapsule_GetPointer(capsule, "minidynamo._jit_state.is_tracing");
    if (reader == NULL) return NULL;
    jit_is_tracing = (int (*)(void))reader;
    Py_RETURN_NONE;
}

static PyObject *py_hook_installed(PyObject *self, PyObject *unused) {
    return PyBool_FromLong(_PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == eval_frame_hook);
}

/* unpaused(fn, *args, **kwargs): call fn with the hook watching this thread again.  A graph
 * break's entry (convert_frame/breaks) runs while the hook is paused; its eager instruction and
 * its resume function must run as watched frames, as they would if the frame had no entry. */
static PyObject *py_unpaused(PyObject *self, PyObject *args, PyObject *kwargs) {
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "unpaused(fn, *args, **kwargs)");
        return NULL;
    }
    PyObject *rest = PyTuple_GetSlice(args, 1, n);
    if (rest == NULL) return NULL;
    int was_paused = tls_paused;
    tls_paused = 0;
    PyObject *result = PyObject_Call(PyTuple_GET_ITEM(args, 0), rest, kwargs);
    tls_paused = was_paused;
    Py_DECREF(rest);
    return result;
}

/* unpaused_call(fn, args, kwargs): fn(*args, **kwargs) as CALL_FUNCTION_EX makes it, watched:
 * an exact tuple of arguments is passed on as that very tuple (a C callable may return it). */
static PyObject *py_unpaused_call(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "unpaused_call(fn, args, kwargs)");
        return NULL;
    }
    PyObject *positional = PyTuple_CheckExact(args[1]) ? Py_NewRef(args[1]) : PySequence_Tuple(args[1]);
    if (positional == NULL) return NULL;
    PyObject *keywords = NULL;
    if (args[2] != Py_None) {
        keywords = PyDict_CheckExact(args[2]) ? Py_NewRef(args[2]) : PyDict_New();
        if (keywords != NULL && keywords != args[2] && PyDict_Merge(keywords, args[2], 1) < 0) Py_CLEAR(keywords);
        if (keywords == NULL) {
            Py_DECREF(positional);
            return NULL;
        }
    }
    int was_paused = tls_paused;
    tls_paused = 0;
    PyObject *result = PyObject_Call(args[0], positional, keywords);
    tls_paused = was_paused;
    Py_DECREF(positional);
    Py_XDECREF(keywords);
    return result;
}

/* hand_over(fn, box): fn(*box) watched by the hook, as unpaused does, where the resume function
 * of a graph break becomes the only holder of the values handed to it.  The items move out of
 * the list `box` (left empty) into a tuple the call holds until fn's frame starts, and the hook
 * drops it there (release_handed): from then on, as in eager, a local the rest of the frame
 * deletes or rebinds is freed at once (its finalizer runs, a weak reference to it dies) instead
 * of living until the resume function returns.  Without the hook (none installed), the tuple is
 * dropped when the call returns. */
static PyObject *py_hand_over(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "hand_over(fn, box): box must be a list");
        return NULL;
    }
    PyObject *fn = args[0], *box = args[1];
    PyObject *held = PyList_AsTuple(box);
    if (held == NULL) return NULL;
    if (PyList_SetSlice(box, 0, PyList_GET_SIZE(box), NULL) < 0) {
        Py_DECREF(held);
        return NULL;
    }
    if (tls_entry_tail) {           /* the entry run_entry called: run_entry makes the call */
        tls_entry_tail = 0;
        tls_pending_fn = Py_NewRef(fn);
        tls_pending_args = held;
        return Py_NewRef(continue_marker);
    }
    int was_paused = tls_paused;
    tls_paused = 0;
    PyObject *result = call_handing_over(fn, held);
    tls_paused = was_paused;
    return result;
}

static PyMethodDef methods[] = {
    {"unpaused_call", (PyCFunction)(void (*)(void))py_unpaused_call, METH_FASTCALL,
     "unpaused_call(fn, args, kwargs): fn(*args, **kwargs) watched by the hook, args passed on as given."},
    {"hand_over", (PyCFunction)(void (*)(void))py_hand_over, METH_FASTCALL,
     "hand_over(fn, box): fn(*box) watched by the hook; the call stops holding box's items once fn's frame starts."},
    {"set_callback", py_set_callback, METH_O, "Set this thread's callback (None: unwatch); returns the previous one."},
    {"get_callback", py_get_callback, METH_NOARGS, "This thread's callback, or None."},
    {"get_cache", py_get_cache, METH_O, "The code object's cache: a list of entries, a skip reason, or None."},
    {"set_cache", (PyCFunction)(void (*)(void))py_set_cache, METH_FASTCALL, "Replace the code object's cache."},
    {"stats", py_stats, METH_NOARGS, "Counters of the hook: frames seen, cache hits and misses."},
    {"reset_stats", py_reset_stats, METH_NOARGS, "Zero the hook's counters."},
    {"unpaused", (PyCFunction)(void (*)(void))py_unpaused, METH_VARARGS | METH_KEYWORDS,
     "unpaused(fn, *args, **kwargs): call fn with this thread's hook watching (not paused)."},
    {"hook_installed", py_hook_installed, METH_NOARGS, "Whether the frame hook is installed right now."},
    {"set_jit_state", py_set_jit_state, METH_O,
     "set_jit_state(capsule): read the JIT tracer's state there; frames run as CPython does while it traces."},
    {"set_eager_when_traced", py_set_eager_when_traced, METH_O,
     "set_eager_when_traced(flag) -> previous: run frames as CPython does while a trace or profile function is set."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "minidynamo._eval_frame",
                                    "The PEP 523 frame hook and per-code caches.", -1, methods};

PyMODINIT_FUNC PyInit__eval_frame(void) {
    extra_index = _PyEval_RequestCodeExtraIndex(free_extra);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "no free co_extra slot for minidynamo");
        return NULL;
    }
    if (PyType_Ready(&WatchedType) < 0) return NULL;
    continue_marker = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);   /* kept for the process's life */
    unwatched_marker = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (continue_marker == NULL || unwatched_marker == NULL) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Watched", (PyObject *)&WatchedType) < 0 ||
        PyModule_AddObjectRef(m, "RUN_UNWATCHED", unwatched_marker) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
