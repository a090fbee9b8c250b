/* Torch-free helpers for generated guard functions (tensor checks are C++: _tensor_match.cpp).
 *
 * ArgumentReader([arg_index, ...])(func, *args) reads the graph inputs that are arguments;
 * DictMemo remembers the version tags of the dicts a passing guard read through, so the next
 * call can skip every check they vouch for; ClassLacks checks, with type version tags, that no
 * module class gained an attribute that a guard's dict shortcut reads past.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

/* ArgumentReader([arg_index, ...])(func, *args) -> [args[i], ...]: graph inputs that are
 * arguments, read without a Python frame. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    Py_ssize_t count;
    Py_ssize_t *arg_index;
} ArgumentReader;

static PyObject *ArgumentReader_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf,
                                           PyObject *kwnames) {
    ArgumentReader *self = (ArgumentReader *)self_obj;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *values = PyList_New(self->count);
    if (values == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Py_ssize_t slot = 1 + self->arg_index[i];
        if (slot >= nargs) {
            Py_DECREF(values);
            PyErr_Format(PyExc_TypeError, "reader: no argument slot %zd", slot - 1);
            return NULL;
        }
        PyList_SET_ITEM(values, i, Py_NewRef(args[slot]));
    }
    return values;
}

static PyObject *ArgumentReader_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *indices;
    if (!PyArg_ParseTuple(args, "O:ArgumentReader", &indices))
        return NULL;
    PyObject *seq = PySequence_Fast(indices, "ArgumentReader expects a sequence of argument indices");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    ArgumentReader *self = (ArgumentReader *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    self->vectorcall = ArgumentReader_vectorcall;
    self->arg_index = PyMem_Calloc(count ? count : 1, sizeof(Py_ssize_t));
    if (self->arg_index == NULL) {
        Py_DECREF(seq);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t index = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (index < 0) {
            Py_DECREF(seq);
            Py_DECREF(self);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "ArgumentReader: negative index");
            return NULL;
        }
        self->arg_index[i] = index;
    }
    self->count = count;
    Py_DECREF(seq);
    return (PyObject *)self;
}

static int ArgumentReader_traverse(ArgumentReader *self, visitproc visit, void *arg) {
    Py_VISIT(self->dict);
    return 0;
}

static int ArgumentReader_clear(ArgumentReader *self) {
    Py_CLEAR(self->dict);
    return 0;
}

static void ArgumentReader_dealloc(ArgumentReader *self) {
    PyObject_GC_UnTrack(self);
    ArgumentReader_clear(self);
    PyMem_Free(self->arg_index);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject ArgumentReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "guards._guard_helpers.ArgumentReader",
    .tp_doc = "ArgumentReader([arg_index, ...])(func, *args) -> [args[i], ...]",
    .tp_basicsize = sizeof(ArgumentReader),
    .tp_dictoffset = offsetof(ArgumentReader, dict),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = ArgumentReader_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(ArgumentReader, vectorcall),
    .tp_traverse = (traverseproc)ArgumentReader_traverse,
    .tp_clear = (inquiry)ArgumentReader_clear,
    .tp_dealloc = (destructor)ArgumentReader_dealloc,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};

/* ---------------------------------------------------------------------------------------
 * DictMemo: "nothing this guard relied on has changed since it last passed", from CPython
 * 3.11's dict version tags (every change to a dict gives it a new, never reused tag).
 *
 * While the full guard runs, it notes every dict it read through (note) and every object
 * whose __dict__ it used (note_owner); when the guard passes it commits, keeping the values
 * the cheap path needs.  valid() then says whether every noted dict still has the noted tag
 * and every owner still has that __dict__ (and every noted object its type): if so each read
 * through them would give the same objects again, and the checks decided by identity need not
 * run.  begin() returns a token that commit() must present, so that of two threads
 * interleaving only a guard whose notes are complete can commit.  note(x, 1) insists that x
 * be a dict or a tuple (a container whose contents the memo vouches for); anything else
 * makes the commit fail, and the memo stays invalid (the full guard always runs).
 *
 * Objects are borrowed, dicts and types owned: a memo must not keep alive the program's objects
 * (a model the program dropped, which a weakly pinned guard lets die).  valid() reads an object
 * only after every noted dict proved unchanged: each object was reached from a pinned argument
 * (compared by the caller first) through noted dicts, tuples in them and constants, so while
 * those dicts hold what they held, it is alive.
 *
 * valid() does not compare each dict's tag with its own noted tag.  Tags come from one counter
 * that only grows: a dict changed after begin() has a tag above the counter's value at begin()
 * (the bound, read by changing a private dict).  A dict noted with a tag at or below the bound
 * is unchanged exactly while its tag stays at or below it, so valid() takes the largest tag of
 * all those dicts and compares it once: one load a dict, not two.  A dict that changed between
 * begin() and its note (above the bound already) is compared with its noted tag, as before.
 *
 * Often no dict at all changed since the memo last proved its dicts unchanged (a loop that only
 * calls the model: the replay changes none).  The counter says so: every read of it (changing
 * the private dict) takes one step, so if it moved by exactly one step since the previous read,
 * nothing else changed any dict in between.  `quiet_epoch` advances whenever it moved by more;
 * a memo whose dicts proved unchanged in the current epoch skips the tags (the owners' __dict__
 * slots and types, which change without any dict changing, are still checked).
 */
typedef struct {
    PyObject *dict;
    uint64_t tag;
} NotedDict;

typedef struct {
    PyObject *owner;
    PyObject *dict;
} NotedOwner;

/* An object whose __dict__ the guard read through: that dict, its tag, and (folded in at commit
 * when the object's type was noted too) its type; valid() checks all three in one visit. */
typedef struct {
    PyObject *owner;
    PyObject *dict;
    uint64_t tag;
    PyObject *type;               /* NULL: the type is not checked here */
} NotedInstance;

typedef struct {
    NotedDict *dicts;
    Py_ssize_t n_dicts, cap_dicts;
    NotedInstance *owners;        /* (object, its __dict__, the dict's tag, its type) */
    Py_ssize_t n_owners, cap_owners;
    NotedOwner *types;            /* (object, its type), for objects not among the owners */
    Py_ssize_t n_types, cap_types;
} Notes;

typedef struct {
    PyObject_HEAD
    Notes active, pending;
    int valid, pending_ok;
    Py_ssize_t generation; /* bumped by begin(): a commit from an older begin is refused */
    PyObject *values;      /* tuple committed with the notes */
    uint64_t unchanged_in; /* the quiet epoch in which the dicts last proved unchanged (0: none) */
    uint64_t pending_bound, bound;   /* the counter at begin(), and at the committed begin() */
    PyObject **below;      /* active dicts noted at or below `bound` (borrowed from `active`) */
    Py_ssize_t n_below, cap_below;
    NotedDict *above;      /* active dicts noted above `bound`: compared with their tags */
    Py_ssize_t n_above, cap_above;
} DictMemo;

/* The tag counter, read by changing a private dict (CPython 3.11 gives a dict the next value of
 * one process-wide counter on every change), and the quiet epoch: it advances when the counter
 * moved by more than this read's own step since the previous read (some dict changed). */
static PyObject *clock_dict;           /* made at module init; never seen by Python code */
static uint64_t clock_last, quiet_epoch = 1;

static int read_clock(uint64_t *now, uint64_t *epoch) {
    int present = PyDict_Contains(clock_dict, Py_None);
    if (present < 0)
        return -1;
    if ((present ? PyDict_DelItem(clock_dict, Py_None) : PyDict_SetItem(clock_dict, Py_None, Py_None)) < 0)
        return -1;
    *now = ((PyDictObject *)clock_dict)->ma_version_tag;
    if (*now != clock_last + 1)
        quiet_epoch++;
    clock_last = *now;
    *epoch = quiet_epoch;
    return 0;
}

static void notes_clear(Notes *notes) {
    for (Py_ssize_t i = 0; i < notes->n_dicts; i++)
        Py_CLEAR(notes->dicts[i].dict);
    for (Py_ssize_t i = 0; i < notes->n_owners; i++) {   /* owners are borrowed */
        Py_CLEAR(notes->owners[i].dict);
        Py_CLEAR(notes->owners[i].type);
    }
    for (Py_ssize_t i = 0; i < notes->n_types; i++)
        Py_CLEAR(notes->types[i].dict);
    notes->n_dicts = notes->n_owners = notes->n_types = 0;
}

static void notes_free(Notes *notes) {
    notes_clear(notes);
    PyMem_Free(notes->dicts);
    PyMem_Free(notes->owners);
    PyMem_Free(notes->types);
    notes->dicts = NULL;
    notes->owners = NULL;
    notes->types = NULL;
    notes->cap_dicts = notes->cap_owners = notes->cap_types = 0;
}

static int notes_add_dict(Notes *notes, PyObject *dict) {
    if (notes->n_dicts == notes->cap_dicts) {
        Py_ssize_t cap = notes->cap_dicts ? 2 * notes->cap_dicts : 16;
        NotedDict *grown = PyMem_Realloc(notes->dicts, cap * sizeof(NotedDict));
        if (grown == NULL)
            return -1;
        notes->dicts = grown;
        notes->cap_dicts = cap;
    }
    notes->dicts[notes->n_dicts].dict = Py_NewRef(dict);
    notes->dicts[notes->n_dicts].tag = ((PyDictObject *)dict)->ma_version_tag;
    notes->n_dicts++;
    return 0;
}

static int pairs_add(NotedOwner **pairs, Py_ssize_t *n, Py_ssize_t *cap, PyObject *a, PyObject *b) {
    if (*n == *cap) {
        Py_ssize_t grown_cap = *cap ? 2 * *cap : 16;
        NotedOwner *grown = PyMem_Realloc(*pairs, grown_cap * sizeof(NotedOwner));
        if (grown == NULL)
            return -1;
        *pairs = grown;
        *cap = grown_cap;
    }
    (*pairs)[*n].owner = a;              /* borrowed: see "Objects are borrowed" above */
    (*pairs)[*n].dict = Py_NewRef(b);
    (*n)++;
    return 0;
}

static PyObject *DictMemo_begin(DictMemo *self, PyObject *const *args, Py_ssize_t nargs) {
    notes_clear(&self->pending);
    self->pending_ok = 1;
    self->generation++;
    uint64_t epoch;
    if (read_clock(&self->pending_bound, &epoch) < 0) {
        self->pending_ok = 0;
        PyErr_Clear();
    }
    for (Py_ssize_t i = 0; i < nargs; i++) { /* dicts every check relies on (global hooks) */
        if (!PyDict_Check(args[i]) || notes_add_dict(&self->pending, args[i]) < 0) {
            self->pending_ok = 0;
            PyErr_Clear();
        }
    }
    return PyLong_FromSsize_t(self->generation);
}

static PyObject *DictMemo_note(DictMemo *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "note(value, must_be_container=False)");
        return NULL;
    }
    PyObject *value = args[0];
    int container = nargs == 2 && PyObject_IsTrue(args[1]) == 1;
    if (PyDict_Check(value)) {
        if (notes_add_dict(&self->pending, value) < 0)
            return NULL;
    } else if (container && !PyTuple_CheckExact(value)) {
        self->pending_ok = 0;
    }
    Py_RETURN_NONE;
}

static PyObject *DictMemo_note_owner(DictMemo *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "note_owner(obj, obj.__dict__)");
        return NULL;
    }
    PyObject **slot = _PyObject_GetDictPtr(args[0]);
    if (slot == NULL || *slot != args[1] || !PyDict_Check(args[1])) {
        self->pending_ok = 0;
        Py_RETURN_NONE;
    }
    Notes *notes = &self->pending;
    if (notes->n_owners == notes->cap_owners) {
        Py_ssize_t cap = notes->cap_owners ? 2 * notes->cap_owners : 16;
        NotedInstance *grown = PyMem_Realloc(notes->owners, cap * sizeof(NotedInstance));
        if (grown == NULL)
            return PyErr_NoMemory();
        notes->owners = grown;
        notes->cap_owners = cap;
    }
    NotedInstance *noted = &notes->owners[notes->n_owners++];
    noted->owner = args[0];              /* borrowed */
    noted->dict = Py_NewRef(args[1]);
    noted->tag = ((PyDictObject *)args[1])->ma_version_tag;
    noted->type = NULL;
    Py_RETURN_NONE;
}

static PyObject *DictMemo_note_type(DictMemo *self, PyObject *obj) {
    Notes *notes = &self->pending;
    if (pairs_add(&notes->types, &notes->n_types, &notes->cap_types, obj, (PyObject *)Py_TYPE(obj)) < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static int by_owner(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)((const NotedOwner *)a)->owner;
    uintptr_t y = (uintptr_t)((const NotedOwner *)b)->owner;
    return (x > y) - (x < y);
}

/* Move each noted type onto its object's owner record, so that valid() visits the object once.
 * A type noted for an object that is not an owner (or noted twice) stays in `types`. */
static void notes_fold_types(Notes *notes) {
    if (notes->n_types == 0 || notes->n_owners == 0)
        return;
    qsort(notes->types, notes->n_types, sizeof(NotedOwner), by_owner);
    for (Py_ssize_t i = 0; i < notes->n_owners; i++) {
        NotedInstance *noted = &notes->owners[i];
        NotedOwner key = {noted->owner, NULL};
        NotedOwner *found = bsearch(&key, notes->types, notes->n_types, sizeof(NotedOwner), by_owner);
        if (found != NULL && found->dict != NULL && noted->type == NULL) {
            noted->type = found->dict;   /* the reference moves to the owner record */
            found->dict = NULL;
        }
    }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < notes->n_types; i++) {
        if (notes->types[i].dict != NULL)
            notes->types[kept++] = notes->types[i];
    }
    notes->n_types = kept;
}

/* Sort the dicts of `notes` for valid(): those noted at or below `bound` into `below`, the
 * others (changed after begin, before their note) into `above`. */
static int split_by_bound(DictMemo *self, const Notes *notes, uint64_t bound) {
    if (notes->n_dicts > self->cap_below || notes->n_dicts > self->cap_above) {
        Py_ssize_t cap = notes->n_dicts;
        PyObject **below = PyMem_Realloc(self->below, cap * sizeof(PyObject *));
        if (below == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->below = below;
        self->cap_below = cap;
        NotedDict *above = PyMem_Realloc(self->above, cap * sizeof(NotedDict));
        if (above == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        self->above = above;
        self->cap_above = cap;
    }
    self->n_below = self->n_above = 0;
    for (Py_ssize_t i = 0; i < notes->n_dicts; i++) {
        if (notes->dicts[i].tag <= bound)
            self->below[self->n_below++] = notes->dicts[i].dict;
        else
            self->above[self->n_above++] = notes->dicts[i];
    }
    return 0;
}

static PyObject *DictMemo_commit(DictMemo *self, PyObject *const *args, Py_ssize_t nargs) {
    /* Another thread may have begun since this guard did (the GIL lets threads interleave):
       then some of this guard's notes were cleared, and its commit is refused. */
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "commit(values, token)");
        return NULL;
    }
    PyObject *values = args[0];
    Py_ssize_t token = PyLong_AsSsize_t(args[1]);
    if (token == -1 && PyErr_Occurred())
        return NULL;
    if (token != self->generation) /* a stale round: leave the current one alone */
        Py_RETURN_FALSE;
    if (!self->pending_ok || !PyTuple_Check(values)) {
        self->valid = 0;
        notes_clear(&self->pending);
        Py_RETURN_FALSE;
    }
    notes_fold_types(&self->pending);
    if (split_by_bound(self, &self->pending, self->pending_bound) < 0) {
        PyErr_Clear();   /* no memory: the memo stays invalid (the full guard always runs) */
        self->valid = 0;
        self->n_below = self->n_above = 0;
        notes_clear(&self->pending);
        Py_RETURN_FALSE;
    }
    Notes old = self->active;
    self->active = self->pending;
    self->pending = old;
    notes_clear(&self->pending);
    self->bound = self->pending_bound;
    Py_XSETREF(self->values, Py_NewRef(values));
    self->unchanged_in = 0;
    self->valid = 1;
    Py_RETURN_TRUE;
}

/* Where obj keeps its __dict__ (as _PyObject_GetDictPtr, without the call in the common case:
 * 3.11 keeps a managed dict three words before the object). */
static inline PyObject **dict_slot(PyObject *obj) {
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
    if (Py_TYPE(obj)->tp_flags & Py_TPFLAGS_MANAGED_DICT)
        return ((PyObject **)obj) - 3;
#endif
    return _PyObject_GetDictPtr(obj);
}

/* Every noted dict still has its tag (see "valid() does not compare each dict's tag" above). */
static int dicts_unchanged(const DictMemo *self) {
    const uint64_t bound = self->bound;
    /* No branch per dict: the largest tag of a block of 8 (the loads of one block are
       independent, so they overlap, also from a cold cache) is compared with the bound. */
    PyObject *const *below = self->below;
    Py_ssize_t n = self->n_below, i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t largest = 0;
        for (int k = 0; k < 8; k++) {
            uint64_t tag = ((PyDictObject *)below[i + k])->ma_version_tag;
            largest = tag > largest ? tag : largest;
        }
        if (largest > bound)
            return 0;
    }
    for (; i < n; i++) {
        if (((PyDictObject *)below[i])->ma_version_tag > bound)
            return 0;
    }
    for (Py_ssize_t j = 0; j < self->n_above; j++) {
        if (((PyDictObject *)self->above[j].dict)->ma_version_tag != self->above[j].tag)
            return 0;
    }
    const Notes *notes = &self->active;
    for (Py_ssize_t i = 0; i < notes->n_owners; i++) {
        uint64_t tag = ((PyDictObject *)notes->owners[i].dict)->ma_version_tag;
        if (tag > bound && tag != notes->owners[i].tag)
            return 0;
    }
    return 1;
}

static PyObject *DictMemo_valid(DictMemo *self, PyObject *unused) {
    if (!self->valid)
        Py_RETURN_FALSE;
    Notes *notes = &self->active;
    /* The dicts first: while they are unchanged, every borrowed object is still held by one of
       them (or is a pinned argument the caller compared already), so it may be read below.
       (Read the clock, then the tags: nothing runs in between, so "unchanged now" holds at
       the clock's reading, and stays known while no other dict changes.) */
    uint64_t now, epoch;
    if (read_clock(&now, &epoch) < 0) {
        PyErr_Clear();
        epoch = 0;
    }
    if (epoch == 0 || epoch != self->unchanged_in) {
        if (!dicts_unchanged(self))
            Py_RETURN_FALSE;
        self->unchanged_in = epoch;
    }
    for (Py_ssize_t i = 0; i < notes->n_owners; i++) {
        const NotedInstance *noted = &notes->owners[i];
        if (i + 8 < notes->n_owners) {
            __builtin_prefetch(notes->owners[i + 8].owner);
            __builtin_prefetch(notes->owners[i + 8].dict);
        }
        if (noted->type != NULL && (PyObject *)Py_TYPE(noted->owner) != noted->type)
            Py_RETURN_FALSE;
        PyObject **slot = dict_slot(noted->owner);
        if (slot == NULL || *slot != noted->dict) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
    }
    for (Py_ssize_t i = 0; i < notes->n_types; i++) {
        if ((PyObject *)Py_TYPE(notes->types[i].owner) != notes->types[i].dict)
            Py_RETURN_FALSE;
    }
    Py_RETURN_TRUE;
}

static PyObject *DictMemo_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    if (!PyArg_ParseTuple(args, ":DictMemo"))
        return NULL;
    DictMemo *self = (DictMemo *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->values = PyTuple_New(0);
    if (self->values == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int DictMemo_traverse(DictMemo *self, visitproc visit, void *arg) {
    Py_VISIT(self->values);
    Notes *all[2] = {&self->active, &self->pending};
    for (int n = 0; n < 2; n++) {
        for (Py_ssize_t i = 0; i < all[n]->n_dicts; i++)
            Py_VISIT(all[n]->dicts[i].dict);
        for (Py_ssize_t i = 0; i < all[n]->n_owners; i++) {
            Py_VISIT(all[n]->owners[i].dict);
            Py_VISIT(all[n]->owners[i].type);
        }
        for (Py_ssize_t i = 0; i < all[n]->n_types; i++)
            Py_VISIT(all[n]->types[i].dict);
    }
    return 0;
}

static int DictMemo_clear(DictMemo *self) {
    self->valid = 0;
    self->unchanged_in = 0;
    self->n_below = self->n_above = 0;   /* (borrowed from the notes cleared below) */
    Py_CLEAR(self->values);
    notes_clear(&self->active);
    notes_clear(&self->pending);
    return 0;
}

static void DictMemo_dealloc(DictMemo *self) {
    PyObject_GC_UnTrack(self);
    DictMemo_clear(self);
    PyMem_Free(self->below);
    PyMem_Free(self->above);
    notes_free(&self->active);
    notes_free(&self->pending);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *DictMemo_noted(DictMemo *self, void *unused) {
    return Py_BuildValue("(nn)", self->active.n_dicts, self->active.n_owners);
}

static PyGetSetDef DictMemo_getset[] = {
    {"noted", (getter)DictMemo_noted, NULL,
     "(dicts, objects): how many dict tags and objects' __dict__ valid() checks", NULL},
    {NULL},
};

static PyMethodDef DictMemo_methods[] = {
    {"begin", (PyCFunction)(void (*)(void))DictMemo_begin, METH_FASTCALL,
     "begin(*dicts) -> token: start noting (these dicts first)"},
    {"note", (PyCFunction)(void (*)(void))DictMemo_note, METH_FASTCALL,
     "note(value, must_be_container=False): note a value the guard read through"},
    {"note_owner", (PyCFunction)(void (*)(void))DictMemo_note_owner, METH_FASTCALL,
     "note_owner(obj, d): the guard used d as obj.__dict__"},
    {"note_type", (PyCFunction)DictMemo_note_type, METH_O,
     "note_type(obj): the guard checked type(obj) (an instance of a class that may be reassigned)"},
    {"commit", (PyCFunction)(void (*)(void))DictMemo_commit, METH_FASTCALL,
     "commit(values, token): the guard that began with token passed"},
    {"valid", (PyCFunction)DictMemo_valid, METH_NOARGS,
     "valid() -> bool: every noted dict and owner unchanged since the last commit"},
    {NULL},
};

static PyMemberDef DictMemo_members[] = {
    {"values", T_OBJECT, offsetof(DictMemo, values), READONLY, "the tuple given to commit"},
    {NULL},
};

static PyTypeObject DictMemoType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "guards._guard_helpers.DictMemo",
    .tp_doc = "DictMemo(): dict version tags noted while a guard passed; valid() if none changed",
    .tp_basicsize = sizeof(DictMemo),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = DictMemo_new,
    .tp_traverse = (traverseproc)DictMemo_traverse,
    .tp_clear = (inquiry)DictMemo_clear,
    .tp_dealloc = (destructor)DictMemo_dealloc,
    .tp_methods = DictMemo_methods,
    .tp_members = DictMemo_members,
    .tp_getset = DictMemo_getset,
};

/* ClassLacks(((cls, names, found), ...))() -> bool: for every triple, no class in cls.__mro__
 * defines any of `names` (in its own __dict__), and each (name, obj) of `found` is what the MRO
 * lookup of name gives (the very object): the facts that make a guard's read of an nn.Module
 * attribute straight from the instance's dicts the read `module.attr` would give.  Exactly the
 * Python of native.PyClassLacks;
 * once a pair held, later calls answer it from cls's type version tag, which CPython clears
 * whenever cls or any base changes (an attribute set or deleted, __bases__ assigned), so a
 * change re-runs the full check.  One call checks every class a guard relies on. */
typedef struct {
    PyTypeObject *cls;
    PyObject *names;        /* tuple of str: defined by no class of the MRO */
    PyObject *found;        /* tuple of (str, object): the MRO lookup of str gives that object */
    unsigned int tag;       /* cls's version tag when the full check last held */
    int have_tag;
} LacksEntry;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *pairs;        /* the tuple given (keeps classes and names alive) */
    Py_ssize_t count;
    LacksEntry *entries;
} ClassLacks;

/* The first definition of `name` along `mro` (borrowed), or NULL. */
static PyObject *mro_lookup(PyObject *mro, PyObject *name) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *klass = PyTuple_GET_ITEM(mro, i);
        PyObject *dict = PyType_Check(klass) ? ((PyTypeObject *)klass)->tp_dict : NULL;
        if (dict == NULL || !PyDict_Check(dict))
            return NULL;
        PyObject *value = PyDict_GetItemWithError(dict, name);
        if (value != NULL)
            return value;
        if (PyErr_Occurred()) {
            PyErr_Clear();
            return NULL;
        }
    }
    return NULL;
}

static int class_lacks_full(LacksEntry *entry) {
    PyObject *mro = entry->cls->tp_mro;
    if (mro == NULL || !PyTuple_Check(mro))
        return 0;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(entry->found); j++) {
        PyObject *pair = PyTuple_GET_ITEM(entry->found, j);
        if (mro_lookup(mro, PyTuple_GET_ITEM(pair, 0)) != PyTuple_GET_ITEM(pair, 1))
            return 0;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *klass = PyTuple_GET_ITEM(mro, i);
        PyObject *dict = PyType_Check(klass) ? ((PyTypeObject *)klass)->tp_dict : NULL;
        if (dict == NULL || !PyDict_Check(dict))
            return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(entry->names); j++) {
            int found = PyDict_Contains(dict, PyTuple_GET_ITEM(entry->names, j));
            if (found != 0) {
                if (found < 0)
                    PyErr_Clear();
                return 0;
            }
        }
    }
    return 1;
}

static int entry_holds(LacksEntry *entry) {
    PyTypeObject *cls = entry->cls;
    if (entry->have_tag && PyType_HasFeature(cls, Py_TPFLAGS_VALID_VERSION_TAG) && cls->tp_version_tag == entry->tag)
        return 1;
    entry->have_tag = 0;
    if (!class_lacks_full(entry))
        return 0;
    PyObject *probe = PyTuple_GET_SIZE(entry->names) > 0 ? PyTuple_GET_ITEM(entry->names, 0)
                    : PyTuple_GET_SIZE(entry->found) > 0 ? PyTuple_GET_ITEM(PyTuple_GET_ITEM(entry->found, 0), 0) : NULL;
    if (probe != NULL) {
        (void)_PyType_Lookup(cls, probe);   /* assigns a tag if it can */
        if (PyType_HasFeature(cls, Py_TPFLAGS_VALID_VERSION_TAG)) {
            entry->tag = cls->tp_version_tag;
            entry->have_tag = 1;
        }
    }
    return 1;
}

static PyObject *ClassLacks_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames) {
    ClassLacks *self = (ClassLacks *)self_obj;
    for (Py_ssize_t i = 0; i < self->count; i++)
        if (!entry_holds(&self->entries[i]))
            Py_RETURN_FALSE;
    Py_RETURN_TRUE;
}

static PyObject *ClassLacks_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *pairs;
    if (!PyArg_ParseTuple(args, "O!:ClassLacks", &PyTuple_Type, &pairs))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(pairs);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        int ok = PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 3 && PyType_Check(PyTuple_GET_ITEM(pair, 0))
                 && PyTuple_Check(PyTuple_GET_ITEM(pair, 1)) && PyTuple_Check(PyTuple_GET_ITEM(pair, 2));
        for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(PyTuple_GET_ITEM(pair, 1)); j++)
            ok = PyUnicode_CheckExact(PyTuple_GET_ITEM(PyTuple_GET_ITEM(pair, 1), j));
        for (Py_ssize_t j = 0; ok && j < PyTuple_GET_SIZE(PyTuple_GET_ITEM(pair, 2)); j++) {
            PyObject *item = PyTuple_GET_ITEM(PyTuple_GET_ITEM(pair, 2), j);
            ok = PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 && PyUnicode_CheckExact(PyTuple_GET_ITEM(item, 0));
        }
        if (!ok) {
            PyErr_SetString(PyExc_TypeError,
                            "ClassLacks: expected a tuple of (class, (name, ...), ((name, object), ...)) triples");
            return NULL;
        }
    }
    ClassLacks *self = (ClassLacks *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = ClassLacks_vectorcall;
    self->entries = PyMem_Calloc(count ? count : 1, sizeof(LacksEntry));
    if (self->entries == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *pair = PyTuple_GET_ITEM(pairs, i);
        self->entries[i].cls = (PyTypeObject *)PyTuple_GET_ITEM(pair, 0);
        self->entries[i].names = PyTuple_GET_ITEM(pair, 1);
        self->entries[i].found = PyTuple_GET_ITEM(pair, 2);
    }
    self->count = count;
    self->pairs = Py_NewRef(pairs);
    return (PyObject *)self;
}

static int ClassLacks_traverse(ClassLacks *self, visitproc visit, void *arg) {
    Py_VISIT(self->pairs);
    return 0;
}

static int ClassLacks_clear(ClassLacks *self) {
    Py_CLEAR(self->pairs);
    self->count = 0;
    return 0;
}

static void ClassLacks_dealloc(ClassLacks *self) {
    PyObject_GC_UnTrack(self);
    ClassLacks_clear(self);
    PyMem_Free(self->entries);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef ClassLacks_members[] = {
    {"pairs", T_OBJECT, offsetof(ClassLacks, pairs), READONLY, "the (class, names, found) triples checked"},
    {NULL},
};

static PyTypeObject ClassLacksType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "guards._guard_helpers.ClassLacks",
    .tp_doc = "ClassLacks(((cls, names, found), ...))(): True when no class in each cls.__mro__ defines any of names "
              "and each (name, obj) in found is what the MRO lookup of name gives",
    .tp_basicsize = sizeof(ClassLacks),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_vectorcall_offset = offsetof(ClassLacks, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_new = ClassLacks_new,
    .tp_traverse = (traverseproc)ClassLacks_traverse,
    .tp_clear = (inquiry)ClassLacks_clear,
    .tp_dealloc = (destructor)ClassLacks_dealloc,
    .tp_members = ClassLacks_members,
};

/* quiet_epoch(): the current quiet epoch, as the last clock reading left it (reads no clock):
 * a test tells by it whether a memo could have skipped its dict tags. */
static PyObject *py_quiet_epoch(PyObject *self, PyObject *unused) {
    return PyLong_FromUnsignedLongLong(quiet_epoch);
}

static PyMethodDef module_functions[] = {
    {"quiet_epoch", py_quiet_epoch, METH_NOARGS, "the dict memos' current quiet epoch"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "guards._guard_helpers",
    .m_doc = "Torch-free C helpers for generated guard functions (optional: guards work without them).",
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC PyInit__guard_helpers(void) {
    if (PyType_Ready(&ArgumentReaderType) < 0 || PyType_Ready(&DictMemoType) < 0 ||
        PyType_Ready(&ClassLacksType) < 0)
        return NULL;
    clock_dict = PyDict_New();
    if (clock_dict == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "ArgumentReader", (PyObject *)&ArgumentReaderType) < 0 ||
        PyModule_AddObjectRef(m, "DictMemo", (PyObject *)&DictMemoType) < 0 ||
        PyModule_AddObjectRef(m, "ClassLacks", (PyObject *)&ClassLacksType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
