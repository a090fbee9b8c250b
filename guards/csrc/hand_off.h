#pragma once

/* Part of guards/_tensor_match.cpp: HandOff, the guard's reads handed to the input reader. */

namespace {

/* The guard's reads, handed to the reader: HandOff(guard, reader)(func, *args) -> list.
 *
 * A FastGuard given hand_off(registers) keeps, when its fast path passes, the values of those
 * registers (the graph inputs, which its tensor checks just read) and the call they were read
 * for.  HandOff answers the very next read with them when it is for that same call (func and
 * every argument the same objects), and forgets them either way; any other call asks `reader`.
 * The values are those the guard verified, read moments before: what the reader would read
 * again, minus the reading.  ``handed`` says whether the last answer was the guard's values (so
 * the guard's tensor checks hold for them: a caller may skip repeating those checks). */
struct HandOff {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *dict;
    PyObject *guard;    // a FastGuard
    PyObject *reader;
    char handed;        // the last answer was the guard's values
};

PyTypeObject *fast_guard_type;

PyObject *HandOff_vectorcall(PyObject *self_obj, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    auto *self = reinterpret_cast<HandOff *>(self_obj);
    auto *guard = reinterpret_cast<FastGuard *>(self->guard);
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Kept *kept = guard->kept;
    bool same = kept != nullptr && kept->full && kwnames == nullptr &&
                static_cast<Py_ssize_t>(kept->call.size()) == nargs;
    for (Py_ssize_t i = 0; same && i < nargs; i++)
        same = kept->call[i] == args[i];
    if (same) {
        PyObject *values = PyList_New(static_cast<Py_ssize_t>(kept->wanted.size()));
        if (values == nullptr) {
            kept->drop();
            return nullptr;
        }
        for (size_t i = 0; i < kept->wanted.size(); i++)
            PyList_SET_ITEM(values, i, kept->take(i));
        kept->drop();
        self->handed = 1;
        return values;
    }
    drop_kept(guard);
    self->handed = 0;
    PyObject *read = PyObject_Vectorcall(self->reader, args, nargsf, kwnames);
    self->handed = 0;   // again: another thread's hand-off may have run inside a Python reader
    return read;
}

PyObject *HandOff_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *guard, *reader;
    if (!PyArg_ParseTuple(args, "O!O:HandOff", fast_guard_type, &guard, &reader))
        return nullptr;
    auto *self = reinterpret_cast<HandOff *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    self->vectorcall = HandOff_vectorcall;
    self->guard = Py_NewRef(guard);
    self->reader = Py_NewRef(reader);
    return reinterpret_cast<PyObject *>(self);
}

int HandOff_traverse(PyObject *self_obj, visitproc visit, void *arg) {
    auto *self = reinterpret_cast<HandOff *>(self_obj);
    Py_VISIT(Py_TYPE(self_obj));
    Py_VISIT(self->dict);
    Py_VISIT(self->guard);
    Py_VISIT(self->reader);
    return 0;
}

int HandOff_clear(PyObject *self_obj) {
    auto *self = reinterpret_cast<HandOff *>(self_obj);
    Py_CLEAR(self->dict);
    Py_CLEAR(self->guard);
    Py_CLEAR(self->reader);
    return 0;
}

void HandOff_dealloc(PyObject *self_obj) {
    PyTypeObject *type = Py_TYPE(self_obj);
    PyObject_GC_UnTrack(self_obj);
    HandOff_clear(self_obj);
    type->tp_free(self_obj);
    Py_DECREF(type);
}

PyMemberDef HandOff_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(HandOff, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(HandOff, dict), READONLY, nullptr},
    {"guard", T_OBJECT, offsetof(HandOff, guard), READONLY, "the FastGuard whose reads are handed off"},
    {"reader", T_OBJECT, offsetof(HandOff, reader), READONLY, "what reads when nothing was handed off"},
    {"handed", T_BOOL, offsetof(HandOff, handed), READONLY,
     "whether the last answer was the values the guard's passing fast path checked"},
    {nullptr},
};

PyType_Slot HandOff_slots[] = {
    {Py_tp_doc, const_cast<char *>("HandOff(guard, reader)(func, *args) -> list: the graph inputs the guard "
                                    "just read for this very call, else reader(func, *args)")},
    {Py_tp_new, reinterpret_cast<void *>(HandOff_new)},
    {Py_tp_call, reinterpret_cast<void *>(PyVectorcall_Call)},
    {Py_tp_traverse, reinterpret_cast<void *>(HandOff_traverse)},
    {Py_tp_clear, reinterpret_cast<void *>(HandOff_clear)},
    {Py_tp_dealloc, reinterpret_cast<void *>(HandOff_dealloc)},
    {Py_tp_members, HandOff_members},
    {Py_tp_getattro, reinterpret_cast<void *>(PyObject_GenericGetAttr)},
    {Py_tp_setattro, reinterpret_cast<void *>(PyObject_GenericSetAttr)},
    {0, nullptr},
};

PyType_Spec HandOff_spec = {
    "guards._tensor_match.HandOff", sizeof(HandOff), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL, HandOff_slots,
};

}  // namespace
